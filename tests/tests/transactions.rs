//! Lock transactions through the core, against the reference model
//! (`snaplock_tests::txmodel`): random transactions from a few sessions on
//! a few namespaces, with time passing, expiries, closes, and bad
//! requests; every reply must be the model's (values, failed statement,
//! error), and fences must grow by one per commit. Seeded: a failure
//! prints the seed and the step, and replays.

use snaplock_proto::wire::{Message, encode_to_vec, parse};
use snaplock_proto::{ClientId, Config, Core, Credentials, Input, Now, Output, Time, UnixTime};
use snaplock_tests::sim::rng::Rng;
use snaplock_tests::txmodel::{Bounds, Model, Op, Outcome, Stmt};

const CLIENTS: u64 = 4;
const START_WALL: u64 = 1_700_000_000_000_000;

/// The variables drawn from, as written on the wire, with their canonical
/// form: a few names, one of them written two ways.
const VARS: &[(&str, &str)] = &[
    ("T/1", "T/1"),
    ("T/%31", "T/1"),
    ("T/2", "T/2"),
    ("U", "U"),
    ("U/x%2Fy", "U/x%2Fy"),
];
const NAMESPACES: &[&str] = &["a", "b", "c"];

struct Run {
    rng: Rng,
    core: Core,
    model: Model,
    now_us: u64,
    open: Vec<bool>,
    last_fence: Option<u64>,
    commits: usize,
    failures: usize,
    overflows: usize,
}

impl Run {
    fn new(seed: u64, bounds: Bounds) -> Run {
        let mut config = Config {
            server_name: "node1".to_owned(),
            ..Config::default()
        };
        config.tx.per_client = bounds.per_client;
        config.tx.total = bounds.total;
        config.tx.namespaces = bounds.namespaces;
        let mut run = Run {
            rng: Rng::new(seed),
            core: Core::new(config, now_at(0)),
            model: Model::new(bounds),
            now_us: 0,
            open: vec![false; CLIENTS as usize],
            last_fence: None,
            commits: 0,
            failures: 0,
            overflows: 0,
        };
        for c in 0..CLIENTS {
            run.open_client(c);
        }
        run.drain();
        run
    }

    fn open_client(&mut self, c: u64) {
        let input = Input::ClientOpened {
            client: ClientId(c),
            cred: Credentials::default(),
        };
        self.core
            .handle_input(now_at(self.now_us), input)
            .expect("opened");
        self.open[c as usize] = true;
    }

    fn drain(&mut self) -> Vec<Message> {
        let mut replies = Vec::new();
        while let Some(out) = self.core.poll_output() {
            match out {
                Output::Reply { reply, .. } => replies.push(reply.into_message()),
                Output::Persist(_) => {}
                other => panic!("unexpected output {other:?}"),
            }
        }
        replies
    }

    /// Time passes, with the core woken as its shell would wake it.
    fn advance(&mut self, by_us: u64) {
        let until = self.now_us + by_us;
        while let Some(t) = self.core.poll_timeout() {
            if t.as_micros() > until {
                break;
            }
            self.now_us = self.now_us.max(t.as_micros());
            self.core.handle_timeout(now_at(self.now_us));
            assert!(self.drain().is_empty(), "expiry says nothing to clients");
        }
        self.now_us = until;
    }

    fn statement(&mut self) -> (Stmt, String) {
        let (wire, canonical) = VARS[self.rng.below(VARS.len() as u64) as usize];
        let op = match self.rng.below(3) {
            0 => Op::Exists(canonical.to_owned()),
            1 => Op::Set(canonical.to_owned(), self.rng.below(2) == 0),
            _ => Op::Delete(canonical.to_owned()),
        };
        let st = Stmt {
            anyway: self.rng.below(6) == 0,
            assert: self.rng.below(3) == 0,
            nots: [0, 0, 0, 1, 1, 2][self.rng.below(6) as usize],
            op,
        };
        let text = st.text(wire);
        (st, text)
    }

    fn step(&mut self, k: usize) {
        let pause = self.rng.below(1_500_000);
        self.advance(pause);
        let c = self.rng.below(CLIENTS);
        if !self.open[c as usize] {
            self.open_client(c);
            return;
        }
        if self.rng.below(40) == 0 {
            self.core
                .handle_input(
                    now_at(self.now_us),
                    Input::ClientClosed {
                        client: ClientId(c),
                    },
                )
                .expect("closed");
            self.open[c as usize] = false;
            self.model.close(c);
            assert!(self.drain().is_empty());
            return;
        }
        let ns = NAMESPACES[self.rng.below(NAMESPACES.len() as u64) as usize];
        let pid = [None, None, Some(1), Some(2)][self.rng.below(4) as usize];
        let secs = 1 + self.rng.below(5);
        let count = 1 + self.rng.below(5) as usize;
        let (stmts, texts): (Vec<Stmt>, Vec<String>) = (0..count).map(|_| self.statement()).unzip();
        let mut msg = Message::new("TRANSACTION").with("namespace", ns);
        for (i, t) in texts.iter().enumerate() {
            msg.set(&format!("s{}", i + 1), t);
        }
        msg.set_u64("duration", secs);
        msg.set_u64("tag", k as u64);
        if let Some(p) = pid {
            msg.set_u64("pid", p);
        }
        // Now and then a bad one: the model says it changes nothing.
        let broken = self.rng.below(15) == 0;
        if broken {
            let bad = ["exists", "set A//B", "frob A", "set A/%zz", "exists A dup"];
            let which = self.rng.below(bad.len() as u64) as usize;
            msg.set(&format!("s{count}"), bad[which]);
        }
        let line = encode_to_vec(&msg);
        let msg = parse(&line[..line.len() - 1]).expect("a well-formed line");
        self.core
            .handle_input(
                now_at(self.now_us),
                Input::ClientMessage {
                    client: ClientId(c),
                    msg,
                },
            )
            .expect("handled");
        let replies = self.drain();
        assert_eq!(replies.len(), 1, "step {k}: {replies:?}");
        let got = &replies[0];
        let want = if broken {
            Outcome::Failed(count, "invalid")
        } else {
            self.model
                .run(self.now_us, (c, pid), ns, &stmts, secs * 1_000_000)
        };
        let context = format!("step {k}: {}", String::from_utf8_lossy(&line).trim_end());
        assert_eq!(
            got.get_str("tag"),
            Some(k.to_string().as_str()),
            "{context}"
        );
        assert_eq!(got.get_str("namespace"), Some(ns), "{context}");
        match want {
            Outcome::Ok(values) => {
                assert_eq!(got.command, "TRANSACTIONOK", "{context}: {got}");
                let r: Vec<&str> = values.iter().map(|&v| if v { "1" } else { "0" }).collect();
                assert_eq!(
                    got.get_str("results"),
                    Some(r.join(",").as_str()),
                    "{context}"
                );
                let fence: u64 = got.get_str("fence").unwrap().parse().unwrap();
                if let Some(last) = self.last_fence {
                    assert_eq!(fence, last + 1, "{context}: fences grow by one per commit");
                }
                self.last_fence = Some(fence);
                self.commits += 1;
            }
            Outcome::Failed(n, error) => {
                assert_eq!(got.command, "TRANSACTIONFAILED", "{context}: {got}");
                assert_eq!(
                    got.get_str("failed"),
                    Some(n.to_string().as_str()),
                    "{context}: {got}"
                );
                assert_eq!(got.get_str("error"), Some(error), "{context}: {got}");
                self.failures += 1;
                self.overflows += usize::from(error == "overflow");
            }
        }
        // The agent wakes for the next expiry, not later.
        self.model.expire(self.now_us);
        if let Some(next) = self.model.next_expiry() {
            assert_eq!(
                self.core.poll_timeout(),
                Some(Time::from_micros(next)),
                "{context}"
            );
        }
    }
}

fn now_at(us: u64) -> Now {
    Now {
        mono: Time::from_micros(us),
        wall: UnixTime(START_WALL + us),
    }
}

fn run_seeds(seeds: std::ops::Range<u64>, steps: usize, bounds: Bounds) -> (usize, usize, usize) {
    let mut totals = (0, 0, 0);
    for seed in seeds {
        let mut run = Run::new(seed, bounds);
        for k in 0..steps {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run.step(k)));
            if let Err(e) = result {
                eprintln!("seed {seed} failed at step {k}");
                std::panic::resume_unwind(e);
            }
        }
        totals.0 += run.commits;
        totals.1 += run.failures;
        totals.2 += run.overflows;
    }
    totals
}

#[test]
fn random_transactions_answer_what_the_model_answers() {
    let roomy = Bounds {
        per_client: 10_000,
        total: 1_000_000,
        namespaces: 10_000,
    };
    let (commits, failures, _) = run_seeds(0..60, 400, roomy);
    assert!(
        commits > 5_000 && failures > 2_000,
        "{commits} commits, {failures} failures"
    );
}

#[test]
fn random_transactions_at_tight_bounds_overflow_where_the_model_does() {
    let tight = Bounds {
        per_client: 2,
        total: 4,
        namespaces: 2,
    };
    let (commits, _, overflows) = run_seeds(100..160, 300, tight);
    assert!(
        commits > 3_000 && overflows > 300,
        "{commits} commits, {overflows} overflows"
    );
}

#[test]
fn the_model_is_not_fooled_by_a_wrong_answer() {
    // The comparison catches a reply that differs: feed the model a
    // transaction the core did not see.
    let mut model = Model::new(Bounds {
        per_client: 9,
        total: 9,
        namespaces: 9,
    });
    let set = |v: &str, dup| Stmt {
        anyway: false,
        assert: true,
        nots: 0,
        op: Op::Set(v.to_owned(), dup),
    };
    assert_eq!(
        model.run(0, (1, None), "n", &[set("A", true)], 10),
        Outcome::Ok(vec![true])
    );
    assert_eq!(
        model.run(0, (2, None), "n", &[set("A", false)], 10),
        Outcome::Failed(1, "failed")
    );
    assert_eq!(
        model.run(0, (2, None), "n", &[set("A", true)], 10),
        Outcome::Ok(vec![true])
    );
    model.close(1);
    model.close(2);
    assert_eq!(model.next_expiry(), None);
}
