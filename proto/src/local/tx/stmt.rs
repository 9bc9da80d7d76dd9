//! One statement, read from the bytes of its `sN=` value:
//!
//! ```text
//! STMT = [ "anyway " ] [ "assert " ] EXPR
//! EXPR = "not " EXPR | "exists " VAR | "set " VAR [ " dup" ] | "delete " VAR
//! VAR  = TABLE *( "/" KEY )    bytes other than space and "/"; %XX escapes any byte
//! ```
//!
//! Words are separated by exactly one space. The reader is total: any
//! bytes give a [`Statement`] or a [`StmtError`] with the column (1 for
//! the first byte of the value) where it went wrong.

use std::fmt;
use std::sync::Arc;

use super::{MAX_VAR, TxError};

/// A variable's name, canonical: its table and keys joined with `/`, with
/// `%`, `/`, space, control and non-ASCII bytes of each part written `%XX`
/// (upper case). `A/%42` and `A/B` are the same variable.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Var(pub Arc<[u8]>);

impl Var {
    /// The canonical text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl fmt::Display for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Canonical text is ASCII.
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

/// What a statement does to one variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// True when some session holds the variable.
    Exists(Var),
    /// True when this session now holds it (`dup`: others may hold it too).
    Set(Var, bool),
    /// True when this session held it and no longer does.
    Delete(Var),
}

impl Op {
    /// The variable it is about.
    pub fn var(&self) -> &Var {
        match self {
            Op::Exists(v) | Op::Set(v, _) | Op::Delete(v) => v,
        }
    }
}

/// One statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    /// `anyway`: its result never fails the transaction.
    pub anyway: bool,
    /// `assert`: a false result fails the transaction (unless `anyway`).
    pub assert: bool,
    /// How many `not`.
    pub nots: usize,
    /// What it does.
    pub op: Op,
}

impl Statement {
    /// Its value given the operation's result.
    pub fn value(&self, result: bool) -> bool {
        result ^ (self.nots % 2 == 1)
    }

    /// Whether a false value fails the whole transaction.
    pub fn fails_on_false(&self) -> bool {
        self.assert && !self.anyway
    }
}

impl fmt::Display for Statement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.anyway {
            f.write_str("anyway ")?;
        }
        if self.assert {
            f.write_str("assert ")?;
        }
        for _ in 0..self.nots {
            f.write_str("not ")?;
        }
        match &self.op {
            Op::Exists(v) => write!(f, "exists {v}"),
            Op::Set(v, dup) => write!(f, "set {v}{}", if *dup { " dup" } else { "" }),
            Op::Delete(v) => write!(f, "delete {v}"),
        }
    }
}

/// Why a statement cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StmtError {
    /// 1-based column in the statement's value.
    pub column: usize,
    /// `Invalid`, or `Overflow` for a variable name over [`MAX_VAR`].
    pub error: TxError,
    /// What is wrong.
    pub reason: String,
}

fn fail<T>(column: usize, reason: impl Into<String>) -> Result<T, StmtError> {
    Err(StmtError {
        column: column + 1,
        error: TxError::Invalid,
        reason: reason.into(),
    })
}

/// The word of `text` starting at `at`: up to the next space or the end.
fn word(text: &[u8], at: usize) -> &[u8] {
    let rest = &text[at.min(text.len())..];
    let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
    &rest[..end]
}

/// Reads one statement.
pub fn parse_statement(text: &[u8]) -> Result<Statement, StmtError> {
    let mut at = 0;
    let mut anyway = false;
    let mut assert = false;
    let mut nots = 0;
    if word(text, at) == b"anyway" {
        anyway = true;
        at += 7;
    }
    if word(text, at) == b"assert" {
        assert = true;
        at += 7;
    }
    while word(text, at) == b"not" {
        nots += 1;
        at += 4;
    }
    at = at.min(text.len());
    let verb = word(text, at);
    let known = matches!(verb, b"exists" | b"set" | b"delete");
    if !known {
        if at >= text.len() {
            return fail(at, "expected exists, set, delete or not, found the end");
        }
        let shown = String::from_utf8_lossy(&verb[..verb.len().min(32)]).into_owned();
        return fail(
            at,
            format!("unknown word {shown:?}: expected exists, set, delete or not"),
        );
    }
    at += verb.len();
    if at >= text.len() {
        return fail(at, "empty VAR: a variable name must follow");
    }
    at += 1; // the space after the verb
    let var_text = word(text, at);
    let var = parse_var(var_text).map_err(|mut e| {
        e.column += at;
        e
    })?;
    at += var_text.len();
    let mut dup = false;
    if verb == b"set" && text.get(at) == Some(&b' ') && word(text, at + 1) == b"dup" {
        dup = true;
        at += 4;
    }
    if at < text.len() {
        let what = if verb == b"set" {
            "expected \" dup\" or the end after the variable"
        } else {
            "expected the end after the variable"
        };
        return fail(at, what);
    }
    let op = match verb {
        b"exists" => Op::Exists(var),
        b"set" => Op::Set(var, dup),
        _ => Op::Delete(var),
    };
    Ok(Statement {
        anyway,
        assert,
        nots,
        op,
    })
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn needs_escape(b: u8) -> bool {
    b <= b' ' || b >= 0x7f || b == b'%' || b == b'/'
}

/// Reads a variable name (no space in `text`); columns from 0 in `text`.
pub fn parse_var(text: &[u8]) -> Result<Var, StmtError> {
    if text.is_empty() {
        return fail(0, "empty VAR: a variable name must follow");
    }
    let mut canonical = Vec::with_capacity(text.len());
    let mut decoded = 0usize;
    let mut part_len = 0usize;
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        if b == b'/' {
            if part_len == 0 {
                let what = if i == 0 { "TABLE" } else { "KEY" };
                return fail(i, format!("empty {what} in the variable name"));
            }
            canonical.push(b'/');
            decoded += 1;
            part_len = 0;
            i += 1;
            continue;
        }
        let byte = if b == b'%' {
            match (
                text.get(i + 1).and_then(|&h| hex(h)),
                text.get(i + 2).and_then(|&l| hex(l)),
            ) {
                (Some(h), Some(l)) => {
                    i += 3;
                    h << 4 | l
                }
                _ => return fail(i, "bad escape: % must be followed by two hex digits"),
            }
        } else {
            i += 1;
            b
        };
        if needs_escape(byte) {
            canonical.extend_from_slice(format!("%{byte:02X}").as_bytes());
        } else {
            canonical.push(byte);
        }
        decoded += 1;
        part_len += 1;
        if decoded > MAX_VAR {
            return Err(StmtError {
                column: i,
                error: TxError::Overflow,
                reason: format!("the variable name is longer than {MAX_VAR} bytes"),
            });
        }
    }
    if part_len == 0 {
        return fail(text.len(), "empty KEY in the variable name");
    }
    Ok(Var(canonical.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> String {
        match parse_statement(text.as_bytes()) {
            Ok(s) => s.to_string(),
            Err(e) => panic!("{text:?}: {e:?}"),
        }
    }

    fn err(text: &[u8]) -> (usize, TxError, String) {
        match parse_statement(text) {
            Ok(s) => panic!("{:?} read as {s}", String::from_utf8_lossy(text)),
            Err(e) => (e.column, e.error, e.reason),
        }
    }

    #[test]
    fn every_statement_form_reads_back_as_written() {
        for text in [
            "exists A",
            "set A/B/C",
            "set A/B dup",
            "delete A/B",
            "not exists A/B",
            "not not set A dup",
            "assert not exists Month-End/CGROVE-35",
            "anyway delete MDS-Review/CGROVE-35/R-45899",
            "anyway assert set X",
        ] {
            assert_eq!(ok(text), text);
        }
    }

    #[test]
    fn escapes_are_decoded_and_written_canonically() {
        assert_eq!(ok("set A/%42"), "set A/B");
        assert_eq!(ok("set a%2fb/%20%25"), "set a%2Fb/%20%25");
        assert_eq!(ok("exists T/%ff%0A"), "exists T/%FF%0A");
        let s = parse_statement(b"exists \xc3\xa9").unwrap();
        assert_eq!(s.op.var().as_bytes(), b"%C3%A9");
    }

    #[test]
    fn a_value_negates_once_per_not() {
        let s = parse_statement(b"not not not exists A").unwrap();
        assert_eq!(s.nots, 3);
        assert!(s.value(false));
        assert!(!s.value(true));
        assert!(parse_statement(b"anyway assert set A").unwrap().assert);
        assert!(
            !parse_statement(b"anyway assert set A")
                .unwrap()
                .fails_on_false()
        );
        assert!(parse_statement(b"assert set A").unwrap().fails_on_false());
    }

    #[test]
    fn bad_statements_name_the_column() {
        let cases: &[(&[u8], usize, &str)] = &[
            (b"", 1, "found the end"),
            (b"lock A", 1, "unknown word \"lock\""),
            (b"assert frob A", 8, "unknown word \"frob\""),
            (b"assert anyway set A", 8, "unknown word \"anyway\""),
            (b"not", 4, "found the end"),
            (b"exists", 7, "empty VAR"),
            (b"exists ", 8, "empty VAR"),
            (b"exists  A", 8, "empty VAR"),
            (b"set A dupe", 6, "expected \" dup\""),
            (b"set A dup x", 10, "expected \" dup\""),
            (b"exists A dup", 9, "expected the end"),
            (b"delete A ", 9, "expected the end"),
            (b"set /A", 5, "empty TABLE"),
            (b"set A/", 7, "empty KEY"),
            (b"set A//B", 7, "empty KEY"),
            (b"set A/%4", 7, "bad escape"),
            (b"set A/%zz", 7, "bad escape"),
            (b"Exists A", 1, "unknown word"),
            (b"exists\tA", 1, "unknown word"),
        ];
        for &(text, column, reason) in cases {
            let (c, e, r) = err(text);
            assert_eq!(e, TxError::Invalid, "{text:?}");
            assert_eq!(c, column, "{:?}: {r}", String::from_utf8_lossy(text));
            assert!(
                r.contains(reason),
                "{:?}: {r}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn a_variable_name_is_at_most_max_var_bytes_decoded() {
        let at_max = format!("set T/{}", "k".repeat(MAX_VAR - 2));
        assert!(parse_statement(at_max.as_bytes()).is_ok());
        let over = format!("set T/{}", "k".repeat(MAX_VAR - 1));
        let (c, e, _) = err(over.as_bytes());
        assert_eq!((c, e), (5 + MAX_VAR, TxError::Overflow));
        // Escapes count once decoded.
        let escaped = format!("set T/{}", "%41".repeat(MAX_VAR - 2));
        assert!(parse_statement(escaped.as_bytes()).is_ok());
    }
}
