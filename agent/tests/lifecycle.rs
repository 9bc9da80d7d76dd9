//! Connections and leases over time: disconnects, half-closed sockets,
//! detached locks, lease expiry.

mod common;

use std::net::Shutdown;
use std::time::Duration;

use common::{Client, assert_reply, deadline_in, fence, now, start};

#[test]
fn a_fully_closed_connection_releases_its_lock_at_once() {
    let (_dir, agent) = start("close", |_| {});
    let mut holder = Client::connect(agent.socket());
    let mut waiter = Client::connect(agent.socket());
    let first = fence(&holder.request("LOCK object_name=c;duration=600"));
    waiter.send(&format!("LOCK object_name=c;timeout={}", deadline_in(10.0)));
    waiter.assert_silent_for(Duration::from_millis(200));
    let t0 = now();
    drop(holder);
    let second = fence(&waiter.recv());
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "released after {:?}",
        t0.elapsed()
    );
    assert!(second > first);
}

#[test]
fn a_closed_connection_cancels_its_waiting_requests() {
    let (_dir, agent) = start("cancel", |_| {});
    let mut holder = Client::connect(agent.socket());
    let mut quitter = Client::connect(agent.socket());
    let mut third = Client::connect(agent.socket());
    holder.request("LOCK object_name=q");
    quitter.send(&format!("LOCK object_name=q;timeout={}", deadline_in(10.0)));
    quitter.assert_silent_for(Duration::from_millis(100));
    third.send(&format!("LOCK object_name=q;timeout={}", deadline_in(10.0)));
    third.assert_silent_for(Duration::from_millis(100));
    drop(quitter);
    holder.request("UNLOCK object_name=q");
    assert_reply(&third.recv(), "LOCKED", &[("object_name", "q")]);
}

#[test]
fn a_half_closed_client_still_receives_a_locked_that_comes_later() {
    let (_dir, agent) = start("half", |_| {});
    let mut holder = Client::connect(agent.socket());
    holder.request("LOCK object_name=h");
    // What `printf 'LOCK ...\n' | socat -t 3 - UNIX-CONNECT:sock` does: send,
    // then shutdown(SHUT_WR) when stdin ends, then keep reading.
    let mut oneshot = Client::connect(agent.socket());
    oneshot.send(&format!(
        "LOCK object_name=h;detach=true;timeout={}",
        deadline_in(10.0)
    ));
    oneshot.stream.shutdown(Shutdown::Write).unwrap();
    oneshot.assert_silent_for(Duration::from_secs(1));
    holder.request("UNLOCK object_name=h");
    assert_reply(&oneshot.recv(), "LOCKED", &[("object_name", "h")]);
    // Its detached lock is held after it is gone for good.
    drop(oneshot);
    assert_reply(
        &holder.request("LOCK object_name=h;try=true"),
        "LOCKFAILED",
        &[("error", "busy")],
    );
}

#[test]
fn a_half_closed_client_gets_its_replies_and_stays_connected() {
    let (_dir, agent) = start("halfinfo", |_| {});
    let mut c = Client::connect(agent.socket());
    c.send("LOCKSTATUS");
    c.stream.write_all_unterminated(b"INFO");
    c.stream.shutdown(Shutdown::Write).unwrap();
    assert_reply(&c.recv(), "LOCKREADY", &[]);
    assert_reply(&c.recv(), "STATUS", &[("clients", "1")]);
    c.assert_silent_for(Duration::from_millis(300));
}

#[test]
fn a_half_closed_waiter_whose_peer_then_closes_is_cancelled_at_once() {
    let (_dir, agent) = start("halfgone", |_| {});
    let mut holder = Client::connect(agent.socket());
    holder.request("LOCK object_name=g");
    let mut gone = Client::connect(agent.socket());
    gone.send(&format!("LOCK object_name=g;timeout={}", deadline_in(10.0)));
    gone.stream.shutdown(Shutdown::Write).unwrap();
    gone.assert_silent_for(Duration::from_millis(200));
    drop(gone);
    std::thread::sleep(Duration::from_millis(200));
    let mut other = Client::connect(agent.socket());
    other.send(&format!("LOCK object_name=g;timeout={}", deadline_in(10.0)));
    holder.request("UNLOCK object_name=g");
    assert_reply(&other.recv(), "LOCKED", &[("object_name", "g")]);
    assert_reply(&holder.request("INFO"), "STATUS", &[("clients", "2")]);
}

#[test]
fn a_detached_lock_survives_its_connection_and_is_unlocked_by_pid_from_another() {
    let (_dir, agent) = start("detach", |_| {});
    let mut a = Client::connect(agent.socket());
    assert_reply(
        &a.request("LOCK object_name=d;detach=true;pid=77"),
        "LOCKED",
        &[("key", "localhost/77")],
    );
    drop(a);
    std::thread::sleep(Duration::from_millis(100));
    let mut c = Client::connect(agent.socket());
    assert_reply(
        &c.request("LOCK object_name=d;try=true"),
        "LOCKFAILED",
        &[("error", "busy")],
    );
    let mut b = Client::connect(agent.socket());
    assert_reply(
        &b.request("UNLOCK object_name=d;pid=77"),
        "UNLOCKED",
        &[("object_name", "d")],
    );
    assert_reply(&c.request("LOCK object_name=d;try=true"), "LOCKED", &[]);
}

#[test]
fn an_expired_lease_is_told_timedout_and_the_next_grant_waits_unlock_duration() {
    let (_dir, agent) = start("expiry", |_| {});
    let mut holder = Client::connect(agent.socket());
    let mut waiter = Client::connect(agent.socket());
    let t0 = now();
    let first = fence(&holder.request("LOCK object_name=x;duration=1;unlock_duration=1"));
    waiter.send(&format!("LOCK object_name=x;timeout={}", deadline_in(10.0)));
    assert_reply(
        &holder.recv(),
        "UNLOCKED",
        &[("object_name", "x"), ("error", "timedout")],
    );
    let told = t0.elapsed();
    assert!(
        told >= Duration::from_millis(950) && told < Duration::from_millis(1800),
        "told after {told:?}"
    );
    let second = fence(&waiter.recv());
    let granted = t0.elapsed();
    assert!(
        granted >= Duration::from_millis(1950) && granted < Duration::from_millis(3000),
        "granted after {granted:?}"
    );
    assert!(second > first);
}

#[test]
fn with_no_unlock_duration_the_next_grant_comes_at_expiry() {
    let (_dir, agent) = start("expiry0", |_| {});
    let mut holder = Client::connect(agent.socket());
    let mut waiter = Client::connect(agent.socket());
    let t0 = now();
    holder.request("LOCK object_name=z;duration=1;unlock_duration=0");
    waiter.send(&format!("LOCK object_name=z;timeout={}", deadline_in(10.0)));
    assert_reply(&holder.recv(), "UNLOCKED", &[("error", "timedout")]);
    fence(&waiter.recv());
    let granted = t0.elapsed();
    assert!(
        granted >= Duration::from_millis(950) && granted < Duration::from_millis(1800),
        "granted after {granted:?}"
    );
}

#[test]
fn an_expired_holder_may_still_unlock_early_to_hand_over() {
    let (_dir, agent) = start("expiryunlock", |_| {});
    let mut holder = Client::connect(agent.socket());
    let mut waiter = Client::connect(agent.socket());
    let t0 = now();
    holder.request("LOCK object_name=u;duration=1;unlock_duration=30");
    waiter.send(&format!("LOCK object_name=u;timeout={}", deadline_in(10.0)));
    assert_reply(&holder.recv(), "UNLOCKED", &[("error", "timedout")]);
    holder.request("UNLOCK object_name=u");
    fence(&waiter.recv());
    assert!(t0.elapsed() < Duration::from_secs(3));
}

/// Writes without a trailing newline.
trait WriteRaw {
    fn write_all_unterminated(&mut self, bytes: &[u8]);
}

impl WriteRaw for std::os::unix::net::UnixStream {
    fn write_all_unterminated(&mut self, bytes: &[u8]) {
        std::io::Write::write_all(self, bytes).unwrap();
    }
}

#[test]
fn stopping_waits_at_most_about_a_second_for_clients_that_do_not_read() {
    let (dir, agent) = start("stopslow", |cfg| cfg.max_pending_output = 64 << 20);
    let mut slow = Client::connect(agent.socket());
    // About 2 MB of replies, far beyond what the socket buffers hold (and
    // within max_pending_output), never read.
    let burst = "INFO\n".repeat(10_000);
    std::io::Write::write_all(&mut slow.stream, burst.as_bytes()).unwrap();
    let mut probe = Client::connect(agent.socket());
    assert_reply(&probe.request("LOCKSTATUS"), "LOCKREADY", &[]);
    std::thread::sleep(Duration::from_millis(300));
    let t0 = now();
    agent.stop().expect("a clean stop");
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(2500),
        "stop took {took:?}"
    );
    assert!(!dir.socket().exists());
    drop(slow);
}

#[test]
fn an_agent_asked_to_stop_before_it_runs_stops_at_once() {
    let dir = common::TempDir::new("early");
    let control = snaplock_agent::Control::in_process();
    control.handle().stop();
    let t0 = now();
    snaplock_agent::run(snaplock_agent::AgentConfig::new(dir.socket()), control)
        .expect("a clean stop");
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "took {:?}",
        t0.elapsed()
    );
    assert!(!dir.socket().exists());
}
