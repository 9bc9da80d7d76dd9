//! The translation, line by line, against the conversations of the
//! snaplock reference (§2, §10, §13), with `node1` as the server name.

use snaplock_proto::UnixTime;
use snaplock_proto::wire::{Message, encode_to_vec, parse};

use super::{Session, Step};

/// "Now" in these tests: 1700000000 s.
const NOW: UnixTime = UnixTime(1_700_000_000_000_000);

fn msg(line: &str) -> Message {
    parse(line.as_bytes()).unwrap_or_else(|e| panic!("{line:?}: {e}"))
}

fn text(m: &Message) -> String {
    let line = encode_to_vec(m);
    String::from_utf8(line[..line.len() - 1].to_vec()).unwrap()
}

fn lines(step: Step) -> Vec<String> {
    match step {
        Step::Answer(replies) => replies.iter().map(text).collect(),
        other => panic!("expected an answer, got {other:?}"),
    }
}

fn to_core(step: Step) -> String {
    match step {
        Step::Core(m) => text(&m),
        other => panic!("expected a request for the core, got {other:?}"),
    }
}

/// A session of `lock_4321_1` on `node1`, registered.
fn registered() -> Session {
    let mut s = Session::new("node1");
    let step = s.inbound(msg("REGISTER service=lock_4321_1;version=1"), NOW);
    assert_eq!(lines(step), ["HELP", "READY"]);
    s
}

#[test]
fn register_is_answered_with_help_then_ready_and_the_command_list_is_taken_silently() {
    let mut s = registered();
    assert_eq!(s.service(), Some("lock_4321_1"));
    let commands =
        "COMMANDS list=LOCKED,LOCKFAILED,UNLOCKED,HELP,ALIVE,LOG,QUITTING,READY,STOP,UNKNOWN";
    assert_eq!(s.inbound(msg(commands), NOW), Step::Ignore);
    for line in [
        "UNKNOWN command=INVALID",
        "ABSOLUTELY serial=1",
        "snaplock/LOG",
    ] {
        assert_eq!(s.inbound(msg(line), NOW), Step::Ignore, "{line}");
    }
}

#[test]
fn a_bad_register_gets_invalid_and_leaves_the_session_unregistered() {
    let mut s = Session::new("node1");
    for (line, why) in [
        ("REGISTER version=1", "service must be"),
        ("REGISTER service=lock-1;version=1", "service must be"),
        ("REGISTER service=lock_1;version=2", "version must be 1"),
        ("REGISTER service=lock_1", "version must be 1"),
    ] {
        let reply = lines(s.inbound(msg(line), NOW));
        assert_eq!(reply.len(), 1);
        assert!(
            reply[0].starts_with("INVALID command=REGISTER;message=")
                && reply[0].contains("REGISTER "),
            "{line}: {reply:?}"
        );
        assert!(reply[0].contains(why), "{line}: {reply:?}");
        assert_eq!(s.service(), None);
    }
    let mut s = registered();
    let again = lines(s.inbound(msg("REGISTER service=other;version=1"), NOW));
    assert!(
        again[0].starts_with("node1:lock_4321_1/INVALID command=REGISTER;"),
        "{again:?}"
    );
    assert!(again[0].contains("already registered as lock_4321_1"));
}

#[test]
fn requests_before_register_are_refused_with_a_reason() {
    let mut s = Session::new("node1");
    let reply = lines(s.inbound(
        msg("snaplock/LOCK duration=10;object_name=test;pid=4321"),
        NOW,
    ));
    assert!(reply[0].starts_with("INVALID command=LOCK;"), "{reply:?}");
    assert!(reply[0].contains("register first"), "{reply:?}");
}

#[test]
fn the_original_clients_lock_reaches_the_core_with_its_durations_as_the_original_applied_them() {
    let mut s = registered();
    // §13.4: duration=10 is raised to 60 s; without unlock_duration the
    // grace is the lock's duration; the sent-from and destination go.
    let core = to_core(s.inbound(
        msg(
            "<node9:spoofed snaplock/LOCK duration=10;object_name=test;pid=4321;timeout=1700000005",
        ),
        NOW,
    ));
    assert_eq!(
        core,
        "LOCK duration=60;object_name=test;pid=4321;timeout=1700000005;unlock_duration=60"
    );
    let core = to_core(s.inbound(
        msg("node1:snaplock/LOCK duration=100;object_name=test;pid=4321;timeout=1700000005;unlock_duration=60"),
        NOW,
    ));
    assert_eq!(
        core,
        "LOCK duration=100;object_name=test;pid=4321;timeout=1700000005;unlock_duration=60"
    );
    let core = to_core(s.inbound(
        msg(".:snaplock/LOCK duration=999999999;object_name=o;pid=1;unlock_duration=99999999"),
        NOW,
    ));
    assert_eq!(
        core, "LOCK duration=604800;object_name=o;pid=1;unlock_duration=604800",
        "7 days at most, and no timeout keeps the core's default of now + 5 s"
    );
}

#[test]
fn internal_and_detaching_parameters_of_a_client_are_dropped() {
    let mut s = registered();
    let core = to_core(s.inbound(
        msg("snaplock/LOCK detach=true;duration=60;lock_proxy_server_name=node2;lock_proxy_service_name=x;object_name=o;pid=7;serial=3"),
        NOW,
    ));
    assert_eq!(
        core,
        "LOCK duration=60;object_name=o;pid=7;unlock_duration=60"
    );
    let core = to_core(s.inbound(
        msg("snaplock/UNLOCK lock_proxy_server_name=node2;object_name=o;pid=7"),
        NOW,
    ));
    assert_eq!(core, "UNLOCK object_name=o;pid=7");
}

#[test]
fn lock_checks_fail_as_the_original_did_in_its_order() {
    let mut s = registered();
    // §13.5: a past timeout is checked first, even with a bad duration.
    let past = lines(s.inbound(
        msg("snaplock/LOCK duration=2;object_name=test;pid=4321;timeout=1000"),
        NOW,
    ));
    assert_eq!(
        past,
        [
            "<node1:snaplock node1:lock_4321_1/LOCKFAILED description=the timeout is already past;error=timedout;key=node1/4321;object_name=test"
        ]
    );
    // §13.6.
    for line in [
        "snaplock/LOCK duration=2;object_name=test;pid=4321;timeout=1700000005",
        "snaplock/LOCK duration=10;object_name=test;pid=4321;timeout=1700000005;unlock_duration=59",
        "snaplock/LOCK duration=10;object_name=test;pid=4321;unlock_duration=-1",
        "snaplock/LOCK object_name=test;pid=4321",
        "snaplock/LOCK duration=5.5;object_name=test;pid=4321",
    ] {
        let reply = lines(s.inbound(msg(line), NOW));
        assert_eq!(reply.len(), 1);
        assert!(
            reply[0].starts_with("<node1:snaplock node1:lock_4321_1/LOCKFAILED description="),
            "{line}: {reply:?}"
        );
        assert!(
            reply[0].ends_with(";error=invalid;key=node1/4321;object_name=test"),
            "{line}: {reply:?}"
        );
    }
    for line in [
        "snaplock/LOCK duration=10;object_name=test",
        "snaplock/LOCK duration=10;object_name=test;pid=0",
        "snaplock/LOCK duration=10;object_name=test;pid=x",
    ] {
        let reply = lines(s.inbound(msg(line), NOW));
        assert!(
            reply[0].contains("pid is required")
                && reply[0].ends_with(";error=invalid;object_name=test"),
            "{line}: {reply:?}"
        );
    }
}

#[test]
fn replies_come_from_snaplock_addressed_to_the_registered_service_with_integer_dates() {
    let s = registered();
    let locked = msg("LOCKED fence=7;key=node1/4321;object_name=test;timeout_date=1700000060.75");
    assert_eq!(
        text(&s.outbound(&locked)),
        "<node1:snaplock node1:lock_4321_1/LOCKED fence=7;key=node1/4321;object_name=test;timeout_date=1700000060"
    );
    let alive = msg("ABSOLUTELY reply_timestamp=1700000000.5;serial=42;timestamp=1700000000");
    assert_eq!(
        text(&s.outbound(&alive)),
        "<node1:snaplock node1:lock_4321_1/ABSOLUTELY reply_timestamp=1700000000;serial=42;timestamp=1700000000"
    );
    // Before REGISTER (a line too long, say), there is nobody to address.
    let unregistered = Session::new("node1");
    let invalid = msg("INVALID message=x;reason=line too long");
    assert_eq!(text(&unregistered.outbound(&invalid)), text(&invalid));
}

#[test]
fn the_tools_list_request_with_both_prefixes_reaches_the_core() {
    let mut s = Session::new("node1");
    s.inbound(msg("REGISTER service=snaplocktool;version=1"), NOW);
    let core = to_core(s.inbound(
        msg("<node1:snaplocktool node1:snaplock/LISTTICKETS cache=no;transmission_report=failure"),
        NOW,
    ));
    assert_eq!(core, "LISTTICKETS cache=no;transmission_report=failure");
    assert_eq!(to_core(s.inbound(msg("LISTTICKETS"), NOW)), "LISTTICKETS");
    assert_eq!(
        to_core(s.inbound(msg("snaplock/ALIVE serial=42;timestamp=1700000000"), NOW)),
        "ALIVE serial=42;timestamp=1700000000"
    );
}

#[test]
fn nothing_is_relayed_to_other_computers_or_services() {
    let mut s = registered();
    let other_server = lines(s.inbound(
        msg("node2:snaplock/LOCK duration=10;object_name=o;pid=1"),
        NOW,
    ));
    assert!(
        other_server[0].starts_with("node1:lock_4321_1/INVALID command=LOCK;")
            && other_server[0].contains("this agent is node1: nothing is relayed to node2"),
        "{other_server:?}"
    );
    let other_service = lines(s.inbound(msg("images/REPROCESS url=x"), NOW));
    assert!(
        other_service[0].contains("nothing is relayed to images"),
        "{other_service:?}"
    );
    let broadcast = lines(s.inbound(msg("*/LOCKSTARTED server_name=x"), NOW));
    assert!(broadcast[0].contains("INVALID"), "{broadcast:?}");
    let communicator = lines(s.inbound(msg("snapcommunicator/CLUSTERSTATUS"), NOW));
    assert_eq!(
        communicator,
        ["node1:lock_4321_1/UNKNOWN command=CLUSTERSTATUS"]
    );
}

#[test]
fn unregister_stop_and_quitting_end_the_session_and_never_the_agent() {
    for line in [
        "UNREGISTER service=lock_4321_1",
        "STOP",
        "QUITTING",
        "snaplock/STOP",
    ] {
        let mut s = registered();
        assert_eq!(s.inbound(msg(line), NOW), Step::End, "{line}");
    }
    assert_eq!(registered().stop_message(), Some(Message::new("STOP")));
    assert_eq!(Session::new("node1").stop_message(), None);
}

/// Lines built from the session's own words, prefixes and numbers, in any
/// order: whatever the client sends, the session answers or forwards, a
/// forwarded request carries no prefix and none of the parameters the
/// session drops, and a LOCK reaches the core only with the original's
/// durations applied.
#[test]
fn any_line_a_client_sends_is_answered_or_forwarded_clean() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    const HEADS: &[&str] = &[
        "",
        "<a:b ",
        "<node1:x ",
        "snaplock/",
        "node1:snaplock/",
        "node2:snaplock/",
        ".:snaplock/",
        "snapcommunicator/",
        "images/",
        "*/",
    ];
    const COMMANDS: &[&str] = &[
        "REGISTER",
        "LOCK",
        "UNLOCK",
        "LISTTICKETS",
        "ALIVE",
        "COMMANDS",
        "UNREGISTER",
        "STOP",
        "QUITTING",
        "FOO",
        "HELP",
        "EXTEND",
    ];
    const NAMES: &[&str] = &[
        "service",
        "version",
        "pid",
        "duration",
        "unlock_duration",
        "timeout",
        "object_name",
        "serial",
        "detach",
        "lock_proxy_server_name",
        "tag",
    ];
    const VALUES: &[&str] = &[
        "1",
        "0",
        "-1",
        "2",
        "3",
        "59",
        "60",
        "61",
        "604801",
        "99999999999999999999",
        "x",
        "lock_1_1",
        "1000",
        "1700000005",
        "1.5",
        "",
    ];
    let mut rng = StdRng::seed_from_u64(0x5eed_c0de);
    let mut forwarded = 0;
    for _ in 0..20_000 {
        let mut s = Session::new("node1");
        if rng.random_bool(0.8) {
            s.inbound(msg("REGISTER service=lock_1_1;version=1"), NOW);
        }
        let pick = |rng: &mut StdRng, from: &[&'static str]| from[rng.random_range(0..from.len())];
        let mut line = format!("{}{}", pick(&mut rng, HEADS), pick(&mut rng, COMMANDS));
        for i in 0..rng.random_range(0..6) {
            line.push(if i == 0 { ' ' } else { ';' });
            line.push_str(&format!(
                "{}={}",
                pick(&mut rng, NAMES),
                pick(&mut rng, VALUES)
            ));
        }
        let Ok(m) = parse(line.as_bytes()) else {
            continue;
        };
        match s.inbound(m, NOW) {
            Step::Core(m) => {
                forwarded += 1;
                assert!(
                    m.sent_from_server.is_empty() && m.server.is_empty() && m.service.is_empty(),
                    "{line}: {m}"
                );
                for dropped in [
                    "serial",
                    "lock_proxy_server_name",
                    "lock_proxy_service_name",
                ] {
                    if m.command == "LOCK" || m.command == "UNLOCK" {
                        assert_eq!(m.get(dropped), None, "{line}: {m}");
                    }
                }
                if m.command == "LOCK" {
                    assert_eq!(m.get("detach"), None, "{line}: {m}");
                    let d: u64 = m.get_str("duration").unwrap().parse().unwrap();
                    let u: u64 = m.get_str("unlock_duration").unwrap().parse().unwrap();
                    assert!((60..=604_800).contains(&d), "{line}: {m}");
                    assert!((60..=604_800).contains(&u), "{line}: {m}");
                }
                assert!(s.service().is_some(), "{line}: forwarded before REGISTER");
            }
            Step::Answer(replies) => {
                assert!(!replies.is_empty(), "{line}");
                for r in &replies {
                    // Every answer is a line the client can parse back.
                    let back = parse(text(r).as_bytes());
                    assert_eq!(back.as_ref().ok(), Some(r), "{line}: {back:?}");
                }
            }
            Step::Ignore | Step::End => {}
        }
    }
    assert!(forwarded > 1000, "only {forwarded} lines reached the core");
}
