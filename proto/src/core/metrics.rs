//! `METRICS`: the exposition the core renders from its counters and its
//! state, and the per-peer figures of `INFO`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::Core;
use crate::metrics::{Exposition, REFUSALS, TX_RESULTS};
use crate::time::{Now, duration_to_wire};

/// A name as a label value: names are bytes, labels UTF-8 text.
fn label_of(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

impl Core {
    /// The whole exposition (Prometheus text format 0.0.4).
    pub fn metrics_text(&self, now: Now) -> String {
        let m = &self.metrics;
        let mut e = Exposition::new();
        let (held, waiting) = (m.held, m.waiting);
        e.single(
            "snaplock_grants_total",
            "counter",
            "Locks granted to this agent's clients.",
            self.status().grants as f64,
        );
        e.histogram(
            "snaplock_lock_wait_seconds",
            "How long granted requests waited, from LOCK to LOCKED.",
            &m.wait,
        );
        e.histogram(
            "snaplock_lock_hold_seconds",
            "How long locks were held, from LOCKED to their release.",
            &m.hold,
        );
        e.single(
            "snaplock_waiting_requests",
            "gauge",
            "This agent's clients' requests waiting for a grant.",
            waiting as f64,
        );
        e.single(
            "snaplock_held_locks",
            "gauge",
            "Locks this agent's clients hold.",
            held as f64,
        );
        e.single(
            "snaplock_revocations_total",
            "counter",
            "Locks taken back from their holders as the agent stops or revokes them (UNLOCKED error=lost).",
            m.revocations as f64,
        );
        e.family(
            "snaplock_refusals_total",
            "counter",
            "LOCKFAILED replies, by error.",
        );
        for (error, n) in REFUSALS.iter().zip(&m.refusals) {
            e.sample("snaplock_refusals_total", &[("error", error)], *n as f64);
        }
        e.family(
            "snaplock_transactions_total",
            "counter",
            "TRANSACTION outcomes: ok, or the error of TRANSACTIONFAILED.",
        );
        for (result, n) in TX_RESULTS.iter().zip(&m.transactions) {
            e.sample(
                "snaplock_transactions_total",
                &[("result", result)],
                *n as f64,
            );
        }
        e.single(
            "snaplock_clients",
            "gauge",
            "Open client connections.",
            self.status().clients as f64,
        );
        e.single(
            "snaplock_ready",
            "gauge",
            "1 when a free name can be granted now (LOCKSTATUS says LOCKREADY).",
            f64::from(u8::from(self.is_ready())),
        );
        e.single(
            "snaplock_trust",
            "gauge",
            "The agent's trust, from 0 to 1, as INFO trust= says it.",
            f64::from(self.trust.trust(now.mono)) / f64::from(crate::local::trust::ONE),
        );
        self.cluster_metrics(now, &mut e);
        self.name_metrics(&mut e);
        e.finish()
    }

    fn cluster_metrics(&self, now: Now, e: &mut Exposition) {
        let cluster = self.authority.is_cluster();
        let leader = !cluster || self.cluster.is_leader();
        e.single(
            "snaplock_epoch",
            "gauge",
            "The current epoch (alone: this agent's own).",
            self.epoch_to_keep() as f64,
        );
        e.single(
            "snaplock_is_leader",
            "gauge",
            "1 when this agent is one of the epoch's leaders.",
            f64::from(u8::from(leader)),
        );
        e.single(
            "snaplock_lock_delay_seconds",
            "gauge",
            "What is left of the lock-delay (0 when none runs).",
            self.lock_delay_left().as_secs_f64(),
        );
        e.histogram(
            "snaplock_handover_seconds",
            "How long this agent took, as a leader, from adopting an epoch to acting in it.",
            &self.metrics.handover,
        );
        let views = if cluster {
            self.cluster.peers.views(self.cluster.addr)
        } else {
            Vec::new()
        };
        e.family(
            "snaplock_peer_up",
            "gauge",
            "1 while the link to the member is up and its agent known.",
        );
        for v in &views {
            let up = v.state == crate::cluster::links::LinkState::Up;
            let peer = v.addr.to_string();
            e.sample(
                "snaplock_peer_up",
                &[("peer", &peer)],
                f64::from(u8::from(up)),
            );
        }
        e.family(
            "snaplock_peer_rtt_seconds",
            "gauge",
            "The smoothed round trip of the pings on the link to the member.",
        );
        for v in &views {
            if let Some(rtt) = v.rtt {
                let peer = v.addr.to_string();
                e.sample(
                    "snaplock_peer_rtt_seconds",
                    &[("peer", &peer)],
                    rtt.as_secs_f64(),
                );
            }
        }
        e.family(
            "snaplock_peer_last_heard_seconds",
            "gauge",
            "How long ago the member was last heard.",
        );
        for v in &views {
            if let Some(heard) = v.heard {
                let peer = v.addr.to_string();
                let ago = now.mono.saturating_since(heard).as_secs_f64();
                e.sample("snaplock_peer_last_heard_seconds", &[("peer", &peer)], ago);
            }
        }
    }

    /// The busiest names' grants, and the grants, holders and waiters of
    /// the configured prefixes. Names that are not UTF-8 may make the
    /// same label: their counts are added up, so every series is once.
    /// Names are up to 4 KiB: the busiest names' series stop once the
    /// text passes `max_list_bytes` (the agent keeps it within a quarter
    /// of what a client may have unsent), the least busy left out; so do
    /// the prefixes' series (64 prefixes of 256 bytes, escaped, pass the
    /// 16 KiB a `max_pending_output` of 64 KiB allows).
    fn name_metrics(&self, e: &mut Exposition) {
        let m = &self.metrics;
        let mut busiest: BTreeMap<String, u64> = BTreeMap::new();
        for (name, n) in m.busiest.top(m.top_names) {
            *busiest.entry(label_of(name)).or_default() += n;
        }
        e.family(
            "snaplock_object_grants_total",
            "counter",
            "Grants of the busiest names (an estimate: an upper bound).",
        );
        let mut by_count: Vec<(&String, &u64)> = busiest.iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (object, n) in by_count {
            if e.len() >= self.config.max_list_bytes {
                break;
            }
            let labels = [("object", object.as_str())];
            e.sample("snaplock_object_grants_total", &labels, *n as f64);
        }
        let mut prefixes: BTreeMap<String, (u64, usize, usize)> = BTreeMap::new();
        let counts = (m.prefix_grants.iter())
            .zip(&m.prefix_held)
            .zip(&m.prefix_waiting);
        for (p, ((grants, held), waiting)) in m.prefixes.iter().zip(counts) {
            let v = prefixes.entry(label_of(p)).or_default();
            *v = (v.0 + grants, v.1 + held, v.2 + waiting);
        }
        let families = [
            (
                "snaplock_prefix_grants_total",
                "counter",
                "Grants of the names under the prefix.",
            ),
            (
                "snaplock_prefix_held_locks",
                "gauge",
                "Locks held on the names under the prefix.",
            ),
            (
                "snaplock_prefix_waiting_requests",
                "gauge",
                "Requests waiting on the names under the prefix.",
            ),
        ];
        for (i, (family, kind, help)) in families.into_iter().enumerate() {
            e.family(family, kind, help);
            for (prefix, (grants, held, waiting)) in &prefixes {
                if e.len() >= self.config.max_list_bytes {
                    break;
                }
                let v = [*grants as f64, *held as f64, *waiting as f64][i];
                e.sample(family, &[("prefix", prefix)], v);
            }
        }
    }

    /// `INFO peers=`: `ADDR/NAME/STATE/HEARD/RTT` for every other member,
    /// comma separated; `-` for a name not known (no link), a member never
    /// heard, a round trip not measured.
    pub(super) fn peers_info(&self, now: Now) -> String {
        let seconds = |d: Duration| {
            duration_to_wire(Duration::from_micros(
                u64::try_from(d.as_micros()).unwrap_or(u64::MAX),
            ))
        };
        let mut out = String::new();
        for v in self.cluster.peers.views(self.cluster.addr) {
            if !out.is_empty() {
                out.push(',');
            }
            let heard = v.heard.map_or("-".to_owned(), |h| {
                let ms = now.mono.saturating_since(h).as_millis();
                seconds(Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX)))
            });
            let rtt = v.rtt.map_or("-".to_owned(), seconds);
            let _ = write!(
                out,
                "{}/{}/{}/{heard}/{rtt}",
                v.addr,
                v.name.unwrap_or("-"),
                v.state.as_str()
            );
        }
        out
    }
}

#[cfg(test)]
mod tests;
