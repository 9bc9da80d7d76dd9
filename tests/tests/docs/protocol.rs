//! The protocol page, snaplock(7), against what the core says: its
//! commands, `STATUS` parameters, metric families, errors, `LOCKWAITING`
//! reasons and `LISTTICKETS` parameters, read from the core's answers or
//! its source.

use super::*;

/// Drives a core through one client's requests and returns its replies.
pub(crate) fn ask(requests: &[&str]) -> Vec<Message> {
    let now = Now {
        mono: Time::from_micros(1_000_000),
        wall: UnixTime(1_700_000_000_000_000),
    };
    let mut core = Core::new(Config::default(), now);
    let client = ClientId(1);
    core.handle_input(
        now,
        Input::ClientOpened {
            client,
            cred: Credentials::default(),
        },
    )
    .expect("open");
    for line in requests {
        let msg = snaplock_proto::wire::parse(line.as_bytes()).expect("a valid line");
        core.handle_input(now, Input::ClientMessage { client, msg })
            .expect("open client");
    }
    let mut replies = Vec::new();
    while let Some(out) = core.poll_output() {
        if let Output::Reply { reply, .. } = out {
            replies.push(reply.into_message());
        }
    }
    replies
}

#[test]
fn every_command_the_agent_lists_has_its_section_in_the_protocol_page() {
    let replies = ask(&["HELP"]);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].command, "COMMANDS");
    let list = replies[0].get_str("list").expect("COMMANDS list=");
    let page = man_text("snaplock.7");
    let commands: Vec<&str> = list.split(',').collect();
    assert!(commands.len() >= 8, "HELP lists only {list}");
    for command in commands {
        assert!(
            page.lines().any(|l| l == format!(".SS {command}")),
            "man/snaplock.7 has no section .SS {command}"
        );
    }
}

#[test]
fn every_status_parameter_is_described_in_the_protocol_page() {
    let replies = ask(&["INFO"]);
    assert_eq!(replies[0].command, "STATUS");
    let page = man_text("snaplock.7");
    let info = page
        .split(".SS INFO")
        .nth(1)
        .expect("an INFO section")
        .split(".SS ")
        .next()
        .unwrap_or("");
    let names: Vec<&str> = replies[0].params().map(|(name, _)| name).collect();
    assert!(names.len() >= 10, "STATUS has only {names:?}");
    for name in names {
        assert!(
            info.contains(&format!(".B {name}\n")),
            "the INFO section of man/snaplock.7 does not describe {name}"
        );
    }
}

#[test]
fn every_metric_family_the_core_renders_is_described_in_the_protocol_page() {
    let replies = ask(&["METRICS"]);
    assert_eq!(replies[0].command, "METRICSTEXT");
    let text = replies[0].get_str("text").expect("METRICSTEXT text=");
    let page = man_section(&man_text("snaplock.7"), "METRICS");
    let families: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert!(families.len() >= 15, "METRICS has only {families:?}");
    for family in &families {
        assert!(
            page.contains(&format!(".B {family}\n")),
            "the METRICS section of man/snaplock.7 does not describe {family}"
        );
    }
    let in_page = page
        .lines()
        .filter_map(|l| l.strip_prefix(".B snaplock_"))
        .map(|f| format!("snaplock_{f}"));
    for family in in_page {
        assert!(
            families.contains(&family.as_str()),
            "man/snaplock.7 describes {family}, which the agent does not render"
        );
    }
}

/// The `error=` values the core can send. There is no list of them in the
/// code, so they are read from its source: the first argument of every
/// `Refusal::new(`, the `invalid` of `Refusal::invalid(`, and every
/// `Some("name")` among the arguments of `replies::unlocked(`. The known
/// set is asserted too, so that a change in how the source spells them
/// fails here instead of checking nothing.
fn errors_in_the_core() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut dirs = vec![workspace().join("proto/src/core")];
    let mut files = Vec::new();
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    for path in files {
        let source = std::fs::read_to_string(&path).expect("readable source");
        for args in call_arguments(&source, "Refusal::new(") {
            if let Some(name) = args
                .trim_start()
                .strip_prefix('"')
                .and_then(|a| a.split('"').next())
            {
                found.insert(name.to_owned());
            }
        }
        // A TICKETLIST that lists nothing says why the same way.
        for args in call_arguments(&source, "refused(") {
            if let Some(name) = args
                .trim_start()
                .strip_prefix('"')
                .and_then(|a| a.split('"').next())
            {
                found.insert(name.to_owned());
            }
        }
        if source.contains("Refusal::invalid(") {
            found.insert("invalid".to_owned());
        }
        for args in call_arguments(&source, "unlocked(") {
            for (at, _) in args.match_indices("Some(\"") {
                let rest = &args[at + "Some(\"".len()..];
                found.insert(rest.split('"').next().unwrap_or_default().to_owned());
            }
        }
    }
    found
}

/// The argument text of every call of `callee` (which ends with `(`) in
/// `source`, up to the matching `)`, across lines.
fn call_arguments<'a>(source: &'a str, callee: &str) -> Vec<&'a str> {
    let mut calls = Vec::new();
    for (at, _) in source.match_indices(callee) {
        let args = &source[at + callee.len()..];
        let mut depth = 1;
        let end = args.char_indices().find_map(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(i)
        });
        calls.push(&args[..end.unwrap_or(args.len())]);
    }
    calls
}

#[test]
fn every_error_the_core_sends_is_described_in_the_protocol_page_and_no_other() {
    let errors = errors_in_the_core();
    let known = [
        "busy",
        "denied",
        "duplicate",
        "invalid",
        "lost",
        "overflow",
        "timedout",
        "unavailable",
    ];
    for name in known {
        assert!(
            errors.contains(name),
            "the scan of proto/src/core no longer finds {name:?}: fix errors_in_the_core"
        );
    }
    // A refusal the metrics do not know would be counted as `other`.
    let labelled: BTreeSet<String> = (snaplock_proto::metrics::REFUSALS.iter())
        .map(|w| (*w).to_owned())
        .collect();
    let unlabelled: Vec<&String> = errors.difference(&labelled).collect();
    assert!(
        unlabelled.is_empty(),
        "errors without their label in metrics::REFUSALS: {unlabelled:?}"
    );
    let section = man_section(&man_text("snaplock.7"), "ERRORS");
    let mut documented = BTreeSet::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        if line.starts_with(".TP") {
            if let Some(name) = lines.next().and_then(|l| l.strip_prefix(".B ")) {
                documented.insert(name.to_owned());
            }
        }
    }
    assert_eq!(
        errors, documented,
        "errors sent by the core vs. described in the ERRORS section of man/snaplock.7"
    );
}

/// The `reason=` values of `LOCKWAITING`: the strings `NotReady::reason`
/// returns, read from its source (the arms of its one `match`).
fn waiting_reasons_in_the_core() -> BTreeSet<String> {
    let source = read("proto/src/core/cluster/status.rs");
    let at = source
        .find("fn reason(&self)")
        .expect("NotReady::reason in proto/src/core/cluster/status.rs");
    let body = &source[at..];
    let body = &body[..body.find("\n    }\n").expect("the end of fn reason")];
    body.match_indices("=> \"")
        .map(|(i, _)| {
            body[i + 4..]
                .split('"')
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn every_waiting_reason_the_core_sends_is_described_in_the_protocol_page() {
    let reasons = waiting_reasons_in_the_core();
    for name in ["lock-delay", "no-quorum", "leaders-changing", "no-leaders"] {
        assert!(
            reasons.contains(name),
            "the scan of NotReady::reason no longer finds {name:?}: fix waiting_reasons_in_the_core"
        );
    }
    let requests = man_section(&man_text("snaplock.7"), "REQUESTS");
    let lockwaiting = requests
        .find(".BI \"LOCKWAITING object_name=")
        .map(|at| &requests[at..])
        .and_then(|s| s.split(".BI \"LOCKED ").next())
        .expect("snaplock(7) REQUESTS describes LOCKWAITING before LOCKED");
    for name in &reasons {
        // A stopping agent fails its waiting requests: never a reason sent.
        if name == "stopping" {
            continue;
        }
        assert!(
            lockwaiting.contains(&format!("\n.B {name}\n")),
            "snaplock(7) LOCKWAITING does not describe reason={name}"
        );
    }
    let cli = man_text("snaplock-cli.1");
    for name in reasons.iter().filter(|n| *n != "stopping") {
        assert!(
            cli.contains(name),
            "snaplock-cli(1) -v does not name {name}"
        );
    }
}

/// The lines of one `.SS` subsection of a man page (up to the next `.SS`
/// or `.SH`).
fn man_subsection(text: &str, title: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(".SS ") {
            inside = rest.trim_matches('"') == title;
            continue;
        }
        if line.starts_with(".SH ") {
            inside = false;
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(!out.is_empty(), "the man page has no subsection {title:?}");
    out
}

/// The quoted first arguments of every call of `callee` in `source`.
fn quoted_arguments(source: &str, callee: &str) -> BTreeSet<String> {
    call_arguments(source, callee)
        .into_iter()
        .filter_map(|a| a.trim_start().strip_prefix('"')?.split('"').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_parameter_listtickets_reads_or_answers_is_described_in_its_section() {
    let source = read("proto/src/core/cluster/view.rs");
    let read_params = quoted_arguments(&source, "msg.get(");
    let mut answered = quoted_arguments(&source, ".with(");
    answered.extend(quoted_arguments(&source, "reply.set("));
    assert!(read_params.contains("scope") && read_params.contains("object_name"));
    assert!(answered.contains("missing") && answered.contains("list"));
    let section = man_subsection(&man_text("snaplock.7"), "LISTTICKETS");
    for name in read_params.iter().chain(&answered) {
        assert!(
            section.contains(&format!(".B {name}"))
                || section.contains(&format!(".BR {name} "))
                || section.contains(&format!("{name}=")),
            "the LISTTICKETS section of man/snaplock.7 does not describe {name}"
        );
    }
    let cli = man_text("snaplock-cli.1");
    assert!(
        cli.lines().any(|l| l == ".SS who"),
        "snaplock-cli(1) has no who"
    );
}
