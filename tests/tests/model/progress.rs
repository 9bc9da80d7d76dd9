//! The liveness check, which stateright's `eventually` cannot do on a graph
//! with cycles (its BFS only judges paths that end): from every reachable
//! state, every client can still finish by steps that are not faults.
//!
//! That is "once faults stop, progress is possible from wherever they left
//! the cluster" (AG EF finished, over fault-free steps). It rules out
//! deadlocks (no step at all) and livelocks (steps, but all of them in
//! circles that never finish a client, as split votes would). It is
//! checked twice: with every fault-free step, and without revocations (nor
//! a transaction given up for `TX_WAIT`), so that a client cannot "finish"
//! only by being failed by its home while the cluster is healthy. A
//! session that holds what its transaction set has finished.

use std::collections::{HashMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};

use stateright::Model;

use crate::state::State;
use crate::steps::{Action, Cluster};

pub struct Progress {
    pub states: usize,
    pub edges: usize,
    /// States at the fence bound, not expanded.
    pub boundary: usize,
    /// States that need an epoch beyond the scope's last, not expanded
    /// either ([`Cluster::needs_epoch_beyond_scope`]).
    pub beyond_epochs: usize,
    /// A shortest path to a state from which no fault-free path finishes.
    pub stuck: Option<Vec<(Option<Action>, State)>>,
    /// The same without revocations.
    pub stuck_without_revoke: Option<Vec<(Option<Action>, State)>>,
}

fn fingerprint(s: &State) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

const REVOKE: u32 = 1 << 31;

/// Explores every reachable state (at most `limit`, else panics: a partial
/// graph proves nothing) and finds states with no way out. States at the
/// fence bound, or that need an epoch beyond the last, are not expanded; `optimistic` counts them as finished (a
/// run of refusals longer than the bound is then not judged), else as
/// stuck (which also blames runs that only needed more room).
pub fn check(model: &Cluster, limit: usize, optimistic: bool) -> Progress {
    let init = model.init_states();
    let mut index: HashMap<u64, u32> = HashMap::new();
    let mut fps: Vec<u64> = Vec::new();
    let mut parent: Vec<u32> = Vec::new();
    let mut finished: Vec<bool> = Vec::new();
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut queue: VecDeque<(u32, State)> = VecDeque::new();
    let mut boundary = 0;
    let mut beyond_epochs = 0;
    for s in init {
        let fp = fingerprint(&s);
        if index.contains_key(&fp) {
            continue;
        }
        index.insert(fp, fps.len() as u32);
        queue.push_back((fps.len() as u32, s));
        fps.push(fp);
        parent.push(u32::MAX);
        finished.push(false);
    }
    while let Some((id, s)) = queue.pop_front() {
        if !model.within_boundary(&s) {
            boundary += 1;
            finished[id as usize] = optimistic;
            continue;
        }
        if model.needs_epoch_beyond_scope(&s) {
            beyond_epochs += 1;
            finished[id as usize] = optimistic;
            continue;
        }
        if model.finished(&s) {
            finished[id as usize] = true;
        }
        for (action, next) in model.next_steps(&s) {
            let fp = fingerprint(&next);
            let nid = match index.get(&fp) {
                Some(&n) => n,
                None => {
                    let n = fps.len() as u32;
                    assert!((n as usize) < limit, "more than {limit} states");
                    index.insert(fp, n);
                    fps.push(fp);
                    parent.push(id);
                    finished.push(false);
                    queue.push_back((n, next));
                    n
                }
            };
            if !action.is_fault() {
                let flag = if matches!(action, Action::Revoke(_) | Action::GiveUpTx(_)) {
                    REVOKE
                } else {
                    0
                };
                edges.push((nid, id | flag));
            }
        }
    }
    drop(index);
    edges.sort_unstable();
    let stuck = stuck_state(&edges, &finished, true).map(|i| path(model, &fps, &parent, i));
    let stuck_without_revoke =
        stuck_state(&edges, &finished, false).map(|i| path(model, &fps, &parent, i));
    Progress {
        states: fps.len(),
        edges: edges.len(),
        boundary,
        beyond_epochs,
        stuck,
        stuck_without_revoke,
    }
}

/// The first (so nearest to the start) state that cannot reach a finished
/// state backwards over `edges` (sorted by target).
fn stuck_state(edges: &[(u32, u32)], finished: &[bool], revoke: bool) -> Option<usize> {
    let mut good = finished.to_vec();
    let mut work: Vec<u32> = (0..good.len() as u32)
        .filter(|&i| good[i as usize])
        .collect();
    while let Some(child) = work.pop() {
        let start = edges.partition_point(|e| e.0 < child);
        for &(c, p) in &edges[start..] {
            if c != child {
                break;
            }
            if !revoke && p & REVOKE != 0 {
                continue;
            }
            let p = (p & !REVOKE) as usize;
            if !good[p] {
                good[p] = true;
                work.push(p as u32);
            }
        }
    }
    good.iter().position(|g| !g)
}

fn path(
    model: &Cluster,
    fps: &[u64],
    parent: &[u32],
    target: usize,
) -> Vec<(Option<Action>, State)> {
    let mut chain = vec![target];
    while parent[*chain.last().expect("not empty")] != u32::MAX {
        chain.push(parent[*chain.last().expect("not empty")] as usize);
    }
    chain.reverse();
    let mut state = model
        .init_states()
        .into_iter()
        .find(|s| fingerprint(s) == fps[chain[0]])
        .expect("the path starts at an initial state");
    let mut out = vec![(None, state.clone())];
    for &i in &chain[1..] {
        let (action, next) = model
            .next_steps(&state)
            .into_iter()
            .find(|(_, n)| fingerprint(n) == fps[i])
            .expect("the parent has a step to its child");
        out.push((Some(action), next.clone()));
        state = next;
    }
    out
}

/// Every state reachable from `start` by fault-free steps, within the
/// model's boundary (at most `limit`).
pub fn fault_free_closure(model: &Cluster, start: State, limit: usize) -> Vec<State> {
    let mut seen: HashMap<u64, ()> = HashMap::new();
    seen.insert(fingerprint(&start), ());
    let mut out = vec![start];
    let mut next = 0;
    while next < out.len() {
        let s = out[next].clone();
        next += 1;
        if !model.within_boundary(&s) {
            continue;
        }
        for (action, n) in model.next_steps(&s) {
            if !action.is_fault() && seen.insert(fingerprint(&n), ()).is_none() {
                assert!(out.len() < limit, "more than {limit} states");
                out.push(n);
            }
        }
    }
    out
}
