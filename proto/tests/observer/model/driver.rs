//! The random shell: what it sends, when it lets time pass, how it stops.

use std::collections::BTreeMap;

use rand::Rng;
use snaplock_proto::wire::Message;
use snaplock_proto::{ClientId, Credentials, Input, Output};

use super::{
    Client, Driver, Event, Expect, MAX_OPEN, MAX_PER_OBJECT, MAX_WAKEUPS, Micros, OBJECTS, PIDS,
    Req, State, now_of, secs, wall,
};

impl Driver {
    /// Sends one message and checks what comes back.
    pub(super) fn send(&mut self, client: u64, msg: Message) -> Result<(), String> {
        if self.tracing {
            self.note(Event::Sent(client, msg.clone()));
        }
        let input = Input::ClientMessage {
            client: ClientId(client),
            msg,
        };
        self.core
            .handle_input(now_of(self.now), input)
            .map_err(|e| e.to_string())?;
        self.observe(false)
    }

    /// Runs the timers due now, as the shell does after its inputs.
    pub(super) fn tick(&mut self) -> Result<(), String> {
        self.note(Event::Note("tick".into()));
        self.core.handle_timeout(now_of(self.now));
        self.overdue = false;
        self.observe(true)
    }

    /// One random step.
    pub fn step(&mut self) -> Result<(), String> {
        let roll = self.rng.random_range(0..100);
        let was_overdue = self.overdue;
        self.act(roll)?;
        if was_overdue {
            // The run loop: inputs first, then the timers.
            self.tick()?;
        }
        Ok(())
    }

    fn act(&mut self, roll: u32) -> Result<(), String> {
        if self.clients.is_empty() || (roll < 5 && self.clients.len() < MAX_OPEN) {
            return self.open();
        }
        match roll {
            0..5 => self.lock(),
            5..9 => self.close(),
            9..45 => self.lock(),
            45..60 => self.unlock(),
            60..68 => self.extend(),
            68..70 => {
                let client = self.any_client();
                self.send(
                    client,
                    Message::new(if roll == 68 { "LISTTICKETS" } else { "INFO" }),
                )
            }
            _ => {
                let d = match self.rng.random_range(0..10) {
                    0 => 0,
                    1 => 1,
                    2..6 => self.rng.random_range(0..500_000),
                    _ => self.rng.random_range(0..3_000_000),
                };
                self.sleep(self.now + d)
            }
        }
    }

    fn any_client(&mut self) -> u64 {
        let ids: Vec<u64> = self.clients.keys().copied().collect();
        ids[self.rng.random_range(0..ids.len())]
    }

    /// The shell sleeps until `until`, waking at every timer on the way.
    fn sleep(&mut self, until: Micros) -> Result<(), String> {
        if self.late && self.rng.random_bool(0.3) {
            self.note(Event::Note(format!("oversleeps to {}", secs(until))));
            self.now = until;
            self.overdue = true;
            return Ok(());
        }
        for _ in 0..MAX_WAKEUPS {
            match self.core.poll_timeout() {
                Some(at) if at.as_micros() <= until => {
                    self.now = self.now.max(at.as_micros());
                    self.tick()?;
                }
                _ => {
                    self.now = until;
                    return Ok(());
                }
            }
        }
        Err(format!(
            "more than {MAX_WAKEUPS} wake-ups: a timer that does not go away"
        ))
    }

    fn open(&mut self) -> Result<(), String> {
        let id = self.next_client;
        self.next_client += 1;
        let client = Client {
            pid: 100 + (id as u32 % 3),
            uid: 1000 + self.rng.random_range(0..2),
        };
        let cred = Credentials {
            pid: Some(client.pid),
            uid: Some(client.uid),
            gid: None,
            // No cgroup: the model's clients never own a lock by unit.
            cgroup: None,
        };
        self.note(Event::Note(format!(
            "open {id} pid={} uid={}",
            client.pid, client.uid
        )));
        self.clients.insert(id, client);
        let input = Input::ClientOpened {
            client: ClientId(id),
            cred,
        };
        self.core
            .handle_input(now_of(self.now), input)
            .map_err(|e| e.to_string())?;
        self.observe(false)
    }

    fn close(&mut self) -> Result<(), String> {
        let id = self.any_client();
        self.note(Event::Note(format!("hangup {id}")));
        let t = self.now;
        for r in self
            .reqs
            .values_mut()
            .filter(|r| r.client == id && r.owner_open)
        {
            r.owner_open = false;
            let keep = r.detach && matches!(r.state, State::Held { .. } | State::Expired { .. });
            if !keep {
                r.state = State::Done;
            }
        }
        self.clients.remove(&id);
        let input = Input::ClientClosed {
            client: ClientId(id),
        };
        self.core
            .handle_input(now_of(t), input)
            .map_err(|e| e.to_string())?;
        self.observe(false)
    }

    fn lock(&mut self) -> Result<(), String> {
        let t = self.now;
        let client = self.any_client();
        let object = self.rng.random_range(0..OBJECTS.len());
        let tag = self.next_tag;
        self.next_tag += 1;
        let mut msg = Message::new("LOCK").with("object_name", OBJECTS[object]);
        msg.set_u64("tag", tag as u64);
        let pid = self
            .rng
            .random_bool(0.4)
            .then(|| PIDS[self.rng.random_range(0..PIDS.len())]);
        if let Some(p) = pid {
            msg.set_u64("pid", u64::from(p));
        }
        let shared = self.rng.random_bool(0.5);
        let mut counted = false;
        let mut limit = None;
        let mut quiet = None;
        if shared && self.rng.random_bool(0.3) {
            counted = true;
            limit = Some(self.rng.random_range(1..5));
            msg.set("mode", "counted");
            msg.set_u64("limit", u64::from(limit.unwrap_or(1)));
        } else if shared {
            msg.set("mode", "shared");
            if self.rng.random_bool(0.4) {
                limit = Some(self.rng.random_range(1..4));
                msg.set_u64("limit", u64::from(limit.unwrap_or(1)));
            }
        } else {
            match self.rng.random_range(0..4) {
                0 => msg.set("policy", "soft"),
                1 => {
                    let q = self.rng.random_range(0..2_000) * 1_000;
                    quiet = Some(q);
                    msg.set("policy", "timed");
                    msg.set("quiet", secs(q));
                }
                _ => {}
            }
        }
        let deadline = match self.rng.random_range(0..10) {
            0 => t.saturating_sub(1_000_000),
            1 => t + 5_000_000, // the default
            _ => t + self.rng.random_range(1..8_000) * 1_000,
        };
        if deadline != t + 5_000_000 {
            msg.set("timeout", wall(deadline));
        }
        let duration = self.rng.random_range(1_000..4_000) * 1_000;
        msg.set("duration", secs(duration));
        let grace = if self.rng.random_bool(0.3) {
            0
        } else {
            self.rng.random_range(1..2_000) * 1_000
        };
        msg.set("unlock_duration", secs(grace));
        let try_once = self.rng.random_bool(0.15);
        if try_once {
            msg.set("try", "true");
        }
        let detach = self.rng.random_bool(0.15);
        if detach {
            msg.set("detach", "true");
        }
        let invalid = self.rng.random_bool(0.03);
        if invalid {
            msg.set("duration", "0");
        }
        // What must come back at once, from what was sent and answered so far.
        let key = self.key_of(client, pid);
        let live: Vec<&Req> = self
            .reqs
            .values()
            .filter(|r| r.object == object && Self::live(r))
            .collect();
        let refusal = if invalid {
            Some("invalid")
        } else if deadline <= t {
            Some("timedout")
        } else if live.iter().any(|r| r.key == key) {
            Some("duplicate")
        } else if live.len() >= MAX_PER_OBJECT {
            Some("overflow")
        } else {
            None
        };
        self.reqs.insert(
            tag,
            Req {
                client,
                owner_open: true,
                uid: self.clients[&client].uid,
                object,
                key,
                shared,
                counted,
                limit,
                quiet,
                detach,
                try_once,
                sent: t,
                deadline,
                duration,
                grace,
                state: State::Pending,
            },
        );
        self.refusal = refusal.map(|why| (tag, why));
        self.send(client, msg)?;
        if let Some((_, why)) = self.refusal.take() {
            return Err(format!(
                "tag {tag} should have been refused with error={why}"
            ));
        }
        if try_once
            && self
                .reqs
                .get(&tag)
                .is_some_and(|r| r.state == State::Pending)
        {
            return Err(format!("try=true request tag {tag} left waiting"));
        }
        Ok(())
    }

    /// An object and maybe a pid: mostly those of a live request.
    fn target(&mut self) -> (usize, Option<u32>) {
        let live: Vec<&Req> = self.reqs.values().filter(|r| Self::live(r)).collect();
        if live.is_empty() || self.rng.random_bool(0.1) {
            let object = self.rng.random_range(0..OBJECTS.len());
            let pid = self
                .rng
                .random_bool(0.5)
                .then(|| PIDS[self.rng.random_range(0..PIDS.len())]);
            return (object, pid);
        }
        let r = live[self.rng.random_range(0..live.len())];
        let pid = r.key.strip_prefix("node1/").and_then(|p| p.parse().ok());
        (r.object, pid)
    }

    fn unlock(&mut self) -> Result<(), String> {
        let sender = self.any_client();
        let (object, pid) = self.target();
        let tag = -self.next_tag;
        self.next_tag += 1;
        let mut msg = Message::new("UNLOCK")
            .with("object_name", OBJECTS[object])
            .with("tag", tag.to_string());
        if let Some(p) = pid {
            msg.set_u64("pid", u64::from(p));
        }
        self.expects
            .insert(tag, Expect::Unlock(self.resolve(sender, object, pid)));
        self.send(sender, msg)
    }

    fn extend(&mut self) -> Result<(), String> {
        let sender = self.any_client();
        let (object, pid) = self.target();
        let tag = -self.next_tag;
        self.next_tag += 1;
        let d = self.rng.random_range(1_000..4_000) * 1_000;
        let mut msg = Message::new("EXTEND")
            .with("object_name", OBJECTS[object])
            .with("tag", tag.to_string());
        msg.set("duration", secs(d));
        if let Some(p) = pid {
            msg.set_u64("pid", u64::from(p));
        }
        self.expects
            .insert(tag, Expect::Extend(self.resolve(sender, object, pid), d));
        self.send(sender, msg)
    }

    /// Shuts the core down: every holder that can be told is told `lost`,
    /// every waiter `unavailable`, every connection closed.
    pub fn finish(&mut self) -> Result<(), String> {
        if self.overdue {
            self.tick()?;
        }
        let t = self.now;
        self.note(Event::Note("shutdown".into()));
        self.core.shutdown(now_of(t));
        let mut closed = Vec::new();
        let mut told = BTreeMap::new();
        while let Some(out) = self.core.poll_output() {
            match out {
                Output::Close { client } => closed.push(client.0),
                Output::Persist(_) => {}
                Output::PeerSend { .. } | Output::PeerClose { .. } => {
                    return Err(format!("one computer spoke to a peer: {out:?}"));
                }
                Output::WatchUnit { .. } | Output::UnwatchUnit { .. } => {
                    return Err(format!(
                        "a client without a cgroup owns a lock by unit: {out:?}"
                    ));
                }
                Output::Reply { client, reply } => {
                    let msg = reply.into_message();
                    let tag: i64 = msg
                        .get_str("tag")
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| format!("no tag: {msg}"))?;
                    let what = format!("{} {}", msg.command, msg.get_str("error").unwrap_or(""));
                    if told.insert(tag, (client.0, what)).is_some() {
                        return Err(format!("tag {tag} told twice at shutdown"));
                    }
                }
            }
        }
        for (tag, r) in &self.reqs {
            let expected = match r.state {
                State::Pending => Some("LOCKFAILED unavailable"),
                State::Held { .. } | State::Expired { .. } if r.owner_open => Some("UNLOCKED lost"),
                _ => None,
            };
            let got = told.remove(tag);
            if got.as_ref().map(|(c, w)| (*c, w.as_str())) != expected.map(|e| (r.client, e)) {
                return Err(format!(
                    "tag {tag} in state {:?}: expected {expected:?}, got {got:?}",
                    r.state
                ));
            }
        }
        if !told.is_empty() {
            return Err(format!("told at shutdown about unknown requests: {told:?}"));
        }
        let open: Vec<u64> = self.clients.keys().copied().collect();
        if closed != open {
            return Err(format!("closed {closed:?}, open were {open:?}"));
        }
        Ok(())
    }
}
