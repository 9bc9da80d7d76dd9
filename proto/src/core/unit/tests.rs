//! `owner=cgroup` on one computer, driven as the shell drives the core.

use std::time::Duration;

use super::MAX_UNITS;
use crate::core::{Config, Core, Credentials, Input, Output};
use crate::time::{Now, Time, UnixTime};
use crate::vocab::ClientId;
use crate::wire::Message;

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
        Solo {
            core: Core::new(Config::default(), now),
            now,
        }
    }

    fn outputs(&mut self) -> Vec<Output> {
        std::iter::from_fn(|| self.core.poll_output())
            .filter(|o| !matches!(o, Output::Persist(_)))
            .collect()
    }

    fn input(&mut self, input: Input) -> Vec<Output> {
        self.core.handle_input(self.now, input).expect("accepted");
        self.outputs()
    }

    fn open(&mut self, client: u64, uid: u32, cgroup: Option<u64>) {
        let cred = Credentials {
            pid: Some(4000 + client as u32),
            uid: Some(uid),
            gid: Some(uid),
            cgroup,
        };
        let client = ClientId(client);
        assert_eq!(self.input(Input::ClientOpened { client, cred }), vec![]);
    }

    fn send(&mut self, client: u64, line: &str) -> Vec<Output> {
        let msg = crate::wire::parse(line.as_bytes()).expect("a valid line");
        let client = ClientId(client);
        self.input(Input::ClientMessage { client, msg })
    }

    fn close(&mut self, client: u64) -> Vec<Output> {
        self.input(Input::ClientClosed {
            client: ClientId(client),
        })
    }

    fn emptied(&mut self, unit: u64) -> Vec<Output> {
        self.input(Input::UnitEmpty { unit })
    }

    fn later(&mut self, secs: u64) -> Vec<Output> {
        self.now = self.now.plus(Duration::from_secs(secs));
        self.core.handle_timeout(self.now);
        self.outputs()
    }
}

/// The replies among `outs`, as `client command error`.
fn replies(outs: &[Output]) -> Vec<String> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Reply { client, reply: r } => Some(reply(client.0, &r.clone().into_message())),
            _ => None,
        })
        .collect()
}

fn reply(client: u64, msg: &Message) -> String {
    match msg.get_str("error") {
        Some(e) => format!("{client} {} {e}", msg.command),
        None => format!("{client} {}", msg.command),
    }
}

fn watches(outs: &[Output]) -> Vec<String> {
    outs.iter()
        .filter_map(|o| match o {
            Output::WatchUnit { unit, client } => Some(format!("watch {unit} for {}", client.0)),
            Output::UnwatchUnit { unit } => Some(format!("unwatch {unit}")),
            _ => None,
        })
        .collect()
}

const OWNED: &str = "LOCK object_name=job;pid=77;owner=cgroup";

#[test]
fn a_lock_owned_by_its_cgroup_outlives_its_connection_until_the_cgroup_empties() {
    let mut s = Solo::new();
    s.open(1, 1000, Some(7));
    s.open(2, 1000, None);
    let outs = s.send(1, OWNED);
    assert_eq!(replies(&outs), ["1 LOCKED"]);
    assert_eq!(watches(&outs), ["watch 7 for 1"]);
    let outs = s.close(1);
    assert_eq!(outs, vec![], "kept, and still watched");
    let list = format!("{:?}", s.send(2, "LISTTICKETS"));
    assert!(
        list.contains("key: alpha/77") || list.contains("/77"),
        "{list}"
    );
    assert!(list.contains("owner: cgroup"), "{list}");
    let outs = s.send(2, "LOCK object_name=job;try=true");
    assert_eq!(replies(&outs), ["2 LOCKFAILED busy"]);
    assert_eq!(
        replies(&s.send(2, "LOCK object_name=job")),
        Vec::<String>::new()
    );
    let outs = s.emptied(7);
    assert_eq!(watches(&outs), ["unwatch 7"]);
    assert_eq!(
        replies(&outs),
        ["2 LOCKED"],
        "the next waiter is served at once"
    );
}

#[test]
fn owner_cgroup_is_refused_as_invalid_without_a_cgroup_with_detach_or_with_another_owner() {
    let mut s = Solo::new();
    s.open(1, 1000, None);
    s.open(2, 1000, Some(7));
    for (client, line) in [
        (1, OWNED),
        (2, "LOCK object_name=job;pid=77;owner=cgroup;detach=true"),
        (2, "LOCK object_name=job;owner=unit"),
    ] {
        let outs = s.send(client, line);
        assert_eq!(
            replies(&outs),
            [format!("{client} LOCKFAILED invalid")],
            "{line}"
        );
        assert_eq!(watches(&outs), Vec::<String>::new(), "{line}");
    }
    let outs = s.send(2, "LOCK object_name=job;owner=connection");
    assert_eq!(replies(&outs), ["2 LOCKED"]);
    assert_eq!(watches(&outs), Vec::<String>::new());
    let outs = s.close(2);
    assert_eq!(
        outs,
        vec![],
        "owner=connection is the default: nothing else held it"
    );
    assert_eq!(
        replies(&s.send(1, "LOCK object_name=job;try=true")),
        ["1 LOCKED"]
    );
}

#[test]
fn the_refusal_without_a_cgroup_says_what_is_needed() {
    let mut s = Solo::new();
    s.open(1, 1000, None);
    let outs = s.send(1, OWNED);
    let Some(Output::Reply { reply, .. }) = outs.first() else {
        panic!("{outs:?}");
    };
    let msg = reply.clone().into_message();
    let why = msg.get_str("description").unwrap_or_default();
    assert!(why.contains("cgroup v2") && why.contains("root"), "{why}");
}

#[test]
fn a_waiting_request_of_a_cgroup_is_cancelled_with_its_connection_and_unwatched() {
    let mut s = Solo::new();
    s.open(1, 1000, None);
    s.open(2, 1000, Some(7));
    assert_eq!(replies(&s.send(1, "LOCK object_name=job")), ["1 LOCKED"]);
    let outs = s.send(2, OWNED);
    assert_eq!(replies(&outs), Vec::<String>::new());
    assert_eq!(watches(&outs), ["watch 7 for 2"]);
    assert_eq!(watches(&s.close(2)), ["unwatch 7"]);
    assert_eq!(s.emptied(7), vec![], "a late report changes nothing");
    s.send(1, "UNLOCK object_name=job");
    assert_eq!(
        replies(&s.send(1, "LOCK object_name=job;try=true")),
        ["1 LOCKED"]
    );
}

#[test]
fn a_cgroup_is_watched_once_and_until_its_last_lock_ends() {
    let mut s = Solo::new();
    s.open(1, 1000, Some(7));
    s.open(2, 1000, Some(7));
    assert_eq!(
        watches(&s.send(1, "LOCK object_name=a;owner=cgroup")),
        ["watch 7 for 1"]
    );
    assert_eq!(
        watches(&s.send(2, "LOCK object_name=b;owner=cgroup")),
        Vec::<String>::new()
    );
    assert_eq!(
        watches(&s.send(1, "UNLOCK object_name=a")),
        Vec::<String>::new()
    );
    assert_eq!(watches(&s.send(2, "UNLOCK object_name=b")), ["unwatch 7"]);
}

#[test]
fn after_its_connection_closed_the_same_user_unlocks_it_by_its_pid_and_no_other_user_may() {
    let mut s = Solo::new();
    s.open(1, 1000, Some(7));
    s.open(2, 1001, None);
    s.open(3, 1000, None);
    s.send(1, OWNED);
    s.close(1);
    assert_eq!(
        replies(&s.send(3, "UNLOCK object_name=job")),
        ["3 LOCKFAILED invalid"],
        "named by its pid, as a detached lock"
    );
    // Another uid computes the same key only on this one server: denied.
    assert_eq!(
        replies(&s.send(2, "UNLOCK object_name=job;pid=77")),
        ["2 LOCKFAILED denied"]
    );
    let outs = s.send(3, "UNLOCK object_name=job;pid=77");
    assert_eq!(replies(&outs), ["3 UNLOCKED"]);
    assert_eq!(watches(&outs), ["unwatch 7"]);
}

#[test]
fn a_connection_still_open_is_told_its_lock_is_lost_when_its_cgroup_empties() {
    let mut s = Solo::new();
    s.open(1, 1000, Some(7));
    s.open(2, 1000, Some(7));
    s.send(1, OWNED);
    s.send(2, "LOCK object_name=job;owner=cgroup");
    let outs = s.emptied(7);
    assert_eq!(
        replies(&outs),
        ["1 UNLOCKED lost", "2 LOCKFAILED lost"],
        "held: lost; waiting: never granted"
    );
    assert_eq!(watches(&outs), ["unwatch 7"]);
    assert_eq!(s.emptied(7), vec![]);
}

#[test]
fn the_lease_still_applies_to_a_lock_its_cgroup_owns() {
    let mut s = Solo::new();
    s.open(1, 1000, Some(7));
    s.open(2, 1000, None);
    s.send(
        1,
        "LOCK object_name=job;pid=77;owner=cgroup;duration=10;unlock_duration=0",
    );
    s.close(1);
    let outs = s.later(11);
    assert_eq!(watches(&outs), ["unwatch 7"], "{outs:?}");
    assert_eq!(
        replies(&s.send(2, "LOCK object_name=job;try=true")),
        ["2 LOCKED"]
    );
}

#[test]
fn the_cgroups_watched_at_once_are_bounded_and_a_watched_one_still_gets_more() {
    let mut s = Solo::new();
    for i in 0..MAX_UNITS as u64 {
        s.open(i, 1000, Some(10_000 + i));
        let outs = s.send(i, &format!("LOCK object_name=o{i};owner=cgroup"));
        assert_eq!(replies(&outs), [format!("{i} LOCKED")]);
    }
    let extra = MAX_UNITS as u64;
    s.open(extra, 1000, Some(1));
    let outs = s.send(extra, "LOCK object_name=x;owner=cgroup");
    assert_eq!(replies(&outs), [format!("{extra} LOCKFAILED overflow")]);
    assert_eq!(watches(&outs), Vec::<String>::new());
    s.open(extra + 1, 1000, Some(10_000));
    let outs = s.send(extra + 1, "LOCK object_name=y;owner=cgroup");
    assert_eq!(replies(&outs), [format!("{} LOCKED", extra + 1)]);
    s.emptied(10_001);
    let outs = s.send(extra, "LOCK object_name=x;owner=cgroup");
    assert_eq!(replies(&outs), [format!("{extra} LOCKED")], "room again");
}
