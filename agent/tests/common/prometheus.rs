//! Prometheus's own parser (Python's `prometheus_client`) on an
//! exposition: the tests fail, saying how to install it, when it is
//! missing.

#![allow(dead_code)] // each test binary uses its own subset

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long the parser may take.
const WAIT: Duration = Duration::from_secs(10);

/// What the parser makes of an exposition: one line per sample,
/// `family<TAB>type<TAB>sample<TAB>labels as sorted JSON<TAB>value`.
const PARSE: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
for f in text_string_to_metric_families(sys.stdin.read()):
    for s in f.samples:
        print("\t".join([f.name, f.type, s.name, json.dumps(s.labels, sort_keys=True), repr(float(s.value))]))
"#;

/// The samples of `text` as Prometheus's parser reads them; fails, with
/// how to install it, when the parser is missing.
pub fn parse_exposition(text: &str) -> Vec<[String; 5]> {
    let python = std::env::var("SNAPLOCK_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let mut child = Command::new(&python)
        .args(["-c", PARSE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python} ({e}): install Python 3"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = wait_output(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No module named 'prometheus_client'"),
        "Prometheus's parser is missing: install it with `{python} -m pip install prometheus_client` \
         or `apt-get install python3-prometheus-client` (SNAPLOCK_TEST_PYTHON names the python to use)"
    );
    assert!(
        out.status.success(),
        "Prometheus's parser refused the exposition: {stderr}\n{text}"
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 5, "{l}");
            [0, 1, 2, 3, 4].map(|i| f[i].to_owned())
        })
        .collect()
}

/// Waits at most [`WAIT`] for `child`, reading its output meanwhile (a
/// thread: the pipes must not fill); kills it, by its pid, after that.
fn wait_output(child: std::process::Child) -> std::process::Output {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(WAIT) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            panic!("the parser did not finish within {WAIT:?}");
        }
    }
}

/// The value of the sample `name` with exactly `labels` (JSON, sorted).
pub fn value(samples: &[[String; 5]], name: &str, labels: &str) -> f64 {
    let found = samples.iter().find(|s| s[2] == name && s[3] == labels);
    let s = found.unwrap_or_else(|| panic!("no sample {name} {labels}"));
    s[4].parse().unwrap()
}

/// The type of family `family`, as the parser read it.
pub fn kind<'s>(samples: &'s [[String; 5]], family: &str) -> &'s str {
    let found = samples.iter().find(|s| s[0] == family);
    &found.unwrap_or_else(|| panic!("no family {family}"))[1]
}
