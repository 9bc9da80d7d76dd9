//! `lock NAME COMMAND`: lock, run, renew, unlock, like flock(1), but for a
//! lease that must never be outlived. The supervision is [`supervise`],
//! shared with `tx ... -- COMMAND` ([`tx`](crate::tx)): what is held, a
//! lock or the variables of a transaction, is a [`Held`].
//!
//! ```text
//!   LOCK ──LOCKED──▶ Holding ──group ended──▶ UNLOCK, exit with the command's status
//!                       │  (EXTEND every lease/3; SIGINT/TERM/HUP passed on)
//!                       │ lock lost: UNLOCKED error=..., LOCKFAILED to EXTEND,
//!                       │ connection closed, no renewal or ALIVE answer in
//!                       │ time, the agent out of contact with the cluster
//!                       ▼
//!                   Stopping (SIGTERM sent) ──grace──▶ Killed (SIGKILL sent)
//!                       └──────command's group ended──────┴──▶ exit 75
//! ```
//!
//! The command runs under a guard process ([`guard`]), in a
//! process group of its own: signals go to the group, which has ended
//! when no process of it is left (the guard then reports and exits).
//!
//! One thread: `poll` on a signalfd (SIGCHLD tells the command exited; the
//! other signals are forwarded) and on the agent's socket, with a timeout
//! for the next renewal or stop deadline.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use nix::sys::signalfd::{SfdFlags, SigSet, SignalFd};
use snaplock_client::wire::Message;
use snaplock_client::{Client, Error, Grant, LockOptions, Mode, clock, extend_message, tag_of};

use crate::args::LockArgs;
use crate::exit;
use crate::guard::{self, Guarded};
use crate::spawn::{self, Ended};

/// How long the command has between SIGTERM and SIGKILL.
pub fn grace(lease: Duration) -> Duration {
    (lease / 4).min(Duration::from_secs(5))
}

/// Slack kept before the lease end for the SIGKILL to take effect.
pub fn margin(lease: Duration) -> Duration {
    (lease / 10).min(Duration::from_secs(1))
}

/// In a cluster, the grace and margin also fit in what the agent vouches
/// for while in contact (`span`, the longest `valid_for` heard): together
/// at most half of it, so that the other half covers the pings.
pub fn vouched_grace(lease: Duration, span: Duration) -> (Duration, Duration) {
    (grace(lease).min(span * 2 / 5), margin(lease).min(span / 10))
}

/// When the lease ends, on the monotonic clock, for a grant whose request
/// was sent at `sent` and answered at `received`. The agent started the
/// lease between the two, so the end lies in `[sent, received] + lease`;
/// within that, `timeout_date` (`date_left` µs after the wall clock read at
/// `received`) says where, since the agent is on this computer's clock.
pub fn lease_end(date_left: i128, sent: Instant, received: Instant, lease: Duration) -> Instant {
    let by_date = if date_left >= 0 {
        received.checked_add(Duration::from_micros(
            u64::try_from(date_left).unwrap_or(u64::MAX),
        ))
    } else {
        received.checked_sub(Duration::from_micros(
            u64::try_from(-date_left).unwrap_or(u64::MAX),
        ))
    };
    let (earliest, latest) = (sent + lease, received + lease);
    by_date.map_or(earliest, |t| t.clamp(earliest, latest))
}

/// What a command runs under: how it is renewed, how its loss shows, how
/// it is given back.
pub trait Held {
    /// How it is named in messages, such as `lock "x"`.
    fn name(&self) -> &str;
    /// The request that renews it for the lease again, tagged `tag`.
    fn renewal(&self, tag: i64) -> Message;
    /// Reads the reply to a renewal: the microseconds from now to the new
    /// end of the lease by the agent's date, when the reply has one (else
    /// the lease counts from when the renewal was sent); or why it is lost.
    fn renewed(&self, reply: &Message) -> Result<Option<i128>, String>;
    /// Why a message the agent sent unasked means it is gone, if it does.
    fn lost_by(&self, msg: &Message) -> Option<String>;
    /// Gives it back explicitly once the command ended; closing the
    /// connection gives it back anyway.
    fn release(&self, client: &mut Client);
}

/// A lock held by `lock`.
struct HeldLock<'a> {
    object: &'a [u8],
    display: String,
    fence: u64,
    lease: Duration,
}

impl Held for HeldLock<'_> {
    fn name(&self) -> &str {
        &self.display
    }

    fn renewal(&self, tag: i64) -> Message {
        extend_message(self.object, self.lease, tag, None)
    }

    fn renewed(&self, reply: &Message) -> Result<Option<i128>, String> {
        match Grant::from_reply(reply) {
            Ok(grant) if grant.fence == self.fence => {
                Ok(Some(grant.timeout_date.micros_since(clock::wall())))
            }
            Ok(_) => Err("the agent renewed the lease with another fence".to_owned()),
            Err(e) => Err(format!("lease renewal: {e}")),
        }
    }

    fn lost_by(&self, msg: &Message) -> Option<String> {
        let about_ours = msg.get("object_name") == Some(self.object);
        match msg.command.as_str() {
            "UNLOCKED" | "LOCKFAILED" if about_ours => {
                let error = msg.get_str("error").unwrap_or("released");
                Some(format!("the agent says {} ({error})", msg.command))
            }
            _ => None,
        }
    }

    fn release(&self, client: &mut Client) {
        // Closing the connection releases the lock anyway; the UNLOCK only
        // makes it explicit, so it does not wait long.
        client.set_reply_timeout(Duration::from_secs(1));
        let _ = client.unlock(self.object);
    }
}

/// Locks, runs the command, and returns the exit status.
pub fn lock_and_run(client: &mut Client, args: &LockArgs) -> u8 {
    let opts = LockOptions {
        // A `timeout=` of now fails before `try=true` is considered, so a
        // try-once request keeps the agent's default deadline.
        wait: (!args.try_once).then_some(args.wait),
        duration: Some(args.lease),
        mode: if args.counted.is_some() {
            Mode::Counted
        } else if args.shared {
            Mode::Shared
        } else {
            Mode::Exclusive
        },
        limit: args.counted,
        try_once: args.try_once,
        min_uptime: args.min_uptime,
        min_trust: args.min_trust,
        owner_cgroup: args.unit,
        ..LockOptions::default()
    };
    let name = String::from_utf8_lossy(&args.name).into_owned();
    let sent = clock::monotonic();
    let locked = if args.verbose {
        client.lock_with_progress(&args.name, &opts, &mut |w| {
            eprintln!("snaplock-cli: {}", describe_waiting(&name, w));
        })
    } else {
        client.lock(&args.name, &opts)
    };
    let grant = match locked {
        Ok(grant) => grant,
        // Silent, as flock(1): the status says it, and a cron job that
        // finds the lock taken (-n) has nothing to report.
        Err(e) if e.is_refused("busy") => return args.conflict_code,
        // A wait that ends is worth a word: it may have been the default.
        Err(e) if exit::is_conflict(&e) => {
            eprintln!(
                "snaplock-cli: lock \"{name}\" not obtained: still taken after waiting {} s (-w)",
                snaplock_proto::time::duration_to_wire(args.wait)
            );
            return args.conflict_code;
        }
        Err(e) => {
            eprintln!("snaplock-cli: error: lock \"{name}\" not obtained: {e}");
            return exit::of_error(&e, args.conflict_code);
        }
    };
    let received = clock::monotonic();
    let date_left = grant.timeout_date.micros_since(clock::wall());
    let fence = grant.fence.to_string();
    let date = grant.timeout_date.to_wire();
    let vars = [
        ("SNAPLOCK_OBJECT", grant.object.as_slice()),
        ("SNAPLOCK_FENCE", fence.as_bytes()),
        ("SNAPLOCK_TIMEOUT_DATE", date.as_bytes()),
    ];
    let held = HeldLock {
        object: &args.name,
        display: format!("lock \"{name}\""),
        fence: grant.fence,
        lease: args.lease,
    };
    let end = lease_end(date_left, sent, received, args.lease);
    supervise(client, &held, args.lease, end, &args.command, &vars)
}

/// A `LOCKWAITING` for a reader: `lock "NAME": waiting, position 2 (1 is
/// next)`, with the reason and, for a lock-delay, its end as a UTC date.
fn describe_waiting(name: &str, w: &snaplock_client::Waiting) -> String {
    let mut line = format!(
        "lock \"{name}\": waiting, position {} (1 is next)",
        w.position
    );
    if let Some(reason) = &w.reason {
        line.push_str(", ");
        line.push_str(reason);
        if let Some(until) = w.until {
            line.push_str(&format!(" until {} UTC", until.to_utc_string()));
        }
    }
    line
}

/// Runs `command` with `vars` added to its environment while `held` is
/// held, renewing it so that its lease, which ends at `lease_end` now,
/// ends `lease` after each renewal; returns the exit status: the
/// command's, or [`exit::LOST`] when `held` was lost and the command
/// stopped. What is held is given back (`Held::release`) when the command
/// ends or cannot start.
pub fn supervise(
    client: &mut Client,
    held: &dyn Held,
    lease: Duration,
    lease_end: Instant,
    command: &[OsString],
    vars: &[(&str, &[u8])],
) -> u8 {
    // Block the signals before the command exists, so none is missed; the
    // command itself starts with an empty mask (see `spawn`).
    let mut mask = SigSet::empty();
    for sig in [
        Signal::SIGCHLD,
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        // Still continues this process; read to know it was stopped.
        Signal::SIGCONT,
    ] {
        mask.add(sig);
    }
    let signals = match mask
        .thread_block()
        .and_then(|()| SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC))
    {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("snaplock-cli: error: cannot watch signals: {e}");
            return exit::SOFTWARE;
        }
    };
    let started = match guard::start(command, vars) {
        Ok(started) => started,
        Err(e) => {
            let e = std::io::Error::from(e);
            let program = spawn::program_name(command);
            eprintln!("snaplock-cli: error: cannot run {program}: {e}");
            held.release(client);
            return exit::of_spawn_error(&e);
        }
    };
    let now = clock::monotonic();
    let mut sup = Supervisor {
        client,
        held,
        lease,
        command: started,
        signals,
        lease_end,
        next_renew: lease_end.checked_sub(lease * 2 / 3).unwrap_or(now),
        pending: None,
        vouched: None,
        span: Duration::ZERO,
        alive: None,
        next_alive: now,
        socket_open: true,
        phase: Phase::Holding,
    };
    sup.run()
}

enum Phase {
    /// The lock is held and renewed; the command runs.
    Holding,
    /// The lock is lost; the command got SIGTERM and gets SIGKILL at `kill_at`.
    Stopping { kill_at: Instant },
    /// The command got SIGKILL; waiting for it to be gone.
    Killed,
}

struct Supervisor<'a> {
    client: &'a mut Client,
    held: &'a dyn Held,
    lease: Duration,
    /// The command, its process group and its guard (the child to reap).
    command: Guarded,
    signals: SignalFd,
    /// When the lease ends, at the earliest.
    lease_end: Instant,
    next_renew: Instant,
    /// The renewal in flight: its tag and when it was sent.
    pending: Option<(i64, Instant)>,
    /// In a cluster: until when the agent vouches for its locks (its
    /// `valid_for` answer to ALIVE, counted from when ALIVE was sent) and
    /// that `valid_for`; the longest `valid_for` heard (what it vouches for
    /// while in contact); the ALIVE in flight, and when to send the next.
    vouched: Option<(Instant, Duration)>,
    span: Duration,
    alive: Option<(i64, Instant)>,
    next_alive: Instant,
    socket_open: bool,
    phase: Phase,
}

impl Supervisor<'_> {
    fn run(&mut self) -> u8 {
        loop {
            self.on_timers();
            let listen = matches!(self.phase, Phase::Holding) && self.socket_open;
            // Lines already read would not wake poll: look at them at once.
            let buffered = listen && self.client.has_buffered();
            let timeout = match self.wake_at() {
                _ if buffered => PollTimeout::ZERO,
                None => PollTimeout::NONE,
                Some(at) => poll_timeout(at.saturating_duration_since(clock::monotonic())),
            };
            let (signalled, readable) = self.wait(timeout, listen);
            let readable = readable || buffered;
            let child_changed = self.on_signals(signalled);
            if readable && matches!(self.phase, Phase::Holding) {
                self.on_socket();
            }
            if child_changed {
                match spawn::try_reap(self.command.guard) {
                    Ok(Some(Ended::Code(0))) => match self.command.ended() {
                        Some(ended) => return self.finish(ended),
                        None => return self.guard_failed("it did not report"),
                    },
                    Ok(Some(ended)) => return self.guard_failed(&format!("{ended:?}")),
                    Ok(None) => {}
                    Err(e) => return self.guard_failed(&e.to_string()),
                }
            }
        }
    }

    /// Polls the signalfd and, when `socket`, the agent's socket; returns
    /// which of them are readable.
    fn wait(&self, timeout: PollTimeout, socket: bool) -> (bool, bool) {
        let mut fds = vec![PollFd::new(self.signals.as_fd(), PollFlags::POLLIN)];
        if socket {
            fds.push(PollFd::new(self.client.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, timeout) {
            Ok(_) => {
                let ready = |fd: &PollFd<'_>| fd.revents().is_some_and(|r| !r.is_empty());
                (ready(&fds[0]), fds.get(1).is_some_and(ready))
            }
            Err(Errno::EINTR) => (false, false),
            // poll on two valid descriptors does not fail otherwise; look
            // at the signals anyway rather than spin.
            Err(_) => (true, false),
        }
    }

    /// The next deadline the loop must wake for.
    fn wake_at(&self) -> Option<Instant> {
        match self.phase {
            Phase::Holding => {
                let mut at = self.stop_at().0;
                if self.pending.is_none() {
                    at = at.min(self.next_renew);
                }
                if self.alive.is_none() {
                    at = at.min(self.next_alive);
                }
                Some(at)
            }
            Phase::Stopping { kill_at } => Some(kill_at),
            Phase::Killed => None,
        }
    }

    /// The grace between SIGTERM and SIGKILL, and the margin kept for the
    /// SIGKILL to act, before the end of what the agent vouches for.
    fn vouch_grace(&self) -> (Duration, Duration) {
        vouched_grace(self.lease, self.span)
    }

    /// Without news from the agent, the command is stopped from here on,
    /// so that the whole grace fits, and even the SIGKILL comes, before the
    /// lease could end, or what the agent vouches for ends. The reason goes
    /// with it.
    fn stop_at(&self) -> (Instant, &'static str) {
        let early = grace(self.lease) + margin(self.lease);
        let by_lease = self.lease_end.checked_sub(early).unwrap_or(self.lease_end);
        let Some((until, _)) = self.vouched else {
            return (by_lease, RENEWAL_LATE);
        };
        let (g, m) = self.vouch_grace();
        let by_vouch = until.checked_sub(g + m).unwrap_or(until);
        let unanswered = self.alive.is_some_and(|(_, sent)| {
            clock::monotonic().saturating_duration_since(sent) > ALIVE_SLOW
        });
        if by_lease <= by_vouch {
            (by_lease, RENEWAL_LATE)
        } else if unanswered {
            (by_vouch, ALIVE_LATE)
        } else {
            // The agent answers, but what it vouches for does not move on:
            // it has not heard from a majority of the cluster.
            (by_vouch, CONTACT_LOST)
        }
    }

    /// The latest the command may still run: the lease's end, or the end of
    /// what the agent vouched for, less the margin for SIGKILL to act.
    fn hard_end(&self) -> Instant {
        let by_lease = self
            .lease_end
            .checked_sub(margin(self.lease))
            .unwrap_or(self.lease_end);
        match self.vouched {
            Some((until, _)) => {
                let (_, m) = self.vouch_grace();
                by_lease.min(until.checked_sub(m).unwrap_or(until))
            }
            None => by_lease,
        }
    }

    /// The grace the command gets from now.
    fn grace_now(&self) -> Duration {
        match self.vouched {
            Some(_) => self.vouch_grace().0,
            None => grace(self.lease),
        }
    }

    fn on_timers(&mut self) {
        let now = clock::monotonic();
        match self.phase {
            Phase::Holding if now >= self.stop_at().0 => {
                let why = self.stop_at().1;
                self.lose(why);
            }
            Phase::Holding if self.pending.is_none() && now >= self.next_renew => {
                let tag = self.client.new_tag();
                match self.client.send(&self.held.renewal(tag)) {
                    Ok(()) => self.pending = Some((tag, now)),
                    Err(e) => {
                        self.socket_open = false;
                        self.lose(&format!("cannot renew the lease: {e}"));
                    }
                }
            }
            Phase::Holding if self.alive.is_none() && now >= self.next_alive => {
                let tag = self.client.new_tag();
                let ping = Message::new("ALIVE").with("serial", tag.to_string());
                match self.client.send(&ping) {
                    Ok(()) => self.alive = Some((tag, now)),
                    Err(e) => {
                        self.socket_open = false;
                        self.lose(&format!("cannot reach the agent: {e}"));
                    }
                }
            }
            Phase::Stopping { kill_at } if now >= kill_at => {
                self.command.signal_group(Signal::SIGKILL);
                self.phase = Phase::Killed;
            }
            _ => {}
        }
    }

    /// Reads the signals; forwards the ones meant for the command. Returns
    /// whether SIGCHLD came.
    fn on_signals(&mut self, readable: bool) -> bool {
        let mut child_changed = false;
        if !readable {
            return false;
        }
        // Bounded: the signalfd holds at most one of each pending signal.
        for _ in 0..64 {
            let Ok(Some(info)) = self.signals.read_signal() else {
                break;
            };
            match Signal::try_from(info.ssi_signo as i32) {
                Ok(Signal::SIGCHLD) => child_changed = true,
                Ok(Signal::SIGCONT) => self.on_continued(),
                Ok(sig) => self.command.signal_group(sig),
                Err(_) => {}
            }
        }
        child_changed
    }

    /// `fg` or `bg` after a job-control stop: the command goes on only if
    /// the lock is still held long enough for its grace; else the timers
    /// stop it.
    fn on_continued(&mut self) {
        if matches!(self.phase, Phase::Holding) && clock::monotonic() < self.stop_at().0 {
            self.command.permit_resume();
        }
    }

    /// Reads what the agent sent; anything that says the lock is gone, or
    /// that cannot be understood, stops the command.
    fn on_socket(&mut self) {
        // Bounded: a well-behaved agent sends at most a few lines here.
        for _ in 0..1000 {
            match self.client.recv(Some(Duration::ZERO)) {
                Ok(Some(msg)) => {
                    if let Some(why) = self.on_message(&msg) {
                        return self.lose(&why);
                    }
                }
                Ok(None) => return,
                Err(e @ (Error::Closed | Error::Io(_))) => {
                    self.socket_open = false;
                    return self.lose(&format!("connection to the agent: {e}"));
                }
                Err(e) => return self.lose(&e.to_string()),
            }
        }
    }

    /// Handles one message while holding; `Some(why)` when the lock is lost.
    fn on_message(&mut self, msg: &Message) -> Option<String> {
        let tag = tag_of(msg);
        if let Some((want, sent)) = self.pending {
            if tag == Some(want) {
                self.pending = None;
                let received = clock::monotonic();
                return match self.held.renewed(msg) {
                    Ok(date_left) => {
                        self.renewed(date_left, sent, received);
                        None
                    }
                    Err(why) => Some(why),
                };
            }
        }
        if msg.command == "ABSOLUTELY" {
            let serial = msg.get_str("serial").and_then(|s| s.parse::<i64>().ok());
            if let Some((want, sent)) = self.alive {
                if serial == Some(want) {
                    self.alive = None;
                    // One computer alone says nothing: its lease is the limit.
                    // A cluster agent vouches for a while; ask again well
                    // before that runs out.
                    let Some(left) = msg.get("valid_for").and_then(parse_secs) else {
                        self.next_alive = sent + self.lease / 3;
                        return None;
                    };
                    self.vouched = Some((sent + left, left));
                    self.span = self.span.max(left);
                    self.next_alive = sent + (left / 5).max(Duration::from_millis(100));
                }
            }
            return None;
        }
        self.held.lost_by(msg)
    }

    /// A renewal sent at `sent` was confirmed at `received`; `date_left` as
    /// [`Held::renewed`] gives it.
    fn renewed(&mut self, date_left: Option<i128>, sent: Instant, received: Instant) {
        self.lease_end = match date_left {
            Some(left) => lease_end(left, sent, received, self.lease),
            None => sent + self.lease,
        };
        self.next_renew = self
            .lease_end
            .checked_sub(self.lease * 2 / 3)
            .unwrap_or(received);
    }

    /// What was held is gone: SIGTERM now to the command's whole process group,
    /// SIGKILL after the grace.
    fn lose(&mut self, why: &str) {
        if !matches!(self.phase, Phase::Holding) {
            return;
        }
        eprintln!(
            "snaplock-cli: error: {} lost: {why}; stopping the command",
            self.held.name()
        );
        let now = clock::monotonic();
        let kill_at = (now + self.grace_now()).min(self.hard_end());
        if kill_at <= now {
            // No time left for a grace (snaplock-cli was stopped, say):
            // a stopped command must not run again, even to exit.
            self.command.signal_group(Signal::SIGKILL);
            self.phase = Phase::Killed;
            return;
        }
        self.command.signal_group(Signal::SIGTERM);
        // A command stopped by job control acts on SIGTERM only once
        // continued.
        self.command.signal_group(Signal::SIGCONT);
        self.phase = Phase::Stopping { kill_at };
    }

    /// The guard ended without saying how the command ended: nothing
    /// watches the command's group any more, so it is killed.
    fn guard_failed(&mut self, how: &str) -> u8 {
        eprintln!(
            "snaplock-cli: error: the command's guard process failed ({how}); killing the command"
        );
        // The lock is released when this process exits: not before the
        // group is gone, as far as the bound allows.
        if !self.command.kill_group_and_wait(Duration::from_secs(5)) {
            eprintln!(
                "snaplock-cli: error: processes of the command are still there after SIGKILL"
            );
        }
        exit::SOFTWARE
    }

    fn finish(&mut self, ended: Ended) -> u8 {
        match self.phase {
            Phase::Holding => {
                if self.socket_open {
                    self.held.release(self.client);
                }
                exit::of_status(ended)
            }
            Phase::Stopping { .. } | Phase::Killed => exit::LOST,
        }
    }
}

/// An agent on this computer answers ALIVE in well under this.
const ALIVE_SLOW: Duration = Duration::from_millis(100);
const RENEWAL_LATE: &str = "the agent did not confirm the lease renewal in time";
const ALIVE_LATE: &str =
    "the agent did not confirm in time that it still vouches for the lock (ALIVE)";
const CONTACT_LOST: &str = "the agent lost contact with the rest of the cluster: \
     what it vouches for (ALIVE valid_for) runs out";

/// A duration in seconds as the protocol writes it (`1.5`).
fn parse_secs(v: &[u8]) -> Option<Duration> {
    let s = std::str::from_utf8(v).ok()?;
    let secs: f64 = s.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)))
}

/// `d` in whole milliseconds, rounded up so poll never wakes before it.
fn poll_timeout(d: Duration) -> PollTimeout {
    let ms = d.as_micros().div_ceil(1000);
    PollTimeout::try_from(ms.min(i32::MAX as u128)).unwrap_or(PollTimeout::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_end_follows_the_agents_date_within_what_is_possible() {
        let sent = clock::monotonic();
        let received = sent + Duration::from_secs(3);
        let lease = Duration::from_secs(10);
        let at = |secs: f64| lease_end((secs * 1e6) as i128, sent, received, lease);
        // The date says 9.5 s from receipt: the grant came at 2.5 s.
        assert_eq!(at(9.5), received + Duration::from_millis(9500));
        // Never later than a lease from receipt, never earlier than one
        // from sending, whatever the wall clock says.
        assert_eq!(at(60.0), received + lease);
        assert_eq!(at(1.0), sent + lease);
        assert_eq!(at(-5.0), sent + lease);
    }

    #[test]
    fn the_grace_and_margin_fit_in_the_lease() {
        for secs in [1, 2, 10, 60, 604_800] {
            let lease = Duration::from_secs(secs);
            assert!(grace(lease) + margin(lease) < lease / 2, "{secs}");
            assert!(grace(lease) <= Duration::from_secs(5));
        }
        assert_eq!(grace(Duration::from_secs(2)), Duration::from_millis(500));
        assert_eq!(margin(Duration::from_secs(2)), Duration::from_millis(200));
    }

    #[test]
    fn in_a_cluster_the_grace_and_margin_take_half_of_the_vouch_at_most() {
        let s = Duration::from_secs;
        // The default agent grace (5 s) and a lease of 8 s: 2 s and 0.5 s.
        assert_eq!(
            vouched_grace(s(8), s(5)),
            (s(2), Duration::from_millis(500))
        );
        // The lease's own grace when the vouch is long.
        assert_eq!(vouched_grace(s(8), s(60)), (grace(s(8)), margin(s(8))));
        for (lease, span) in [(1, 1), (60, 5), (604_800, 1), (2, 3600)] {
            let (g, m) = vouched_grace(s(lease), s(span));
            assert!(g + m <= s(span) / 2, "{lease} {span}");
            assert!(g <= grace(s(lease)) && m <= margin(s(lease)));
        }
    }

    #[test]
    fn a_place_in_line_reads_as_a_sentence_with_its_reason_and_date() {
        let mut w = snaplock_client::Waiting {
            object: b"x".to_vec(),
            position: 2,
            reason: None,
            until: None,
        };
        assert_eq!(
            describe_waiting("x", &w),
            "lock \"x\": waiting, position 2 (1 is next)"
        );
        w.reason = Some("lock-delay".to_owned());
        w.until = Some(snaplock_client::UnixTime(1_700_000_009_500_000));
        assert_eq!(
            describe_waiting("x", &w),
            "lock \"x\": waiting, position 2 (1 is next), lock-delay until 2023-11-14 22:13:29 UTC"
        );
    }

    #[test]
    fn poll_timeouts_round_up() {
        assert_eq!(poll_timeout(Duration::ZERO), PollTimeout::ZERO);
        assert_eq!(i32::from(poll_timeout(Duration::from_micros(1))), 1);
        assert_eq!(i32::from(poll_timeout(Duration::from_millis(1500))), 1500);
        assert_eq!(
            poll_timeout(Duration::from_secs(u64::MAX / 2)),
            PollTimeout::MAX
        );
    }
}
