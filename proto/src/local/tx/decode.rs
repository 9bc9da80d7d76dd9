//! A `TRANSACTION` message, decoded and checked (snaplock(7),
//! TRANSACTIONS): every bad parameter gives a [`TxRefusal`] that names it,
//! and the statement and column when it is about a statement.

use super::stmt::parse_statement;
use super::{
    DEFAULT_DURATION, MAX_NAMESPACE, MAX_STATEMENTS, Transaction, TxError, TxRefusal,
    is_valid_namespace_char,
};
use crate::local::request::{MAX_DURATION, MIN_DURATION};
use crate::time::parse_duration;
use crate::vocab::{parse_i64, parse_u64};
use crate::wire::Message;

/// What the reply echoes of a request that could not be decoded: the
/// namespace (cut to 64 bytes) and the tag, when they could be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Echo {
    /// `namespace=`, as sent, cut.
    pub namespace: Vec<u8>,
    /// `tag=`, when it is an integer.
    pub tag: Option<i64>,
}

/// Longest namespace echoed back in a refusal.
const ECHO: usize = 64;

fn refuse<T>(
    echo: &Echo,
    statement: usize,
    error: TxError,
    why: impl Into<String>,
) -> Result<T, (TxRefusal, Echo)> {
    Err((TxRefusal::new(statement, error, why), echo.clone()))
}

/// The statement number of a parameter name `sN`: `None` when the name is
/// not of that form (an unknown parameter, ignored), `Some(Err)` for `s0`,
/// a leading zero, or a number too large to read.
fn statement_number(name: &str) -> Option<Result<u64, ()>> {
    let digits = name.strip_prefix('s')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.starts_with('0') {
        return Some(Err(()));
    }
    Some(parse_u64(digits.as_bytes()).ok_or(()))
}

/// Decodes a `TRANSACTION`. `min_uptime`, `min_trust` and `description`
/// are not read here.
pub fn decode_transaction(msg: &Message) -> Result<Transaction, (TxRefusal, Echo)> {
    let raw_ns = msg.get("namespace").unwrap_or_default();
    let mut echo = Echo {
        namespace: raw_ns[..raw_ns.len().min(ECHO)].to_vec(),
        tag: None,
    };
    if let Some(tag) = msg.get("tag") {
        match parse_i64(tag) {
            Some(t) => echo.tag = Some(t),
            None => return refuse(&echo, 0, TxError::Invalid, "tag must be an integer"),
        }
    }
    if raw_ns.is_empty() {
        return refuse(
            &echo,
            0,
            TxError::Invalid,
            "namespace is required and must not be empty",
        );
    }
    if raw_ns.len() > MAX_NAMESPACE {
        let why = format!("namespace is longer than {MAX_NAMESPACE} bytes");
        return refuse(&echo, 0, TxError::Overflow, why);
    }
    if let Some(i) = raw_ns.iter().position(|&b| !is_valid_namespace_char(b)) {
        let why = format!(
            "namespace: byte {} is not a letter, a digit, '_', '-', '.' or ':'",
            i + 1
        );
        return refuse(&echo, 0, TxError::Invalid, why);
    }
    let pid = match msg.get("pid") {
        None => None,
        Some(v) => match parse_u64(v) {
            Some(p) if p >= 1 && p <= i64::MAX as u64 => Some(p),
            _ => return refuse(&echo, 0, TxError::Invalid, "pid must be a positive integer"),
        },
    };
    let duration = match msg.get("duration") {
        None => DEFAULT_DURATION,
        Some(v) => match parse_duration(v, MAX_DURATION.as_secs() + 1) {
            Some(d) if (MIN_DURATION..=MAX_DURATION).contains(&d) => d,
            _ => {
                let why = "duration must be from 1 to 604800 seconds";
                return refuse(&echo, 0, TxError::Invalid, why);
            }
        },
    };
    let mut numbered: Vec<(u64, &[u8])> = Vec::new();
    for (name, value) in msg.params() {
        match statement_number(name) {
            None => {}
            Some(Err(())) => {
                let why = format!("{name}: statements are named s1, s2, ... (no leading zero)");
                return refuse(&echo, 0, TxError::Invalid, why);
            }
            Some(Ok(n)) => numbered.push((n, value)),
        }
    }
    numbered.sort_unstable_by_key(|&(n, _)| n);
    if let Some(&(n, _)) = numbered.iter().find(|&&(n, _)| n > MAX_STATEMENTS as u64) {
        let why = format!("at most {MAX_STATEMENTS} statements (s1 to s{MAX_STATEMENTS})");
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        return refuse(&echo, n, TxError::Overflow, why);
    }
    if let Some(gap) = (1..).zip(&numbered).find(|&(k, &(n, _))| n != k) {
        let why = format!(
            "s{} is missing: statements are numbered s1, s2, ... without gaps",
            gap.0
        );
        return refuse(&echo, gap.0 as usize, TxError::Invalid, why);
    }
    if numbered.is_empty() {
        return refuse(
            &echo,
            1,
            TxError::Invalid,
            "s1 is missing: a transaction needs a statement",
        );
    }
    let mut statements = Vec::with_capacity(numbered.len());
    for (n, value) in numbered {
        match parse_statement(value) {
            Ok(s) => statements.push(s),
            Err(e) => {
                let why = format!("s{n} column {}: {}", e.column, e.reason);
                return refuse(&echo, n as usize, e.error, why);
            }
        }
    }
    Ok(Transaction {
        namespace: raw_ns.to_vec(),
        statements,
        pid,
        tag: echo.tag,
        duration,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::parse;
    use std::time::Duration;

    fn decode(line: &str) -> Result<Transaction, (usize, TxError, String)> {
        let msg = parse(line.as_bytes()).expect("a message");
        decode_transaction(&msg).map_err(|(r, _)| (r.statement, r.error, r.description))
    }

    fn refused(line: &str) -> (usize, TxError, String) {
        match decode(line) {
            Ok(tx) => panic!("{line}: accepted as {tx:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn statements_are_read_in_the_order_of_their_number() {
        let tx = decode(
            "TRANSACTION namespace=Clinical;s2=set B;s10=delete J;s1=exists A;s3=exists C;\
             s4=exists D;s5=exists E;s6=exists F;s7=exists G;s8=exists H;s9=exists I;tag=7;pid=3;duration=5",
        )
        .unwrap();
        let vars: Vec<String> = tx
            .statements
            .iter()
            .map(|s| s.op.var().to_string())
            .collect();
        assert_eq!(vars, ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J"]);
        assert_eq!((tx.tag, tx.pid), (Some(7), Some(3)));
        assert_eq!(tx.duration, Duration::from_secs(5));
        let tx = decode("TRANSACTION namespace=a;s1=\"set A dup\";unknown=1").unwrap();
        assert_eq!(tx.duration, DEFAULT_DURATION);
    }

    #[test]
    fn numbering_must_start_at_one_without_gaps_and_stop_at_32() {
        assert_eq!(refused("TRANSACTION namespace=a").0, 1);
        assert_eq!(refused("TRANSACTION namespace=a;s2=exists A").0, 1);
        let (n, e, why) = refused("TRANSACTION namespace=a;s1=exists A;s3=exists A");
        assert_eq!((n, e), (2, TxError::Invalid));
        assert!(why.contains("s2 is missing"), "{why}");
        assert_eq!(
            refused("TRANSACTION namespace=a;s0=exists A").1,
            TxError::Invalid
        );
        assert_eq!(
            refused("TRANSACTION namespace=a;s01=exists A").1,
            TxError::Invalid
        );
        let all: Vec<String> = (1..=32).map(|i| format!("s{i}=exists A")).collect();
        assert!(decode(&format!("TRANSACTION namespace=a;{}", all.join(";"))).is_ok());
        let (n, e, _) = refused(&format!(
            "TRANSACTION namespace=a;{};s33=exists A",
            all.join(";")
        ));
        assert_eq!((n, e), (33, TxError::Overflow));
        let (n, e, _) = refused("TRANSACTION namespace=a;s99999999999999999999999=exists A");
        assert_eq!((n, e), (0, TxError::Invalid));
    }

    #[test]
    fn a_bad_statement_is_named_with_its_column() {
        let (n, e, why) = refused("TRANSACTION namespace=a;s1=exists A;s2=\"assert sett B\"");
        assert_eq!((n, e), (2, TxError::Invalid));
        assert!(why.starts_with("s2 column 8: unknown word"), "{why}");
    }

    #[test]
    fn the_namespace_and_the_other_parameters_are_checked() {
        for (line, error) in [
            ("TRANSACTION s1=exists A", TxError::Invalid),
            ("TRANSACTION namespace=;s1=exists A", TxError::Invalid),
            ("TRANSACTION namespace=a/b;s1=exists A", TxError::Invalid),
            (
                "TRANSACTION namespace=\"a b\";s1=exists A",
                TxError::Invalid,
            ),
            (
                "TRANSACTION namespace=a;s1=exists A;pid=0",
                TxError::Invalid,
            ),
            (
                "TRANSACTION namespace=a;s1=exists A;tag=x",
                TxError::Invalid,
            ),
            (
                "TRANSACTION namespace=a;s1=exists A;duration=0",
                TxError::Invalid,
            ),
            (
                "TRANSACTION namespace=a;s1=exists A;duration=604801",
                TxError::Invalid,
            ),
            (
                "TRANSACTION namespace=a;s1=exists A;duration=x",
                TxError::Invalid,
            ),
        ] {
            assert_eq!(refused(line), (0, error, refused(line).2), "{line}");
            assert_eq!(refused(line).1, error, "{line}");
        }
        let long = "n".repeat(MAX_NAMESPACE + 1);
        let (n, e, _) = refused(&format!("TRANSACTION namespace={long};s1=exists A"));
        assert_eq!((n, e), (0, TxError::Overflow));
        let ok = "n".repeat(MAX_NAMESPACE);
        assert!(decode(&format!("TRANSACTION namespace={ok};s1=exists A")).is_ok());
        assert!(decode("TRANSACTION namespace=Sky-OS.v1:Clinical_2;s1=exists A").is_ok());
    }
}
