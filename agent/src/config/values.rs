//! The parsers of single values, shared by the keys: each value is read
//! the same way in the file and on the command line.

use std::net::SocketAddr;

use log::LevelFilter;
use snaplock_proto::vocab::parse_u64;

/// `metrics_prefixes=`: prefixes separated by blanks (names are often
/// URLs, which may hold commas but no blank), each of at most
/// `MAX_PREFIX_LEN` bytes, `MAX_PREFIXES` at most.
pub(super) fn parse_prefixes(value: &str) -> Result<Vec<Vec<u8>>, &'static str> {
    use snaplock_proto::metrics::{MAX_PREFIX_LEN, MAX_PREFIXES};
    let list: Vec<Vec<u8>> = value.split_whitespace().map(|p| p.into()).collect();
    if list.len() > MAX_PREFIXES {
        return Err("at most 64 prefixes, separated by blanks");
    }
    if list.iter().any(|p| p.len() > MAX_PREFIX_LEN) {
        return Err("a prefix is at most 256 bytes");
    }
    Ok(list)
}

pub(super) fn non_empty(v: &str) -> Option<&str> {
    if v.is_empty() { None } else { Some(v) }
}

pub(super) fn parse_addr(v: &str) -> Result<SocketAddr, ()> {
    v.parse::<SocketAddr>().map_err(|_| ())
}

/// `I` or `I.F` with at most `decimals` digits in `F`, scaled by
/// 10^`decimals`: exact, unlike a float.
pub(super) fn decimal(v: &str, decimals: u32) -> Option<u64> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits(int) || !digits(frac) || frac.len() > decimals as usize {
        return None;
    }
    if v.ends_with('.') {
        return None;
    }
    let scale = 10u64.pow(decimals);
    let frac_scaled = if frac.is_empty() {
        0
    } else {
        unsigned(frac)? * 10u64.pow(decimals - frac.len() as u32)
    };
    unsigned(int)?.checked_mul(scale)?.checked_add(frac_scaled)
}

/// Digits only, as the protocol reads its numbers: no sign, no blank.
pub(super) fn unsigned(v: &str) -> Option<u64> {
    parse_u64(v.as_bytes())
}

pub(super) fn number(v: &str, (min, max): (usize, usize), unit: &str) -> Result<usize, String> {
    match unsigned(v).and_then(|n| usize::try_from(n).ok()) {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be an integer from {min} to {max}{unit}")),
    }
}

/// `error`, `warn`, `info`, `debug` or `trace`.
pub fn parse_log_level(v: &str) -> Option<LevelFilter> {
    match v {
        "error" => Some(LevelFilter::Error),
        "warn" => Some(LevelFilter::Warn),
        "info" => Some(LevelFilter::Info),
        "debug" => Some(LevelFilter::Debug),
        "trace" => Some(LevelFilter::Trace),
        _ => None,
    }
}
