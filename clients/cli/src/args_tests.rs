use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::time::Duration;

use super::*;

fn parse(args: &[&str]) -> Result<Command, UsageError> {
    parse_command(args.iter().map(OsString::from))
}

fn lock(args: &[&str]) -> LockArgs {
    match parse(args).expect("valid").action {
        Action::Lock(l) => l,
        other => panic!("not a lock: {other:?}"),
    }
}

fn usage_error(args: &[&str]) -> String {
    parse(args).expect_err("a usage error").0
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

#[test]
fn lock_has_flock_like_defaults() {
    let l = lock(&["lock", "name", "true"]);
    assert_eq!(l.name, b"name");
    // flock(1) waits forever: as long as the agent allows here.
    assert_eq!(l.wait, Duration::from_secs(604_800));
    assert_eq!(l.lease, Duration::from_secs(60));
    assert!(!l.try_once && !l.shared);
    assert_eq!(l.counted, None);
    assert_eq!((l.min_uptime, l.min_trust), (None, None));
    assert_eq!(l.conflict_code, 1);
    assert!(!l.unit, "a lock belongs to its connection unless --unit");
    assert_eq!(l.command, os(&["true"]));
}

#[test]
fn unit_is_a_flag_before_the_name_and_the_command_keeps_its_own() {
    let l = lock(&["lock", "--unit", "backup", "--", "tar", "--unit"]);
    assert!(l.unit);
    assert_eq!(l.name, b"backup");
    assert_eq!(l.command, os(&["tar", "--unit"]));
    let l = lock(&["lock", "backup", "--unit"]);
    assert!(!l.unit, "after NAME it is the command");
    assert_eq!(l.command, os(&["--unit"]));
}

#[test]
fn every_lock_option_is_read_in_short_and_long_form() {
    for args in [
        &[
            "lock", "-w", "2.5", "-d", "10", "-n", "-s", "-E", "3", "x", "cmd",
        ][..],
        &[
            "lock",
            "--wait=2.5",
            "--lease",
            "10",
            "--nonblock",
            "--shared",
            "--conflict-exit-code",
            "3",
            "x",
            "cmd",
        ],
        &["lock", "-ns", "-w2.5", "-d10", "-E3", "x", "cmd"],
    ] {
        let l = lock(args);
        assert_eq!(l.wait, Duration::from_millis(2500), "{args:?}");
        assert_eq!(l.lease, Duration::from_secs(10), "{args:?}");
        assert!(l.try_once && l.shared, "{args:?}");
        assert_eq!(l.conflict_code, 3, "{args:?}");
    }
}

#[test]
fn a_zero_wait_means_try_once() {
    assert!(lock(&["lock", "-w", "0", "x", "cmd"]).try_once);
    assert!(!lock(&["lock", "-w", "0.001", "x", "cmd"]).try_once);
}

#[test]
fn the_command_keeps_its_own_options_and_one_separator_is_dropped() {
    assert_eq!(
        lock(&["lock", "x", "ls", "-l", "-w", "1"]).command,
        os(&["ls", "-l", "-w", "1"])
    );
    assert_eq!(
        lock(&["lock", "x", "--", "ls", "-l"]).command,
        os(&["ls", "-l"])
    );
    assert_eq!(lock(&["lock", "--", "x", "ls"]).command, os(&["ls"]));
    assert_eq!(
        lock(&["lock", "x", "--", "--", "y"]).command,
        os(&["--", "y"])
    );
    let l = lock(&["lock", "-w", "1", "x", "-n", "cmd"]);
    assert!(!l.try_once, "options after NAME belong to the command");
    assert_eq!(l.command, os(&["-n", "cmd"]));
}

#[test]
fn names_and_commands_may_be_any_bytes() {
    let name = OsString::from_vec(b"caf\xe9;x".to_vec());
    let arg = OsString::from_vec(b"\xff\xfe".to_vec());
    let cmd = parse_command([
        OsString::from("lock"),
        name,
        OsString::from("echo"),
        arg.clone(),
    ])
    .expect("valid");
    let Action::Lock(l) = cmd.action else {
        panic!("not a lock")
    };
    assert_eq!(l.name, b"caf\xe9;x");
    assert_eq!(l.command, vec![OsString::from("echo"), arg]);
}

#[test]
fn lock_rejects_bad_numbers() {
    for (args, needle) in [
        (&["lock", "-w", "abc", "x", "c"][..], "-w: 'abc'"),
        (&["lock", "-w", "-1", "x", "c"], "-w"),
        (&["lock", "-w", "1e3", "x", "c"], "-w: '1e3'"),
        (&["lock", "-w", "604801", "x", "c"], "-w"),
        (&["lock", "-d", "0", "x", "c"], "-d: '0'"),
        (&["lock", "-d", "0.5", "x", "c"], "-d"),
        (&["lock", "-d", "604801", "x", "c"], "-d"),
        (&["lock", "-E", "-1", "x", "c"], "-E: '-1'"),
        (&["lock", "-E", "256", "x", "c"], "-E"),
        (&["lock", "-E", "x", "x", "c"], "-E"),
    ] {
        let err = usage_error(args);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert_eq!(
        lock(&[
            "lock", "-E", "255", "-d", "604800", "-w", "604800", "x", "c"
        ])
        .conflict_code,
        255
    );
}

#[test]
fn lock_needs_a_name_and_a_command() {
    assert!(usage_error(&["lock"]).contains("missing NAME"));
    assert!(usage_error(&["lock", "x"]).contains("missing COMMAND"));
    assert!(usage_error(&["lock", "x", "--"]).contains("missing COMMAND"));
    assert!(usage_error(&["lock", "", "c"]).contains("empty"));
    let long = "n".repeat(4097);
    assert!(usage_error(&["lock", &long, "c"]).contains("longer"));
    assert!(usage_error(&["lock", "-q", "x", "c"]).contains("'q'"));
    assert!(usage_error(&["lock", "-w"]).contains('w'));
}

#[test]
fn global_options_come_before_the_command() {
    let cmd = parse(&["--socket", "/tmp/s.sock", "status"]).expect("valid");
    assert_eq!(cmd.socket.as_deref(), Some(Path::new("/tmp/s.sock")));
    assert_eq!(cmd.action, Action::Status);
    assert_eq!(
        parse(&["--socket=/a", "info"])
            .expect("valid")
            .socket
            .as_deref(),
        Some(Path::new("/a"))
    );
    assert!(
        parse(&["status", "--socket", "/a"]).is_err(),
        "--socket after the command is not global"
    );
    assert!(usage_error(&["--socket", "", "status"]).contains("--socket"));
    assert!(usage_error(&["--socket"]).contains("socket"));
}

#[test]
fn help_and_version_win_over_everything_else() {
    assert_eq!(parse(&["--help"]).expect("valid").action, Action::Help);
    assert_eq!(parse(&["-h", "lock"]).expect("valid").action, Action::Help);
    assert_eq!(parse(&["-V"]).expect("valid").action, Action::Version);
    assert_eq!(
        parse(&["--version"]).expect("valid").action,
        Action::Version
    );
    assert_eq!(parse(&["lock", "-h"]).expect("valid").action, Action::Help);
    assert_eq!(
        parse(&["send", "--help"]).expect("valid").action,
        Action::Help
    );
    assert_eq!(parse(&["list", "-h"]).expect("valid").action, Action::Help);
}

#[test]
fn a_command_is_required_and_must_be_known() {
    assert!(usage_error(&[]).contains("missing command"));
    assert!(usage_error(&["frobnicate"]).contains("unknown command 'frobnicate'"));
    assert!(usage_error(&["-x"]).contains('x'));
}

#[test]
fn status_list_and_info_take_no_arguments() {
    assert_eq!(parse(&["status"]).expect("valid").action, Action::Status);
    assert_eq!(parse(&["list"]).expect("valid").action, Action::List);
    assert_eq!(parse(&["info"]).expect("valid").action, Action::Info);
    assert!(usage_error(&["status", "now"]).contains("unexpected argument 'now'"));
    assert!(usage_error(&["list", "-w", "1"]).contains('w'));
}

#[test]
fn who_takes_exactly_one_name() {
    assert_eq!(
        parse(&["who", "https://x/a;b"]).expect("valid").action,
        Action::Who(b"https://x/a;b".to_vec())
    );
    assert!(usage_error(&["who"]).contains("who: missing NAME"));
    assert!(usage_error(&["who", ""]).contains("must not be empty"));
    assert!(usage_error(&["who", "a", "b"]).contains("unexpected argument 'b'"));
    let long = "n".repeat(4097);
    assert!(usage_error(&["who", &long]).contains("longer than 4096"));
}

#[test]
fn send_takes_one_line_and_a_timeout() {
    let Action::Send(s) = parse(&["send", "LOCK object_name=x"])
        .expect("valid")
        .action
    else {
        panic!("not a send")
    };
    assert_eq!(s.line, b"LOCK object_name=x");
    assert_eq!(s.timeout, Duration::from_secs(10));
    let Action::Send(s) = parse(&["send", "-t", "0.5", "INFO"]).expect("valid").action else {
        panic!("not a send")
    };
    assert_eq!(s.timeout, Duration::from_millis(500));
    assert!(usage_error(&["send"]).contains("missing LINE"));
    assert!(usage_error(&["send", "LOCK", "object_name=x"]).contains("one argument"));
    assert!(usage_error(&["send", "INFO\nINFO"]).contains("one non-empty line"));
    assert!(usage_error(&["send", ""]).contains("one non-empty line"));
    assert!(usage_error(&["send", "-t", "x", "INFO"]).contains("-t: 'x'"));
}

#[test]
fn every_option_is_in_the_help_text() {
    for opts in [make_opts(), lock_opts(), send_opts()] {
        let described = opts.usage("");
        for word in described.split_whitespace() {
            let word = word.trim_end_matches(',');
            if word.starts_with('-') {
                let word = word.split('=').next().unwrap_or(word);
                assert!(USAGE.contains(word), "{word} is missing from the help text");
            }
        }
    }
    for exit in ["0 ", "1 ", "64", "69", "70", "75", "126", "127", "128+N"] {
        assert!(
            USAGE.contains(&format!("\n  {exit}")),
            "exit status {exit} is undocumented"
        );
    }
}

#[test]
fn flock_habits_are_understood() {
    // -x and -e: exclusive, the default.
    for flag in ["-x", "-e", "--exclusive"] {
        let l = lock(&["lock", flag, "x", "cmd"]);
        assert!(!l.shared, "{flag}");
    }
    // -c runs its argument through sh -c, after NAME or before it.
    for args in [
        &["lock", "x", "-c", "echo a | wc -c"][..],
        &["lock", "-c", "echo a | wc -c", "x"],
        &["lock", "x", "--command", "echo a | wc -c"],
    ] {
        assert_eq!(
            lock(args).command,
            os(&["sh", "-c", "echo a | wc -c"]),
            "{args:?}"
        );
    }
    // -E 0: skip quietly when taken.
    assert_eq!(
        lock(&["lock", "-n", "-E", "0", "x", "cmd"]).conflict_code,
        0
    );
}

#[test]
fn counted_takes_its_limit() {
    for args in [
        &["lock", "--counted", "6", "x", "cmd"][..],
        &["lock", "--counted=6", "x", "cmd"],
    ] {
        let l = lock(args);
        assert_eq!(l.counted, Some(6), "{args:?}");
        assert!(!l.shared, "{args:?}");
    }
}

#[test]
fn a_trust_contract_takes_seconds_and_a_fraction() {
    let l = lock(&[
        "lock",
        "--min-uptime",
        "3600.5",
        "--min-trust=0.75",
        "x",
        "cmd",
    ]);
    assert_eq!(l.min_uptime, Some(Duration::from_millis(3_600_500)));
    assert_eq!(l.min_trust, Some(750_000));
    let l = lock(&["lock", "--min-uptime=0", "--min-trust", "1", "x", "cmd"]);
    assert_eq!(
        (l.min_uptime, l.min_trust),
        (Some(Duration::ZERO), Some(1_000_000))
    );
    for (args, needle) in [
        (
            &["lock", "--min-uptime", "-1", "x", "c"][..],
            "--min-uptime: '-1'",
        ),
        (
            &["lock", "--min-uptime", "315360000.5", "x", "c"],
            "from 0 to 315360000",
        ),
        (
            &["lock", "--min-trust", "1.5", "x", "c"],
            "--min-trust: '1.5' is not a number from 0 to 1",
        ),
        (&["lock", "--min-trust", "high", "x", "c"], "from 0 to 1"),
    ] {
        let err = usage_error(args);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn flock_habits_that_contradict_each_other_are_refused() {
    for (args, needle) in [
        (&["lock", "-s", "-x", "x", "c"][..], "exclude each other"),
        (&["lock", "-e", "-s", "x", "c"], "exclude each other"),
        (
            &["lock", "--counted", "3", "-s", "x", "c"],
            "exclude each other",
        ),
        (
            &["lock", "-x", "--counted=3", "x", "c"],
            "exclude each other",
        ),
        (&["lock", "--counted", "0", "x", "c"], "from 1 to 1000000"),
        (
            &["lock", "--counted", "1000001", "x", "c"],
            "from 1 to 1000000",
        ),
        (
            &["lock", "--counted", "many", "x", "c"],
            "from 1 to 1000000",
        ),
        (&["lock", "x", "-c"], "-c needs"),
        (&["lock", "x", "-c", "a", "b"], "one argument"),
        (&["lock", "-c", "a", "x", "b"], "not both"),
    ] {
        let err = usage_error(args);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

fn tx(args: &[&str]) -> TxArgs {
    match parse(args).expect("valid").action {
        Action::Tx(t) => t,
        other => panic!("not a transaction: {other:?}"),
    }
}

#[test]
fn tx_takes_a_namespace_and_its_statements_in_order() {
    let t = tx(&["tx", "-N", "Clinical", "assert not exists A", "set B dup"]);
    assert_eq!(t.namespace, "Clinical");
    assert_eq!(
        t.statements,
        [b"assert not exists A".to_vec(), b"set B dup".to_vec()]
    );
    assert_eq!((t.duration, t.pid), (None, None));
    let t = tx(&[
        "tx",
        "--namespace=n",
        "-d",
        "2.5",
        "-p",
        "9",
        "--",
        "exists A",
    ]);
    assert_eq!(t.duration, Some(Duration::from_millis(2500)));
    assert_eq!(t.pid, Some(9));
    assert_eq!(t.statements, [b"exists A".to_vec()]);
}

#[test]
fn tx_refuses_what_the_agent_would_refuse_anyway() {
    assert!(usage_error(&["tx", "exists A"]).contains("-N"));
    assert!(usage_error(&["tx", "-N", "", "exists A"]).contains("empty"));
    assert!(usage_error(&["tx", "-N", "n"]).contains("STATEMENT"));
    assert!(usage_error(&["tx", "-N", "n", "-d", "0", "exists A"]).contains("-d"));
    assert!(usage_error(&["tx", "-N", "n", "-p", "0", "exists A"]).contains("-p"));
    let many: Vec<String> = (0..33).map(|_| "exists A".to_owned()).collect();
    let mut line = vec!["tx", "-N", "n"];
    line.extend(many.iter().map(String::as_str));
    assert!(usage_error(&line).contains("at most 32"));
}

#[test]
fn tx_takes_a_command_after_the_statements_and_a_double_dash() {
    let t = tx(&["tx", "-N", "n", "exists A", "set B", "--", "sh", "-c", "x"]);
    assert_eq!(t.statements, [b"exists A".to_vec(), b"set B".to_vec()]);
    assert_eq!(t.command, Some(os(&["sh", "-c", "x"])));
    // A `--` that ends the options is not the one before COMMAND; the
    // command keeps its own options and double dashes.
    let t = tx(&[
        "tx", "-N", "n", "-d", "2", "--", "exists A", "--", "ls", "-l", "--", "x",
    ]);
    assert_eq!(t.statements, [b"exists A".to_vec()]);
    assert_eq!(t.command, Some(os(&["ls", "-l", "--", "x"])));
    assert_eq!(t.duration, Some(Duration::from_secs(2)));
    // Without `--`, there is no command: tx prints the outcome.
    assert_eq!(tx(&["tx", "-N", "n", "exists A"]).command, None);
}

#[test]
fn tx_takes_a_shell_command_before_or_after_the_statements() {
    let want = Some(os(&["sh", "-c", "echo $SNAPLOCK_TX_FENCE"]));
    let before = tx(&["tx", "-N", "n", "-c", "echo $SNAPLOCK_TX_FENCE", "set A"]);
    assert_eq!(before.command, want);
    assert_eq!(before.statements, [b"set A".to_vec()]);
    let after = tx(&["tx", "-N", "n", "set A", "-c", "echo $SNAPLOCK_TX_FENCE"]);
    assert_eq!(after, before);
}

#[test]
fn tx_refuses_a_missing_or_doubled_command() {
    for (args, needle) in [
        (&["tx", "-N", "n", "exists A", "--"][..], "missing COMMAND"),
        (&["tx", "-N", "n", "--", "--", "true"], "missing STATEMENT"),
        (
            &["tx", "-N", "n", "-c", "true", "set A", "--", "ls"],
            "not both",
        ),
        (&["tx", "-N", "n", "-c", "true"], "missing STATEMENT"),
        (&["tx", "-N", "n", "set A", "-c"], "-c needs"),
    ] {
        let err = usage_error(args);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let many: Vec<String> = (0..33).map(|_| "exists A".to_owned()).collect();
    let mut line = vec!["tx", "-N", "n"];
    line.extend(many.iter().map(String::as_str));
    line.extend(["--", "true"]);
    assert!(usage_error(&line).contains("at most 32"));
}
