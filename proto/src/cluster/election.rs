//! Elections and epochs (docs/cluster.md, "Elections"): who conducts, who
//! leads, and adopting a newer epoch.
//!
//! This file holds the part and its own logic; what the core does with it
//! on each message and tick is in `core/cluster/election.rs`.

use std::collections::BTreeSet;

use std::time::Duration;

use super::config::addr_key;
use super::{Cluster, Id, ids, links};
use crate::time::{Now, Time};

/// The current epoch, its leaders, and what the elections need to know.
#[derive(Debug)]
pub(crate) struct Epoch {
    /// The current epoch's number (0: none yet).
    pub number: u64,
    /// Its leaders' ids, in order (the first collects the handover).
    pub leaders: Vec<Id>,
    /// Digest of `leaders` ([`super::view_of`]).
    pub view: u64,
    /// When this agent moved to it.
    pub since: Time,
    /// The largest epoch seen anywhere (to draw a larger one).
    pub max_seen: u64,
    /// The epoch before the current one and its leaders, for the report.
    pub prev_number: u64,
    pub prev_leaders: Vec<Id>,
    /// When this agent last conducted an election.
    pub last_election: Option<Time>,
    /// When this agent last found it had not run for more than a
    /// `ping_interval` (paused, or busy): it does not conduct for a
    /// `peer_timeout` after, as its links may be coming back.
    pub woke: Option<Time>,
    /// The current leaders this agent had a link to since it moved to the
    /// current epoch: one of them not connected now is gone; another one
    /// counts as gone only a `peer_timeout` after the move (its link may
    /// not be up yet, e.g. after this agent was paused).
    pub linked_leaders: BTreeSet<Id>,
    /// When this agent last logged what the first election waits for.
    pub waiting_logged: Option<Time>,
}

impl Epoch {
    /// No epoch yet; `max_seen` from the record.
    pub fn new(now: Time, max_seen: u64) -> Epoch {
        Epoch {
            number: 0,
            leaders: Vec::new(),
            view: 0,
            since: now,
            max_seen,
            prev_number: 0,
            prev_leaders: Vec::new(),
            last_election: None,
            woke: None,
            linked_leaders: BTreeSet::new(),
            waiting_logged: None,
        }
    }

    /// Any epoch a peer names, current or not, bounds the next one from
    /// below: a conductor draws past every epoch fences came from.
    pub fn note_seen(&mut self, epoch: u64) {
        self.max_seen = self.max_seen.max(epoch);
    }

    /// Whether `epoch` may be adopted: newer than this one, and none older
    /// than `min_epoch`, the one this agent had adopted before it
    /// restarted (its record): an epoch drawn without knowing that one may
    /// start its fences below those it saw. The conductor elects past it
    /// (`maybe_elect`, `max_seen`).
    pub fn may_adopt(&self, epoch: u64, min_epoch: u64) -> bool {
        epoch > self.number && epoch >= min_epoch
    }
}

/// What weighing an election comes to ([`Cluster::weigh_election`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Conduct {
    /// No election now, and why.
    Wait(Wait),
    /// Elect `leaders` in epoch `epoch`.
    Elect {
        /// Larger than every epoch seen, drawn from the wall clock.
        epoch: u64,
        /// At most three, the current ones first.
        leaders: Vec<Id>,
        /// What the current leaders lack.
        why: Why,
    },
}

/// Why the conductor elects (its log says it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// The epoch has no leaders.
    NoLeaders,
    /// A current leader is not connected.
    LeaderGone,
    /// Fewer leaders than the candidates allow (up to three).
    TooFewLeaders,
    /// Somebody answers in this epoch's number with other leaders.
    Conflict,
    /// A majority of the leaders never answered as acting.
    NoContact,
    /// A leader answers but has not acted for the epoch.
    Lagging,
    /// This agent, a leader, never became ready.
    NotReady,
    /// A connected agent had adopted a later epoch.
    Behind,
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Why::NoLeaders => "no leaders",
            Why::LeaderGone => "a leader is not connected",
            Why::TooFewLeaders => "fewer leaders than candidates",
            Why::Conflict => "another view of this epoch",
            Why::NoContact => "no majority of the leaders ever acted",
            Why::Lagging => "a leader answers without acting",
            Why::NotReady => "this leader never became ready",
            Why::Behind => "a later epoch was seen",
        })
    }
}

/// Why the conductor holds no election now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// This agent has no `listen` address: it is not a member.
    NoAddress,
    /// Fewer members are connected (itself included) than an election
    /// needs: every member up to three, a majority beyond.
    TooFew {
        /// Connected, this agent included.
        connected: usize,
        /// Needed.
        needed: usize,
    },
    /// A lower member is connected: it conducts.
    NotLowest,
    /// A connected member has not said yet which members it is linked to.
    LinksUnknown,
    /// A lower member is reached by enough members to conduct.
    LowerReached,
    /// A current leader that others reach may be this agent's next link
    /// to come up.
    LinksSettling,
    /// This agent did not run for a while: its links may be coming back.
    Woke,
    /// A current leader it was not linked to in this epoch yet may still
    /// dial.
    Unlinked,
    /// A member whose link just went down may be redialling.
    Redialling,
    /// The current leaders are connected and acting: nothing to do.
    LeadersOk,
    /// It conducted an election less than two ping intervals ago.
    TooSoon,
    /// Every connected agent has `candidate_priority=off`.
    NoCandidate,
}

impl Cluster {
    /// Whether this agent conducts an election now, and whom it elects:
    /// it is the lowest member its connected peers reach, enough members
    /// are connected, none of them may just be redialling or settling, and
    /// the current leaders are not all connected and acting (or their
    /// epoch never became ready, or conflicts with another).
    pub(crate) fn weigh_election(&self, now: Now) -> Conduct {
        let c = self;
        let Some(my_addr) = c.addr else {
            return Conduct::Wait(Wait::NoAddress);
        };
        // Only members that answered a ping lately, or whose link just came
        // up (no ping answered yet), count as connected: an agent cut off
        // one way must not elect leaders over links that merely are not
        // closed yet (it hears nothing, or is not heard and its LOCKLEADERS
        // would reach the others once the cut heals).
        let lately = now.mono - c.cfg.peer_timeout / 2;
        let known: Vec<(&links::Link, &Id)> = c
            .peers
            .links
            .values()
            .filter(|l| !l.closing)
            .filter_map(|l| l.id.as_ref().map(|id| (l, id)))
            .filter(|(l, id)| {
                l.since >= lately || c.peers.contact.get(*id).is_some_and(|k| k.sent >= lately)
            })
            .collect();
        // The first election needs everybody in a small cluster; later ones
        // a quorum, so a 3-computer cluster that loses one goes on with the
        // two others.
        let needed = if c.epoch.max_seen == 0 {
            c.peers.election_quorum()
        } else {
            c.peers.quorum
        };
        if known.len() + 1 < needed {
            return Conduct::Wait(Wait::TooFew {
                connected: known.len() + 1,
                needed,
            });
        }
        // Addresses compared as numbers (never as text), and ties (same
        // address) broken by id.
        let mine = (addr_key(my_addr), &c.me);
        if known.iter().any(|(l, id)| (addr_key(l.addr), *id) < mine) {
            return Conduct::Wait(Wait::NotLowest);
        }
        // The conductor is the lowest member the connected ones reach, not
        // only this agent: one that comes back from a cut, linked to a
        // single other member so far, must not elect while that member is
        // linked to a lower one (which conducts). So every member counted
        // must first have said, over its current link, which members it is
        // linked to (`links=` of its pongs: a ping interval after the link
        // comes up).
        // A leader whose address is this agent's, or a linked member's,
        // under another id restarted: that run of it is gone for certain,
        // and neither a link to it nor its redial is to be waited for.
        let restarted = |l: &Id| {
            *l != c.me
                && ids::parse_id(l).and_then(|p| p.addr).is_some_and(|a| {
                    a == my_addr
                        || (c.peers.links.values()).any(|k| {
                            !k.closing && k.addr == a && k.id.as_ref().is_some_and(|i| i != l)
                        })
                })
        };
        if c.epoch.leaders.iter().any(|l| *l != c.me) || c.epoch.max_seen > 0 {
            if known
                .iter()
                .any(|(l, _)| !c.peers.peer_links.contains_key(&l.addr))
            {
                return Conduct::Wait(Wait::LinksUnknown);
            }
            let lower = |i: usize| {
                c.peers
                    .members
                    .get(i)
                    .is_some_and(|a| *a != my_addr && addr_key(*a) < addr_key(my_addr))
            };
            // A lower member that enough of them reach to conduct (itself
            // and q − 1 others); one reached by fewer cannot, and waiting
            // for it would elect nobody.
            let masks: Vec<u64> = (known.iter())
                .filter_map(|(l, _)| c.peers.peer_links.get(&l.addr).map(|(m, _)| *m))
                .collect();
            let reached_lower = (0..c.peers.members.len().min(64)).any(|i| {
                lower(i)
                    && masks.iter().filter(|m| *m & (1 << i) != 0).count() + 1 >= c.peers.quorum
            });
            if reached_lower {
                return Conduct::Wait(Wait::LowerReached);
            }
            // A leader this agent is not linked to, but others are, is
            // not gone: while this agent's links are coming up (one came up
            // less than a `peer_timeout` ago), its link to that leader may
            // be next.
            let settling =
                (c.peers.last_link_up).is_some_and(|t| now.mono < t + c.cfg.peer_timeout);
            let bit = |a| c.peers.member_bit(a);
            let reached_elsewhere = c.epoch.leaders.iter().any(|l| {
                let addr = ids::parse_id(l).and_then(|p| p.addr);
                *l != c.me
                    && !restarted(l)
                    && !known.iter().any(|(_, k)| *k == l)
                    && addr.is_some_and(|a| masks.iter().any(|m| m & bit(a) != 0))
            });
            if settling && reached_elsewhere {
                return Conduct::Wait(Wait::LinksSettling);
            }
        }
        let connected = |id: &Id| *id == c.me || known.iter().any(|(_, k)| *k == id);
        // A leader this agent has not been linked to in this epoch yet may
        // just not have redialled (this agent was paused, or adopted the
        // epoch from another): electing without it would make it revoke
        // what its clients hold for nothing. Wait a `peer_timeout` for it;
        // one whose link went down (in the epoch, or just before the move:
        // see `adopt`) is left to the rule of lost links below, and one
        // that restarted is gone at once.
        let timeout = c.cfg.peer_timeout;
        let woke = c.epoch.woke.is_some_and(|w| now.mono < w + timeout);
        let unlinked = c.epoch.leaders.iter().any(|l| {
            !connected(l)
                && !restarted(l)
                && !c.epoch.linked_leaders.contains(l)
                && now.mono < c.epoch.since + timeout
        });
        // A member whose link just went down may be redialling (a broken
        // connection, not a dead agent): wait until another member says it
        // lost it too, or `4 × ping_interval`. A crashed agent's links all
        // go at once, so its death is confirmed by the next pong.
        let redialling =
            (c.peers.lost.keys()).any(|a| c.peers.presumed_up(*a, now.mono, c.cfg.ping_interval));
        if woke {
            return Conduct::Wait(Wait::Woke);
        }
        if unlinked {
            return Conduct::Wait(Wait::Unlinked);
        }
        if redialling {
            return Conduct::Wait(Wait::Redialling);
        }
        // A member that is not a leader yet becomes one only once it says
        // (`links=` of its pongs) it is linked to every member this agent
        // is: a member that restarted, or was cut off, may not have its
        // link to the collector up yet, and a leader that cannot hear the
        // collector never becomes ready, which costs the locks its
        // objects carry. It is added once its links are up.
        let bit = |a| c.peers.member_bit(a);
        let seasoned = |l: &links::Link, id: &Id| {
            c.epoch.leaders.is_empty()
                || c.epoch.leaders.contains(id)
                || c.peers.peer_links.get(&l.addr).is_some_and(|(mask, _)| {
                    (known.iter())
                        .filter(|(k, _)| k.addr != l.addr)
                        .all(|(k, _)| mask & bit(k.addr) != 0)
                })
        };
        let candidates_up = known
            .iter()
            .filter(|(l, id)| seasoned(l, id))
            .map(|(_, id)| *id)
            .chain(std::iter::once(&c.me))
            .filter(|id| ids::parse_id(id).is_some_and(|p| p.priority != ids::OFF))
            .count();
        // Too few leaders (after a loss) while more candidates are up: grow.
        let leaders_ok = !c.epoch.leaders.is_empty()
            && c.epoch.leaders.iter().all(connected)
            && c.epoch.leaders.len() >= candidates_up.min(3);
        let settle = c.cfg.peer_timeout * 3;
        let settled = now.mono >= c.epoch.since + settle;
        // A leader that answers pings in this epoch but has not acted for
        // it for long lost part of the handover (its state, or our report
        // in it): its objects would wait forever. A new epoch hands over
        // again.
        let lagging = c
            .epoch
            .leaders
            .iter()
            .filter(|l| **l != c.me)
            .any(|l| self.answers_without_acting(l, now.mono, settle));
        // Somebody answers in this epoch with other leaders (a restarted
        // conductor reused its number): a new epoch, larger than both,
        // ends the confusion at once.
        let conflict = c.peers.contact.values().any(|k| {
            k.epoch == c.epoch.number
                && k.view != c.epoch.view
                && k.sent + c.cfg.peer_timeout >= now.mono
        });
        // So is this very agent, a leader that never became ready.
        let not_ready = c.leader.table.as_ref().is_some_and(|l| !l.ready);
        // Somebody connected had adopted a later epoch before it restarted
        // and takes no earlier one: elect past it.
        let behind = c.epoch.max_seen > c.epoch.number;
        let stuck = leaders_ok
            && (conflict
                || settled
                    && (self.contact_time(now.mono).is_none() || lagging || not_ready || behind));
        if leaders_ok && !stuck {
            return Conduct::Wait(Wait::LeadersOk);
        }
        let pause: Duration = c.cfg.ping_interval * 2;
        if c.epoch.last_election.is_some_and(|t| now.mono < t + pause) {
            return Conduct::Wait(Wait::TooSoon);
        }
        let up = (known.iter())
            .filter(|(l, id)| seasoned(l, id))
            .map(|(_, id)| (*id).clone())
            .chain(std::iter::once(c.me.clone()));
        let leaders = pick_leaders(up, &c.epoch.leaders);
        if leaders.is_empty() {
            return Conduct::Wait(Wait::NoCandidate);
        }
        // The latest wall clock among the connected: when every agent that
        // knew the last fences is gone, the epoch (and so the fence base)
        // still follows the clock that drew the latest epochs, if it runs.
        let ahead = known.iter().map(|(l, _)| l.ahead).max().unwrap_or(0);
        let wall_ms = now.wall.0 / 1000 + ahead;
        let n = c.peers.members.len().max(1) as u64;
        let slot = c
            .peers
            .members
            .iter()
            .position(|a| *a == my_addr)
            .unwrap_or(0) as u64;
        let epoch = draw_epoch(c.epoch.number.max(c.epoch.max_seen), wall_ms, slot, n);
        let why = if c.epoch.leaders.is_empty() {
            Why::NoLeaders
        } else if !c.epoch.leaders.iter().all(connected) {
            Why::LeaderGone
        } else if !leaders_ok {
            Why::TooFewLeaders
        } else if conflict {
            Why::Conflict
        } else if self.contact_time(now.mono).is_none() {
            Why::NoContact
        } else if lagging {
            Why::Lagging
        } else if not_ready {
            Why::NotReady
        } else {
            Why::Behind
        };
        Conduct::Elect {
            epoch,
            leaders,
            why,
        }
    }
}

/// The leaders a conductor elects among the candidates `up` (itself and the
/// members it counts): at most three, the current leaders first, then by
/// priority and the random part of the id; a member with
/// `candidate_priority=off` never leads.
pub(crate) fn pick_leaders(up: impl Iterator<Item = Id>, current: &[Id]) -> Vec<Id> {
    let mut candidates: Vec<(String, Id)> = up
        .filter(|id| ids::parse_id(id).is_some_and(|p| p.priority != ids::OFF))
        .map(|id| (ids::candidate_key(&id, current.contains(&id)), id))
        .collect();
    candidates.sort();
    candidates.into_iter().take(3).map(|(_, id)| id).collect()
}

/// The epoch a conductor in position `slot` of `n` members draws: above
/// every epoch it knows of (`known`), at least its wall clock in ms (so
/// epochs, and the fences based on them, keep growing across a restart of
/// every member), and of its own residue modulo `n`: two conductors on both
/// sides of a broken link may elect in the same millisecond, and one
/// number must never name two leader sets.
pub(crate) fn draw_epoch(known: u64, wall_ms: u64, slot: u64, n: u64) -> u64 {
    let least = (known + 1).max(wall_ms);
    least + (slot + n - least % n) % n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(priority: u8, random: u32, name: &str) -> Id {
        ids::make_id(Some(priority), random, None, 1, name).into()
    }

    #[test]
    fn an_epoch_is_past_all_known_on_the_clock_and_in_its_own_residue() {
        for n in 1..=5u64 {
            for slot in 0..n {
                for (known, wall) in [(0, 0), (9, 3), (3, 1_000), (u64::MAX >> 21, 7)] {
                    let e = draw_epoch(known, wall, slot, n);
                    assert!(e > known && e >= wall, "{known} {wall}: {e}");
                    assert_eq!(e % n, slot, "n={n}");
                    assert!(e < (known + 1).max(wall) + n, "the least such epoch");
                }
            }
        }
        // Two conductors at the same instant draw different epochs.
        assert_ne!(draw_epoch(41, 100, 0, 3), draw_epoch(41, 100, 1, 3));
    }

    #[test]
    fn current_leaders_stay_then_priority_then_chance_and_off_never_leads() {
        let a = id(5, 9, "a");
        let b = id(1, 7, "b");
        let c = id(1, 3, "c");
        let d = id(10, 1, "d");
        let off: Id = ids::make_id(None, 0, None, 1, "off").into();
        let up = || [a.clone(), b.clone(), c.clone(), d.clone(), off.clone()].into_iter();
        // Nobody leads yet: by priority (smaller first), then the random
        // part.
        assert_eq!(
            pick_leaders(up(), &[]),
            vec![c.clone(), b.clone(), a.clone()]
        );
        // A current leader keeps its place ahead of better priorities.
        assert_eq!(
            pick_leaders(up(), std::slice::from_ref(&d)),
            vec![d.clone(), c.clone(), b.clone()]
        );
        assert!(pick_leaders([off.clone()].into_iter(), &[]).is_empty());
        assert_eq!(pick_leaders([off, a.clone()].into_iter(), &[]), vec![a]);
    }

    #[test]
    fn an_epoch_is_adopted_only_when_newer_and_not_below_the_record() {
        let mut e = Epoch::new(Time::ZERO, 5);
        e.number = 10;
        assert!(!e.may_adopt(10, 0), "not newer");
        assert!(e.may_adopt(11, 0));
        assert!(!e.may_adopt(11, 12), "below the epoch on record");
        assert!(e.may_adopt(12, 12));
        e.note_seen(3);
        assert_eq!(e.max_seen, 5, "only ever grows");
        e.note_seen(40);
        assert_eq!(e.max_seen, 40);
    }
}

/// The conductor's decision ([`Cluster::weigh_election`]), member by
/// member of what it weighs.
#[cfg(test)]
mod weigh {
    use std::collections::BTreeSet;
    use std::net::SocketAddr;

    use super::*;
    use crate::cluster::links::Link;
    use crate::cluster::{ClusterConfig, Contact, view_of};
    use crate::time::UnixTime;
    use crate::vocab::PeerId;

    fn addr(i: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 4000 + i))
    }

    fn at(ms: u64) -> Now {
        Now {
            mono: Time::from_micros(ms * 1000),
            wall: UnixTime(1_700_000_000_000_000 + ms * 1000),
        }
    }

    fn id(i: u16) -> Id {
        ids::make_id(Some(14), u32::from(i), Some(addr(i)), 1, &format!("n{i}")).into()
    }

    /// Member `me` of a cluster of `n`, started at 0 with nothing linked.
    fn member(me: u16, n: u16) -> Cluster {
        let cfg = ClusterConfig {
            listen: Some(addr(me)),
            neighbors: (0..n).map(addr).collect(),
            seed: u64::from(me),
            ..ClusterConfig::default()
        };
        let mut c = Cluster::new(&cfg, &format!("n{me}"), at(0));
        c.me = id(me);
        c
    }

    /// A link to member `i`, up since `since`.
    fn link(c: &mut Cluster, i: u16, since: u64) {
        let link = Link {
            id: Some(id(i)),
            ..Link::new(format!("n{i}"), addr(i), at(since).mono)
        };
        c.peers.links.insert(PeerId(u64::from(i)), link);
    }

    /// Member `i` answered a ping sent at `sent` in the current epoch, as
    /// acting, and said it is linked to the members of `mask`.
    fn answered(c: &mut Cluster, i: u16, sent: u64, mask: u64) {
        let k = Contact {
            sent: at(sent).mono,
            epoch: c.epoch.number,
            active_sent: Some(at(sent).mono),
            view: c.epoch.view,
            delay_until: None,
        };
        c.peers.contact.insert(id(i), k);
        c.peers.peer_links.insert(addr(i), (mask, at(sent).mono));
    }

    /// Member 0 of three in epoch 5, led by all three and linked to both
    /// others since 1 s; both answered at 9.9 s.
    fn in_epoch_five() -> Cluster {
        let mut c = member(0, 3);
        c.epoch.number = 5;
        c.epoch.max_seen = 5;
        c.epoch.leaders = vec![id(0), id(1), id(2)];
        c.epoch.view = view_of(&c.epoch.leaders);
        c.epoch.since = at(1000).mono;
        c.epoch.linked_leaders = [id(1), id(2)].into_iter().collect::<BTreeSet<_>>();
        link(&mut c, 1, 1000);
        link(&mut c, 2, 1000);
        answered(&mut c, 1, 9900, 0b111);
        answered(&mut c, 2, 9900, 0b111);
        c
    }

    fn elects(c: &Cluster, now: Now) -> (u64, Vec<Id>) {
        match c.weigh_election(now) {
            Conduct::Elect { epoch, leaders, .. } => (epoch, leaders),
            other => panic!("no election: {other:?}"),
        }
    }

    #[test]
    fn the_first_election_waits_for_every_member_of_a_small_cluster() {
        let mut c = member(0, 3);
        link(&mut c, 1, 900);
        assert_eq!(
            c.weigh_election(at(1000)),
            Conduct::Wait(Wait::TooFew {
                connected: 2,
                needed: 3
            })
        );
        link(&mut c, 2, 950);
        let (epoch, leaders) = elects(&c, at(1000));
        assert!(epoch > 0);
        let all: BTreeSet<Id> = (0..3).map(id).collect();
        assert_eq!(leaders.iter().cloned().collect::<BTreeSet<_>>(), all);
    }

    #[test]
    fn only_the_lowest_member_conducts() {
        let mut c = member(1, 3);
        link(&mut c, 0, 900);
        link(&mut c, 2, 900);
        assert_eq!(c.weigh_election(at(1000)), Conduct::Wait(Wait::NotLowest));
    }

    #[test]
    fn a_member_silent_past_half_a_timeout_is_not_counted() {
        let mut c = in_epoch_five();
        // Both last answered pings sent at 9.9 s: half the 2 s timeout
        // later, neither counts as connected, although their links are up.
        assert_eq!(
            c.weigh_election(at(11_000)),
            Conduct::Wait(Wait::TooFew {
                connected: 1,
                needed: 2
            })
        );
        // Member 1 answers again; member 2 stays silent: elect without it.
        answered(&mut c, 1, 10_500, 0b011);
        let (epoch, leaders) = elects(&c, at(11_000));
        assert!(epoch > 5);
        assert_eq!(leaders, vec![id(0), id(1)]);
    }

    #[test]
    fn healthy_leaders_are_left_alone_and_a_conflict_is_not() {
        let mut c = in_epoch_five();
        assert_eq!(c.weigh_election(at(10_000)), Conduct::Wait(Wait::LeadersOk));
        // Somebody answers in epoch 5 with other leaders (a restarted
        // conductor reused the number): a new epoch ends it.
        let mut k = c.peers.contact[&id(2)];
        k.view ^= 1;
        c.peers.contact.insert(id(2), k);
        let (epoch, _) = elects(&c, at(10_000));
        assert!(epoch > 5);
    }

    #[test]
    fn a_lost_link_is_given_time_to_come_back() {
        let mut c = in_epoch_five();
        c.peers.links.remove(&PeerId(2));
        c.peers.lost.insert(addr(2), at(9950).mono);
        // Member 1 said, before the loss, that it is linked to member 2.
        assert_eq!(
            c.weigh_election(at(10_000)),
            Conduct::Wait(Wait::Redialling)
        );
        // `4 × ping_interval` later, or once member 1 says it lost it too,
        // member 2 is gone: elect without it.
        answered(&mut c, 1, 9960, 0b111);
        assert_eq!(
            c.weigh_election(at(10_900)),
            Conduct::Wait(Wait::Redialling)
        );
        let (_, leaders) = elects(&c, at(10_950));
        assert_eq!(leaders, vec![id(0), id(1)]);
        answered(&mut c, 1, 9980, 0b011);
        let (_, leaders) = elects(&c, at(10_000));
        assert_eq!(leaders, vec![id(0), id(1)]);
        // Not twice within two ping intervals.
        c.epoch.last_election = Some(at(9800).mono);
        assert_eq!(c.weigh_election(at(10_000)), Conduct::Wait(Wait::TooSoon));
    }

    #[test]
    fn an_agent_that_did_not_run_waits_for_its_links() {
        let mut c = in_epoch_five();
        c.peers.links.remove(&PeerId(2));
        c.epoch.woke = Some(at(9000).mono);
        assert_eq!(c.weigh_election(at(10_000)), Conduct::Wait(Wait::Woke));
        answered(&mut c, 1, 10_900, 0b011);
        assert_eq!(c.weigh_election(at(10_950)), Conduct::Wait(Wait::Woke));
        let (_, leaders) = elects(&c, at(11_100));
        assert_eq!(leaders, vec![id(0), id(1)]);
    }

    /// In epoch five since 9 s, leader 2 not linked in it yet.
    fn leader_two_unlinked() -> Cluster {
        let mut c = in_epoch_five();
        c.peers.links.remove(&PeerId(2));
        c.epoch.linked_leaders.remove(&id(2));
        c.epoch.since = at(9000).mono;
        c
    }

    #[test]
    fn a_leader_not_yet_linked_in_this_epoch_is_given_a_timeout() {
        let mut c = leader_two_unlinked();
        assert_eq!(c.weigh_election(at(10_000)), Conduct::Wait(Wait::Unlinked));
        answered(&mut c, 1, 10_900, 0b011);
        assert_eq!(c.weigh_election(at(10_950)), Conduct::Wait(Wait::Unlinked));
        let (_, leaders) = elects(&c, at(11_100));
        assert_eq!(leaders, vec![id(0), id(1)]);
    }

    #[test]
    fn a_leader_that_restarted_is_gone_at_once() {
        // Member 2, a leader not linked in this epoch yet, is back under a
        // new id: its old run is not waited for.
        let mut c = leader_two_unlinked();
        answered(&mut c, 1, 9950, 0b011);
        assert_eq!(c.weigh_election(at(10_000)), Conduct::Wait(Wait::Unlinked));
        let again: Id = ids::make_id(Some(14), 99, Some(addr(2)), 1, "n2").into();
        let link = Link {
            id: Some(again.clone()),
            ..Link::new("n2".into(), addr(2), at(9990).mono)
        };
        c.peers.links.insert(PeerId(7), link);
        c.peers.peer_links.insert(addr(2), (0b111, at(9995).mono));
        let (_, leaders) = elects(&c, at(10_000));
        assert!(!leaders.contains(&id(2)), "{leaders:?}");
        assert!(leaders.contains(&again), "{leaders:?}");

        // This very agent restarted: its old run, a leader still, is gone.
        let mut c = in_epoch_five();
        c.me = ids::make_id(Some(14), 98, Some(addr(0)), 1, "n0").into();
        c.epoch.linked_leaders.clear();
        c.epoch.since = at(9000).mono;
        let (_, leaders) = elects(&c, at(10_000));
        assert_eq!(leaders, vec![id(1), id(2), c.me.clone()]);
    }

    #[test]
    fn a_lower_member_that_enough_members_reach_conducts() {
        let mut c = member(1, 3);
        c.epoch.number = 5;
        c.epoch.max_seen = 5;
        c.epoch.leaders = vec![id(0), id(1), id(2)];
        c.epoch.view = view_of(&c.epoch.leaders);
        // It was linked to member 0 in this epoch: that link went down.
        c.epoch.linked_leaders = [id(0), id(2)].into_iter().collect();
        link(&mut c, 2, 1000);
        // Member 2 has said nothing of its links yet: wait.
        assert_eq!(
            c.weigh_election(at(1200)),
            Conduct::Wait(Wait::LinksUnknown)
        );
        // It is linked to member 0, the lowest: member 0 conducts.
        c.peers.peer_links.insert(addr(2), (0b101, at(1200).mono));
        assert_eq!(
            c.weigh_election(at(1300)),
            Conduct::Wait(Wait::LowerReached)
        );
        // It lost it: member 1 conducts without member 0.
        c.peers.peer_links.insert(addr(2), (0b110, at(1400).mono));
        let (_, leaders) = elects(&c, at(1500));
        assert_eq!(leaders, vec![id(1), id(2)]);
    }
}
