//! `acl_file` with real processes: the `snaplockd` binary, and a client
//! running under uid 65534 (`nobody`), which only root can start: these
//! tests fail, and say so, when not run as root.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};

use nix::sys::signal::Signal;
use snaplock_proto::wire::{Message, parse};

use common::{Client, Daemon, TempDir, WAIT, assert_reply, now, param, snaplockd, wait_bounded};

const NOBODY: u32 = 65534;

/// A client that sends each line it is given on the socket and prints the
/// one reply line it gets back.
const PY_CLIENT: &str = "
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
replies = s.makefile('rb')
for line in sys.stdin.buffer:
    s.sendall(line)
    sys.stdout.buffer.write(replies.readline())
    sys.stdout.flush()
";

fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "the acl tests start a client under uid {NOBODY} (nobody), which needs root: \
         run them as root (they cannot pass otherwise)"
    );
}

/// A client process under another uid, speaking lines through python3.
struct Foreign {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Foreign {
    fn connect(socket: &Path, uid: u32, gid: u32) -> Foreign {
        let mut child = Command::new("/usr/bin/python3")
            .args(["-c", PY_CLIENT])
            .arg(socket)
            .uid(uid)
            .gid(gid)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 starts under another uid");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Foreign {
            child,
            stdin,
            lines,
        }
    }

    fn request(&mut self, line: &str) -> Message {
        writeln!(self.stdin, "{line}").expect("the client reads its input");
        self.stdin.flush().unwrap();
        let reply = self
            .lines
            .recv_timeout(WAIT)
            .unwrap_or_else(|e| panic!("no reply to {line:?} in time: {e}"));
        parse(reply.as_bytes()).unwrap_or_else(|e| panic!("{reply:?}: {e}"))
    }
}

impl Drop for Foreign {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The agent's standard error, line by line, as it comes.
fn log_lines(daemon: &mut Daemon) -> Receiver<String> {
    let stderr = daemon.child.as_mut().unwrap().stderr.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits (bounded) for a log line containing `what`, and returns it.
fn wait_log(log: &Receiver<String>, what: &str) -> String {
    let start = now();
    loop {
        let left = WAIT.saturating_sub(start.elapsed());
        match log.recv_timeout(left) {
            Ok(line) if line.contains(what) => return line,
            Ok(_) => {}
            Err(e) => panic!("no log line with {what:?} in time: {e}"),
        }
    }
}

/// A directory every user may enter, with a configuration whose socket
/// every user may connect to, guarded by `acl`.
fn setup(tag: &str, acl: &str) -> (TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = TempDir::new(tag);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let acl_path = dir.path().join("acl");
    std::fs::write(&acl_path, acl).unwrap();
    let conf = dir.path().join("snaplock.conf");
    std::fs::write(
        &conf,
        format!("socket_mode=0666\nacl_file={}\n", acl_path.display()),
    )
    .unwrap();
    (dir, acl_path, conf)
}

const RULES: &str = "\
# nobody: the public pages in any mode, the shared ones in shared mode,
# transactions in the ns. namespaces; root: everything.
user nobody: o4/public/
user nobody modes=shared commands=LOCK: o4/shared/
user nobody commands=TRANSACTION: ns.
user 0: *
";

#[test]
fn a_client_under_another_uid_gets_only_what_the_rules_grant_and_sighup_replaces_them() {
    require_root();
    let (dir, acl_path, conf) = setup("acl", RULES);
    let conf_arg = conf.to_str().unwrap();
    let mut daemon = Daemon::start(&dir.socket(), &["-c", conf_arg], &[]);
    let log = log_lines(&mut daemon);
    let mut root = Client::connect(&dir.socket());
    assert_reply(
        &root.request("LOCK object_name=o4/private/x;tag=1"),
        "LOCKED",
        &[("object_name", "o4/private/x")],
    );
    assert_reply(
        &root.request("LOCK object_name=o4/public/held;tag=2"),
        "LOCKED",
        &[("object_name", "o4/public/held")],
    );

    let mut nobody = Foreign::connect(&dir.socket(), NOBODY, NOBODY);
    assert_reply(
        &nobody.request("LOCK object_name=o4/public/a;tag=1"),
        "LOCKED",
        &[("object_name", "o4/public/a"), ("tag", "1")],
    );
    let denied = nobody.request("LOCK object_name=o4/private/a;tag=2");
    assert_reply(
        &denied,
        "LOCKFAILED",
        &[
            ("object_name", "o4/private/a"),
            ("error", "denied"),
            ("tag", "2"),
        ],
    );
    assert_eq!(
        param(&denied, "description"),
        format!(
            "no rule of {} grants uid 65534 (gid 65534) LOCK mode=exclusive on this name",
            acl_path.display()
        )
    );
    let narrower = nobody.request("LOCK object_name=o4/shared/a;tag=3");
    assert_reply(&narrower, "LOCKFAILED", &[("error", "denied")]);
    let why = param(&narrower, "description");
    assert!(
        why.contains("line 4 (user nobody)") && why.contains("only LOCK in modes shared"),
        "the refusal names the rule that grants less: {why}"
    );
    assert_reply(
        &nobody.request("LOCK object_name=o4/shared/a;mode=shared;tag=4"),
        "LOCKED",
        &[("object_name", "o4/shared/a")],
    );
    assert_reply(
        &nobody.request("TRANSACTION namespace=ns.1;s1=anyway delete v;tag=5"),
        "TRANSACTIONOK",
        &[("namespace", "ns.1")],
    );
    let tx = nobody.request("TRANSACTION namespace=other;s1=anyway delete v;tag=6");
    assert_reply(
        &tx,
        "TRANSACTIONFAILED",
        &[("namespace", "other"), ("error", "denied"), ("failed", "0")],
    );
    assert!(param(&tx, "description").contains("TRANSACTION in this namespace"));

    let list = nobody.request("LISTTICKETS");
    let text = param(&list, "list");
    for shown in ["o4/public/held", "o4/public/a", "o4/shared/a"] {
        assert!(text.contains(shown), "nobody sees {shown}: {text}");
    }
    assert!(
        !text.contains("o4/private"),
        "nobody sees no private name: {text}"
    );
    let all = root.request("LISTTICKETS");
    assert!(
        param(&all, "list").contains("o4/private/x"),
        "root sees all"
    );

    // New rules: the private names, and no longer the public ones.
    std::fs::write(&acl_path, "user nobody: o4/private/\nuser 0: *\n").unwrap();
    daemon.signal(Signal::SIGHUP);
    wait_log(&log, "SIGHUP: 2 rules from the acl_file");
    assert_reply(
        &nobody.request("LOCK object_name=o4/private/b;tag=7"),
        "LOCKED",
        &[("object_name", "o4/private/b")],
    );
    assert_reply(
        &nobody.request("LOCK object_name=o4/public/b;tag=8"),
        "LOCKFAILED",
        &[("error", "denied")],
    );
    let list = nobody.request("LISTTICKETS");
    let text = param(&list, "list");
    assert!(
        text.contains("o4/private/x") && !text.contains("o4/public"),
        "{text}"
    );

    // A broken file: logged, and the rules in force stay.
    std::fs::write(&acl_path, "user nobody o4/public/\n").unwrap();
    daemon.signal(Signal::SIGHUP);
    let line = wait_log(&log, "the previous access rules stay");
    assert!(
        line.contains(":1: no ':'"),
        "the log says where and why: {line}"
    );
    assert_reply(
        &nobody.request("LOCK object_name=o4/private/c;tag=9"),
        "LOCKED",
        &[("object_name", "o4/private/c")],
    );
    assert_reply(
        &nobody.request("LOCK object_name=o4/public/c;tag=10"),
        "LOCKFAILED",
        &[("error", "denied")],
    );
    drop(nobody);
    daemon.signal(Signal::SIGTERM);
    let (code, _) = daemon.wait();
    assert_eq!(code, Some(0));
}

#[test]
fn a_group_rule_grants_the_primary_group_of_the_connection() {
    require_root();
    let (dir, _, conf) = setup("aclg", "group 4242: team/\n");
    let daemon = Daemon::start(&dir.socket(), &["-c", conf.to_str().unwrap()], &[]);
    let mut member = Foreign::connect(&dir.socket(), NOBODY, 4242);
    assert_reply(
        &member.request("LOCK object_name=team/a"),
        "LOCKED",
        &[("object_name", "team/a")],
    );
    let mut other = Foreign::connect(&dir.socket(), NOBODY, NOBODY);
    assert_reply(
        &other.request("LOCK object_name=team/b"),
        "LOCKFAILED",
        &[("error", "denied")],
    );
    drop(daemon);
}

#[test]
fn check_config_fails_with_the_file_line_and_fault_of_a_broken_acl_file() {
    let (dir, acl_path, conf) = setup("aclc", "user nobody: o4/\nuser nobody modes=write: x/\n");
    let out = snaplockd()
        .args(["--check-config", "-n", "acl_check", "-c"])
        .arg(&conf)
        .arg("--socket")
        .arg(dir.socket())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("snaplockd runs");
    let (code, stderr) = wait_bounded(out);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "snaplockd: error: {}:2: unknown mode \"write\"",
            acl_path.display()
        )),
        "{stderr}"
    );
    std::fs::write(&acl_path, "user no_such_user_here: o4/\n").unwrap();
    let out = snaplockd()
        .args(["--check-config", "-n", "acl_check", "-c"])
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, stderr) = wait_bounded(out);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("no such user"), "{stderr}");
    std::fs::write(&acl_path, "user nobody: o4/\n").unwrap();
    let out = snaplockd()
        .args(["--check-config", "-n", "acl_check", "-c"])
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, stderr) = wait_bounded(out);
    assert_eq!(code, Some(0), "a good file passes: {stderr}");
}
