//! Records as the core runs them: asking the shell to write the epoch and
//! fence, checking what peers claim.

use crate::cluster::persist::{
    FENCE_RESERVATION, MAX_EPOCH_AHEAD, Persisted, WARN_EVERY, humantime, too_far,
};
use crate::core::{Core, Output};
use crate::time::Now;
use crate::vocab::PeerId;
use crate::wire::Fields;

impl Core {
    /// Refuses a peer message that names an epoch or a fence too far
    /// ahead of this agent's wall clock (logged, at most every 10 s).
    pub(crate) fn refuse_far(&mut self, now: Now, peer: PeerId, msg: &impl Fields) -> bool {
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
        let from = self.cluster.peers.name_of(peer);
        log::warn!(
            "{} from {from} refused: {name}={value} is more than {} ahead of this computer's clock \
             (a forged message, or clocks far apart){}",
            msg.command(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Time;

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
            .position(|o| matches!(o, Output::Reply { reply, .. } if reply.command() == "LOCKED"));
        let (Some(kept), Some(locked)) = (kept, locked) else {
            panic!("{outs:?}");
        };
        assert!(
            kept < locked,
            "the record is kept before the grant: {outs:?}"
        );
        let Output::Reply { reply, .. } = &outs[locked] else {
            unreachable!()
        };
        let msg = reply.clone().into_message();
        let fence: u64 = msg.get_str("fence").unwrap().parse().unwrap();
        assert!(fence > record.fence, "{fence} > {}", record.fence);
        let Output::Persist(last) = outs[kept] else {
            unreachable!()
        };
        assert!(last.fence >= fence && last.epoch >= record.epoch, "{last}");
    }
}
