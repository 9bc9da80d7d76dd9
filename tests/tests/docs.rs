//! Keeps the shipped documentation true to the code: the man pages, the
//! default configuration file and the README are checked against what the
//! binaries print, what the agent accepts and what the core answers.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use snaplock_agent::config::{self, Environment, LogSource, Settings};
use snaplock_proto::wire::Message;
use snaplock_proto::{ClientId, Config, Core, Credentials, Input, Now, Output, Time, UnixTime};

const MAN_PAGES: &[&str] = &[
    "snaplockd.8",
    "snaplock-cli.1",
    "snaplock.conf.5",
    "snaplock.7",
    "libsnaplock.3",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the workspace")
        .to_path_buf()
}

fn read(relative: &str) -> String {
    let path = workspace().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// A man page with roff's `\-` made `-` and font escapes removed, so that
/// `\fB\-\-socket\fR` reads `--socket`.
fn man_text(page: &str) -> String {
    let mut text = read(&format!("man/{page}")).replace("\\-", "-");
    for font in ["\\fB", "\\fI", "\\fR", "\\fP"] {
        text = text.replace(font, "");
    }
    text
}

/// The lines of one `.SH` section of a man page (up to the next `.SH`).
fn man_section(text: &str, title: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(".SH ") {
            inside = rest.trim_matches('"') == title;
            continue;
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(!out.is_empty(), "the man page has no section {title:?}");
    out
}

/// Every `--long-option` in `text`.
fn long_options(text: &str) -> BTreeSet<String> {
    let bytes = text.as_bytes();
    let mut found = BTreeSet::new();
    let mut i = 0;
    while let Some(at) = text[i..].find("--") {
        let start = i + at;
        let before_ok =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'-');
        let mut end = start + 2;
        while end < bytes.len()
            && (bytes[end].is_ascii_lowercase()
                || bytes[end].is_ascii_digit()
                || bytes[end] == b'-')
        {
            end += 1;
        }
        if before_ok && end > start + 2 && bytes[start + 2].is_ascii_lowercase() {
            found.insert(text[start..end].trim_end_matches('-').to_owned());
        }
        i = end.max(start + 2);
    }
    found
}

/// The directory cargo puts this build's binaries in: the test runs from
/// `<target>/<profile>/deps/`.
fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its own path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test runs from <target>/<profile>/deps")
        .to_path_buf()
}

/// The path of a workspace binary, built (or brought up to date) first, once
/// per test process: `cargo test` builds the binaries only of packages with
/// integration tests, and a stale binary would check stale help.
fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let dir = bin_dir();
    let built = BUILT.get_or_init(|| {
        let Some(cargo) = std::env::var_os("CARGO") else {
            return Ok(()); // not run by cargo: use what is there
        };
        let profile = dir.file_name().and_then(|n| n.to_str()).unwrap_or("debug");
        let profile = if profile == "debug" { "dev" } else { profile };
        let target = dir.parent().expect("<target>/<profile>");
        let out = Command::new(cargo)
            .current_dir(workspace())
            .args([
                "build",
                "--bins",
                "-p",
                "snaplock-agent",
                "-p",
                "snaplock-cli",
                "--profile",
                profile,
            ])
            .arg("--target-dir")
            .arg(target)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    });
    if let Err(why) = built {
        panic!("building the binaries failed; run `cargo build --workspace` and fix it:\n{why}");
    }
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace` before the tests",
        path.display()
    );
    path
}

/// Runs a binary with `args` and returns its standard output; it must exit 0.
fn run(name: &str, args: &[&str]) -> String {
    let out = Command::new(binary(name))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {name}: {e}"));
    assert!(
        out.status.success(),
        "`{name} {}` exited with {}: {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("the help is UTF-8")
}

/// The options a page documents: the `--long` names in the tags (`.B` or
/// `.BI` lines right after `.TP`) of its OPTIONS section.
fn documented_options(page: &str) -> BTreeSet<String> {
    let options = man_section(&man_text(page), "OPTIONS");
    let mut tags = String::new();
    let mut lines = options.lines();
    while let Some(line) = lines.next() {
        if line.starts_with(".TP") {
            if let Some(tag) = lines.next() {
                tags.push_str(tag);
                tags.push('\n');
            }
        }
    }
    long_options(&tags)
}

fn check_help_against_page(help: &str, page: &str, least: usize) {
    let printed = long_options(help);
    assert!(
        printed.len() >= least,
        "the help lists only {printed:?}:\n{help}"
    );
    let documented = documented_options(page);
    let undocumented: Vec<_> = printed.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "man/{page} does not document {undocumented:?}"
    );
    let stale: Vec<_> = documented.difference(&printed).collect();
    assert!(
        stale.is_empty(),
        "man/{page} documents {stale:?}, which the help does not list:\n{help}"
    );
}

#[test]
fn every_long_option_of_snaplockd_is_documented_in_its_man_page_and_no_other() {
    check_help_against_page(&run("snaplockd", &["--help"]), "snaplockd.8", 10);
}

#[test]
fn every_long_option_of_snaplock_cli_is_documented_in_its_man_page_and_no_other() {
    let mut help = run("snaplock-cli", &["--help"]);
    help.push_str(&run("snaplock-cli", &["lock", "--help"]));
    check_help_against_page(&help, "snaplock-cli.1", 8);
}

#[test]
fn every_config_key_is_documented_in_the_man_page_and_the_default_file() {
    let page = man_section(&man_text("snaplock.conf.5"), "KEYS");
    let file = read("packaging/snaplock.conf");
    let keys: BTreeSet<&str> = config::KEYS.iter().copied().collect();
    assert!(keys.len() >= 10, "KEYS lists only {keys:?}");
    for key in &keys {
        assert!(
            page.contains(&format!(".BI {key}=")),
            "man/snaplock.conf.5 does not document {key}"
        );
        let line = format!("#{key}=");
        assert!(
            file.lines().any(|l| l.starts_with(&line)),
            "packaging/snaplock.conf has no commented-out {line} line"
        );
    }
    let in_page: BTreeSet<&str> = page
        .lines()
        .filter_map(|l| l.strip_prefix(".BI "))
        .filter_map(|l| l.split('=').next())
        .collect();
    let unknown: Vec<_> = in_page.difference(&keys).collect();
    assert!(
        unknown.is_empty(),
        "man/snaplock.conf.5 documents unknown keys {unknown:?}"
    );
}

fn test_environment() -> Environment {
    Environment {
        hostname: Some("docs-test.example.com".to_owned()),
        uid: 4242,
        ..Environment::default()
    }
}

#[test]
fn the_defaults_written_in_the_default_file_are_the_agents_defaults() {
    // Uncomment every `#key=value` line that gives a value: the resulting
    // configuration must be the one the agent builds with no file at all.
    let file = read("packaging/snaplock.conf");
    let mut uncommented = String::new();
    let mut count = 0;
    for line in file.lines() {
        let Some(setting) = line.strip_prefix('#') else {
            continue;
        };
        let Some((key, value)) = setting.split_once('=') else {
            continue;
        };
        if config::KEYS.contains(&key) && !value.is_empty() {
            uncommented.push_str(setting);
            uncommented.push('\n');
            count += 1;
        }
    }
    assert!(
        count >= 8,
        "only {count} defaults found in packaging/snaplock.conf"
    );
    let settings =
        config::parse_text("packaging/snaplock.conf", &uncommented).unwrap_or_else(|e| {
            panic!("the agent refuses the defaults of packaging/snaplock.conf: {e}")
        });
    let env = test_environment();
    let with_file =
        config::build(settings, Settings::default(), &env, LogSource::default()).expect("valid");
    let without = config::build(
        Settings::default(),
        Settings::default(),
        &env,
        LogSource::default(),
    )
    .expect("valid");
    assert_eq!(
        format!("{with_file:?}"),
        format!("{without:?}"),
        "uncommenting the defaults of packaging/snaplock.conf changes the configuration"
    );
}

#[test]
fn every_man_page_passes_groff_without_a_warning() {
    for page in MAN_PAGES {
        let path = workspace().join("man").join(page);
        assert!(path.is_file(), "{} is missing", path.display());
        let out = match Command::new("groff")
            .args(["-man", "-z", "-wall", "-ww"])
            .arg(&path)
            .output()
        {
            Ok(out) => out,
            Err(e) => {
                panic!("cannot run groff ({e}): install it (Debian: apt-get install groff-base)")
            }
        };
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && warnings.is_empty(),
            "groff on man/{page}:\n{warnings}"
        );
    }
}

#[test]
fn every_man_page_the_readme_links_to_exists() {
    let readme = read("README.md");
    let mut linked = 0;
    for page in MAN_PAGES {
        if readme.contains(&format!("man/{page}")) {
            linked += 1;
        }
    }
    assert_eq!(
        linked,
        MAN_PAGES.len(),
        "README.md must link to every page of man/"
    );
    for (at, _) in readme.match_indices("(man/") {
        let rest = &readme[at + 1..];
        let target = &rest[..rest.find(')').expect("a closing parenthesis")];
        assert!(
            workspace().join(target).is_file(),
            "README.md links to {target}, which does not exist"
        );
    }
}

/// The names of the functions `include/snaplock.h` declares: every
/// `snaplock_name(` outside a comment.
fn header_functions() -> BTreeSet<String> {
    let header = read("clients/libsnaplock/include/snaplock.h");
    let mut found = BTreeSet::new();
    for line in header.lines() {
        let line = line.trim_start();
        if line.starts_with("//") || line.starts_with("/*") || line.starts_with('*') {
            continue;
        }
        for (at, _) in line.match_indices("snaplock_") {
            let rest = &line[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let before_ok = at == 0 || matches!(line.as_bytes()[at - 1], b' ' | b'*');
            if before_ok && rest[end..].starts_with('(') {
                found.insert(rest[..end].to_owned());
            }
        }
    }
    found
}

/// The `SNAPLOCK_<prefix>*` constants `include/snaplock.h` defines as enum
/// variants (`  NAME = value,`).
fn header_variants(prefix: &str) -> BTreeSet<String> {
    read("clients/libsnaplock/include/snaplock.h")
        .lines()
        .filter_map(|l| l.trim().split_once(" = "))
        .map(|(name, _)| name)
        .filter(|name| name.starts_with(prefix))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_function_of_snaplock_h_is_documented_in_libsnaplock_3_and_no_other() {
    let functions = header_functions();
    assert!(
        functions.len() >= 14,
        "snaplock.h declares only {functions:?}"
    );
    let page = man_text("libsnaplock.3");
    let synopsis = man_section(&page, "SYNOPSIS");
    for f in &functions {
        assert!(
            synopsis.contains(&format!("{f}(")),
            "the SYNOPSIS of man/libsnaplock.3 does not declare {f}"
        );
        assert!(
            page.lines().any(|l| l == format!(".SS {f}")),
            "man/libsnaplock.3 has no section .SS {f}"
        );
    }
    let sections: BTreeSet<String> = page
        .lines()
        .filter_map(|l| l.strip_prefix(".SS snaplock_"))
        .map(|name| format!("snaplock_{name}"))
        .collect();
    let stale: Vec<_> = sections.difference(&functions).collect();
    assert!(
        stale.is_empty(),
        "man/libsnaplock.3 documents {stale:?}, which snaplock.h does not declare"
    );
}

#[test]
fn every_result_event_kind_and_policy_of_snaplock_h_is_described_in_libsnaplock_3() {
    let page = man_text("libsnaplock.3");
    let results = header_variants("SNAPLOCK_RESULT_");
    assert!(results.len() >= 16, "snaplock.h has only {results:?}");
    let section = man_section(&page, "RESULTS");
    let mut lines = section.lines();
    let mut described = BTreeSet::new();
    while let Some(line) = lines.next() {
        if line.starts_with(".TP") {
            if let Some(name) = lines.next().and_then(|l| l.strip_prefix(".B ")) {
                described.insert(name.to_owned());
            }
        }
    }
    assert_eq!(
        results, described,
        "results in snaplock.h vs. described in the RESULTS section of man/libsnaplock.3"
    );
    let types = man_section(&page, "TYPES");
    for name in header_variants("SNAPLOCK_EVENT_KIND_")
        .into_iter()
        .chain(header_variants("SNAPLOCK_POLICY_"))
    {
        assert!(
            types.contains(&format!(".B {name}\n")),
            "the TYPES section of man/libsnaplock.3 does not describe {name}"
        );
    }
}

#[test]
fn libsnaplock_3_passes_mandoc_lint_when_mandoc_is_installed() {
    let path = workspace().join("man/libsnaplock.3");
    let out = match Command::new("mandoc")
        .args(["-Tlint", "-W", "warning"])
        .arg(&path)
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => panic!("cannot run mandoc: {e}"),
    };
    let warnings = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && warnings.is_empty(),
        "mandoc -Tlint on man/libsnaplock.3:\n{warnings}"
    );
}

#[test]
fn the_option_scanner_finds_long_options_and_nothing_else() {
    let found = long_options("use --socket PATH, --log-level=x; not a--b or -- or ---x");
    let expected: BTreeSet<String> = ["--socket", "--log-level"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    assert_eq!(found, expected);
}

/// Every number after `fence=` or `fence: ` in `text`.
fn fences_in(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for marker in ["fence=", "fence: "] {
        for (at, _) in text.match_indices(marker) {
            let digits: String = text[at + marker.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if !digits.is_empty() {
                found.push(digits);
            }
        }
    }
    found
}

#[test]
fn the_example_fences_are_as_large_as_real_ones_and_the_docs_say_to_keep_them_as_text() {
    let replies = protocol::ask(&["LOCK object_name=x;duration=10"]);
    let real = replies
        .iter()
        .find(|m| m.command == "LOCKED")
        .and_then(|m| m.get_str("fence"))
        .expect("a LOCKED with a fence")
        .to_owned();
    assert!(
        real.parse::<u64>().unwrap() > 1 << 53,
        "a real fence, {real}, exceeds 2^53"
    );
    let mut checked = 0;
    for file in ["README.md", "man/snaplock.7", "man/snaplock-cli.1"] {
        for fence in fences_in(&read(file)) {
            assert_eq!(
                fence.len(),
                real.len(),
                "{file}: the example fence {fence} is not of the size of a real one ({real})"
            );
            checked += 1;
        }
    }
    assert!(checked >= 6, "only {checked} example fences found");
    let fences = man_section(&man_text("snaplock.7"), "FENCES");
    assert!(
        fences.contains("2^53") && fences.contains("JSON"),
        "snaplock(7) FENCES says fences exceed 2^53 and how to keep them:\n{fences}"
    );
    assert!(read("README.md").contains("2^53"));
}

#[test]
fn the_pages_say_when_lost_and_unavailable_come_not_only_at_a_stop() {
    for page in ["snaplock.7", "libsnaplock.3"] {
        let text = man_text(page).replace('\n', " ");
        assert!(
            !text.contains("in this version") && !text.contains("(it is stopping)"),
            "man/{page} still says that only a stopping agent loses locks"
        );
    }
    // The core revokes (UNLOCKED error=lost) when contact is lost; the
    // protocol page says so where it describes the error.
    let errors = man_section(&man_text("snaplock.7"), "ERRORS").replace('\n', " ");
    let lost = &errors[errors.find(".B lost").expect("lost is described")..];
    assert!(lost.contains("revoked"), "{lost}");
    let lost_event = man_text("libsnaplock.3").replace('\n', " ");
    let at = lost_event
        .find("SNAPLOCK_EVENT_KIND_LOST (2)")
        .expect("the LOST event");
    assert!(lost_event[at..at + 300].contains("revoked"));
}

#[test]
fn the_package_and_its_unit_are_those_of_a_cluster_service() {
    let unit = read("packaging/snaplock.service");
    for key in ["Wants=", "After="] {
        assert!(
            unit.lines()
                .any(|l| l.starts_with(key) && l.contains("network-online.target")),
            "snaplock.service: {key}network-online.target (listen= needs the address up)"
        );
    }
    for file in ["packaging/debian/control", "packaging/debian/changelog"] {
        let text = read(file).replace("\n ", " ");
        assert!(
            !text.contains("processes of one computer.") && !text.contains("of a computer"),
            "{file} describes a single-computer service"
        );
        assert!(text.contains("cluster"), "{file} does not mention clusters");
    }
}

#[path = "docs/protocol.rs"]
mod protocol;
