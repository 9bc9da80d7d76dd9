//! The words every part of the core speaks: who is who (clients, links,
//! tickets), what an object is called, what a request asks for, why one is
//! refused, and the protocol's numbers. Every other module may import this
//! one; it imports nothing of the core above it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A client connection, numbered by the shell; never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub u64);

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client {}", self.0)
    }
}

/// A link to another computer, numbered by the shell; never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeerId(pub u64);

impl fmt::Display for PeerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "peer {}", self.0)
    }
}

/// An object name, shared between the tables and their timers, with its
/// FNV-1a hash computed once.
///
/// Names order by that hash first and by their bytes only when two hashes
/// are equal: a table search compares the numbers kept beside each name
/// in the tree's nodes instead of reading every name it passes, and names
/// sharing a long prefix (`db/table/row17`) part at once. The order is
/// the same on every agent and every platform, like the hash, but it is
/// not the order of the bytes: what a user reads sorted by name is sorted
/// by [`ObjectName::as_bytes`] where it is written.
///
/// A transaction's variable ([`var_object`]) keeps 0 for its hash, so the
/// variables come first in a table, in the order of their bytes (a lock's
/// name, whose first byte is never NUL, sorts after them even if its hash
/// is 0).
#[derive(Clone)]
pub struct ObjectName {
    hash: u64,
    bytes: Arc<[u8]>,
}

impl ObjectName {
    /// The name `bytes`, copied once.
    pub fn new(bytes: &[u8]) -> ObjectName {
        ObjectName::from_parts(name_hash(bytes), bytes)
    }

    fn from_parts(hash: u64, bytes: &[u8]) -> ObjectName {
        ObjectName {
            hash,
            bytes: Arc::from(bytes),
        }
    }

    /// FNV-1a of the name's bytes ([`fnv1a64`]); 0 for a variable's
    /// object.
    pub fn hash64(&self) -> u64 {
        self.hash
    }

    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl std::ops::Deref for ObjectName {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl AsRef<[u8]> for ObjectName {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl From<&[u8]> for ObjectName {
    fn from(bytes: &[u8]) -> ObjectName {
        ObjectName::new(bytes)
    }
}

impl From<Vec<u8>> for ObjectName {
    fn from(bytes: Vec<u8>) -> ObjectName {
        ObjectName {
            hash: name_hash(&bytes),
            bytes: Arc::from(bytes),
        }
    }
}

impl From<&str> for ObjectName {
    fn from(s: &str) -> ObjectName {
        ObjectName::new(s.as_bytes())
    }
}

impl PartialEq for ObjectName {
    fn eq(&self, other: &ObjectName) -> bool {
        self.hash == other.hash
            && (Arc::ptr_eq(&self.bytes, &other.bytes) || self.bytes == other.bytes)
    }
}

impl Eq for ObjectName {}

impl PartialOrd for ObjectName {
    fn partial_cmp(&self, other: &ObjectName) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ObjectName {
    fn cmp(&self, other: &ObjectName) -> std::cmp::Ordering {
        self.hash.cmp(&other.hash).then_with(|| {
            if Arc::ptr_eq(&self.bytes, &other.bytes) {
                std::cmp::Ordering::Equal
            } else {
                self.bytes.cmp(&other.bytes)
            }
        })
    }
}

impl std::hash::Hash for ObjectName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        if self.hash == 0 {
            state.write(&self.bytes); // the variables, whose hash is 0
        } else {
            state.write_u64(self.hash);
        }
    }
}

/// Longest object name accepted, in bytes.
pub const MAX_OBJECT_NAME: usize = 4096;

/// The names read lately, the last one of each of [`NameCache::SLOTS`]
/// slots by hash: a message that names one of them shares its bytes
/// instead of copying them, and a table that holds the name compares it
/// with them by pointer. A transaction's variable is not kept (its hash is
/// 0), nor a name longer than [`MAX_OBJECT_NAME`] (a request that names
/// one is refused). At most `SLOTS` names are kept alive by it, 4 MiB of
/// names at the most.
#[derive(Debug, Default)]
pub struct NameCache {
    slots: Vec<Option<ObjectName>>,
}

impl NameCache {
    /// How many names it keeps at most.
    pub const SLOTS: usize = 1024;

    /// The name `bytes`: the one kept, when it is, else a new one, kept.
    pub fn name(&mut self, bytes: &[u8]) -> ObjectName {
        let hash = name_hash(bytes);
        if hash == 0 || bytes.len() > MAX_OBJECT_NAME {
            return ObjectName::from_parts(hash, bytes);
        }
        if self.slots.is_empty() {
            self.slots = vec![None; Self::SLOTS];
        }
        let slot = &mut self.slots[(hash as usize) % Self::SLOTS];
        if let Some(kept) = slot
            .as_ref()
            .filter(|n| n.hash == hash && *n.bytes == *bytes)
        {
            return kept.clone();
        }
        let name = ObjectName::from_parts(hash, bytes);
        *slot = Some(name.clone());
        name
    }
}

/// What an [`ObjectName`] keeps for its hash.
fn name_hash(bytes: &[u8]) -> u64 {
    if bytes.first() == Some(&VAR_OBJECT) {
        0
    } else {
        fnv1a64(bytes)
    }
}

impl fmt::Debug for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.bytes, f)
    }
}

/// FNV-1a, 64 bits, of `bytes`: the same on every agent and every
/// platform. It orders [`ObjectName`]s and chooses the leader that owns
/// an object.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a_extend(FNV1A_OFFSET, bytes)
}

/// FNV-1a's starting value.
pub(crate) const FNV1A_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a state `h` after `bytes`.
pub(crate) fn fnv1a_extend(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The first byte of the object name a transaction's variable takes in the
/// tables of a cluster: no client's lock may name an object that starts
/// with it (`object_name` refuses a NUL first byte).
pub const VAR_OBJECT: u8 = 0;

/// The object a cluster's tables keep for variable `var` (its canonical,
/// escaped text: ASCII, no NUL) of namespace `ns` (letters, digits and
/// `_-.:`): `NUL NS NUL VAR`.
pub fn var_object(ns: &[u8], var: &[u8]) -> Vec<u8> {
    let mut o = Vec::with_capacity(ns.len() + var.len() + 2);
    o.push(VAR_OBJECT);
    o.extend_from_slice(ns);
    o.push(VAR_OBJECT);
    o.extend_from_slice(var);
    o
}

/// The namespace and variable of an object [`var_object`] made; `None`
/// for a lock's object.
pub fn split_var_object(object: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = object.strip_prefix(&[VAR_OBJECT])?;
    let at = rest.iter().position(|&b| b == VAR_OBJECT)?;
    Some((&rest[..at], &rest[at + 1..]))
}

/// Never reused within one core: a timer or an index entry naming a
/// ticket that is gone finds nothing, and does nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TicketId(pub u64);

/// READ/WRITE (`exclusive`), READ-ONLY (`shared`), or one of a number of
/// slots each requester counts from its own view (`counted`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// At most one holder, and no other holder at the same time.
    #[default]
    Exclusive,
    /// Any number of shared holders, up to every holder's own `limit`.
    Shared,
    /// Granted while fewer holders than its own `limit` hold the object
    /// (canal's elastic count): a counted holder's limit binds only its own
    /// grant, never a later request's.
    Counted,
}

impl Mode {
    /// Shared or counted: held beside others, excluded by an exclusive holder.
    pub fn is_shared(self) -> bool {
        self != Mode::Exclusive
    }

    /// The `mode=` word.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Shared => "shared",
            Mode::Counted => "counted",
        }
    }
}

/// How a waiting exclusive request treats later shared requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Keeps its place: later shared requests wait behind it.
    Hard,
    /// Later shared requests may pass it; granted once no shared lock is held.
    Soft,
    /// Soft, and also waits until no shared lock was granted for `quiet`.
    Timed {
        /// How long the object must have seen no shared grant.
        quiet: Duration,
    },
}

/// What a ticket asks for: its mode, its limit and its policy (snaplock(7)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    /// Exclusive, shared or counted.
    pub mode: Mode,
    /// For shared tickets: most holders this request accepts sharing with
    /// (itself included), for as long as it holds. For counted tickets
    /// (always `Some`): most holders, itself included, when it is granted.
    /// `None`: unlimited.
    pub limit: Option<u32>,
    /// For exclusive tickets: the write policy.
    pub policy: Policy,
}

impl Kind {
    /// The default kind: exclusive, hard policy.
    pub const EXCLUSIVE: Kind = Kind {
        mode: Mode::Exclusive,
        limit: None,
        policy: Policy::Hard,
    };

    pub(crate) fn limit_or_max(&self) -> u64 {
        self.limit.map_or(u64::MAX, u64::from)
    }
}

/// Why a request is refused: the `error=` and `description=` of the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `invalid`, `timedout`, `duplicate`, `busy`, `overflow`, `unavailable`,
    /// `denied`, `untrusted`.
    pub error: &'static str,
    /// For the human reading the reply.
    pub description: String,
}

impl Refusal {
    pub(crate) fn new(error: &'static str, description: impl Into<String>) -> Refusal {
        Refusal {
            error,
            description: description.into(),
        }
    }

    pub(crate) fn invalid(description: impl Into<String>) -> Refusal {
        Refusal::new("invalid", description)
    }
}

/// `[0-9]{1,20}` within `u64`. Eight digits at a time: every peer
/// message carries a few numbers of 13 to 19 digits (epochs, fences).
pub fn parse_u64(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 20 {
        return None;
    }
    if v.len() == 20 {
        // The one length that can overflow.
        if !v.iter().all(u8::is_ascii_digit) {
            return None;
        }
        return v.iter().try_fold(0u64, |a, &b| {
            a.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        });
    }
    // At most 19 digits: below 10^19, no overflow.
    let mut n = 0u64;
    let mut rest = v;
    while let Some((chunk, tail)) = rest.split_first_chunk::<8>() {
        n = n * 100_000_000 + eight_digits(u64::from_le_bytes(*chunk))?;
        rest = tail;
    }
    for &b in rest {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n * 10 + u64::from(d);
    }
    Some(n)
}

/// The number eight ASCII digits make (the first in the lowest byte), or
/// `None` when a byte is not a digit.
fn eight_digits(word: u64) -> Option<u64> {
    const HIGH_NIBBLES: u64 = 0xf0f0_f0f0_f0f0_f0f0;
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    // Every byte is 0x30..=0x3f, and stays below 0x40 with 6 added (no
    // byte then carries into the next): every byte is 0x30..=0x39.
    if word & HIGH_NIBBLES != ZEROS
        || word.wrapping_add(0x0606_0606_0606_0606) & HIGH_NIBBLES != ZEROS
    {
        return None;
    }
    let mut v = word - ZEROS;
    // Pairs, then fours, then all eight: the first digit is the highest.
    v = (v * 10 + (v >> 8)) & 0x00ff_00ff_00ff_00ff;
    v = (v * 100 + (v >> 16)) & 0x0000_ffff_0000_ffff;
    v = (v * 10_000 + (v >> 32)) & 0x0000_0000_ffff_ffff;
    Some(v)
}

/// `-?[0-9]+` within `i64`.
pub fn parse_i64(v: &[u8]) -> Option<i64> {
    let (neg, digits) = match v.first() {
        Some(b'-') => (true, &v[1..]),
        _ => (false, v),
    };
    let n = parse_u64(digits)?;
    if neg {
        0i64.checked_sub_unsigned(n)
    } else {
        i64::try_from(n).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_read_again_is_shared_and_the_cache_stays_bounded() {
        let mut names = NameCache::default();
        let a = names.name(b"db/table/row17");
        let again = names.name(b"db/table/row17");
        assert!(Arc::ptr_eq(&a.bytes, &again.bytes), "shared, not copied");
        assert_eq!(a, ObjectName::new(b"db/table/row17"));
        assert_eq!(a.hash64(), ObjectName::new(b"db/table/row17").hash64());
        // A transaction's variable is not kept: each read is its own copy.
        let var = var_object(b"ns", b"x");
        let (v1, v2) = (names.name(&var), names.name(&var));
        assert!(!Arc::ptr_eq(&v1.bytes, &v2.bytes));
        assert_eq!(v1.hash64(), 0);
        // Nor a name longer than any a client may lock.
        let long = vec![b'x'; MAX_OBJECT_NAME + 1];
        let (l1, l2) = (names.name(&long), names.name(&long));
        assert!(!Arc::ptr_eq(&l1.bytes, &l2.bytes));
        assert_eq!(l1, ObjectName::new(&long));
        assert!(
            names
                .slots
                .iter()
                .flatten()
                .all(|n| n.len() <= MAX_OBJECT_NAME)
        );
        // Many names: each read gives its own name, and no more than
        // SLOTS of them are kept.
        let many: Vec<ObjectName> = (0..4 * NameCache::SLOTS)
            .map(|k| names.name(format!("n{k}").as_bytes()))
            .collect();
        for (k, n) in many.iter().enumerate() {
            assert_eq!(n.as_bytes(), format!("n{k}").as_bytes());
        }
        let kept = names.slots.iter().flatten().count();
        assert!(kept <= NameCache::SLOTS, "{kept} kept");
        assert!(names.slots.len() == NameCache::SLOTS);
        // The one kept in a slot gives way to another name of that slot.
        let last = many.last().expect("names");
        let slot = (last.hash64() as usize) % NameCache::SLOTS;
        assert_eq!(names.slots[slot].as_ref(), Some(last));
    }

    #[test]
    fn names_order_as_one_total_order_with_the_variables_first() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        use std::collections::BTreeSet;
        let mut rng = StdRng::seed_from_u64(0x5eed_0009);
        // Short names over few bytes, so that names repeat and share
        // prefixes; a quarter are variables' objects.
        let mut names: Vec<ObjectName> = (0..3000)
            .map(|_| {
                let len = rng.random_range(0..6);
                let mut v: Vec<u8> = (0..len)
                    .map(|_| b"ab/\x00"[rng.random_range(0..4)])
                    .collect();
                if rng.random_range(0..4) == 0 {
                    v = var_object(b"ns", &v);
                }
                ObjectName::from(v)
            })
            .collect();
        for a in &names[..300] {
            for b in &names[..300] {
                // Equal exactly when the bytes are, and then alike to a
                // hash table.
                assert_eq!(a == b, a.as_bytes() == b.as_bytes());
                assert_eq!(a.cmp(b) == std::cmp::Ordering::Equal, a == b);
                assert_eq!(a.cmp(b), b.cmp(a).reverse());
                if a == b {
                    let h = |n: &ObjectName| {
                        use std::hash::{BuildHasher, BuildHasherDefault};
                        BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
                            .hash_one(n)
                    };
                    assert_eq!(h(a), h(b));
                }
            }
        }
        names.sort();
        assert!(names.windows(2).all(|w| w[0] <= w[1]), "a total order");
        // The variables first, in the order of their bytes; then the
        // locks' names, by hash.
        let vars = names
            .iter()
            .take_while(|n| n.first() == Some(&VAR_OBJECT))
            .count();
        assert!(vars > 0 && vars < names.len());
        assert!(names[vars..].iter().all(|n| n.first() != Some(&VAR_OBJECT)));
        assert!(
            names[..vars]
                .windows(2)
                .all(|w| w[0].as_bytes() <= w[1].as_bytes())
        );
        assert!(
            names[vars..]
                .windows(2)
                .all(|w| w[0].hash64() <= w[1].hash64())
        );
        assert!(names[vars..].iter().all(|n| n.hash64() == fnv1a64(n)));
        // A set of names holds each once.
        let set: BTreeSet<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
        let mut distinct = names.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), set.len());
    }

    /// What `parse_u64` must answer, one digit at a time.
    fn slow_u64(v: &[u8]) -> Option<u64> {
        if v.is_empty() || v.len() > 20 || !v.iter().all(u8::is_ascii_digit) {
            return None;
        }
        v.iter().try_fold(0u64, |a, &b| {
            a.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        })
    }

    #[test]
    fn numbers_are_read_eight_digits_at_a_time_as_one_at_a_time() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let mut rng = StdRng::seed_from_u64(0x5eed_0008);
        // Bytes next to the digits, and the digits, most often.
        let bytes = b"0123456789/:\x00\xff+- 09";
        for case in 0..200_000 {
            let len = rng.random_range(0..=22);
            let v: Vec<u8> = (0..len)
                .map(|_| match rng.random_range(0..10) {
                    0 => bytes[rng.random_range(0..bytes.len())],
                    1 => rng.random(),
                    _ => b'0' + rng.random_range(0..10u8),
                })
                .collect();
            assert_eq!(
                parse_u64(&v),
                slow_u64(&v),
                "case {case}: {:?}",
                v.escape_ascii().to_string()
            );
        }
        for n in [
            0,
            1,
            9,
            10,
            99_999_999,
            100_000_000,
            u64::MAX / 10,
            u64::MAX - 1,
            u64::MAX,
        ] {
            assert_eq!(parse_u64(n.to_string().as_bytes()), Some(n));
            assert_eq!(
                parse_u64(format!("{n:019}").as_bytes()),
                slow_u64(format!("{n:019}").as_bytes())
            );
        }
    }

    #[test]
    fn numbers_are_plain_decimal_within_their_type() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b""[..],
            b"+5",
            b"-1",
            b" 5",
            b"5 ",
            b"1e3",
            b"18446744073709551616",
        ] {
            assert_eq!(parse_u64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"-9223372036854775809"), None);
        assert_eq!(parse_i64(b"--1"), None);
        assert_eq!(parse_i64(b"-"), None);
    }
}
