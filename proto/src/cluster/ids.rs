//! Agent ids, the leaders' sort order, and the small deterministic helpers
//! (hash, random numbers) the cluster needs without any OS facility.

use std::hash::{BuildHasherDefault, Hasher};
use std::net::SocketAddr;

/// Priority written in an id for `candidate_priority=off`.
pub const OFF: u8 = 99;

/// `PP|RANDOM|ADDRESS|PID|NAME`: priority on two digits,
/// so ids sort by priority first, then by a random number drawn at start.
pub fn make_id(
    priority: Option<u8>,
    random: u32,
    addr: Option<SocketAddr>,
    pid: u32,
    name: &str,
) -> String {
    let pp = priority.unwrap_or(OFF);
    let addr = addr.map_or_else(|| "-".to_owned(), |a| a.to_string());
    format!("{pp:02}|{random:010}|{addr}|{pid}|{name}")
}

/// The pieces of an id; `None` when it is not one.
pub struct Parsed<'a> {
    pub priority: u8,
    pub addr: Option<SocketAddr>,
    pub name: &'a str,
}

pub fn parse_id(id: &str) -> Option<Parsed<'_>> {
    let mut parts = id.splitn(5, '|');
    let pp = parts.next()?;
    let random = parts.next()?;
    let addr = parts.next()?;
    let pid = parts.next()?;
    let name = parts.next()?;
    if pp.len() != 2 || random.len() != 10 || pid.parse::<u32>().is_err() {
        return None;
    }
    if !random.bytes().all(|b| b.is_ascii_digit()) || !crate::wire::is_valid_name(name.as_bytes()) {
        return None;
    }
    let priority = pp.parse().ok()?;
    let addr = if addr == "-" {
        None
    } else {
        Some(addr.parse().ok()?)
    };
    Some(Parsed {
        priority,
        addr,
        name,
    })
}

/// The key candidates sort by: current leaders first (`00`),
/// then priority, then the random part and the rest of the id.
pub fn candidate_key(id: &str, is_leader: bool) -> String {
    if is_leader {
        format!("00{}", &id[2..])
    } else {
        id.to_owned()
    }
}

pub use crate::vocab::fnv1a64;

/// FNV-1a as a [`std::hash::Hasher`] for the core's large hash
/// tables (a handover's million tickets): fixed, since the core draws
/// nothing from the system, and quick on short keys. `finish` mixes the
/// bits (MurmurHash3's finalizer), so that the table's low bits depend on
/// every byte. Keys come from authenticated peers, or are clients' names
/// in a table of bounded size (the busiest names), where names made to
/// collide cost a walk of that size at worst.
#[derive(Clone, Copy, Debug)]
pub struct Fnv(u64);

/// A hash table with the fixed hasher [`Fnv`].
pub(crate) type FixedMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<Fnv>>;

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(crate::vocab::FNV1A_OFFSET)
    }
}

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = crate::vocab::fnv1a_extend(self.0, bytes);
    }

    fn write_u64(&mut self, n: u64) {
        self.write(&n.to_le_bytes());
    }

    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// SplitMix64: a small, seeded, platform-independent generator.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_reads_back_its_priority_address_and_name() {
        let addr: SocketAddr = "10.0.0.10:4040".parse().unwrap();
        let id = make_id(Some(3), 42, Some(addr), 77, "node_a");
        assert_eq!(id, "03|0000000042|10.0.0.10:4040|77|node_a");
        let p = parse_id(&id).unwrap();
        assert_eq!((p.priority, p.addr, p.name), (3, Some(addr), "node_a"));
        assert!(parse_id("3|42|x|1|a").is_none());
        assert!(parse_id("03|0000000042|nonsense|77|node_a").is_none());
    }

    #[test]
    fn current_leaders_sort_before_any_priority() {
        let leader = make_id(Some(14), 9, None, 1, "b");
        let eager = make_id(Some(1), 1, None, 1, "a");
        assert!(candidate_key(&leader, true) < candidate_key(&eager, false));
        assert!(candidate_key(&eager, false) < candidate_key(&leader, false));
    }

    #[test]
    fn the_generator_and_the_hash_are_the_same_everywhere() {
        let mut r = SplitMix64::new(1);
        assert_eq!(r.next_u64(), 0x910a_2dec_8902_5cc1);
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
