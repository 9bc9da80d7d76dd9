//! Silent failures (SIGSTOP) that must cost healthy agents nothing: a
//! paused leader, the conductor paused and back, an owner paused twice.
//! Revoking a healthy holder, or a name that stays taken by nobody, is
//! "safe" and still a defect; these tests fail on either.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::common::{Client, deadline_in, fence, now};
use crate::harness::Cluster;

/// The owner of `name` among `leaders` (docs/cluster.md: FNV-1a 64 of the
/// name, modulo the number of leaders).
fn owner_of<'a>(name: &str, leaders: &'a [String]) -> &'a str {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    &leaders[(h % leaders.len() as u64) as usize]
}

fn leaders(c: &Cluster) -> Vec<String> {
    let info = c.info(0);
    (info.get_str("leaders").unwrap_or(""))
        .split(',')
        .map(str::to_owned)
        .collect()
}

/// Names with three of each leader as owner: a pause then takes the owner
/// of some and a follower of the others.
fn names_over(leaders: &[String], tag: &str) -> Vec<String> {
    let mut names = Vec::new();
    for l in leaders {
        let mine = (0..10_000)
            .map(|k| format!("{tag}-{k}"))
            .filter(|n| owner_of(n, leaders) == l.as_str())
            .take(3);
        names.extend(mine);
    }
    names
}

/// Takes every name from `holder`, then queues a request for each from
/// `waiter` (none answered: the holder has them).
fn hold_and_queue(holder: &mut Client, waiter: &mut Client, names: &[String]) -> Vec<u64> {
    let mut fences = Vec::new();
    for n in names {
        holder.send(&format!("LOCK object_name={n};duration=120"));
        let got = holder.recv();
        assert_eq!(got.command, "LOCKED", "{got}");
        fences.push(fence(&got));
    }
    for n in names {
        waiter.send(&format!(
            "LOCK object_name={n};timeout={}",
            deadline_in(120.0)
        ));
    }
    waiter.assert_silent_for(Duration::from_millis(300));
    fences
}

/// Releases every name from `holder`; each must then pass to `waiter`,
/// with a larger fence.
fn release_to_waiter(holder: &mut Client, waiter: &mut Client, names: &[String], fences: &[u64]) {
    for n in names {
        holder.send(&format!("UNLOCK object_name={n}"));
        let got = holder.recv();
        assert_eq!(got.command, "UNLOCKED", "{got}");
        assert_eq!(got.get_str("error"), None, "{got}");
    }
    let mut granted = Vec::new();
    for _ in names {
        let got = waiter.recv_within(Duration::from_secs(10));
        assert_eq!(got.command, "LOCKED", "{got}");
        let name = got.get_str("object_name").unwrap().to_owned();
        let k = names.iter().position(|n| *n == name).expect("one of ours");
        assert!(fence(&got) > fences[k], "{got}");
        granted.push(name);
    }
    granted.sort();
    granted.dedup();
    assert_eq!(granted.len(), names.len());
}

#[test]
fn each_leader_paused_past_grace_costs_the_other_agents_nothing() {
    let c = Cluster::start("silent-leader", 3);
    c.wait_converged(3, Duration::from_secs(20));
    for paused in 0..3 {
        let (h, w) = ((paused + 1) % 3, (paused + 2) % 3);
        let names = names_over(&leaders(&c), &format!("s{paused}"));
        let mut holder = Client::connect(&c.socket(h));
        let mut waiter = Client::connect(&c.socket(w));
        let fences = hold_and_queue(&mut holder, &mut waiter, &names);
        let start = now();
        c.signal(paused, Signal::SIGSTOP);
        // Past the grace (5 s): the holder's agent keeps the other leader,
        // a majority. Nothing may be revoked, nothing granted.
        holder.assert_silent_for(Duration::from_secs(9));
        waiter.assert_silent_for(Duration::from_millis(10));
        c.signal(paused, Signal::SIGCONT);
        c.wait_converged(3, Duration::from_secs(30));
        holder.assert_silent_for(Duration::from_millis(500));
        waiter.assert_silent_for(Duration::from_millis(10));
        release_to_waiter(&mut holder, &mut waiter, &names, &fences);
        eprintln!(
            "node{paused} paused 9 s: 9 locks of node{h} kept, node{w}'s waiters served ({:?} in all)",
            start.elapsed()
        );
    }
}

#[test]
fn the_conductor_paused_and_back_costs_the_other_agents_nothing() {
    // The conductor is the agent with the lowest address; the ports are
    // drawn at random, so find it.
    let c = Cluster::start("conductor", 3);
    c.wait_converged(3, Duration::from_secs(20));
    let conductor = (0..3).min_by_key(|&i| c.addr(i)).expect("three agents");
    let (h, w) = ((conductor + 1) % 3, (conductor + 2) % 3);
    let names = names_over(&leaders(&c), "cond");
    let mut holder = Client::connect(&c.socket(h));
    let mut waiter = Client::connect(&c.socket(w));
    let fences = hold_and_queue(&mut holder, &mut waiter, &names);
    c.signal(conductor, Signal::SIGSTOP);
    holder.assert_silent_for(Duration::from_secs(10));
    c.signal(conductor, Signal::SIGCONT);
    // It comes back, learns the newer epoch, and conducts again: that
    // must not make the holder's agent revoke anything.
    c.wait_converged(3, Duration::from_secs(30));
    holder.assert_silent_for(Duration::from_secs(8));
    waiter.assert_silent_for(Duration::from_millis(10));
    release_to_waiter(&mut holder, &mut waiter, &names, &fences);
}

#[test]
fn an_owner_paused_twice_leaves_no_name_stuck() {
    let c = Cluster::start("double-pause", 3);
    c.wait_converged(3, Duration::from_secs(20));
    let leaders = leaders(&c);
    let owner = 2;
    let name = (0..10_000)
        .map(|k| format!("stuck-{k}"))
        .find(|n| owner_of(n, &leaders) == format!("node{owner}"))
        .expect("a name node2 owns");
    let mut holder = Client::connect(&c.socket(owner));
    holder.send(&format!("LOCK object_name={name};duration=120"));
    assert_eq!(holder.recv().command, "LOCKED");
    for (pause, gap) in [(3, 1), (3, 0)] {
        c.signal(owner, Signal::SIGSTOP);
        std::thread::sleep(Duration::from_secs(pause));
        c.signal(owner, Signal::SIGCONT);
        std::thread::sleep(Duration::from_secs(gap));
    }
    // Its own agent was the one paused: it may have revoked the lock. The
    // client leaves either way; from then on nobody holds the name.
    drop(holder);
    let start = now();
    let bound = Duration::from_secs(30);
    let mut tries = 0;
    loop {
        let mut other = Client::connect(&c.socket(0));
        let got = other.request(&format!("LOCK object_name={name};try=true"));
        tries += 1;
        if got.command == "LOCKED" {
            eprintln!(
                "free again {:?} after the client left ({tries} tries)",
                start.elapsed()
            );
            break;
        }
        assert!(
            start.elapsed() < bound,
            "{name} still refused {bound:?} after its holder left: {got}\n{}",
            c.logs()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
