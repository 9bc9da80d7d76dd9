//! What an agent keeps across restarts, and the bound on epochs a peer may
//! name (docs/cluster.md "Fences").
//!
//! The core reads no file: the shell hands it what it kept
//! ([`ClusterConfig::persisted`](super::ClusterConfig)) and writes what
//! the core asks for ([`Output::Persist`]), in the order of the outputs, so
//! the record is on disk before anything the core said after asking.
//!
//! The record is a *reservation*, not a copy of every fence: when the
//! largest fence an agent knows passes the fence on disk, it asks for that
//! fence plus [`FENCE_RESERVATION`] to be written; a restarted agent starts
//! its fence floor at the fence on disk, which is at least every fence it
//! ever drew, voted for or was told of.

use std::fmt;
use std::time::Duration;

use super::msg::BadField;
use crate::core::{Core, Output};
use crate::time::{Now, Time};
use crate::wire::Message;

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
const WARN_EVERY: Duration = Duration::from_secs(10);

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

/// The epochs and fences of a peer message, checked against the limits.
fn too_far(now: Now, msg: &Message) -> Option<(&'static str, u64)> {
    let num = |name: &str| msg.get_str(name).and_then(|v| v.parse::<u64>().ok());
    // `wall=` is a wall clock in ms, as epochs are: a conductor follows it.
    let epochs = ["epoch", "max_epoch", "prev_epoch", "ready_epoch", "wall"];
    for name in epochs {
        if let Some(v) = num(name) {
            if v > epoch_limit(now) {
                return Some((name, v));
            }
        }
    }
    for name in ["fence", "floor", "base"] {
        if let Some(v) = num(name) {
            if v > fence_limit(now) {
                return Some((name, v));
            }
        }
    }
    None
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
    last: Option<Time>,
    quiet: u64,
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

impl Core {
    /// Refuses a peer message that names an epoch or a fence too far
    /// ahead of this agent's wall clock (logged, at most every 10 s).
    pub(crate) fn refuse_far(&mut self, now: Now, from: &str, msg: &Message) -> bool {
        let Some((name, value)) = too_far(now, msg) else {
            return false;
        };
        let w = &mut self.cluster.records.far_warnings;
        if w.last.is_some_and(|t| now.mono < t + WARN_EVERY) {
            w.quiet += 1;
            return true;
        }
        let quiet = std::mem::take(&mut w.quiet);
        w.last = Some(now.mono);
        log::warn!(
            "{} from {from} refused: {name}={value} is more than {} ahead of this computer's clock \
             (a forged message, or clocks far apart){}",
            msg.command,
            humantime(MAX_EPOCH_AHEAD),
            if quiet > 0 {
                format!("; {quiet} more refused since the last warning")
            } else {
                String::new()
            }
        );
        true
    }

    /// Raises the fence floor to `fence`; past the reservation on disk,
    /// asks the shell to write a new one before anything said after.
    pub(crate) fn raise_floor(&mut self, fence: u64) {
        let c = &mut self.cluster;
        c.records.fence_floor = c.records.fence_floor.max(fence);
        self.persist();
    }

    /// Asks the shell to write the record when the epoch or the fence
    /// floor passed what is on disk.
    pub(crate) fn persist(&mut self) {
        let epoch = self
            .epoch_to_keep()
            .max(self.cluster.records.persisted.epoch);
        let c = &mut self.cluster;
        let fence = if c.records.fence_floor > c.records.persisted.fence {
            c.records.fence_floor.saturating_add(FENCE_RESERVATION)
        } else {
            c.records.persisted.fence
        };
        let next = Persisted { epoch, fence };
        if next != c.records.persisted {
            c.records.persisted = next;
            self.out.push_back(Output::Persist(next));
        }
    }
}

fn humantime(d: Duration) -> String {
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
    fn a_restarted_computer_alone_grants_above_its_record_and_keeps_it_first() {
        use crate::core::{Config, Credentials, Input};
        use crate::time::UnixTime;
        use crate::vocab::ClientId;
        let record = Persisted {
            epoch: 1_800_000_000_000,
            fence: (1_800_000_000_000 << 20) + 5,
        };
        let mut config = Config::default();
        config.cluster.persisted = record;
        // Its clock was set back a day.
        let now = Now {
            mono: Time::from_micros(1),
            wall: UnixTime((1_800_000_000_000 - 86_400_000) * 1000),
        };
        let mut core = Core::new(config, now);
        let client = ClientId(1);
        core.handle_input(
            now,
            Input::ClientOpened {
                client,
                cred: Credentials::default(),
            },
        )
        .unwrap();
        let msg = crate::wire::parse(b"LOCK object_name=a;pid=1").unwrap();
        core.handle_input(now, Input::ClientMessage { client, msg })
            .unwrap();
        let outs: Vec<Output> = std::iter::from_fn(|| core.poll_output()).collect();
        let kept = outs.iter().rposition(|o| matches!(o, Output::Persist(_)));
        let locked = outs
            .iter()
            .position(|o| matches!(o, Output::Reply { msg, .. } if msg.command == "LOCKED"));
        let (Some(kept), Some(locked)) = (kept, locked) else {
            panic!("{outs:?}");
        };
        assert!(
            kept < locked,
            "the record is kept before the grant: {outs:?}"
        );
        let Output::Reply { msg, .. } = &outs[locked] else {
            unreachable!()
        };
        let fence: u64 = msg.get_str("fence").unwrap().parse().unwrap();
        assert!(fence > record.fence, "{fence} > {}", record.fence);
        let Output::Persist(last) = outs[kept] else {
            unreachable!()
        };
        assert!(last.fence >= fence && last.epoch >= record.epoch, "{last}");
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
}
