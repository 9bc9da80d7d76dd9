use std::collections::BTreeMap;

use snaplock_proto::local::acl::{Action, Peer};

use super::*;

/// A user and group database in a table.
struct Table {
    users: BTreeMap<&'static str, u32>,
    groups: Vec<(&'static str, u32, Vec<&'static str>)>,
}

fn table() -> Table {
    Table {
        users: [
            ("root", 0),
            ("alice", 1000),
            ("bob", 1001),
            ("www-data", 33),
            ("nobody", 65534),
        ]
        .into_iter()
        .collect(),
        groups: vec![
            ("staff", 50, vec!["alice", "bob", "gone"]),
            ("nogroup", 65534, vec![]),
            ("adm", 4, vec!["alice"]),
        ],
    }
}

impl Directory for Table {
    fn user(&self, name: &str) -> Result<Option<u32>, String> {
        if name == "broken" {
            return Err("the database is down".to_owned());
        }
        Ok(self.users.get(name).copied())
    }

    fn group(&self, name: &str) -> Result<Option<GroupEntry>, String> {
        Ok(self
            .groups
            .iter()
            .find(|g| g.0 == name)
            .map(|g| GroupEntry {
                gid: g.1,
                members: g.2.iter().map(|m| m.to_string()).collect(),
            }))
    }

    fn group_by_gid(&self, gid: u32) -> Result<Option<GroupEntry>, String> {
        let name = self.groups.iter().find(|g| g.1 == gid).map(|g| g.0);
        match name {
            Some(name) => self.group(name),
            None => Ok(None),
        }
    }
}

fn parsed(text: &str) -> Acl {
    parse("acl", text, &table()).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn error(text: &str) -> String {
    match parse("acl", text, &table()) {
        Ok(acl) => panic!("{text:?} was accepted: {acl:?}"),
        Err(e) => e.0,
    }
}

const NOBODY: Peer = Peer {
    ids: Some((65534, 65534)),
};
const X: Action = Action::Lock(Mode::Exclusive);

#[test]
fn a_file_with_every_form_parses_to_its_rules() {
    let acl = parsed(
        "# who may lock what\n\
         \n\
         user nobody: o4/public/\n\
         group staff modes=shared,counted commands=LOCK: db/ \"with blank/\"\n\
         user 1234 commands=TRANSACTION: jobs/\n\
         \t* : https://example.com/public#\n\
         communicator: *\n",
    );
    assert_eq!(acl.rules.len(), 5);
    let r = &acl.rules[0];
    assert_eq!((r.line, r.written.as_str()), (3, "user nobody"));
    assert_eq!(r.who, Who::User(65534));
    assert_eq!((r.modes, r.commands), (Modes::ALL, Commands::ALL));
    assert_eq!(r.prefixes, vec![b"o4/public/".to_vec()]);
    let r = &acl.rules[1];
    assert_eq!(
        r.who,
        Who::Group {
            gid: 50,
            members: vec![1000, 1001]
        },
        "the member the user database does not know is left out"
    );
    assert_eq!(r.modes, Modes::NONE.with(Mode::Shared).with(Mode::Counted));
    assert_eq!(
        r.commands,
        Commands {
            lock: true,
            transaction: false
        }
    );
    assert_eq!(r.prefixes, vec![b"db/".to_vec(), b"with blank/".to_vec()]);
    assert_eq!(acl.rules[2].who, Who::User(1234));
    assert!(!acl.rules[2].commands.lock);
    assert_eq!(acl.rules[3].who, Who::Anyone);
    assert_eq!(
        acl.rules[3].prefixes,
        vec![b"https://example.com/public#".to_vec()],
        "a '#' after the start of a line is part of the prefix, and ':' after the first too"
    );
    assert_eq!(acl.rules[4].who, Who::Communicator);
    assert_eq!(acl.rules[4].prefixes, vec![Vec::new()], "* is every name");
}

#[test]
fn a_parsed_file_decides_as_written() {
    let acl = parsed("user nobody: o4/public/\n");
    assert_eq!(acl.check(NOBODY, b"o4/public/x", X), Ok(()));
    let why = acl.check(NOBODY, b"o4/x", X).unwrap_err();
    assert!(why.starts_with("no rule of acl grants uid 65534"), "{why}");
}

#[test]
fn an_empty_file_has_no_rule_and_refuses_everything() {
    let acl = parsed("# nothing yet\n\n");
    assert!(acl.rules.is_empty());
    assert!(acl.check(NOBODY, b"x", X).is_err());
}

#[test]
fn quoted_prefixes_take_escaped_quotes_and_backslashes() {
    let acl = parsed(r#"user 0: "a \"b\" c\\" "*" """#);
    assert_eq!(
        acl.rules[0].prefixes,
        vec![br#"a "b" c\"#.to_vec(), b"*".to_vec(), Vec::new()],
        "a quoted * is a literal *; an empty quoted prefix is every name"
    );
}

#[test]
fn errors_name_the_file_the_line_and_the_fault() {
    for (text, expected) in [
        ("user nobody o4/\n", "acl:1: no ':'"),
        ("\nusr nobody: o4/\n", "acl:2: unknown WHO \"usr\""),
        ("user: o4/\n", "acl:1: user without a name"),
        (": o4/\n", "acl:1: nothing before ':'"),
        ("user nobody:\n", "acl:1: no prefix after ':'"),
        ("user nobody:   \n", "acl:1: no prefix after ':'"),
        ("user mallory: o4/\n", "acl:1: no such user \"mallory\""),
        ("group wheel: o4/\n", "acl:1: no such group \"wheel\""),
        (
            "user broken: o4/\n",
            "acl:1: cannot look the user \"broken\" up",
        ),
        ("user 4294967296: o4/\n", "acl:1: 4294967296 is not an id"),
        (
            "user nobody modes=write: o4/\n",
            "acl:1: unknown mode \"write\"",
        ),
        ("user nobody modes=: o4/\n", "acl:1: unknown mode \"\""),
        (
            "user nobody commands=lock: o4/\n",
            "acl:1: unknown command \"lock\"",
        ),
        (
            "user nobody modes=shared modes=counted: o4/\n",
            "acl:1: modes= given twice",
        ),
        (
            "user nobody limit=3: o4/\n",
            "acl:1: unknown option \"limit=3\"",
        ),
        (
            "user nobody: \"o4/\n",
            "acl:1: a quoted prefix is not closed",
        ),
        (
            "user nobody: \"o4/\"x\n",
            "acl:1: a quoted prefix must be followed by a blank",
        ),
        (
            "user nobody: \"a\\n\"\n",
            "acl:1: in a quoted prefix, \\ is followed",
        ),
        ("user nobody: o4\"x\n", "acl:1: a '\"' inside the prefix"),
    ] {
        let e = error(text);
        assert!(e.starts_with(expected), "{text:?}: {e}");
    }
}

#[test]
fn a_numeric_gid_unknown_to_the_database_matches_as_a_gid() {
    let acl = parsed("group 777: x/\n");
    assert_eq!(
        acl.rules[0].who,
        Who::Group {
            gid: 777,
            members: vec![]
        }
    );
}

#[test]
fn the_bounds_of_the_file_are_enforced() {
    let many = "user 0: a\n".repeat(MAX_RULES + 1);
    assert!(error(&many).contains(&format!("more than {MAX_RULES} rules")));
    let wide = format!("user 0:{}\n", " p".repeat(MAX_PREFIXES + 1));
    assert!(error(&wide).contains("prefixes in the file"));
    let long = format!("user 0: {}\n", "p".repeat(MAX_PREFIX_LEN + 1));
    assert!(error(&long).contains("longer than 4096 bytes"));
}

#[test]
fn loading_reads_a_regular_file_and_names_it_in_errors() {
    let dir = std::env::temp_dir().join(format!("snaplock-acl-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("acl");
    std::fs::write(&path, "user nobody: o4/\n").unwrap();
    let acl = load(&path, &table()).expect("loads");
    assert_eq!(acl.source, path.display().to_string());
    std::fs::write(&path, b"user nobody: \xff\n").unwrap();
    assert!(load(&path, &table()).unwrap_err().0.contains("not UTF-8"));
    let missing = load(&dir.join("missing"), &table()).unwrap_err().0;
    assert!(missing.starts_with("cannot read the acl_file"), "{missing}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_example_of_the_manual_page_parses_and_decides_as_it_says() {
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../man/snaplock.conf.5"),
    )
    .expect("the manual page");
    let example: String = page
        .lines()
        .skip_while(|l| *l != "# /etc/snaplock/acl")
        .take_while(|l| *l != ".EE")
        .map(|l| l.replace("\\-", "-") + "\n")
        .collect();
    let acl = parsed(&example);
    assert_eq!(acl.rules.len(), 5, "{example}");
    let www = Peer {
        ids: Some((33, 33)),
    };
    let alice = Peer {
        ids: Some((1000, 1000)),
    };
    let session = Peer { ids: None };
    assert_eq!(acl.check(www, b"https://example.com/a", X), Ok(()));
    assert!(acl.check(NOBODY, b"db/t", X).is_err());
    assert_eq!(
        acl.check(NOBODY, b"db/t", Action::Lock(Mode::Shared)),
        Ok(())
    );
    assert_eq!(acl.check(NOBODY, b"jobs.1", Action::Transaction), Ok(()));
    assert_eq!(acl.check(alice, b"anything", X), Ok(()), "alice is of adm");
    assert_eq!(acl.check(session, b"legacy lock/1", X), Ok(()));
    assert!(acl.check(session, b"db/t", X).is_err());
}
