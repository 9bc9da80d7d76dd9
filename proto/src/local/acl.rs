//! Who may lock which names: the rules of `acl_file` as plain data, and
//! the one decision made from them (snaplock.conf(5), ACCESS CONTROL).
//!
//! The agent reads the file and resolves every user and group name to its
//! ids when it loads it; here only ids are compared, so a decision never
//! asks the system anything. The rules are a union: a request is allowed
//! when any rule that matches the connection grants it; the order of the
//! rules decides nothing but which one a refusal names.

use crate::vocab::Mode;

/// Most rules in one file.
pub const MAX_RULES: usize = 4096;
/// Most prefixes in one file, over all its rules.
pub const MAX_PREFIXES: usize = 16_384;
/// Most user ids the groups of one file list as their members, in all.
pub const MAX_MEMBERS: usize = 65_536;
/// Longest prefix, in bytes: an object name is at most this long.
pub const MAX_PREFIX_LEN: usize = 4096;

/// Whom a rule is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Who {
    /// `user NAME|UID`: a local connection of this uid.
    User(u32),
    /// `group NAME|GID`: a local connection whose gid is this one, or whose
    /// uid is among the group's members as the group database listed them
    /// when the file was loaded (`members`, sorted).
    Group {
        /// The group's id.
        gid: u32,
        /// Its members' uids, sorted, without duplicates.
        members: Vec<u32>,
    },
    /// `*`: every connection, the communicator sessions included.
    Anyone,
    /// `communicator`: the sessions of `communicator_listen`, which have no
    /// peer credentials.
    Communicator,
}

/// What a connection is, as far as the rules are concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The uid and gid of `SO_PEERCRED`; `None` for a connection without
    /// credentials (a communicator session).
    pub ids: Option<(u32, u32)>,
}

impl Peer {
    fn describe(self) -> String {
        match self.ids {
            Some((uid, gid)) => format!("uid {uid} (gid {gid})"),
            None => "a communicator session".to_owned(),
        }
    }
}

impl Who {
    fn matches(&self, peer: Peer) -> bool {
        match (self, peer.ids) {
            (Who::Anyone, _) => true,
            (Who::Communicator, ids) => ids.is_none(),
            (Who::User(u), Some((uid, _))) => *u == uid,
            (Who::Group { gid, members }, Some((uid, peer_gid))) => {
                *gid == peer_gid || members.binary_search(&uid).is_ok()
            }
            (Who::User(_) | Who::Group { .. }, None) => false,
        }
    }
}

/// What a request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `LOCK` in this mode, on an object name.
    Lock(Mode),
    /// `TRANSACTION`, in a namespace.
    Transaction,
}

impl Action {
    fn describe(self) -> String {
        match self {
            Action::Lock(mode) => format!("LOCK mode={} on this name", mode.as_str()),
            Action::Transaction => "TRANSACTION in this namespace".to_owned(),
        }
    }
}

/// The lock modes a rule grants, one bit per [`Mode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Modes(u8);

impl Modes {
    /// Every mode: what a rule without `modes=` grants.
    pub const ALL: Modes = Modes(0b111);
    /// No mode yet.
    pub const NONE: Modes = Modes(0);

    fn bit(mode: Mode) -> u8 {
        match mode {
            Mode::Exclusive => 1,
            Mode::Shared => 2,
            Mode::Counted => 4,
        }
    }

    /// `self` and `mode`.
    pub fn with(self, mode: Mode) -> Modes {
        Modes(self.0 | Self::bit(mode))
    }

    /// Whether `mode` is granted.
    pub fn contains(self, mode: Mode) -> bool {
        self.0 & Self::bit(mode) != 0
    }

    fn describe(self) -> String {
        [Mode::Exclusive, Mode::Shared, Mode::Counted]
            .into_iter()
            .filter(|&m| self.contains(m))
            .map(Mode::as_str)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The commands a rule grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commands {
    /// `LOCK`, in the rule's modes.
    pub lock: bool,
    /// `TRANSACTION`, whatever the rule's modes.
    pub transaction: bool,
}

impl Commands {
    /// Both: what a rule without `commands=` grants.
    pub const ALL: Commands = Commands {
        lock: true,
        transaction: true,
    };
}

/// One line of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Its line in the file, for refusals and logs.
    pub line: usize,
    /// Whom it is for, as written (`user nobody`), for refusals.
    pub written: String,
    /// Whom it is for.
    pub who: Who,
    /// The modes it grants to `LOCK`.
    pub modes: Modes,
    /// The commands it grants.
    pub commands: Commands,
    /// The name prefixes it grants; an empty one grants every name.
    pub prefixes: Vec<Vec<u8>>,
}

impl Rule {
    fn covers(&self, name: &[u8]) -> bool {
        self.prefixes.iter().any(|p| name.starts_with(p))
    }

    fn grants(&self, action: Action) -> bool {
        match action {
            Action::Lock(mode) => self.commands.lock && self.modes.contains(mode),
            Action::Transaction => self.commands.transaction,
        }
    }

    /// What it grants, for a refusal that names it.
    fn describe_grant(&self) -> String {
        let mut what = Vec::new();
        if self.commands.lock {
            what.push(format!("LOCK in modes {}", self.modes.describe()));
        }
        if self.commands.transaction {
            what.push("TRANSACTION".to_owned());
        }
        what.join(" and ")
    }
}

/// The rules of one `acl_file`, in the order of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl {
    /// The file's path, named in refusals.
    pub source: String,
    /// The rules.
    pub rules: Vec<Rule>,
}

impl Acl {
    /// `Ok` when a rule that matches `peer` covers `name` and grants
    /// `action`; else the refusal's description. It names the first rule
    /// that matches `peer` and covers `name` but grants less, or says that
    /// no rule covers the name for this connection.
    pub fn check(&self, peer: Peer, name: &[u8], action: Action) -> Result<(), String> {
        let mut closest = None;
        for rule in &self.rules {
            if !rule.who.matches(peer) || !rule.covers(name) {
                continue;
            }
            if rule.grants(action) {
                return Ok(());
            }
            closest = closest.or(Some(rule));
        }
        Err(match closest {
            Some(rule) => format!(
                "{} line {} ({}) grants {} on this name only {}",
                self.source,
                rule.line,
                rule.written,
                peer.describe(),
                rule.describe_grant()
            ),
            None => format!(
                "no rule of {} grants {} {}",
                self.source,
                peer.describe(),
                action.describe()
            ),
        })
    }

    /// Whether `peer` may `LOCK` `name` in some mode: what `LISTTICKETS`
    /// shows it.
    pub fn may_lock(&self, peer: Peer, name: &[u8]) -> bool {
        self.rules.iter().any(|rule| {
            rule.commands.lock
                && rule.modes != Modes::NONE
                && rule.who.matches(peer)
                && rule.covers(name)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(line: usize, written: &str, who: Who, prefixes: &[&str]) -> Rule {
        Rule {
            line,
            written: written.to_owned(),
            who,
            modes: Modes::ALL,
            commands: Commands::ALL,
            prefixes: prefixes.iter().map(|p| p.as_bytes().to_vec()).collect(),
        }
    }

    fn acl(rules: Vec<Rule>) -> Acl {
        Acl {
            source: "/etc/snaplock/acl".to_owned(),
            rules,
        }
    }

    const NOBODY: Peer = Peer {
        ids: Some((65534, 65534)),
    };
    const ALICE: Peer = Peer {
        ids: Some((1000, 1000)),
    };
    const SESSION: Peer = Peer { ids: None };
    const X: Action = Action::Lock(Mode::Exclusive);

    #[test]
    fn a_user_rule_grants_its_prefixes_and_nothing_else() {
        let a = acl(vec![rule(
            1,
            "user nobody",
            Who::User(65534),
            &["o4/public/"],
        )]);
        assert_eq!(a.check(NOBODY, b"o4/public/page", X), Ok(()));
        let why = a.check(NOBODY, b"o4/private/page", X).unwrap_err();
        assert_eq!(
            why,
            "no rule of /etc/snaplock/acl grants uid 65534 (gid 65534) LOCK mode=exclusive on this name"
        );
        assert!(a.check(ALICE, b"o4/public/page", X).is_err());
        assert!(a.check(SESSION, b"o4/public/page", X).is_err());
    }

    #[test]
    fn rules_are_a_union_whatever_their_order() {
        let mut shared_only = rule(
            1,
            "group staff",
            Who::Group {
                gid: 50,
                members: vec![1000],
            },
            &["db/"],
        );
        shared_only.modes = Modes::NONE.with(Mode::Shared);
        let all = rule(2, "user 1000", Who::User(1000), &["db/"]);
        for rules in [
            vec![shared_only.clone(), all.clone()],
            vec![all, shared_only],
        ] {
            assert_eq!(acl(rules).check(ALICE, b"db/x", X), Ok(()));
        }
    }

    #[test]
    fn a_refusal_names_the_rule_that_covers_the_name_but_grants_less() {
        let mut r = rule(3, "user nobody", Who::User(65534), &["o4/"]);
        r.modes = Modes::NONE.with(Mode::Shared).with(Mode::Counted);
        r.commands.transaction = false;
        let a = acl(vec![r]);
        assert_eq!(a.check(NOBODY, b"o4/a", Action::Lock(Mode::Shared)), Ok(()));
        assert_eq!(
            a.check(NOBODY, b"o4/a", X).unwrap_err(),
            "/etc/snaplock/acl line 3 (user nobody) grants uid 65534 (gid 65534) on this name \
             only LOCK in modes shared,counted"
        );
        assert!(
            a.check(NOBODY, b"o4/a", Action::Transaction)
                .unwrap_err()
                .contains("line 3")
        );
    }

    #[test]
    fn a_group_matches_the_primary_gid_and_the_listed_members() {
        let a = acl(vec![rule(
            1,
            "group staff",
            Who::Group {
                gid: 50,
                members: vec![1000, 1001],
            },
            &[""],
        )]);
        assert_eq!(a.check(ALICE, b"anything", X), Ok(()));
        let primary = Peer {
            ids: Some((2000, 50)),
        };
        assert_eq!(a.check(primary, b"anything", X), Ok(()));
        assert!(a.check(NOBODY, b"anything", X).is_err());
        assert!(a.check(SESSION, b"anything", X).is_err());
    }

    #[test]
    fn communicator_sessions_match_only_communicator_and_anyone() {
        let a = acl(vec![
            rule(1, "communicator", Who::Communicator, &["comm/"]),
            rule(2, "*", Who::Anyone, &["open/"]),
        ]);
        assert_eq!(a.check(SESSION, b"comm/1", X), Ok(()));
        assert_eq!(a.check(SESSION, b"open/1", X), Ok(()));
        assert!(a.check(NOBODY, b"comm/1", X).is_err());
        assert_eq!(a.check(NOBODY, b"open/1", X), Ok(()));
        assert!(
            a.check(SESSION, b"x", X)
                .unwrap_err()
                .contains("grants a communicator session")
        );
    }

    #[test]
    fn a_transaction_is_granted_by_commands_whatever_the_modes() {
        let mut r = rule(1, "user nobody", Who::User(65534), &["ns/"]);
        r.modes = Modes::NONE.with(Mode::Shared);
        r.commands.lock = false;
        let a = acl(vec![r]);
        assert_eq!(a.check(NOBODY, b"ns/1", Action::Transaction), Ok(()));
        assert!(
            a.check(NOBODY, b"ns/1", Action::Lock(Mode::Shared))
                .is_err()
        );
        assert!(
            !a.may_lock(NOBODY, b"ns/1"),
            "a TRANSACTION-only rule lists nothing"
        );
    }

    #[test]
    fn may_lock_is_true_for_any_granted_mode() {
        let mut r = rule(1, "user nobody", Who::User(65534), &["o4/public/"]);
        r.modes = Modes::NONE.with(Mode::Counted);
        let a = acl(vec![r]);
        assert!(a.may_lock(NOBODY, b"o4/public/x"));
        assert!(!a.may_lock(NOBODY, b"o4/x"));
        assert!(!a.may_lock(ALICE, b"o4/public/x"));
    }
}
