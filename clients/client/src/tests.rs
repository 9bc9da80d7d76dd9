//! The client against a scripted fake agent on the other end of a socket pair.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use snaplock_proto::wire::{Message, parse};

use super::*;

/// The agent's end: reads request lines and writes scripted replies.
struct FakeAgent {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl FakeAgent {
    /// The next request; panics (failing the test) after 5 s without one.
    fn read(&mut self) -> Message {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).expect("read a request");
        assert!(n > 0, "the client closed the connection");
        parse(line.trim_end().as_bytes()).expect("the client sends well-formed lines")
    }

    fn write(&mut self, line: &str) {
        self.writer
            .write_all(line.as_bytes())
            .expect("write a reply");
        self.writer.write_all(b"\n").expect("write a reply");
    }
}

fn with_fake_agent(
    script: impl FnOnce(&mut FakeAgent) + Send + 'static,
) -> (Client, JoinHandle<()>) {
    let (ours, theirs) = UnixStream::pair().expect("socket pair");
    theirs
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let handle = thread::spawn(move || {
        let mut agent = FakeAgent {
            reader: BufReader::new(theirs.try_clone().expect("clone")),
            writer: theirs,
        };
        script(&mut agent);
    });
    (Client::from_stream(ours), handle)
}

fn tag(msg: &Message) -> i64 {
    tag_of(msg).expect("the request is tagged")
}

#[test]
fn lock_sends_a_tagged_request_with_its_options_and_returns_the_grant() {
    let (mut client, agent) = with_fake_agent(|a| {
        let req = a.read();
        assert_eq!(req.command, "LOCK");
        assert_eq!(req.get("object_name"), Some(&b"a;b"[..]));
        assert_eq!(req.get_str("duration"), Some("2.5"));
        assert_eq!(req.get_str("mode"), Some("shared"));
        assert_eq!(req.get_str("limit"), Some("3"));
        assert_eq!(req.get_str("try"), Some("true"));
        assert!(req.get("timeout").and_then(UnixTime::from_wire).is_some());
        let t = tag(&req);
        a.write(&format!(
            "LOCKED fence=7;key=h/1.1;object_name=\"a;b\";tag={t};timeout_date=1700000002.5"
        ));
    });
    let opts = LockOptions {
        wait: Some(Duration::from_secs(1)),
        duration: Some(Duration::from_millis(2500)),
        mode: Mode::Shared,
        limit: Some(3),
        try_once: true,
        ..LockOptions::default()
    };
    let grant = client.lock(b"a;b", &opts).expect("granted");
    agent.join().expect("fake agent");
    assert_eq!(grant.object, b"a;b");
    assert_eq!(grant.fence, 7);
    assert_eq!(grant.key, "h/1.1");
    assert_eq!(grant.timeout_date, UnixTime(1_700_000_002_500_000));
}

#[test]
fn every_request_gets_a_fresh_tag() {
    let (mut client, agent) = with_fake_agent(|a| {
        let mut seen = Vec::new();
        for _ in 0..3 {
            let req = a.read();
            let t = tag(&req);
            seen.push(t);
            a.write(&format!("UNLOCKED object_name=x;tag={t}"));
        }
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 3);
    });
    for _ in 0..3 {
        client.unlock(b"x").expect("unlocked");
    }
    agent.join().expect("fake agent");
}

#[test]
fn messages_about_other_requests_are_kept_as_events_in_order() {
    let (mut client, agent) = with_fake_agent(|a| {
        let req = a.read();
        let t = tag(&req);
        a.write("UNLOCKED error=timedout;object_name=old;tag=999");
        a.write(&format!(
            "LOCKED fence=1;key=k;object_name=x;tag={};timeout_date=5",
            t + 100
        ));
        a.write(&format!(
            "LOCKED fence=2;key=k;object_name=x;tag={t};timeout_date=5"
        ));
    });
    let grant = client.lock(b"x", &LockOptions::default()).expect("granted");
    agent.join().expect("fake agent");
    assert_eq!(
        grant.fence, 2,
        "the reply is the one with the request's tag"
    );
    assert!(client.has_buffered());
    let first = client.next_event().expect("first event");
    assert_eq!(first.command, "UNLOCKED");
    assert_eq!(first.get_str("error"), Some("timedout"));
    let second = client.next_event().expect("second event");
    assert_eq!(second.get_str("fence"), Some("1"));
    assert!(client.next_event().is_none());
    assert!(!client.has_buffered());
}

#[test]
fn untagged_requests_skip_lock_notices() {
    let (mut client, agent) = with_fake_agent(|a| {
        assert_eq!(a.read().command, "LOCKSTATUS");
        a.write("UNLOCKED error=lost;object_name=x;tag=4");
        a.write("NOLOCK");
    });
    assert!(!client.status().expect("status"));
    agent.join().expect("fake agent");
    let event = client
        .recv(Some(Duration::ZERO))
        .expect("recv")
        .expect("the notice");
    assert_eq!(event.get_str("error"), Some("lost"));
}

#[test]
fn lockfailed_is_refused_with_the_agents_words() {
    let (mut client, agent) = with_fake_agent(|a| {
        let t = tag(&a.read());
        a.write(&format!(
            "LOCKFAILED description=\"the object is locked\";error=busy;object_name=x;tag={t}"
        ));
    });
    let err = client
        .lock(b"x", &LockOptions::default())
        .expect_err("refused");
    agent.join().expect("fake agent");
    assert!(err.is_refused("busy"), "{err:?}");
    let Error::Refused { description, .. } = &err else {
        unreachable!()
    };
    assert_eq!(description, "the object is locked");
}

#[test]
fn unlocked_with_an_error_while_waiting_is_lost() {
    let (mut client, agent) = with_fake_agent(|a| {
        let t = tag(&a.read());
        a.write(&format!("UNLOCKED error=lost;object_name=x;tag={t}"));
    });
    let err = client
        .lock(b"x", &LockOptions::default())
        .expect_err("lost");
    agent.join().expect("fake agent");
    assert!(
        matches!(&err, Error::Lost { error } if error == "lost"),
        "{err:?}"
    );
}

#[test]
fn a_malformed_reply_is_a_protocol_error_and_later_lines_still_read() {
    let (mut client, agent) = with_fake_agent(|a| {
        assert_eq!(a.read().command, "LOCKSTATUS");
        a.write("this is not a message");
        a.write("LOCKREADY");
    });
    let err = client.status().expect_err("malformed");
    assert!(matches!(err, Error::Protocol(_)), "{err:?}");
    agent.join().expect("fake agent");
    let next = client
        .recv(Some(Duration::from_secs(1)))
        .expect("recv")
        .expect("message");
    assert_eq!(next.command, "LOCKREADY");
}

#[test]
fn a_grant_without_a_valid_fence_is_a_protocol_error() {
    let (mut client, agent) = with_fake_agent(|a| {
        let t = tag(&a.read());
        a.write(&format!(
            "LOCKED fence=-1;key=k;object_name=x;tag={t};timeout_date=5"
        ));
        let t = tag(&a.read());
        a.write(&format!(
            "LOCKED key=k;object_name=x;tag={t};timeout_date=5"
        ));
        let t = tag(&a.read());
        a.write(&format!(
            "LOCKED fence=1;key=k;object_name=other;tag={t};timeout_date=5"
        ));
    });
    for _ in 0..3 {
        let err = client
            .lock(b"x", &LockOptions::default())
            .expect_err("bad grant");
        assert!(matches!(err, Error::Protocol(_)), "{err:?}");
    }
    agent.join().expect("fake agent");
}

#[test]
fn a_reply_of_the_wrong_kind_is_a_protocol_error() {
    let (mut client, agent) = with_fake_agent(|a| {
        assert_eq!(a.read().command, "INFO");
        a.write("UNKNOWN command=INFO");
        assert_eq!(a.read().command, "LISTTICKETS");
        a.write("TICKETLIST");
    });
    assert!(matches!(client.info(), Err(Error::Protocol(_))));
    assert!(matches!(client.list(), Err(Error::Protocol(_))));
    agent.join().expect("fake agent");
}

#[test]
fn no_reply_in_time_is_a_timeout_and_the_request_is_cancelled() {
    let (mut client, agent) = with_fake_agent(|a| {
        let lock = a.read();
        assert_eq!(lock.command, "LOCK");
        let cancel = a.read();
        assert_eq!(cancel.command, "UNLOCK");
        assert_eq!(cancel.get("object_name"), Some(&b"x"[..]));
    });
    client.set_reply_timeout(Duration::from_millis(100));
    let opts = LockOptions {
        wait: Some(Duration::from_millis(100)),
        ..LockOptions::default()
    };
    let start = clock::monotonic();
    let err = client.lock(b"x", &opts).expect_err("no reply");
    let took = start.elapsed();
    agent.join().expect("fake agent");
    assert!(matches!(err, Error::Timeout), "{err:?}");
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

#[test]
fn a_closed_connection_is_closed_not_a_panic() {
    let (mut client, agent) = with_fake_agent(|a| {
        assert_eq!(a.read().command, "LOCKSTATUS");
        a.write("LOCKREADY");
    });
    assert!(client.status().expect("status"));
    agent.join().expect("fake agent");
    let err = client.status().expect_err("closed");
    assert!(matches!(err, Error::Closed), "{err:?}");
    let err = client
        .recv(Some(Duration::from_secs(1)))
        .expect_err("still closed");
    assert!(matches!(err, Error::Closed), "{err:?}");
}

#[test]
fn lines_split_across_reads_are_put_back_together() {
    let (mut client, agent) = with_fake_agent(|a| {
        assert_eq!(a.read().command, "INFO");
        a.writer
            .write_all(b"STATUS server_name=h;vers")
            .expect("write");
        thread::sleep(Duration::from_millis(50));
        a.writer.write_all(b"ion=1.0\r\nNOLOCK\n").expect("write");
    });
    let info = client.info().expect("info");
    agent.join().expect("fake agent");
    assert_eq!(info.get_str("version"), Some("1.0"));
    assert_eq!(
        client.next_event().map(|m| m.command.to_string()),
        Some("NOLOCK".to_owned())
    );
}

#[test]
fn a_reply_longer_than_the_limit_is_a_protocol_error() {
    let (mut client, agent) = with_fake_agent(|a| {
        assert_eq!(a.read().command, "LISTTICKETS");
        let mut huge = b"TICKETLIST list=".to_vec();
        huge.resize(MAX_REPLY_LINE + 100, b'x');
        huge.push(b'\n');
        // The client may stop reading once it has failed: ignore EPIPE.
        let _ = a.writer.write_all(&huge);
    });
    client.set_reply_timeout(Duration::from_secs(5));
    let err = client.list().expect_err("too long");
    assert!(matches!(err, Error::Protocol(_)), "{err:?}");
    drop(client);
    agent.join().expect("fake agent");
}

#[test]
fn extend_and_unlock_name_the_pid_the_lock_was_taken_with() {
    let (mut client, agent) = with_fake_agent(|a| {
        let req = a.read();
        assert_eq!(req.get_str("pid"), Some("4242"));
        assert_eq!(req.get_str("detach"), Some("true"));
        let t = tag(&req);
        a.write(&format!(
            "LOCKED fence=1;key=h/4242;object_name=x;tag={t};timeout_date=10"
        ));
        let req = a.read();
        assert_eq!(
            (req.command.as_str(), req.get_str("pid")),
            ("EXTEND", Some("4242"))
        );
        assert_eq!(req.get_str("duration"), Some("30"));
        let t = tag(&req);
        a.write(&format!(
            "LOCKED fence=1;key=h/4242;object_name=x;tag={t};timeout_date=40"
        ));
        let req = a.read();
        assert_eq!(
            (req.command.as_str(), req.get_str("pid")),
            ("UNLOCK", Some("4242"))
        );
        let t = tag(&req);
        a.write(&format!("UNLOCKED object_name=x;tag={t}"));
    });
    let opts = LockOptions {
        pid: Some(4242),
        detach: true,
        ..LockOptions::default()
    };
    client.lock(b"x", &opts).expect("granted");
    let renewed = client
        .extend(b"x", Duration::from_secs(30))
        .expect("extended");
    assert_eq!(renewed.timeout_date, UnixTime(40_000_000));
    client.unlock(b"x").expect("unlocked");
    agent.join().expect("fake agent");
}

#[test]
fn send_line_refuses_embedded_newlines() {
    let (mut client, agent) = with_fake_agent(|_| {});
    assert!(matches!(client.send_line(b"LOCK\nLOCK"), Err(Error::Io(_))));
    agent.join().expect("fake agent");
}

#[test]
fn recv_times_out_with_none() {
    let (mut client, agent) = with_fake_agent(|a| {
        let _ = a.read();
    });
    let got = client.recv(Some(Duration::from_millis(30))).expect("recv");
    assert!(got.is_none());
    client.send_line(b"ALIVE").expect("send");
    agent.join().expect("fake agent");
}

#[test]
fn the_explicit_socket_path_wins() {
    let p = default_socket_path(Some(Path::new("/x/y.sock")));
    assert_eq!(p, Path::new("/x/y.sock"));
    assert!(
        default_socket_path(None).ends_with("snaplock.sock")
            || std::env::var_os(SOCKET_ENV).is_some()
    );
}

#[test]
fn lock_options_write_policies_and_durations_on_the_wire() {
    let opts = LockOptions {
        wait: Some(Duration::from_millis(1500)),
        unlock_duration: Some(Duration::ZERO),
        policy: Some(Policy::Timed {
            quiet: Duration::from_millis(250),
        }),
        ..LockOptions::default()
    };
    let msg = opts.to_message(b"o", 3, UnixTime(10_000_000));
    assert_eq!(msg.get_str("timeout"), Some("11.5"));
    assert_eq!(msg.get_str("unlock_duration"), Some("0"));
    assert_eq!(msg.get_str("policy"), Some("timed"));
    assert_eq!(msg.get_str("quiet"), Some("0.25"));
    assert_eq!(msg.get_str("tag"), Some("3"));
    assert_eq!(msg.get("mode"), None);
    assert_eq!(msg.get("try"), None);
}

#[test]
fn a_counted_lock_writes_its_mode_and_limit() {
    let opts = LockOptions {
        mode: Mode::Counted,
        limit: Some(6),
        ..LockOptions::default()
    };
    let msg = opts.to_message(b"db", 1, UnixTime(10_000_000));
    assert_eq!(msg.get_str("mode"), Some("counted"));
    assert_eq!(msg.get_str("limit"), Some("6"));
}

#[test]
fn a_trust_contract_is_written_only_when_given() {
    let opts = LockOptions {
        min_uptime: Some(Duration::from_millis(3_600_500)),
        min_trust: Some(750_000),
        ..LockOptions::default()
    };
    let msg = opts.to_message(b"db", 1, UnixTime(10_000_000));
    assert_eq!(msg.get_str("min_uptime"), Some("3600.5"));
    assert_eq!(msg.get_str("min_trust"), Some("0.75"));
    let msg = LockOptions::default().to_message(b"db", 1, UnixTime(10_000_000));
    assert_eq!(msg.get("min_uptime"), None);
    assert_eq!(msg.get("min_trust"), None);
}

#[test]
fn owner_cgroup_is_written_only_when_asked() {
    let opts = LockOptions {
        owner_cgroup: true,
        ..LockOptions::default()
    };
    let msg = opts.to_message(b"db", 1, UnixTime(10_000_000));
    assert_eq!(msg.get_str("owner"), Some("cgroup"));
    assert_eq!(msg.get("detach"), None);
    let msg = LockOptions::default().to_message(b"db", 1, UnixTime(10_000_000));
    assert_eq!(msg.get("owner"), None);
}

#[test]
fn vouched_for_reads_valid_for_from_the_answer_to_its_alive() {
    let (mut client, agent) = with_fake_agent(|a| {
        let req = a.read();
        assert_eq!(req.command, "ALIVE");
        let serial = req.get_str("serial").expect("a serial").to_owned();
        // An event first, and an answer to another ALIVE: both set aside.
        a.write("UNLOCKED object_name=other;error=timedout");
        a.write("ABSOLUTELY serial=999999;valid_for=9");
        a.write(&format!("ABSOLUTELY serial={serial};valid_for=2.5"));
        let req = a.read();
        let serial = req.get_str("serial").expect("a serial").to_owned();
        // An agent alone: no valid_for.
        a.write(&format!("ABSOLUTELY serial={serial}"));
        let req = a.read();
        let serial = req.get_str("serial").expect("a serial").to_owned();
        a.write(&format!("ABSOLUTELY serial={serial};valid_for=soon"));
    });
    let before = clock::monotonic();
    let until = client.vouched_for().expect("answered").expect("a cluster");
    let after = clock::monotonic();
    assert!(until >= before + Duration::from_millis(2500), "{until:?}");
    assert!(until <= after + Duration::from_millis(2500), "{until:?}");
    assert_eq!(client.next_event().expect("kept").command, "UNLOCKED");
    assert_eq!(client.vouched_for().expect("answered"), None);
    assert!(matches!(client.vouched_for(), Err(Error::Protocol(_))));
    agent.join().expect("fake agent");
}

#[test]
fn a_busy_polling_client_gets_its_replies_and_sees_the_agent_close() {
    let (mut client, agent) = with_fake_agent(|a| {
        let req = a.read();
        // Later than the spin: the reply comes through the poll.
        thread::sleep(Duration::from_millis(20));
        a.write(&format!(
            "LOCKED fence=7;key=h/1.1;object_name=x;timeout_date=1700000002.5;tag={}",
            tag(&req)
        ));
        let req = a.read();
        // At once: the spin reads it.
        a.write(&format!("UNLOCKED object_name=x;tag={}", tag(&req)));
    });
    client.set_busy_poll(Duration::from_millis(5));
    let grant = client.lock(b"x", &LockOptions::default()).expect("granted");
    assert_eq!(grant.fence, 7);
    client.unlock(b"x").expect("unlocked");
    agent.join().expect("fake agent");
    assert!(matches!(client.status(), Err(Error::Closed)));
}

#[test]
fn lock_with_progress_asks_for_it_and_hands_each_place_to_the_caller() {
    let (mut client, agent) = with_fake_agent(|a| {
        let req = a.read();
        assert_eq!(req.get_str("progress"), Some("true"));
        let t = tag(&req);
        a.write(&format!("LOCKWAITING object_name=x;position=2;tag={t}"));
        a.write(&format!(
            "LOCKWAITING object_name=x;position=1;reason=lock-delay;tag={t};until=1700000009.5"
        ));
        // Malformed: skipped, the request still waits.
        a.write(&format!("LOCKWAITING object_name=x;position=0;tag={t}"));
        a.write(&format!(
            "LOCKED fence=7;key=h/1.1;object_name=x;tag={t};timeout_date=1700000070"
        ));
    });
    let mut seen = Vec::new();
    let grant = client
        .lock_with_progress(b"x", &LockOptions::default(), &mut |w| seen.push(w.clone()))
        .expect("granted");
    agent.join().expect("fake agent");
    assert_eq!(grant.fence, 7);
    let places: Vec<(u64, Option<&str>, Option<UnixTime>)> = seen
        .iter()
        .map(|w| (w.position, w.reason.as_deref(), w.until))
        .collect();
    assert_eq!(
        places,
        [
            (2, None, None),
            (1, Some("lock-delay"), Some(UnixTime(1_700_000_009_500_000)))
        ]
    );
}

#[test]
fn a_lockwaiting_that_was_not_asked_for_is_never_taken_for_the_answer() {
    let (mut client, agent) = with_fake_agent(|a| {
        let req = a.read();
        assert_eq!(req.get("progress"), None);
        let t = tag(&req);
        a.write(&format!("LOCKWAITING object_name=x;position=1;tag={t}"));
        a.write(&format!(
            "LOCKED fence=8;key=h/1.1;object_name=x;tag={t};timeout_date=1700000070"
        ));
    });
    let grant = client.lock(b"x", &LockOptions::default()).expect("granted");
    agent.join().expect("fake agent");
    assert_eq!(grant.fence, 8);
    let kept = client.recv(Some(Duration::ZERO)).expect("an event");
    assert_eq!(
        kept.map(|m| m.command.to_string()),
        Some("LOCKWAITING".to_owned())
    );
}

#[test]
fn readiness_told_unasked_is_never_the_answer_to_another_request() {
    let (mut client, agent) = with_fake_agent(|a| {
        assert_eq!(a.read().command, "LOCKSTATUS");
        a.write("LOCKREADY");
        // Told unasked, then the answer to INFO.
        assert_eq!(a.read().command, "INFO");
        a.write("NOLOCK");
        a.write("STATUS ready=false;server_name=h");
        // An old push, read or not, then the answer to LOCKSTATUS.
        thread::sleep(Duration::from_millis(50));
        a.write("LOCKREADY");
        assert_eq!(a.read().command, "LOCKSTATUS");
        a.write("NOLOCK");
    });
    assert!(client.status().expect("answered"));
    let info = client.info().expect("answered");
    assert_eq!(info.get_str("ready"), Some("false"));
    assert_eq!(
        client.next_event().map(|m| m.command.to_string()),
        Some("NOLOCK".to_owned())
    );
    // Give the old push time to arrive before asking again.
    thread::sleep(Duration::from_millis(100));
    assert!(
        !client.status().expect("answered"),
        "the answer, not the old push"
    );
    agent.join().expect("fake agent");
}
