//! The busiest names, in bounded memory: the space-saving count of
//! Metwally, Agrawal and El Abbadi ("Efficient computation of frequent and
//! top-k elements in data streams", 2005).
//!
//! At most `capacity` names are counted. A name not counted yet takes the
//! place of the least counted one and starts from its count plus one, so a
//! count is an upper bound on the name's true count, over by at most the
//! count of the name it replaced, and every name seen more than
//! `total / capacity` times is counted. Counts only grow: a name evicted
//! and seen again starts above where it was, so its series is a counter.

use std::collections::BTreeSet;

use crate::cluster::ids::FixedMap;
use crate::vocab::ObjectName;

/// The counted names, by name and by count.
#[derive(Debug, Default)]
pub(crate) struct TopNames {
    capacity: usize,
    /// Looked up on every request, never walked: hashed, not ordered. The
    /// hash is fixed (the core draws nothing from the world); names are
    /// the clients' choice, but at most `capacity` are kept (400 at most,
    /// `metrics_top_names` × 4), so even names made to collide cost a walk
    /// of that many at worst.
    counts: FixedMap<ObjectName, u64>,
    by_count: BTreeSet<(u64, ObjectName)>,
}

impl TopNames {
    /// Counts at most `capacity` names (none when 0).
    pub fn new(capacity: usize) -> TopNames {
        TopNames {
            capacity,
            ..TopNames::default()
        }
    }

    /// One more for `name`.
    pub fn note(&mut self, name: &ObjectName) {
        if self.capacity == 0 {
            return;
        }
        let count = match self.counts.get_mut(name) {
            Some(c) => {
                self.by_count.remove(&(*c, name.clone()));
                *c += 1;
                *c
            }
            None => {
                let start = if self.counts.len() < self.capacity {
                    1
                } else {
                    let (least, gone) = self.by_count.pop_first().expect("full, so not empty");
                    self.counts.remove(&gone);
                    least + 1
                };
                self.counts.insert(name.clone(), start);
                start
            }
        };
        self.by_count.insert((count, name.clone()));
        debug_assert_eq!(self.counts.len(), self.by_count.len());
    }

    /// The `n` most counted names, most counted first.
    pub fn top(&self, n: usize) -> impl Iterator<Item = (&ObjectName, u64)> {
        self.by_count
            .iter()
            .rev()
            .take(n)
            .map(|(c, name)| (name, *c))
    }

    /// How many names are counted.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.counts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> ObjectName {
        ObjectName::from(s.as_bytes())
    }

    #[test]
    fn a_frequent_name_stays_on_top_among_many_rare_ones() {
        let mut top = TopNames::new(8);
        for i in 0..10_000 {
            if i % 3 == 0 {
                top.note(&name("hot"));
            }
            top.note(&name(&format!("cold-{i}")));
        }
        assert_eq!(top.len(), 8, "memory stays bounded");
        let (first, count) = top.top(1).next().expect("one counted");
        assert_eq!(&**first, b"hot");
        assert!(
            count >= 3334,
            "a count is never below the true one: {count}"
        );
    }

    #[test]
    fn an_evicted_name_comes_back_above_its_old_count() {
        let mut top = TopNames::new(2);
        top.note(&name("a"));
        top.note(&name("b"));
        top.note(&name("b"));
        top.note(&name("c")); // replaces a (1): starts at 2
        let mut counts: Vec<(Vec<u8>, u64)> = top.top(5).map(|(n, c)| (n.to_vec(), c)).collect();
        counts.sort(); // a tie is in the names' order, that of their hashes
        assert_eq!(counts, [(b"b".to_vec(), 2), (b"c".to_vec(), 2)]);
        top.note(&name("a")); // replaces c or b (2): starts at 3, above its old 1
        assert_eq!(
            top.top(1).next().map(|(n, c)| (n.to_vec(), c)),
            Some((b"a".to_vec(), 3))
        );
    }

    #[test]
    fn a_capacity_of_zero_counts_nothing() {
        let mut top = TopNames::new(0);
        top.note(&name("a"));
        assert_eq!(top.top(5).count(), 0);
    }
}
