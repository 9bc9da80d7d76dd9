//! `acl_file`: who may lock which names (snaplock.conf(5), ACCESS CONTROL).
//!
//! One rule a line, `#` comments and blank lines:
//!
//! ```text
//! WHO [modes=MODE,...] [commands=COMMAND,...]: PREFIX...
//! WHO = user NAME|UID | group NAME|GID | * | communicator
//! ```
//!
//! Every user and group name is resolved to its id here, when the file is
//! loaded, and so are the members the group database lists for each
//! group: the core compares ids only, and no request waits for the
//! system's user database. Loading is bounded by the core's limits
//! ([`snaplock_proto::local::acl`]) and by [`MAX_ACL_FILE`].

use std::path::Path;

use snaplock_proto::local::acl::{
    Acl, Commands, MAX_MEMBERS, MAX_PREFIX_LEN, MAX_PREFIXES, MAX_RULES, Modes, Rule, Who,
};
use snaplock_proto::vocab::{Mode, parse_u64};

use super::ConfigError;
use crate::files::{self, shown};

/// The largest `acl_file` read, in bytes.
pub const MAX_ACL_FILE: u64 = 1 << 20;

/// A group as the group database gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupEntry {
    /// Its id.
    pub gid: u32,
    /// The names of its listed members.
    pub members: Vec<String>,
}

/// Where names are looked up: the system's databases ([`System`]), or a
/// table in tests. `Ok(None)` is "no such entry".
pub trait Directory {
    /// A user's uid.
    fn user(&self, name: &str) -> Result<Option<u32>, String>;
    /// A group by name.
    fn group(&self, name: &str) -> Result<Option<GroupEntry>, String>;
    /// A group by id.
    fn group_by_gid(&self, gid: u32) -> Result<Option<GroupEntry>, String>;
}

/// The system's user and group databases (NSS).
#[derive(Debug, Clone, Copy, Default)]
pub struct System;

fn entry(g: nix::unistd::Group) -> GroupEntry {
    GroupEntry {
        gid: g.gid.as_raw(),
        members: g.mem,
    }
}

impl Directory for System {
    fn user(&self, name: &str) -> Result<Option<u32>, String> {
        nix::unistd::User::from_name(name)
            .map(|u| u.map(|u| u.uid.as_raw()))
            .map_err(|e| e.to_string())
    }

    fn group(&self, name: &str) -> Result<Option<GroupEntry>, String> {
        nix::unistd::Group::from_name(name)
            .map(|g| g.map(entry))
            .map_err(|e| e.to_string())
    }

    fn group_by_gid(&self, gid: u32) -> Result<Option<GroupEntry>, String> {
        nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
            .map(|g| g.map(entry))
            .map_err(|e| e.to_string())
    }
}

/// Reads and resolves the file at `path`: a regular file of at most
/// [`MAX_ACL_FILE`] bytes of UTF-8 text.
pub fn load(path: &Path, dir: &dyn Directory) -> Result<Acl, ConfigError> {
    let (bytes, _) = files::read_regular(path, MAX_ACL_FILE)
        .map_err(|e| ConfigError(format!("cannot read the acl_file {}: {e}", path.display())))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        ConfigError(format!(
            "{}: the acl_file is not UTF-8 text",
            path.display()
        ))
    })?;
    parse(&path.display().to_string(), &text, dir)
}

/// What the file holds so far, against the bounds.
#[derive(Default)]
struct Counts {
    prefixes: usize,
    members: usize,
}

/// Parses the text of an `acl_file` named `source`; errors say
/// `source:LINE: why`.
pub fn parse(source: &str, text: &str, dir: &dyn Directory) -> Result<Acl, ConfigError> {
    let mut rules = Vec::new();
    let mut counts = Counts::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |why: String| ConfigError(format!("{source}:{}: {why}", i + 1));
        if rules.len() == MAX_RULES {
            return Err(at(format!("more than {MAX_RULES} rules")));
        }
        let rule = parse_rule(i + 1, line, dir, &mut counts).map_err(at)?;
        rules.push(rule);
    }
    Ok(Acl {
        source: source.to_owned(),
        rules,
    })
}

const GRAMMAR: &str = "a rule is WHO [modes=MODE,...] [commands=COMMAND,...]: PREFIX..., where WHO is \
     user NAME, group NAME, * or communicator";

fn parse_rule(
    line: usize,
    text: &str,
    dir: &dyn Directory,
    counts: &mut Counts,
) -> Result<Rule, String> {
    // Names and options hold no ':', so the first one ends them; the
    // prefixes may hold any (URLs).
    let Some((head, tail)) = text.split_once(':') else {
        return Err(format!("no ':' in {}: {GRAMMAR}", shown(text)));
    };
    let mut words = head.split_whitespace();
    let (written, who) = match words.next() {
        Some("*") => ("*".to_owned(), Who::Anyone),
        Some("communicator") => ("communicator".to_owned(), Who::Communicator),
        Some(kind @ ("user" | "group")) => {
            let Some(name) = words.next() else {
                return Err(format!("{kind} without a name: {GRAMMAR}"));
            };
            let who = if kind == "user" {
                Who::User(user_id(name, dir)?)
            } else {
                group(name, dir, counts)?
            };
            (format!("{kind} {name}"), who)
        }
        Some(other) => return Err(format!("unknown WHO {}: {GRAMMAR}", shown(other))),
        None => return Err(format!("nothing before ':': {GRAMMAR}")),
    };
    let mut modes = None;
    let mut commands = None;
    for word in words {
        let (option, value) = word.split_once('=').unwrap_or((word, ""));
        match option {
            "modes" if modes.is_none() => modes = Some(parse_modes(value)?),
            "commands" if commands.is_none() => commands = Some(parse_commands(value)?),
            "modes" | "commands" => return Err(format!("{option}= given twice")),
            _ => {
                return Err(format!(
                    "unknown option {} (options: modes=, commands=)",
                    shown(word)
                ));
            }
        }
    }
    let prefixes = parse_prefixes(tail)?;
    if prefixes.is_empty() {
        return Err("no prefix after ':' (write * for every name)".to_owned());
    }
    counts.prefixes += prefixes.len();
    if counts.prefixes > MAX_PREFIXES {
        return Err(format!("more than {MAX_PREFIXES} prefixes in the file"));
    }
    Ok(Rule {
        line,
        written,
        who,
        modes: modes.unwrap_or(Modes::ALL),
        commands: commands.unwrap_or(Commands::ALL),
        prefixes,
    })
}

/// Digits only: an id as is.
fn numeric(name: &str) -> Result<Option<u32>, String> {
    match parse_u64(name.as_bytes()) {
        None => Ok(None),
        Some(n) => u32::try_from(n)
            .map(Some)
            .map_err(|_| format!("{n} is not an id (0 to 4294967295)")),
    }
}

fn user_id(name: &str, dir: &dyn Directory) -> Result<u32, String> {
    if let Some(uid) = numeric(name)? {
        return Ok(uid);
    }
    match dir.user(name) {
        Ok(Some(uid)) => Ok(uid),
        Ok(None) => Err(format!("no such user {}", shown(name))),
        Err(e) => Err(format!("cannot look the user {} up: {e}", shown(name))),
    }
}

fn group(name: &str, dir: &dyn Directory, counts: &mut Counts) -> Result<Who, String> {
    let found = match numeric(name)? {
        Some(gid) => dir.group_by_gid(gid).map(|g| {
            // A gid the database does not know still matches as a gid.
            Some(g.unwrap_or(GroupEntry {
                gid,
                members: Vec::new(),
            }))
        }),
        None => dir.group(name),
    };
    let entry = match found {
        Ok(Some(entry)) => entry,
        Ok(None) => return Err(format!("no such group {}", shown(name))),
        Err(e) => return Err(format!("cannot look the group {} up: {e}", shown(name))),
    };
    counts.members += entry.members.len();
    if counts.members > MAX_MEMBERS {
        return Err(format!(
            "the groups of the file list more than {MAX_MEMBERS} members"
        ));
    }
    let mut members = Vec::with_capacity(entry.members.len());
    for member in &entry.members {
        // A member the user database no longer knows can connect as
        // nobody: it is left out, as the system itself would.
        match dir.user(member) {
            Ok(Some(uid)) => members.push(uid),
            Ok(None) => {}
            Err(e) => {
                return Err(format!(
                    "cannot look up the user {} of the group {}: {e}",
                    shown(member),
                    shown(name)
                ));
            }
        }
    }
    members.sort_unstable();
    members.dedup();
    Ok(Who::Group {
        gid: entry.gid,
        members,
    })
}

fn parse_modes(value: &str) -> Result<Modes, String> {
    let mut modes = Modes::NONE;
    for word in value.split(',') {
        let mode = match word {
            "exclusive" => Mode::Exclusive,
            "shared" => Mode::Shared,
            "counted" => Mode::Counted,
            _ => {
                return Err(format!(
                    "unknown mode {} in modes= (modes: exclusive, shared, counted)",
                    shown(word)
                ));
            }
        };
        modes = modes.with(mode);
    }
    Ok(modes)
}

fn parse_commands(value: &str) -> Result<Commands, String> {
    let mut commands = Commands {
        lock: false,
        transaction: false,
    };
    for word in value.split(',') {
        match word {
            "LOCK" => commands.lock = true,
            "TRANSACTION" => commands.transaction = true,
            _ => {
                return Err(format!(
                    "unknown command {} in commands= (commands: LOCK, TRANSACTION)",
                    shown(word)
                ));
            }
        }
    }
    Ok(commands)
}

/// Blank-separated prefixes: bare words, `"quoted"` ones (with `\"` and
/// `\\`) for a prefix with blanks or quotes, and `*` for every name.
fn parse_prefixes(text: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut prefixes = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(&first) = chars.peek() else {
            return Ok(prefixes);
        };
        let mut prefix = String::new();
        if first == '"' {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err("a quoted prefix is not closed".to_owned()),
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(c @ ('"' | '\\')) => prefix.push(c),
                        _ => {
                            return Err(
                                "in a quoted prefix, \\ is followed by \" or \\ only".to_owned()
                            );
                        }
                    },
                    Some(c) => prefix.push(c),
                }
            }
            if chars.peek().is_some_and(|c| !c.is_whitespace()) {
                return Err("a quoted prefix must be followed by a blank".to_owned());
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '"' {
                    return Err(format!(
                        "a '\"' inside the prefix {}: quote the whole prefix",
                        shown(&prefix)
                    ));
                }
                prefix.push(c);
            }
            if prefix == "*" {
                prefix.clear();
            }
        }
        if prefix.len() > MAX_PREFIX_LEN {
            return Err(format!(
                "a prefix is longer than {MAX_PREFIX_LEN} bytes, the longest object name"
            ));
        }
        prefixes.push(prefix.into_bytes());
    }
}

#[cfg(test)]
mod tests;
