//! Lock transactions through a real socket of an in-process agent: Sky
//! OS's medical example over two connections, and a variable that
//! vanishes with its connection.

mod common;

use common::{Client, assert_reply, param, start};

const NOT_MONTH_END: &str = "s1=assert not exists Month-End/CGROVE-35";

fn entry(tag: u32) -> String {
    format!(
        "TRANSACTION namespace=Clinical;{NOT_MONTH_END};\
         s2=assert not exists MDS-Review/CGROVE-35/R-45899;\
         s3=assert set MDS-Entry/CGROVE-35/R-45899 dup;tag={tag}"
    )
}

fn review(tag: u32) -> String {
    format!(
        "TRANSACTION namespace=Clinical;{NOT_MONTH_END};\
         s2=assert not exists MDS-Entry/CGROVE-35/R-45899;\
         s3=assert set MDS-Review/CGROVE-35/R-45899;tag={tag}"
    )
}

fn fence(reply: &snaplock_proto::wire::Message) -> u64 {
    param(reply, "fence").parse().expect("a fence")
}

#[test]
fn the_medical_example_runs_entries_together_and_a_review_alone() {
    let (_dir, agent) = start("medical", |_| {});
    let mut user1 = Client::connect(agent.socket());
    let mut user2 = Client::connect(agent.socket());
    let ok = |tag: &str, results: &str| {
        vec![
            ("namespace", "Clinical".to_owned()),
            ("results", results.to_owned()),
            ("tag", tag.to_owned()),
        ]
    };
    let check = |m: &snaplock_proto::wire::Message, cmd: &str, want: Vec<(&str, String)>| {
        let want: Vec<(&str, &str)> = want.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_reply(m, cmd, &want);
    };

    // Both enter data for the patient at once.
    let a = user1.request(&entry(1));
    check(&a, "TRANSACTIONOK", ok("1", "1,1,1"));
    let b = user2.request(&entry(2));
    check(&b, "TRANSACTIONOK", ok("2", "1,1,1"));
    assert!(fence(&b) > fence(&a));

    // User 1 cannot review while user 2 enters: statement 2 fails.
    user1.request(
        "TRANSACTION namespace=Clinical;s1=anyway delete MDS-Entry/CGROVE-35/R-45899;tag=3",
    );
    let m = user1.request(&review(4));
    assert_reply(
        &m,
        "TRANSACTIONFAILED",
        &[
            ("namespace", "Clinical"),
            ("failed", "2"),
            ("error", "failed"),
            ("tag", "4"),
        ],
    );

    // User 2 is done: user 1 reviews, alone.
    let m = user2.request(
        "TRANSACTION namespace=Clinical;s1=anyway delete MDS-Entry/CGROVE-35/R-45899;tag=5",
    );
    check(&m, "TRANSACTIONOK", ok("5", "1"));
    let m = user1.request(&review(6));
    check(&m, "TRANSACTIONOK", ok("6", "1,1,1"));
    let m = user2.request(&review(7));
    assert_reply(
        &m,
        "TRANSACTIONFAILED",
        &[("failed", "3"), ("error", "failed")],
    );
    let m = user2.request(&entry(8));
    assert_reply(
        &m,
        "TRANSACTIONFAILED",
        &[("failed", "2"), ("error", "failed")],
    );

    // The reviewer's connection ends: its review vanishes with it.
    drop(user1);
    let mut tries = 0;
    loop {
        let m = user2.request(&entry(9));
        if m.command == "TRANSACTIONOK" {
            check(&m, "TRANSACTIONOK", ok("9", "1,1,1"));
            break;
        }
        tries += 1;
        assert!(tries < 200, "the review outlived its connection: {m}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn a_malformed_transaction_keeps_the_connection_open() {
    let (_dir, agent) = start("txbad", |_| {});
    let mut c = Client::connect(agent.socket());
    let m = c.request("TRANSACTION namespace=n;s1=exists A;s2=frob B;tag=1");
    assert_reply(
        &m,
        "TRANSACTIONFAILED",
        &[("failed", "2"), ("error", "invalid"), ("tag", "1")],
    );
    let m = c.request("TRANSACTION namespace=n;s1=set A;tag=2");
    assert_reply(&m, "TRANSACTIONOK", &[("results", "1"), ("tag", "2")]);
}
