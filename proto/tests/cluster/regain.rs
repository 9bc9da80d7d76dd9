//! What an owner says again to a home whose link came (back) up.

use crate::net::Net;
use std::time::Duration;

/// When a link comes back up, the owner says the home's tickets again, a
/// `report_step` at a time (here 4 of 24): the home answers for the ones
/// it let go while their `UNLOCK`s were lost, wherever they fall in the
/// walk, and the owner frees those names; the ones still held stay held.
#[test]
fn tickets_said_again_in_steps_after_a_link_comes_back_free_what_was_let_go() {
    const N: usize = 24;
    let mut net = Net::with_report_step(3, 21, 4);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let (owner, home) = (0, 1);
    let names: Vec<String> = (0..N)
        .map(|k| net.name_owned_by(&format!("again{k}x"), owner))
        .collect();
    let c = net.open(home);
    for (k, n) in names.iter().enumerate() {
        net.send(c, &format!("LOCK object_name={n};duration=600;tag={k}"));
    }
    for _ in 0..N {
        let got = net.wait_reply(c, Duration::from_secs(5)).expect("granted");
        assert_eq!(got.command, "LOCKED", "{got}");
    }
    // Every other name is let go, and the home's UNLOCKs are lost.
    net.lose(home, "UNLOCK", N / 2);
    for (k, n) in names.iter().enumerate().filter(|(k, _)| k % 2 == 0) {
        net.send(c, &format!("UNLOCK object_name={n};tag={k}"));
        let got = net.wait_reply(c, Duration::from_secs(1)).expect("answered");
        assert_eq!(got.command, "UNLOCKED", "{got}");
    }
    net.run_for(Duration::from_millis(200));
    // The link breaks and comes back: the owner walks the home's tickets
    // and says each grant again.
    let told = net.count(home, "LOCKED");
    net.cut(home, owner);
    net.join(home, owner);
    let free = net.open(2);
    let busy = net.open(2);
    let soon = net.wall_secs() as u64 + 3;
    for (k, n) in names.iter().enumerate() {
        let (conn, timeout) = if k % 2 == 0 {
            (free, 1_800_000_500)
        } else {
            (busy, soon)
        };
        net.send(
            conn,
            &format!("LOCK object_name={n};duration=60;timeout={timeout};tag={k}"),
        );
    }
    for _ in 0..N / 2 {
        let got = net
            .wait_reply(free, Duration::from_secs(3))
            .expect("a name let go is granted again");
        assert_eq!(got.command, "LOCKED", "{got}");
    }
    for _ in 0..N / 2 {
        let got = net
            .wait_reply(busy, Duration::from_secs(6))
            .expect("a held name's request ends at its deadline");
        assert_eq!(got.command, "LOCKFAILED", "{got}");
    }
    assert!(
        net.count(home, "LOCKED") - told >= N,
        "every grant said again"
    );
}
