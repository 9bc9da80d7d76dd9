//! What `METRICS` counts, against the core's state: the held and waiting
//! counts are kept as tickets come, are granted and go, on every path that
//! removes one, and agree with a walk of the table after each step; a
//! revocation's notice is no transaction's outcome.

use std::time::Duration;

use crate::core::{Config, Core, Credentials, Input};
use crate::metrics::MetricsConfig;
use crate::time::{Now, Time, UnixTime};
use crate::vocab::{ClientId, VAR_OBJECT};

struct Solo {
    core: Core,
    now: Now,
}

impl Solo {
    fn new() -> Solo {
        let now = Now {
            mono: Time::from_micros(1),
            wall: UnixTime(1_800_000_000_000_000),
        };
        let config = Config {
            metrics: MetricsConfig {
                top_names: 5,
                prefixes: vec![b"a/".to_vec(), b"a/b".to_vec(), b"z".to_vec()],
            },
            ..Config::default()
        };
        let mut s = Solo {
            core: Core::new(config, now),
            now,
        };
        for client in 1..=4 {
            let cred = Credentials {
                pid: Some(4000 + client as u32),
                uid: Some(1000),
                gid: Some(1000),
                cgroup: (client == 4).then_some(77),
            };
            s.input(Input::ClientOpened {
                client: ClientId(client),
                cred,
            });
        }
        s
    }

    fn input(&mut self, input: Input) {
        self.core.handle_input(self.now, input).expect("accepted");
        while self.core.poll_output().is_some() {}
        self.check();
    }

    fn send(&mut self, client: u64, line: &str) {
        let msg = crate::wire::parse(line.as_bytes()).expect("a valid line");
        self.input(Input::ClientMessage {
            client: ClientId(client),
            msg,
        });
    }

    fn later(&mut self, secs: u64) {
        self.now = self.now.plus(Duration::from_secs(secs));
        self.core.handle_timeout(self.now);
        while self.core.poll_output().is_some() {}
        self.check();
    }

    /// Held and waiting lock tickets under `prefix`, by a walk.
    fn walk(&self, prefix: &[u8]) -> (usize, usize) {
        let mut counts = (0, 0);
        for (name, o) in &self.core.table.objects {
            if name.first() == Some(&VAR_OBJECT) || !name.starts_with(prefix) {
                continue;
            }
            for t in &o.tickets {
                if t.state.is_held() {
                    counts.0 += 1;
                } else {
                    counts.1 += 1;
                }
            }
        }
        counts
    }

    fn check(&self) {
        let m = &self.core.metrics;
        assert_eq!((m.held, m.waiting), self.walk(b""), "the totals");
        for (i, p) in m.prefixes.iter().enumerate() {
            let kept = (m.prefix_held[i], m.prefix_waiting[i]);
            assert_eq!(kept, self.walk(p), "under {:?}", String::from_utf8_lossy(p));
        }
    }
}

#[test]
fn the_counts_follow_grants_releases_timeouts_closes_a_cgroups_end_and_a_stop() {
    let mut s = Solo::new();
    s.send(1, "LOCK object_name=a/b/1;duration=100");
    s.send(2, "LOCK object_name=a/b/1;timeout=1800000005");
    s.send(3, "LOCK object_name=a/b/1;timeout=1800000500");
    s.send(2, "LOCK object_name=a/x;duration=3;unlock_duration=2");
    s.send(3, "LOCK object_name=z;try=true");
    s.send(1, "LOCK object_name=z;try=true");
    s.send(4, "LOCK object_name=a/u;owner=cgroup");
    s.send(4, "LOCK object_name=a/b/1;owner=cgroup;timeout=1800000500");
    assert_eq!(s.core.metrics.waiting, 3);
    // The waiter of client 2 times out; a/x's lease ends, then its grace.
    s.later(4);
    s.later(3);
    assert_eq!(s.core.metrics.held, 3, "a/b/1, z, a/u");
    s.send(1, "UNLOCK object_name=a/b/1");
    assert_eq!(s.core.metrics.waiting, 1, "client 3 holds a/b/1 now");
    s.input(Input::UnitEmpty { unit: 77 });
    s.input(Input::ClientClosed {
        client: ClientId(3),
    });
    s.send(2, "LOCK object_name=a/b/2");
    s.send(1, "LOCK object_name=a/b/2;timeout=1800001000");
    s.core.shutdown(s.now);
    while s.core.poll_output().is_some() {}
    s.check();
    assert_eq!((s.core.metrics.held, s.core.metrics.waiting), (0, 0));
}

#[test]
fn the_notice_that_a_connections_variables_are_revoked_is_no_transaction_outcome() {
    let mut s = Solo::new();
    s.send(1, "LOCK object_name=a/1");
    let name = crate::vocab::ObjectName::from(&b"a/1"[..]);
    let t = s.core.table.objects[&name].tickets[0].clone();
    let var: crate::vocab::ObjectName = crate::vocab::var_object(b"jobs", b"n").into();
    let mut told = std::collections::BTreeSet::new();
    s.core.tell_lost(&var, &t, "a test", &mut told);
    let outs: Vec<_> = std::iter::from_fn(|| s.core.poll_output()).collect();
    assert!(
        outs.iter().any(|o| matches!(o,
            crate::core::Output::Reply { reply, .. } if reply.command() == "TRANSACTIONFAILED")),
        "{outs:?}"
    );
    assert_eq!(s.core.metrics.transactions.iter().sum::<u64>(), 0);
    assert_eq!(s.core.metrics.revocations, 0, "a variable is not a lock");
}
