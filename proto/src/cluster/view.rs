//! The cluster-wide `LISTTICKETS` (snaplock(7) "Listing tickets"): the
//! lists an agent is gathering from the owner leaders, what an owner
//! answers about the objects it owns, and the text the client gets.
//!
//! Each leader owns a share of the objects and knows their whole queue
//! with each ticket's home, so the agent asks each owner once
//! (`LOCKLIST`) and answers its client when all answered or at the
//! deadline, naming the leaders that did not. Every part is bounded: at
//! most [`MAX_LISTS`] lists in flight, one bounded answer per leader
//! ([`msg::view`](super::msg::view)), and the client's text cut at the
//! agent's `max_list_bytes`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Id;
use super::ltable::{LeaderObject, LeaderState, LeaderTable};
use super::msg::view::{LIST_BYTES, LIST_ENTRIES};
use super::msg::{ListEntry, Listed};
use crate::time::{Now, Time, UnixTime};
use crate::vocab::{ClientId, ObjectName};

/// Most cluster-wide lists in flight on one agent; a client asking for
/// one more is answered at once (`error=overflow`).
pub(crate) const MAX_LISTS: usize = 16;

/// Most objects an owner looks at for one answer: past it, it stops and
/// says there is more (its replicas of other owners' objects are skipped,
/// but still cost a look).
pub(crate) const SCAN_OBJECTS: usize = 64 * LIST_ENTRIES;

/// A list being gathered for a client.
#[derive(Debug)]
pub(crate) struct Pending {
    pub client: ClientId,
    pub epoch: u64,
    /// When the client is answered with what came.
    pub deadline: Time,
    /// The leaders asked that did not answer yet.
    pub waiting: Vec<Id>,
    /// The leaders that could not answer: no link to them, or not ready
    /// leaders of the epoch when asked.
    pub missed: Vec<Id>,
    pub entries: Vec<ListEntry>,
    /// Some owner did not list all it owns.
    pub more: bool,
}

/// The lists this agent is gathering, by serial.
#[derive(Debug, Default)]
pub(crate) struct Views {
    pub pending: BTreeMap<u64, Pending>,
    pub next_serial: u64,
}

impl Views {
    /// When the first list in flight is due.
    pub fn next_deadline(&self) -> Option<Time> {
        self.pending.values().map(|p| p.deadline).min()
    }

    /// The serials due at `now`.
    pub fn due(&self, now: Time) -> Vec<u64> {
        (self.pending.iter())
            .filter(|(_, p)| p.deadline <= now)
            .map(|(s, _)| *s)
            .collect()
    }

    /// Takes `from`'s answer in; `true` when its list has every answer
    /// now. An answer nobody waits for (late, repeated, of another epoch)
    /// changes nothing.
    pub fn answered(&mut self, from: &Id, l: Listed) -> bool {
        let Some(p) = self.pending.get_mut(&l.serial) else {
            return false;
        };
        let Some(i) = p.waiting.iter().position(|w| w == from) else {
            return false;
        };
        if l.epoch != p.epoch {
            return false;
        }
        p.waiting.remove(i);
        if l.ready {
            p.entries.extend(l.entries);
            p.more |= l.more;
        } else {
            p.missed.push(from.clone());
        }
        p.waiting.is_empty()
    }
}

/// A ticket of an owner's queue, as it is listed: holders first (a
/// follower's vote may stand for them), then the waiters, each in bakery
/// order.
fn queue_of(o: &LeaderObject) -> impl Iterator<Item = (&super::ltable::LeaderTicket, bool)> {
    let held = o.tickets.iter().filter(|t| t.blocks()).map(|t| (t, true));
    let waiting = o.tickets.iter().filter(|t| !t.blocks()).map(|t| (t, false));
    held.chain(waiting)
}

/// The owner's answer: the queues of the objects `owns` accepts (or of
/// `object` alone), at most [`LIST_ENTRIES`] tickets and about
/// [`LIST_BYTES`] bytes, looking at most at [`SCAN_OBJECTS`] objects.
pub(crate) fn owner_list(
    l: &LeaderTable,
    now: Now,
    object: Option<&[u8]>,
    owns: impl Fn(&[u8]) -> bool,
) -> (Vec<ListEntry>, bool) {
    let mut out = Vec::new();
    let mut bytes = 0;
    let one;
    let objects: Box<dyn Iterator<Item = (&[u8], &LeaderObject)>> = match object {
        Some(name) => {
            one = l.objects.get_key_value(&ObjectName::new(name));
            Box::new(one.into_iter().map(|(n, o)| (&**n, o)))
        }
        None => Box::new(l.objects.iter().map(|(n, o)| (&**n, o))),
    };
    for (looked, (name, o)) in objects.enumerate() {
        if looked >= SCAN_OBJECTS {
            return (out, true);
        }
        if crate::vocab::split_var_object(name).is_some() || !owns(name) {
            continue; // a transaction's variable, or another owner's
        }
        let mut position = 0;
        for (t, held) in queue_of(o) {
            if out.len() >= LIST_ENTRIES || bytes >= LIST_BYTES {
                return (out, true);
            }
            if !held {
                position += 1;
            }
            let fence = match t.state {
                LeaderState::Held { fence } | LeaderState::Inherited { fence } => fence,
                LeaderState::Waiting | LeaderState::Activating { .. } => 0,
            };
            let e = ListEntry {
                object: name.to_vec(),
                number: t.number,
                position: if held { 0 } else { position },
                fence,
                since_us: t
                    .since
                    .map_or(0, |s| now.wall_of(Time::from_micros(s.get())).0),
                mode: t.kind.mode,
                agent: super::Cluster::name_of(&t.home).to_owned(),
                key: t.key.to_string(),
            };
            bytes += e.object.len() + e.agent.len() + e.key.len() + 64;
            out.push(e);
        }
    }
    (out, false)
}

/// The client's text: one line per ticket, by object, holders first then
/// the waiters in queue order; the objects `may_list` refuses are left
/// out (the one place a listing is filtered per name). Cut once it
/// passes `max_bytes`, with a last line saying so.
///
/// `ticket id: N  object name: "O"  key: K  mode: M  <state>  agent: A
/// position: P`, where `<state>` is `held since DATE  fence: F` (`held
/// fence: F` when the grant time is unknown) or `waiting`.
pub(crate) fn list_text(
    mut entries: Vec<ListEntry>,
    more: bool,
    max_bytes: usize,
    may_list: impl Fn(&[u8]) -> bool,
) -> String {
    entries.sort_by(|a, b| {
        (&a.object, a.position, a.number, &a.key).cmp(&(&b.object, b.position, b.number, &b.key))
    });
    let mut text = String::new();
    let mut i = 0;
    while i < entries.len() {
        let name = entries[i].object.clone();
        let end = i + entries[i..].iter().take_while(|e| e.object == name).count();
        if may_list(&name) {
            for e in &entries[i..end] {
                if text.len() >= max_bytes {
                    let _ = writeln!(text, "... and more tickets (cut at max_list_bytes)");
                    return text;
                }
                entry_line(&mut text, e);
            }
        }
        i = end;
    }
    if more {
        let _ = writeln!(
            text,
            "... and more tickets (an owner lists at most {LIST_ENTRIES} in one answer)"
        );
    }
    text
}

fn entry_line(text: &mut String, e: &ListEntry) {
    let mode = e.mode.as_str();
    let state = match (e.position, e.since_us) {
        (0, 0) => format!("held  fence: {}", e.fence),
        (0, since) => format!(
            "held since {}  fence: {}",
            UnixTime(since).to_utc_string(),
            e.fence
        ),
        _ => "waiting".to_owned(),
    };
    let _ = writeln!(
        text,
        "ticket id: {}  object name: \"{}\"  key: {}  mode: {mode}  {state}  agent: {}  position: {}",
        e.number,
        String::from_utf8_lossy(&e.object).escape_debug(),
        e.key,
        e.agent,
        e.position,
    );
}

/// The entries of one local object, numbered as an owner numbers them:
/// what a single agent, which is its own owner, lists.
pub(crate) fn local_entries(
    name: &[u8],
    o: &crate::local::table::Object,
    agent: &str,
    now: Now,
) -> Vec<ListEntry> {
    use crate::local::table::State;
    let held = o.tickets.iter().filter(|t| t.state.is_held());
    let waiting = o.tickets.iter().filter(|t| !t.state.is_held());
    let mut position = 0;
    held.chain(waiting)
        .map(|t| {
            let fence = match t.state {
                State::Held { fence, .. } | State::Expired { fence, .. } => fence,
                State::Waiting { .. } => 0,
            };
            if fence == 0 {
                position += 1;
            }
            ListEntry {
                object: name.to_vec(),
                number: t.number,
                position: if fence == 0 { position } else { 0 },
                fence,
                since_us: if fence == 0 {
                    0
                } else {
                    now.wall_of(t.since).0
                },
                mode: t.kind.mode,
                agent: agent.to_owned(),
                key: t.key.to_string(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Mode;

    fn entry(object: &str, position: u64, agent: &str) -> ListEntry {
        ListEntry {
            object: object.as_bytes().to_vec(),
            number: position + 1,
            position,
            fence: if position == 0 { 7 } else { 0 },
            since_us: if position == 0 {
                1_700_000_000_000_000
            } else {
                0
            },
            mode: Mode::Exclusive,
            agent: agent.to_owned(),
            key: format!("{agent}/{position}"),
        }
    }

    #[test]
    fn the_text_lists_each_object_holder_first_then_its_waiters_in_order() {
        let entries = vec![
            entry("b", 2, "n3"),
            entry("a", 0, "n1"),
            entry("b", 0, "n2"),
            entry("b", 1, "n1"),
        ];
        let text = list_text(entries, false, 1 << 20, |_| true);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].contains("\"a\"") && lines[0].contains("position: 0"));
        assert!(lines[1].contains("key: n2/0  mode: exclusive  held since 2023-11-14 22:13:20"));
        assert!(lines[1].ends_with("fence: 7  agent: n2  position: 0"));
        assert!(lines[2].ends_with("waiting  agent: n1  position: 1"));
        assert!(lines[3].ends_with("waiting  agent: n3  position: 2"));
    }

    #[test]
    fn an_object_the_filter_refuses_is_left_out_whole() {
        let entries = vec![
            entry("a", 0, "n1"),
            entry("b", 0, "n2"),
            entry("b", 1, "n1"),
        ];
        let text = list_text(entries, false, 1 << 20, |n| n != b"b");
        assert_eq!(text.lines().count(), 1);
    }

    #[test]
    fn a_long_list_is_cut_with_a_last_line_saying_so() {
        let entries: Vec<ListEntry> = (0..100)
            .map(|i| entry(&format!("o{i:03}"), 0, "n1"))
            .collect();
        let text = list_text(entries, false, 500, |_| true);
        assert!(text.lines().count() < 10);
        assert!(text.ends_with("... and more tickets (cut at max_list_bytes)\n"));
        let text = list_text(vec![entry("a", 0, "n1")], true, 1 << 20, |_| true);
        assert!(
            text.lines()
                .last()
                .unwrap()
                .contains("at most 1000 in one answer")
        );
    }

    #[test]
    fn an_answer_counts_once_and_only_from_a_leader_asked() {
        let mut v = Views::default();
        let a: Id = "a".into();
        let b: Id = "b".into();
        v.pending.insert(
            1,
            Pending {
                client: ClientId(1),
                epoch: 5,
                deadline: Time::from_micros(10),
                waiting: vec![a.clone(), b.clone()],
                missed: Vec::new(),
                entries: Vec::new(),
                more: false,
            },
        );
        let listed = |epoch, ready| Listed {
            epoch,
            serial: 1,
            ready,
            more: false,
            entries: vec![entry("x", 0, "a")],
        };
        assert!(!v.answered(&"c".into(), listed(5, true)));
        assert!(!v.answered(&a, listed(4, true)), "another epoch's answer");
        assert!(!v.answered(&a, listed(5, true)));
        assert!(!v.answered(&a, listed(5, true)), "a repeated answer");
        assert_eq!(v.pending[&1].entries.len(), 1);
        assert!(v.answered(&b, listed(5, false)));
        assert_eq!(v.pending[&1].missed, vec![b]);
        assert_eq!(v.due(Time::from_micros(9)), Vec::<u64>::new());
        assert_eq!(v.due(Time::from_micros(10)), vec![1]);
    }
}
