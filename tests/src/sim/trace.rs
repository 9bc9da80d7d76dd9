//! The run's fingerprint and its readable log.
//!
//! Every input a core is given and every output it gives is folded, in
//! order, into a 64-bit FNV-1a-style hash: two runs of one seed must end with the
//! same hash, or the simulator (or the core) is not deterministic. The log
//! is built only when asked for (replay, or re-running a failed seed), and
//! only its tail is kept unless it is printed as it goes.

use std::collections::VecDeque;

use snaplock_proto::wire::Message;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// Hash and log of one run.
#[derive(Debug)]
pub struct Trace {
    hash: u64,
    /// Print every line as it is made.
    pub verbose: bool,
    /// Keep this many of the last lines (0: build no lines at all).
    pub keep: usize,
    tail: VecDeque<String>,
}

impl Trace {
    /// A trace that keeps `keep` lines, printing them too when `verbose`.
    pub fn new(verbose: bool, keep: usize) -> Trace {
        Trace {
            hash: FNV_OFFSET,
            verbose,
            keep,
            tail: VecDeque::new(),
        }
    }

    /// The hash so far.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// Whether log lines are wanted (so callers skip formatting otherwise).
    pub fn logging(&self) -> bool {
        self.verbose || self.keep > 0
    }

    /// Folds raw bytes in: FNV-1a over little-endian 64-bit words, then
    /// the bytes left over (a word at a time keeps unoptimized test builds
    /// fast; the fingerprint only has to be the same from run to run).
    pub fn bytes(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.num(u64::from_le_bytes(w.try_into().expect("eight bytes")));
        }
        for &b in words.remainder() {
            self.hash ^= u64::from(b);
            self.hash = self.hash.wrapping_mul(FNV_PRIME);
        }
    }

    /// Folds a number in.
    pub fn num(&mut self, x: u64) {
        self.hash ^= x;
        self.hash = self.hash.wrapping_mul(FNV_PRIME);
    }

    /// Folds a message in, field by field (no encoding, no allocation).
    pub fn message(&mut self, msg: &Message) {
        self.bytes(msg.command.as_bytes());
        for (name, value) in msg.params() {
            self.bytes(&[0]);
            self.bytes(name.as_bytes());
            self.bytes(&[1]);
            self.bytes(value);
        }
        self.bytes(&[2]);
    }

    /// Adds a log line.
    pub fn line(&mut self, line: String) {
        if self.verbose {
            println!("{line}");
        }
        if self.keep > 0 {
            if self.tail.len() == self.keep {
                self.tail.pop_front();
            }
            self.tail.push_back(line);
        }
    }

    /// The kept lines, oldest first.
    pub fn tail(&self) -> Vec<String> {
        self.tail.iter().cloned().collect()
    }
}
