//! The owner's arithmetic of one grant, pure: whom to ask first, what the
//! votes so far decide, and whom to ask next.
//!
//! Sets of leaders are masks of the epoch's leader list: bit i stands for
//! leader i (at most 8 leaders). An owner votes for its own grants, so its
//! bit is in `votes` from the start. The tests read their cases from
//! `testdata/votes.txt`.

/// The answers on one grant so far: the leaders that voted for it and
/// against it, and those asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ballot {
    /// Voted for it (the owner from the start).
    pub votes: u8,
    /// Voted against it.
    pub refused: u8,
    /// Asked for their votes.
    pub asked: u8,
}

/// What the votes on one grant decide now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tally {
    /// A majority voted for it and the owner acts: granted.
    Grant,
    /// A majority voted for it, but the owner does not act now: grant it
    /// when it does.
    NotActing,
    /// Everyone asked answered, short of a majority, and some leaders were
    /// not asked: ask them.
    AskOthers,
    /// Every leader answered, short of a majority: wait, and try again
    /// later with a new fence.
    Retry,
    /// Answers are still awaited.
    Pending,
}

/// Whom to ask next about a grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Widen {
    /// It has its majority: nobody.
    Enough,
    /// Still short, and nobody is left to ask.
    NobodyLeft,
    /// Ask `rest` for their votes, after sending the ticket itself to
    /// `lacks_ticket` (the part of `rest` that never heard of it).
    Ask {
        /// Leaders to ask.
        rest: u8,
        /// Leaders to tell of the ticket first.
        lacks_ticket: u8,
    },
}

impl Ballot {
    /// The tally of a grant among `leaders` in all, `majority` of them
    /// needed. `count_refused` plants a bug (refusals counted as votes), for
    /// the simulator to catch.
    pub(crate) fn tally(
        &self,
        leaders: u32,
        majority: u32,
        acting: bool,
        count_refused: bool,
    ) -> Tally {
        let Ballot {
            votes,
            refused,
            asked,
        } = *self;
        let answered = votes | refused;
        let counted = if count_refused {
            answered.count_ones()
        } else {
            votes.count_ones()
        };
        if counted >= majority {
            if acting {
                Tally::Grant
            } else {
                Tally::NotActing
            }
        } else if answered & asked == asked && asked.count_ones() < leaders {
            Tally::AskOthers
        } else if answered.count_ones() >= leaders {
            Tally::Retry
        } else {
            Tally::Pending
        }
    }

    /// Whom to ask about a grant short of its majority: the leaders not asked
    /// yet; once all were asked and `again`, those that did not answer (a link
    /// that broke and came back lost the question), never the owner `me`.
    /// `has_ticket`: the leaders that have the ticket; `all`: every leader.
    pub(crate) fn widen(
        &self,
        has_ticket: u8,
        all: u8,
        me: u8,
        majority: u32,
        again: bool,
    ) -> Widen {
        let Ballot {
            votes,
            refused,
            asked,
        } = *self;
        if votes.count_ones() >= majority {
            return Widen::Enough;
        }
        let (rest, lacks_ticket) = if asked != all {
            let rest = all & !asked;
            (rest, rest & !has_ticket)
        } else if again {
            let silent = asked & !(votes | refused) & !me;
            (silent, silent)
        } else {
            return Widen::NobodyLeft;
        };
        if rest == 0 {
            Widen::NobodyLeft
        } else {
            Widen::Ask { rest, lacks_ticket }
        }
    }
}

/// The leaders a new ticket goes to first: the owner `me` and as many
/// others as a majority of `n` needs, among those `linked` now, the home
/// first when it is another leader (it has a link, it just sent the
/// request), then in ring order after the owner. Every leader when too few
/// are linked. The others are asked only when these do not make the
/// majority ([`Ballot::widen`]), so every grant costs one agent less.
pub(crate) fn first_followers(
    n: usize,
    me: usize,
    home: Option<usize>,
    linked: impl Fn(usize) -> bool,
) -> u8 {
    let all = ((1u16 << n) - 1) as u8;
    let need = n / 2;
    // The others from the one after this leader on, the home first (when
    // it is one of them); walked, not collected.
    let home = home.filter(|&h| h != me && h < n);
    let order = home
        .into_iter()
        .chain((1..n).map(|k| (me + k) % n).filter(|&i| Some(i) != home));
    let (mut mask, mut chosen) = (1 << me, 0);
    for i in order.filter(|&i| linked(i)).take(need) {
        mask |= 1 << i;
        chosen += 1;
    }
    if chosen < need {
        return all;
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `{0,2}` → 0b101.
    fn set(text: &str) -> u8 {
        let inner = text
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or_else(|| panic!("not a set: {text}"));
        inner
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|i| 1u8 << i.parse::<u8>().expect("a leader index"))
            .fold(0, |m, b| m | b)
    }

    fn show(mask: u8) -> String {
        let members: Vec<String> = (0..8)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| i.to_string())
            .collect();
        format!("{{{}}}", members.join(","))
    }

    /// `key=value` words of one case.
    fn field<'a>(words: &[&'a str], key: &str) -> &'a str {
        words
            .iter()
            .find_map(|w| w.strip_prefix(key).and_then(|w| w.strip_prefix('=')))
            .unwrap_or_else(|| panic!("no {key}= in {words:?}"))
    }

    fn ballot(words: &[&str]) -> Ballot {
        Ballot {
            votes: set(field(words, "votes")),
            refused: set(field(words, "refused")),
            asked: set(field(words, "asked")),
        }
    }

    #[test]
    fn the_cases_of_testdata_hold() {
        let data = include_str!("testdata/votes.txt");
        let mut cases = 0;
        for (n, line) in data.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (given, want) = line
                .split_once("=>")
                .unwrap_or_else(|| panic!("line {}: no =>", n + 1));
            let words: Vec<&str> = given.split_whitespace().collect();
            let want = want.trim();
            let leaders: u32 = field(&words, "leaders").parse().expect("a count");
            let all = ((1u16 << leaders) - 1) as u8;
            let majority = leaders / 2 + 1;
            let got = match words[0] {
                "tally" => format!(
                    "{:?}",
                    ballot(&words).tally(
                        leaders,
                        majority,
                        field(&words, "acting") == "yes",
                        false,
                    )
                ),
                "widen" => match ballot(&words).widen(
                    set(field(&words, "has_ticket")),
                    all,
                    1 << field(&words, "me").parse::<u8>().expect("an index"),
                    majority,
                    field(&words, "again") == "yes",
                ) {
                    Widen::Ask { rest, lacks_ticket } => {
                        format!(
                            "Ask rest={} lacks_ticket={}",
                            show(rest),
                            show(lacks_ticket)
                        )
                    }
                    other => format!("{other:?}"),
                },
                "first" => {
                    let linked = set(field(&words, "linked"));
                    let home = field(&words, "home");
                    let home = (home != "-").then(|| home.parse().expect("an index"));
                    let me = field(&words, "me").parse().expect("an index");
                    show(first_followers(leaders as usize, me, home, |i| {
                        linked & (1 << i) != 0
                    }))
                }
                other => panic!("line {}: unknown case {other}", n + 1),
            };
            assert_eq!(got, want, "line {}: {line}", n + 1);
            cases += 1;
        }
        assert!(cases >= 30, "only {cases} cases read");
    }

    #[test]
    fn a_planted_count_of_refusals_grants_without_a_majority() {
        // The bug the simulator must catch (S1): two refusals of three
        // counted as votes.
        let b = Ballot {
            votes: 0b001,
            refused: 0b110,
            asked: 0b111,
        };
        assert_eq!(b.tally(3, 2, true, true), Tally::Grant);
        assert_eq!(b.tally(3, 2, true, false), Tally::Retry);
    }
}
