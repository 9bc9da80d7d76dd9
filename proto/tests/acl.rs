//! The access rules in the core: what a refused request changes (nothing),
//! what `LISTTICKETS` shows, and what replacing the rules keeps.

use snaplock_proto::local::acl::{Acl, Commands, Modes, Rule, Who};
use snaplock_proto::wire::{Message, parse};
use snaplock_proto::{ClientId, Config, Core, Credentials, Input, Now, Output, Time, UnixTime};

const NOBODY: ClientId = ClientId(1);
const ROOT: ClientId = ClientId(2);
const SESSION: ClientId = ClientId(3);

fn now() -> Now {
    Now {
        mono: Time::from_micros(1_000_000),
        wall: UnixTime(1_700_000_000_000_000),
    }
}

fn rules(text: &[(Who, &str)]) -> Acl {
    Acl {
        source: "acl".to_owned(),
        rules: text
            .iter()
            .enumerate()
            .map(|(i, (who, prefix))| Rule {
                line: i + 1,
                written: format!("{who:?}"),
                who: who.clone(),
                modes: Modes::ALL,
                commands: Commands::ALL,
                prefixes: vec![prefix.as_bytes().to_vec()],
            })
            .collect(),
    }
}

fn core_with(acl: Option<Acl>) -> Core {
    let mut core = Core::new(
        Config {
            acl,
            ..Config::default()
        },
        now(),
    );
    for (client, uid) in [(NOBODY, Some(65534)), (ROOT, Some(0)), (SESSION, None)] {
        let cred = Credentials {
            pid: Some(100),
            uid,
            gid: uid,
            cgroup: None,
        };
        core.handle_input(now(), Input::ClientOpened { client, cred })
            .unwrap();
    }
    core
}

/// Sends `line` and returns the replies to `client`.
fn ask(core: &mut Core, client: ClientId, line: &str) -> Vec<Message> {
    let msg = parse(line.as_bytes()).unwrap();
    core.handle_input(now(), Input::ClientMessage { client, msg })
        .unwrap();
    let mut replies = Vec::new();
    while let Some(out) = core.poll_output() {
        match out {
            Output::Reply { client: to, reply } if to == client => {
                replies.push(reply.into_message())
            }
            _ => {}
        }
    }
    replies
}

fn one(core: &mut Core, client: ClientId, line: &str) -> Message {
    let mut replies = ask(core, client, line);
    assert_eq!(replies.len(), 1, "{line}: {replies:?}");
    replies.pop().unwrap()
}

fn list_of(core: &mut Core, client: ClientId) -> String {
    let m = one(core, client, "LISTTICKETS");
    m.get_str("list").unwrap().to_owned()
}

#[test]
fn a_denied_lock_queues_nothing_and_the_name_stays_free() {
    let mut core = core_with(Some(rules(&[
        (Who::User(65534), "pub/"),
        (Who::User(0), ""),
    ])));
    let m = one(&mut core, NOBODY, "LOCK object_name=priv/a;tag=1");
    assert_eq!(m.command, "LOCKFAILED");
    assert_eq!(m.get_str("error"), Some("denied"));
    assert_eq!(m.get_str("tag"), Some("1"));
    let m = one(&mut core, ROOT, "LOCK object_name=priv/a;try=true");
    assert_eq!(
        m.command, "LOCKED",
        "nothing of the refused request is left"
    );
}

#[test]
fn without_rules_every_connection_may_lock_and_list_everything() {
    let mut core = core_with(None);
    for (client, name) in [(NOBODY, "a"), (SESSION, "b")] {
        let m = one(&mut core, client, &format!("LOCK object_name={name}"));
        assert_eq!(m.command, "LOCKED");
    }
    let list = list_of(&mut core, NOBODY);
    assert!(list.contains("\"a\"") && list.contains("\"b\""), "{list}");
}

#[test]
fn listtickets_shows_each_connection_the_names_it_may_lock() {
    let mut core = core_with(Some(rules(&[
        (Who::User(65534), "pub/"),
        (Who::Communicator, "comm/"),
        (Who::User(0), ""),
    ])));
    for name in ["pub/a", "comm/b", "root/c"] {
        let m = one(&mut core, ROOT, &format!("LOCK object_name={name}"));
        assert_eq!(m.command, "LOCKED");
    }
    let nobody = list_of(&mut core, NOBODY);
    assert!(nobody.contains("pub/a"), "{nobody}");
    assert!(
        !nobody.contains("comm/b") && !nobody.contains("root/c"),
        "{nobody}"
    );
    let session = list_of(&mut core, SESSION);
    assert!(
        session.contains("comm/b") && !session.contains("pub/a"),
        "{session}"
    );
    assert_eq!(list_of(&mut core, ROOT).lines().count(), 3);
}

#[test]
fn new_rules_decide_later_requests_and_keep_what_is_held() {
    let mut core = core_with(Some(rules(&[(Who::User(65534), "pub/")])));
    let m = one(&mut core, NOBODY, "LOCK object_name=pub/a");
    assert_eq!(m.command, "LOCKED");
    core.set_acl(Some(rules(&[(Who::User(65534), "other/")])));
    let m = one(&mut core, NOBODY, "LOCK object_name=pub/b");
    assert_eq!(m.get_str("error"), Some("denied"));
    let m = one(&mut core, NOBODY, "LOCK object_name=other/b");
    assert_eq!(m.command, "LOCKED");
    // The lock taken under the old rules is still held, and released.
    let m = one(&mut core, NOBODY, "UNLOCK object_name=pub/a");
    assert_eq!(m.command, "UNLOCKED");
    assert_eq!(m.get("error"), None);
    core.set_acl(None);
    let m = one(&mut core, NOBODY, "LOCK object_name=anything");
    assert_eq!(m.command, "LOCKED");
}

#[test]
fn a_denied_transaction_changes_nothing() {
    let mut core = core_with(Some(rules(&[(Who::User(65534), "ns.")])));
    let m = one(
        &mut core,
        NOBODY,
        "TRANSACTION namespace=other;s1=set v;tag=4",
    );
    assert_eq!(m.command, "TRANSACTIONFAILED");
    assert_eq!(m.get_str("error"), Some("denied"));
    assert_eq!(m.get_str("failed"), Some("0"));
    let m = one(&mut core, NOBODY, "TRANSACTION namespace=ns.1;s1=set v");
    assert_eq!(m.command, "TRANSACTIONOK", "{m}");
}

#[test]
fn a_local_list_looks_at_a_bounded_number_of_names_however_few_it_shows() {
    let mut core = core_with(Some(rules(&[
        (Who::User(65534), "pub/"),
        (Who::User(0), ""),
    ])));
    // More names than a list looks at (64,000), all hidden from NOBODY.
    for i in 0..64_000 {
        let m = one(&mut core, ROOT, &format!("LOCK object_name=a/{i:05}"));
        assert_eq!(m.command, "LOCKED");
    }
    let m = one(&mut core, ROOT, "LOCK object_name=pub/x");
    assert_eq!(m.command, "LOCKED");
    // The list looks at 64,000 names of 64,001 in the table's order (that
    // of their hashes): "pub/x" among them or not, one ticket is left.
    let list = list_of(&mut core, NOBODY);
    assert!(list.ends_with("... and 1 more tickets\n"), "{list}");
    let shown: Vec<&str> = list.lines().collect();
    assert!(shown.len() <= 2, "{list}");
    assert!(
        shown[..shown.len() - 1]
            .iter()
            .all(|l| l.contains("\"pub/x\"")),
        "{list}"
    );
    // One name is looked up, not searched for.
    let m = one(
        &mut core,
        NOBODY,
        "LISTTICKETS object_name=pub/x;scope=local",
    );
    let list = m.get_str("list").unwrap();
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(list.contains("\"pub/x\""), "{list}");
}
