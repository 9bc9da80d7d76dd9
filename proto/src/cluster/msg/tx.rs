//! The transactions' messages (`TRANSACTION`, `TXDONE`): their
//! fields, and how their lists go on the wire.

use super::{BadField, Message};
use crate::vocab::parse_u64;

/// `TRANSACTION` from a home to the owner of the namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TxReq {
    pub epoch: u64,
    pub namespace: Vec<u8>,
    /// The home's number for it; the variables it sets take the next
    /// [`crate::local::tx::MAX_STATEMENTS`] numbers as their requests.
    pub req: u64,
    /// The session: the key its variables are held by.
    pub key: String,
    /// The statements, in their canonical text.
    pub statements: Vec<Vec<u8>>,
    pub duration_us: u64,
    /// How many more variables the session's connection may hold.
    pub room: u64,
}

/// `TXDONE`: the owner ran the transaction; the home applies it (its
/// `TXACK` makes it visible to other transactions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TxDone {
    pub epoch: u64,
    pub namespace: Vec<u8>,
    pub req: u64,
    pub fence: u64,
    pub results: Vec<bool>,
    /// New holdings: (request, dup, variable).
    pub sets: Vec<(u64, bool, Vec<u8>)>,
    /// Holdings renewed: their requests.
    pub renews: Vec<u64>,
    /// Holdings deleted: their requests.
    pub deletes: Vec<u64>,
}

/// Most statements or variables one transaction message carries.
pub(crate) const MAX_TX_ITEMS: usize = 32;

/// What every transaction message starts with.
pub(super) fn put_tx_head(m: &mut Message, epoch: u64, namespace: Vec<u8>, req: u64) {
    m.set_u64("epoch", epoch);
    m.set_owned("namespace", namespace);
    m.set_u64("req", req);
}

/// `s1`, `s2`, ... in order, without a gap.
pub(super) fn statements(m: &mut Message) -> Result<Vec<Vec<u8>>, BadField> {
    let mut out = Vec::new();
    while let Some(st) = m.remove(&format!("s{}", out.len() + 1)) {
        if out.len() == MAX_TX_ITEMS {
            return Err(BadField("s33"));
        }
        out.push(st);
    }
    if out.is_empty() {
        return Err(BadField("s1"));
    }
    Ok(out)
}

/// `results=1,0,...` as written: one digit per statement.
pub(super) fn bits(m: &Message, name: &'static str) -> Result<Vec<bool>, BadField> {
    let v = m.get(name).ok_or(BadField(name))?;
    if v.len() > MAX_TX_ITEMS {
        return Err(BadField(name));
    }
    v.iter()
        .map(|b| match b {
            b'1' => Ok(true),
            b'0' => Ok(false),
            _ => Err(BadField(name)),
        })
        .collect()
}

/// `set1=REQ DUP VAR`, `set2=...`: the holdings a transaction made.
pub(super) fn tx_sets(m: &mut Message) -> Result<Vec<(u64, bool, Vec<u8>)>, BadField> {
    let mut out = Vec::new();
    while let Some(v) = m.remove(&format!("set{}", out.len() + 1)) {
        if out.len() == MAX_TX_ITEMS {
            return Err(BadField("set"));
        }
        let mut parts = v.splitn(3, |&b| b == b' ');
        let req = parts.next().and_then(parse_u64).ok_or(BadField("set"))?;
        let dup = match parts.next() {
            Some(b"1") => true,
            Some(b"0") => false,
            _ => return Err(BadField("set")),
        };
        let var = parts
            .next()
            .filter(|v| !v.is_empty())
            .ok_or(BadField("set"))?;
        out.push((req, dup, var.to_vec()));
    }
    Ok(out)
}

/// A list of numbers, `1,2,3` (absent: none).
pub(super) fn numbers(m: &Message, name: &'static str) -> Result<Vec<u64>, BadField> {
    let Some(v) = m.get(name) else {
        return Ok(Vec::new());
    };
    let out: Vec<u64> = v
        .split(|&b| b == b',')
        .map(|n| parse_u64(n).ok_or(BadField(name)))
        .collect::<Result<_, _>>()?;
    if out.len() > MAX_TX_ITEMS {
        return Err(BadField(name));
    }
    Ok(out)
}

pub(super) fn put_numbers(m: &mut Message, name: &str, list: &[u64]) {
    if list.is_empty() {
        return;
    }
    let text: Vec<String> = list.iter().map(u64::to_string).collect();
    m.set_owned(name, text.join(",").into_bytes());
}
