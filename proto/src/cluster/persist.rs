//! What an agent keeps across restarts, and the bound on epochs a peer may
//! name (docs/cluster.md "Fences").
//!
//! The core reads no file: the shell hands it what it kept
//! ([`ClusterConfig::persisted`](super::ClusterConfig)) and writes what
//! the core asks for (`Output::Persist`), in the order of the outputs, so
//! the record is on disk before anything the core said after asking.
//!
//! The record is a *reservation*, not a copy of every fence: when the
//! largest fence an agent knows passes the fence on disk, it asks for that
//! fence plus [`FENCE_RESERVATION`] to be written; a restarted agent starts
//! its fence floor at the fence on disk, which is at least every fence it
//! ever drew, voted for or was told of.
//!
//! This file holds the part and its own logic; what the core does with it
//! on each message and tick is in `core/cluster/persist.rs`.

use std::fmt;
use std::time::Duration;

use super::msg::BadField;
use crate::time::{Now, Time};
use crate::wire::Fields;

/// How far past the largest fence it knows an agent reserves: one write
/// per 65,536 fences at most, and a restart moves fences up by at most
/// that (a sixteenth of the 2^20 fences of one millisecond of epoch).
pub const FENCE_RESERVATION: u64 = 1 << 16;

/// How far ahead of this agent's wall clock an epoch a peer names may be
/// (epochs are a conductor's wall clock in ms). A peer that names a
/// larger one, or a fence above `(wall + this + 2) << 20`, is refused: one
/// line with the secret must not move every fence to the end of u64.
/// Wall clocks of the members must be within this of each other.
pub const MAX_EPOCH_AHEAD: Duration = Duration::from_secs(7 * 24 * 3600);

/// Most warnings about epochs too far ahead per [`WARN_EVERY`].
pub(crate) const WARN_EVERY: Duration = Duration::from_secs(10);

/// An agent's record on disk: the largest epoch it adopted and a fence at
/// least as large as every fence it knew of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Persisted {
    /// The largest epoch the agent adopted (drew, or took from a peer).
    pub epoch: u64,
    /// Above or equal to every fence the agent drew, voted for or saw.
    pub fence: u64,
}

impl Persisted {
    /// The file's text: a header line and `key=value` lines.
    pub fn to_text(&self) -> String {
        format!(
            "snaplock-state 1\nepoch={}\nfence={}\n",
            self.epoch, self.fence
        )
    }

    /// Reads [`to_text`](Self::to_text)'s text; unknown keys are ignored
    /// (a later version may add some), a missing or broken one is an error.
    pub fn parse(text: &str) -> Result<Persisted, String> {
        let mut lines = text.lines();
        if lines.next().map(str::trim) != Some("snaplock-state 1") {
            return Err("the first line is not \"snaplock-state 1\"".to_owned());
        }
        let (mut epoch, mut fence) = (None, None);
        for line in lines {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(format!("{line:?}: not key=value"));
            };
            let slot = match key {
                "epoch" => &mut epoch,
                "fence" => &mut fence,
                _ => continue,
            };
            *slot = Some(
                value
                    .parse::<u64>()
                    .map_err(|_| format!("{key}={value:?}: not a number"))?,
            );
        }
        let epoch = epoch.ok_or("no epoch=")?;
        // Past year 2500 in ms: no clock drew it, and its fences would not
        // fit in 64 bits.
        if epoch > u64::MAX >> 21 {
            return Err(format!("epoch={epoch}: too large"));
        }
        Ok(Persisted {
            epoch,
            fence: fence.ok_or("no fence=")?,
        })
    }
}

impl fmt::Display for Persisted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "epoch {} and fence {}", self.epoch, self.fence)
    }
}

/// The largest epoch a peer may name now.
pub(crate) fn epoch_limit(now: Now) -> u64 {
    let ahead = u64::try_from(MAX_EPOCH_AHEAD.as_millis()).unwrap_or(u64::MAX);
    (now.wall.0 / 1000).saturating_add(ahead)
}

/// The largest fence a peer may name now.
pub(crate) fn fence_limit(now: Now) -> u64 {
    epoch_limit(now).saturating_add(2).saturating_mul(1 << 20)
}

/// Where `epoch << 20` cannot overflow: an epoch past `u64::MAX >> 20` is
/// refused long before (it is past year 2500 in ms), but the base must not
/// wrap around if one ever came through.
pub(crate) fn fence_base(epoch: u64) -> u64 {
    debug_assert!(
        epoch <= u64::MAX >> 20,
        "epoch {epoch} overflows its fences"
    );
    epoch.saturating_mul(1 << 20)
}

/// The epochs and fences of a peer message, checked against the limits:
/// the first epoch too far ahead (`epoch`, `max_epoch`, `prev_epoch`,
/// `ready_epoch`, `wall`), else the first fence (`fence`, `floor`, `base`),
/// in that order whatever their order on the wire. A value that is not a
/// number is left to the message's reader.
pub(crate) fn too_far(now: Now, msg: &impl Fields) -> Option<(&'static str, u64)> {
    // Each name looked up on its own: in a scanned line, a name that is
    // not there costs a few instructions (`wire::scan`).
    #[inline(always)]
    fn far(msg: &impl Fields, name: &'static str, limit: u64) -> Option<(&'static str, u64)> {
        let v = msg.get(name).and_then(crate::vocab::parse_u64)?;
        (v > limit).then_some((name, v))
    }
    let (epochs, fences) = (epoch_limit(now), fence_limit(now));
    // `wall=` is a wall clock in ms, as epochs are: a conductor follows it.
    far(msg, "epoch", epochs)
        .or_else(|| far(msg, "max_epoch", epochs))
        .or_else(|| far(msg, "prev_epoch", epochs))
        .or_else(|| far(msg, "ready_epoch", epochs))
        .or_else(|| far(msg, "wall", epochs))
        .or_else(|| far(msg, "fence", fences))
        .or_else(|| far(msg, "floor", fences))
        .or_else(|| far(msg, "base", fences))
}

/// Checks the fences of tickets a peer sent (reports, states).
pub(crate) fn check_fences<'a>(
    now: Now,
    fences: impl IntoIterator<Item = &'a u64>,
) -> Result<(), BadField> {
    let limit = fence_limit(now);
    if fences.into_iter().any(|f| *f > limit) {
        return Err(BadField("fence (too far ahead of this computer's clock)"));
    }
    Ok(())
}

/// Rate limit of the warnings about peers too far ahead.
#[derive(Debug, Default)]
pub(crate) struct FarWarnings {
    pub(crate) last: Option<Time>,
    pub(crate) quiet: u64,
}

/// What this agent keeps on record, and the bounds on what peers claim.
#[derive(Debug)]
pub(crate) struct Records {
    /// Largest fence this agent knows of.
    pub fence_floor: u64,
    /// What is on disk, or asked to be written.
    pub persisted: Persisted,
    /// The epoch this agent had adopted when it last stopped (from its
    /// record): it never adopts a smaller one (docs/cluster.md, S2).
    pub min_epoch: u64,
    /// When a far epoch or fence was last warned of, and how many since.
    pub far_warnings: FarWarnings,
}

pub(crate) fn humantime(d: Duration) -> String {
    let s = d.as_secs();
    if s % 86_400 == 0 {
        format!("{} days", s / 86_400)
    } else {
        format!("{s} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Message;

    #[test]
    fn a_record_reads_back_as_written() {
        let p = Persisted {
            epoch: 1_700_000_000_123,
            fence: 1_782_579_200_000_000_000,
        };
        assert_eq!(Persisted::parse(&p.to_text()), Ok(p));
        let later = format!("{}color=blue\n", p.to_text());
        assert_eq!(Persisted::parse(&later), Ok(p), "unknown keys are ignored");
    }

    #[test]
    fn a_broken_record_is_an_error() {
        for text in [
            "",
            "epoch=1\nfence=2\n",
            "snaplock-state 1\nepoch=1\n",
            "snaplock-state 1\nepoch=x\nfence=2\n",
            "snaplock-state 1\nepoch\nfence=2\n",
            "snaplock-state 1\nepoch=18446744073709551615\nfence=2\n",
        ] {
            assert!(Persisted::parse(text).is_err(), "{text:?} was read");
        }
    }

    #[test]
    fn the_largest_epoch_leaves_room_for_its_fences() {
        let now = Now {
            mono: Time::ZERO,
            wall: crate::time::UnixTime(u64::MAX),
        };
        assert_eq!(fence_limit(now), u64::MAX);
        assert_eq!(fence_base(u64::MAX >> 20), (u64::MAX >> 20) << 20);
        // A wall clock of year 2500 and a week ahead: fences still fit.
        let year_2500_ms = 16_725_225_600_000u64;
        let limit = year_2500_ms + 7 * 86_400_000 + 2;
        assert!(limit.checked_mul(1 << 20).is_some());
    }

    #[test]
    fn a_peer_message_too_far_ahead_names_its_first_epoch_else_its_first_fence() {
        let now = Now {
            mono: Time::ZERO,
            wall: crate::time::UnixTime(1_800_000_000_000_000),
        };
        let (e, f) = (epoch_limit(now), fence_limit(now));
        // A message, and the same line as given (its names unsorted),
        // scanned: both read the same.
        let m = |params: &[(&str, u64)]| {
            let mut m = Message::new("LOCKED");
            let mut line = b"LOCKED ".to_vec();
            for (n, v) in params {
                m.set_u64(n, *v);
                line.extend_from_slice(format!("{n}={v};").as_bytes());
            }
            let scanned = crate::wire::scan(&line).expect("a plain line");
            assert_eq!(too_far(now, &scanned), too_far(now, &m), "{params:?}");
            too_far(now, &m)
        };
        assert_eq!(m(&[("epoch", e), ("fence", f), ("req", u64::MAX)]), None);
        assert_eq!(m(&[("epoch", e + 1)]), Some(("epoch", e + 1)));
        assert_eq!(
            m(&[("wall", e + 1), ("fence", f + 1)]),
            Some(("wall", e + 1))
        );
        assert_eq!(
            m(&[("max_epoch", e + 2), ("wall", e + 1)]),
            Some(("max_epoch", e + 2))
        );
        // `fence` before `floor` before `base`, whatever their order on the wire.
        assert_eq!(
            m(&[("base", f + 3), ("floor", f + 2), ("fence", f + 1)]),
            Some(("fence", f + 1))
        );
        assert_eq!(
            m(&[("base", f + 3), ("floor", f + 2)]),
            Some(("floor", f + 2))
        );
        assert_eq!(m(&[("base", f + 3), ("floor", f)]), Some(("base", f + 3)));
        // An epoch within the limit but beyond the fences' is no fence.
        assert_eq!(m(&[("epoch", e), ("floor", e)]), None);
        // A value that is not a number is not checked here.
        let mut bad = Message::new("LOCKED");
        bad.set("epoch", "x");
        assert_eq!(too_far(now, &bad), None);
    }
}
