//! Typed peer messages: the round trip of each, roles, refusals.
use super::*;
use crate::wire::{encode_to_vec, parse};

const A: &str = "14|0000000001|127.0.0.1:4040|7|alpha";
const B: &str = "14|0000000002|127.0.0.1:4041|8|beta";

fn at() -> TicketAt {
    TicketAt {
        epoch: 7,
        object: b"a;b \"c\"\\d"[..].into(),
        home: B.into(),
        req: 42,
    }
}

/// Written as a line (as the core sends it), read back, parsed.
fn through_the_wire(m: &PeerMsg) -> PeerMsg {
    let mut line = m.clone().into_line();
    assert_eq!(line.pop(), Some(b'\n'));
    let mut wire = parse(&line).expect("a line");
    PeerMsg::parse(&mut wire)
        .expect("reads")
        .expect("a known command")
}

fn every_kind_of_message() -> Vec<PeerMsg> {
    let kind = Kind {
        mode: Mode::Shared,
        limit: Some(3),
        policy: Policy::Timed {
            quiet: Duration::from_millis(250),
        },
    };
    let tickets = Tickets {
        n: 2,
        records: b"any bytes;\n at all".to_vec(),
    };
    let parts = vec![
        Part::ReportBegin(ReportBegin {
            prev_epoch: 6,
            prev_leaders: vec![Id::from(A), Id::from(B)],
            ready_epoch: 5,
            floor: 1 << 40,
            delay_left_us: 1_500_000,
            up_us: 9,
            own: Some(3),
        }),
        Part::ReportBegin(ReportBegin::default()),
        Part::Report {
            as_leader: true,
            tickets: tickets.clone(),
        },
        Part::Report {
            as_leader: false,
            tickets: tickets.clone(),
        },
        Part::ReportEnd { count: 4 },
        Part::StateBegin {
            base: 7 << 20,
            delay: Duration::from_secs(2),
        },
        Part::State(tickets.clone()),
        Part::Reporter { id: Id::from(A) },
        Part::StateEnd { count: 5 },
        Part::LateBegin { id: Id::from(B) },
        Part::Late(tickets),
        Part::LateEnd {
            id: Id::from(B),
            count: 3,
        },
    ];
    let mut all = vec![
        PeerMsg::Started(Started {
            id: Id::from(A),
            server_name: "alpha".to_owned(),
            start_us: 1_700_000_000_000_000,
            wall_ms: Some(1_700_000_000_000),
            max_epoch: Some(9),
            epoch: 7,
            leaders: vec![Id::from(A), Id::from(B)],
            add_vote: true,
            home_grant: true,
            home_drop: true,
        }),
        PeerMsg::Ping { serial: 3 },
        PeerMsg::Pong(Pong {
            serial: 3,
            epoch: 7,
            view: u64::MAX,
            wall_ms: Some(5),
            active: true,
            links: Some(0b101),
            delay_us: 250,
        }),
        PeerMsg::Leaders {
            epoch: 7,
            leaders: vec![Id::from(B)],
        },
        PeerMsg::Lock(Lock {
            epoch: 7,
            object: b"x"[..].into(),
            req: 1,
            key: "beta/123".to_owned(),
            kind,
            try_once: true,
            progress: true,
        }),
        PeerMsg::Lock(Lock {
            epoch: 7,
            object: b"x"[..].into(),
            req: 2,
            key: "beta/124".to_owned(),
            kind,
            try_once: false,
            progress: false,
        }),
        PeerMsg::Unlock {
            epoch: 7,
            object: b"x"[..].into(),
            req: 1,
        },
        PeerMsg::AddTicket {
            at: at(),
            key: "beta/1".to_owned(),
            number: 2,
            kind: Kind::EXCLUSIVE,
            fence: None,
        },
        PeerMsg::AddTicket {
            at: at(),
            key: "beta/2".to_owned(),
            number: 3,
            kind: Kind {
                mode: Mode::Counted,
                limit: Some(6),
                policy: Policy::Hard,
            },
            fence: Some(41),
        },
        PeerMsg::ActivateLock {
            at: at(),
            fence: 99,
        },
        PeerMsg::LockActivated {
            at: at(),
            fence: 99,
            ok: false,
            other: Some((A.to_owned(), 4)),
        },
        PeerMsg::LockActivated {
            at: at(),
            fence: 99,
            ok: true,
            other: None,
        },
        PeerMsg::DropTicket(at()),
        PeerMsg::Locked {
            at: at(),
            fence: 99,
        },
        PeerMsg::LockFailed {
            at: at(),
            error: "busy",
            description: "the object is locked".to_owned(),
        },
        PeerMsg::HasTicket(at()),
        PeerMsg::Waiting {
            at: at(),
            position: 10_000,
        },
        PeerMsg::Tx(TxReq {
            epoch: 7,
            namespace: b"Clinical".to_vec(),
            req: 40,
            key: "12/0".to_owned(),
            statements: vec![
                b"assert not exists Month-End/CGROVE-35".to_vec(),
                b"set MDS-Entry/CGROVE-35/R-45899 dup".to_vec(),
            ],
            duration_us: 60_000_000,
            room: 9_998,
        }),
        PeerMsg::TxDone(TxDone {
            epoch: 7,
            namespace: b"Clinical".to_vec(),
            req: 40,
            fence: 1 << 40,
            results: vec![true, false, true],
            sets: vec![(41, true, b"A/%20b".to_vec()), (42, false, b"B".to_vec())],
            renews: vec![3, 4],
            deletes: vec![9],
        }),
        PeerMsg::TxDone(TxDone {
            epoch: 7,
            namespace: b"n".to_vec(),
            req: 40,
            fence: 5,
            results: vec![false],
            sets: Vec::new(),
            renews: Vec::new(),
            deletes: Vec::new(),
        }),
        PeerMsg::TxFailed {
            epoch: 7,
            namespace: b"n".to_vec(),
            req: 40,
            failed: 2,
            error: "failed",
            description: "s2: assert set A is false".to_owned(),
        },
        PeerMsg::TxAck {
            epoch: 7,
            namespace: b"n".to_vec(),
            req: 40,
            ok: false,
        },
        PeerMsg::TxFence {
            epoch: 7,
            namespace: b"n".to_vec(),
            req: 40,
            home: A.to_owned(),
            fence: 1 << 41,
        },
        PeerMsg::TxFenced {
            epoch: 7,
            namespace: b"n".to_vec(),
            req: 40,
            home: A.to_owned(),
            fence: 1 << 41,
            ok: true,
        },
        PeerMsg::List(ListReq {
            epoch: 7,
            serial: 3,
            object: None,
        }),
        PeerMsg::List(ListReq {
            epoch: 7,
            serial: 4,
            object: Some(b"a;b \"c\"\\d".to_vec()),
        }),
        PeerMsg::Listed(Listed {
            epoch: 7,
            serial: 4,
            ready: true,
            more: true,
            entries: vec![
                ListEntry {
                    object: b"a;b 1:\"c\"\\d".to_vec(),
                    number: 3,
                    position: 0,
                    fence: 1 << 41,
                    since_us: 1_700_000_000_250_000,
                    mode: Mode::Shared,
                    agent: "alpha".to_owned(),
                    key: "alpha/12".to_owned(),
                },
                ListEntry {
                    object: Vec::new(),
                    number: 4,
                    position: 2,
                    fence: 0,
                    since_us: 0,
                    mode: Mode::Counted,
                    agent: "beta".to_owned(),
                    key: "beta/1 2:x".to_owned(),
                },
            ],
        }),
        PeerMsg::Listed(Listed {
            epoch: 7,
            serial: 5,
            ready: false,
            more: false,
            entries: Vec::new(),
        }),
    ];
    all.extend(
        parts
            .into_iter()
            .map(|part| PeerMsg::Tickets { epoch: 7, part }),
    );
    all
}

#[test]
fn every_message_reads_back_as_it_was_written() {
    for m in every_kind_of_message() {
        assert_eq!(through_the_wire(&m), m, "{}", m.clone().encode());
    }
}

#[test]
fn every_message_is_written_as_its_message_would_be() {
    // The messages of a grant are written straight from their fields
    // (`wire::Line`), the others through a `Message`: the same bytes.
    for m in every_kind_of_message() {
        let line = m.clone().into_line();
        let through_message = encode_to_vec(&m.clone().encode());
        assert_eq!(
            String::from_utf8_lossy(&line),
            String::from_utf8_lossy(&through_message)
        );
    }
}

#[test]
fn each_role_gets_its_own_messages() {
    let roles: Vec<(&str, Role)> = every_kind_of_message()
        .iter()
        .map(|m| (m.command(), m.role()))
        .collect();
    for (command, role) in roles {
        let want = match command {
            "LOCKSTARTED" | "LOCKPING" | "LOCKPONG" => Role::Link,
            "LOCKLEADERS" => Role::Election,
            "LOCKTICKETS" => Role::Handover,
            "LOCKED" | "LOCKFAILED" | "HASTICKET" | "LOCKWAITING" | "TXDONE" | "TXFAILED" => {
                Role::Home
            }
            "LOCKLIST" | "LOCKLISTED" => Role::View,
            _ => Role::Leader,
        };
        assert_eq!(role, want, "{command}");
    }
}

fn read(line: &str) -> Result<Option<PeerMsg>, BadField> {
    PeerMsg::parse(&mut parse(line.as_bytes()).expect("a line"))
}

#[test]
fn a_missing_or_bad_field_is_named() {
    let cases = [
        ("LOCKPING", "serial"),
        ("LOCKPING serial=+5", "serial"),
        ("LOCKPING serial=18446744073709551616", "serial"),
        ("LOCKPONG serial=1", "epoch"),
        ("LOCKPONG serial=1;epoch=2;delay=-1", "delay"),
        ("LOCKLEADERS epoch=3", "leader0"),
        ("LOCKLEADERS epoch=3;leader0=nobody", "leader"),
        ("LOCKSTARTED epoch=3;lockid=not-an-id", "lockid"),
        ("UNLOCK epoch=1;req=2", "object_name"),
        ("ACTIVATELOCK epoch=1;object_name=o;home=h;req=2", "fence"),
        (
            "ADDTICKET epoch=1;object_name=o;home=h;req=2;key=k;number=1;mode=both",
            "mode",
        ),
        (
            "ADDTICKET epoch=1;object_name=o;home=h;req=2;key=k;number=1;limit=0",
            "limit",
        ),
        (
            "ADDTICKET epoch=1;object_name=o;home=h;req=2;key=k;number=1;mode=counted",
            "limit",
        ),
        (
            "LOCKACTIVATED epoch=1;object_name=o;home=h;req=2;fence=3;other_home=h;other_req=x",
            "other_req",
        ),
        ("LOCKTICKETS epoch=1", "part"),
        (
            "LOCK epoch=1;object_name=o;req=2;key=k;progress=yes",
            "progress",
        ),
        ("LOCKWAITING epoch=1;object_name=o;home=h;req=2", "position"),
        (
            "LOCKWAITING epoch=1;object_name=o;home=h;req=2;position=0",
            "position",
        ),
        (
            "LOCKWAITING epoch=1;object_name=o;home=h;req=2;position=-1",
            "position",
        ),
        ("LOCKWAITING epoch=1;object_name=o;home=h;position=3", "req"),
        ("LOCKTICKETS epoch=1;part=middle", "part"),
        ("LOCKTICKETS epoch=1;part=state;n=1", "tickets"),
        (
            "LOCKTICKETS epoch=1;part=begin;prev_epoch=1;ready_epoch=1",
            "floor",
        ),
        ("LOCKLIST epoch=1", "serial"),
        ("LOCKLISTED epoch=1;serial=2;more=x", "more"),
        // A record cut short, a length past the end, a bad mode, a waiter
        // with a fence, a holder without, trailing bytes, a bad number.
        (
            "LOCKLISTED epoch=1;serial=2;tickets=1 0 5 0 x 1:a",
            "tickets",
        ),
        (
            "LOCKLISTED epoch=1;serial=2;tickets=1 0 5 0 x 1:a1:n9:k",
            "tickets",
        ),
        (
            "LOCKLISTED epoch=1;serial=2;tickets=1 0 5 0 q 1:a1:n1:k",
            "tickets",
        ),
        (
            "LOCKLISTED epoch=1;serial=2;tickets=1 1 5 0 x 1:a1:n1:k",
            "tickets",
        ),
        (
            "LOCKLISTED epoch=1;serial=2;tickets=1 0 0 0 x 1:a1:n1:k",
            "tickets",
        ),
        (
            "LOCKLISTED epoch=1;serial=2;tickets=1 0 5 0 x 1:a1:n1:kz",
            "tickets",
        ),
        (
            "LOCKLISTED epoch=1;serial=2;tickets=1 0 5 -1 x 1:a1:n1:k",
            "tickets",
        ),
    ];
    for (line, field) in cases {
        assert_eq!(read(line), Err(BadField(field)), "{line}");
    }
}

#[test]
fn a_list_answer_of_more_than_its_bound_is_refused() {
    let e = ListEntry {
        object: b"o".to_vec(),
        number: 1,
        position: 1,
        fence: 0,
        since_us: 0,
        mode: Mode::Exclusive,
        agent: "n".to_owned(),
        key: "n/1".to_owned(),
    };
    let mut records = Vec::new();
    for _ in 0..=view::LIST_ENTRIES {
        e.encode(&mut records);
    }
    let mut m = Message::new("LOCKLISTED")
        .with("epoch", "1")
        .with("serial", "1");
    m.set_owned("tickets", records);
    assert_eq!(PeerMsg::parse(&mut m), Err(BadField("tickets")));
}

#[test]
fn a_list_answer_with_a_key_not_in_utf8_is_refused() {
    let mut m = Message::new("LOCKLISTED")
        .with("epoch", "1")
        .with("serial", "1");
    m.set_owned("tickets", b"1 0 5 0 x 1:a1:n1:\xff".to_vec());
    assert_eq!(PeerMsg::parse(&mut m), Err(BadField("tickets")));
}

#[test]
fn an_unknown_command_is_ignored_and_unknown_fields_too() {
    assert_eq!(read("LOCKGOSSIP epoch=1"), Ok(None));
    let got = read("LOCKPING serial=4;colour=blue").expect("reads");
    assert_eq!(got, Some(PeerMsg::Ping { serial: 4 }));
}

#[test]
fn a_refusal_keeps_only_the_protocols_errors() {
    let got = read("LOCKFAILED epoch=1;object_name=o;home=h;req=2;error=weird")
        .expect("reads")
        .expect("known");
    let PeerMsg::LockFailed {
        error, description, ..
    } = got
    else {
        panic!("{got:?}");
    };
    assert_eq!(
        (error, description.as_str()),
        ("unavailable", "refused by the leaders")
    );
}

#[test]
fn every_cut_or_changed_byte_of_a_list_answer_is_read_or_refused() {
    let good = b"1 0 1048576 1700000000000000 x 1:a5:node27:node2/72 1 0 0 s 3:b;c5:node37:node3/1";
    for cut in 0..=good.len() {
        let mut m = Message::new("LOCKLISTED")
            .with("epoch", "1")
            .with("serial", "1");
        m.set_owned("tickets", good[..cut].to_vec());
        let read = PeerMsg::parse(&mut m);
        if cut == good.len() {
            let Ok(Some(PeerMsg::Listed(l))) = read else {
                panic!("the whole answer reads: {read:?}")
            };
            assert_eq!(l.entries.len(), 2);
        }
    }
    for at in 0..good.len() {
        for b in [b' ', b':', b'0', b'9', b'x', 0xff] {
            let mut changed = good.to_vec();
            changed[at] = b;
            let mut m = Message::new("LOCKLISTED")
                .with("epoch", "1")
                .with("serial", "1");
            m.set_owned("tickets", changed);
            let _ = PeerMsg::parse(&mut m);
        }
    }
}

/// `m` with object names the encoder writes as they are, unquoted.
fn with_plain_objects(mut m: PeerMsg) -> PeerMsg {
    match &mut m {
        PeerMsg::Lock(Lock { object, .. }) | PeerMsg::Unlock { object, .. } => {
            *object = b"plain/object.1"[..].into();
        }
        PeerMsg::AddTicket { at, .. }
        | PeerMsg::ActivateLock { at, .. }
        | PeerMsg::LockActivated { at, .. }
        | PeerMsg::DropTicket(at)
        | PeerMsg::Locked { at, .. }
        | PeerMsg::LockFailed { at, .. }
        | PeerMsg::HasTicket(at)
        | PeerMsg::Waiting { at, .. } => at.object = b"plain/object.1"[..].into(),
        _ => {}
    }
    m
}

#[test]
fn every_common_message_is_scanned_and_reads_as_it_was_written() {
    let mut kinds = std::collections::BTreeSet::new();
    for m in every_kind_of_message().into_iter().map(with_plain_objects) {
        let mut line = m.clone().into_line();
        line.pop();
        let common = PeerMsg::is_common(m.command());
        let mut parsed = parse(&line).expect("a line");
        assert_eq!(
            PeerMsg::read_common(&mut parsed).expect("reads").is_some(),
            common,
            "{}: is_common and read_common agree",
            m.command()
        );
        if !common {
            continue;
        }
        let mut scanned = crate::wire::scan(&line)
            .unwrap_or_else(|| panic!("not scanned: {}", String::from_utf8_lossy(&line)));
        assert_eq!(
            PeerMsg::read_common(&mut scanned),
            Ok(Some(m.clone())),
            "{}",
            String::from_utf8_lossy(&line)
        );
        kinds.insert(m.command());
    }
    assert_eq!(kinds.len(), 12, "every common command was tried: {kinds:?}");
}
