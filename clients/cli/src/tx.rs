//! `tx -N NS STATEMENT...`: one lock transaction (snaplock(7),
//! TRANSACTIONS), its outcome printed and turned into the exit status.
//!
//! `tx ... -- COMMAND`: the same transaction, then, when it committed,
//! COMMAND runs as under `lock` ([`run::supervise`]) while the connection
//! holds the variables the transaction set ([`Variables`]):
//!
//! ```text
//!   TRANSACTION ──OK──▶ Holding ──command ended──▶ close, exit with its status
//!        │                 │ (every duration/3: TRANSACTION s1=assert set V1 ...)
//!        │ FAILED          │ lost: the renewal fails, the agent revokes
//!        ▼                 │ them (TRANSACTIONFAILED without tag), the
//!   exit as tx does        │ connection closes, no renewal confirmed in time
//!   (COMMAND never runs)   ▼
//!                      stop the command as lock does ──▶ exit 75
//! ```

use std::io::{self, Write};
use std::time::Duration;

use snaplock_client::wire::Message;
use snaplock_client::{Client, Error, clock, tag_of};
use snaplock_proto::local::tx::DEFAULT_DURATION;
use snaplock_proto::local::tx::stmt::{Op, Var, parse_statement};

use crate::args::TxArgs;
use crate::exit;
use crate::run::{self, Held};

/// The exit status of a transaction that an assert failed.
pub const ASSERT_FAILED: u8 = 1;

/// The request for `args`, with `tag`.
pub fn message(args: &TxArgs, tag: i64) -> Message {
    let mut msg = Message::new("TRANSACTION").with("namespace", &args.namespace);
    for (i, s) in args.statements.iter().enumerate() {
        msg.set(&format!("s{}", i + 1), s);
    }
    if let Some(d) = args.duration {
        msg.set("duration", format!("{}", d.as_secs_f64()));
    }
    if let Some(pid) = args.pid {
        msg.set_u64("pid", pid);
    }
    msg.set("tag", tag.to_string());
    msg
}

/// The variables a committed transaction left its session holding, each
/// with whether it was set with `dup`: the `set` statements that took
/// effect, less the `delete`s after them that did. `results` is the
/// reply's `results=`, one value per statement. An error when the reply
/// does not fit the statements.
pub fn held_after(statements: &[Vec<u8>], results: &str) -> Result<Vec<(Var, bool)>, String> {
    let values: Vec<bool> = results
        .split(',')
        .map(|v| match v {
            "1" => Ok(true),
            "0" => Ok(false),
            _ => Err(format!("results={results} is not a list of 1 and 0")),
        })
        .collect::<Result<_, _>>()?;
    if values.len() != statements.len() {
        return Err(format!(
            "results={results} has {} values for {} statements",
            values.len(),
            statements.len()
        ));
    }
    let mut held: Vec<(Var, bool)> = Vec::new();
    for (i, (text, value)) in statements.iter().zip(values).enumerate() {
        let stmt = parse_statement(text).map_err(|e| format!("s{}: {}", i + 1, e.reason))?;
        // The value is the operation's result through the `not`s; the
        // same parity turns it back.
        let took_effect = stmt.value(value);
        match stmt.op {
            Op::Set(var, dup) if took_effect => {
                held.retain(|(v, _)| *v != var);
                held.push((var, dup));
            }
            Op::Delete(var) if took_effect => held.retain(|(v, _)| *v != var),
            _ => {}
        }
    }
    Ok(held)
}

/// The variables `tx ... -- COMMAND` holds for its command.
pub struct Variables {
    namespace: String,
    pid: Option<u64>,
    duration: Duration,
    /// Never more than the 32 statements of the transaction that set them.
    set: Vec<(Var, bool)>,
    display: String,
}

impl Variables {
    /// What the transaction of `args` holds, once committed with `results`.
    pub fn new(args: &TxArgs, set: Vec<(Var, bool)>) -> Variables {
        Variables {
            namespace: args.namespace.clone(),
            pid: args.pid,
            duration: args.duration.unwrap_or(DEFAULT_DURATION),
            set,
            display: format!("tx: the variables of namespace {}", args.namespace),
        }
    }
}

impl Held for Variables {
    fn name(&self) -> &str {
        &self.display
    }

    /// `assert set V [dup]` for each: true, and renewed, while this session
    /// holds V; false when it is gone and somebody else holds it.
    fn renewal(&self, tag: i64) -> Message {
        let mut msg = Message::new("TRANSACTION").with("namespace", &self.namespace);
        for (i, (var, dup)) in self.set.iter().enumerate() {
            let dup = if *dup { " dup" } else { "" };
            msg.set(&format!("s{}", i + 1), format!("assert set {var}{dup}"));
        }
        msg.set("duration", format!("{}", self.duration.as_secs_f64()));
        if let Some(pid) = self.pid {
            msg.set_u64("pid", pid);
        }
        msg.set("tag", tag.to_string());
        msg
    }

    fn renewed(&self, reply: &Message) -> Result<Option<i128>, String> {
        match reply.command.as_str() {
            // No date: the variables live `duration` from the commit.
            "TRANSACTIONOK" => Ok(None),
            "TRANSACTIONFAILED" => Err(format!("the renewal failed: {}", failure(reply))),
            _ => Err(format!(
                "unexpected reply to the renewal: {}",
                one_line(reply)
            )),
        }
    }

    fn lost_by(&self, msg: &Message) -> Option<String> {
        // A notice nobody asked for: the agent dropped the connection's
        // variables (`revoked: ...`). One without a namespace is taken as
        // about ours: the safe reading.
        let ours = msg
            .get("namespace")
            .is_none_or(|ns| ns == self.namespace.as_bytes());
        (msg.command == "TRANSACTIONFAILED" && tag_of(msg).is_none() && ours)
            .then(|| format!("the agent says {}", failure(msg)))
    }

    fn release(&self, _client: &mut Client) {
        // The variables vanish with the connection, when snaplock-cli
        // exits.
    }
}

/// `TRANSACTIONFAILED`'s error and description, for a message.
fn failure(msg: &Message) -> String {
    let error = msg.get_str("error").unwrap_or("");
    let why = String::from_utf8_lossy(msg.get("description").unwrap_or_default());
    format!("TRANSACTIONFAILED ({error}): {why}")
}

fn one_line(msg: &Message) -> String {
    String::from_utf8_lossy(&snaplock_client::wire::encode_to_vec(msg))
        .trim_end()
        .to_owned()
}

/// What a reply means for the user: the text for stdout, the text for
/// stderr, and the exit status.
pub fn outcome(args: &TxArgs, reply: &Message) -> (String, String, u8) {
    match reply.command.as_str() {
        "TRANSACTIONOK" => {
            let fence = reply.get_str("fence").unwrap_or("");
            let results = reply.get_str("results").unwrap_or("");
            (
                format!("fence: {fence}\nresults: {results}\n"),
                String::new(),
                exit::OK,
            )
        }
        "TRANSACTIONFAILED" => {
            let error = reply.get_str("error").unwrap_or("");
            let why = String::from_utf8_lossy(reply.get("description").unwrap_or_default());
            let n: usize = reply
                .get_str("failed")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let statement = n
                .checked_sub(1)
                .and_then(|i| args.statements.get(i))
                .map(|s| String::from_utf8_lossy(s).into_owned());
            let code = match error {
                "failed" => ASSERT_FAILED,
                // As for lock: the agent cannot serve this now.
                "unavailable" | "untrusted" => exit::UNAVAILABLE,
                _ => exit::SOFTWARE,
            };
            let text = match (error, statement) {
                ("failed", Some(s)) => format!("snaplock-cli: tx: s{n} is false: {s}\n"),
                (_, Some(s)) => format!("snaplock-cli: error: tx: {error}: {why} (s{n}: {s})\n"),
                (_, None) => format!("snaplock-cli: error: tx: {error}: {why}\n"),
            };
            (String::new(), text, code)
        }
        _ => {
            let text = format!(
                "snaplock-cli: error: tx: unexpected reply: {}\n",
                one_line(reply)
            );
            (String::new(), text, exit::SOFTWARE)
        }
    }
}

/// Sends the transaction, the reply or the exit status to give.
fn request(client: &mut Client, args: &TxArgs) -> Result<Message, u8> {
    let tag = client.new_tag();
    let timeout = client.reply_timeout();
    client.request(&message(args, tag), timeout).map_err(|e| {
        eprintln!("snaplock-cli: error: tx: {e}");
        match e {
            Error::Protocol(_) => exit::SOFTWARE,
            _ => exit::UNAVAILABLE,
        }
    })
}

/// Sends the transaction and reports its outcome; with a command, runs it
/// while holding the variables ([`run_command`]).
pub fn run(client: &mut Client, args: &TxArgs) -> u8 {
    if let Some(command) = &args.command {
        return run_command(client, args, command);
    }
    let reply = match request(client, args) {
        Ok(reply) => reply,
        Err(code) => return code,
    };
    let (out, err, code) = outcome(args, &reply);
    if !err.is_empty() {
        eprint!("{err}");
    }
    let mut stdout = io::stdout().lock();
    if stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return exit::SOFTWARE;
    }
    code
}

/// `tx ... -- COMMAND`: on commit, runs `command` while holding the
/// variables, renewed every third of their duration.
fn run_command(client: &mut Client, args: &TxArgs, command: &[std::ffi::OsString]) -> u8 {
    let sent = clock::monotonic();
    let reply = match request(client, args) {
        Ok(reply) => reply,
        Err(code) => return code,
    };
    if reply.command != "TRANSACTIONOK" {
        // Nothing is held: the command does not run.
        let (_, err, code) = outcome(args, &reply);
        eprint!("{err}");
        return code;
    }
    let results = reply.get_str("results").unwrap_or("");
    let set = match held_after(&args.statements, results) {
        Ok(set) => set,
        Err(why) => {
            eprintln!(
                "snaplock-cli: error: tx: the reply does not fit the statements ({why}): {}",
                one_line(&reply)
            );
            return exit::SOFTWARE;
        }
    };
    let held = Variables::new(args, set);
    let lease_end = if held.set.is_empty() {
        // Nothing to keep: nothing ends, nothing is renewed.
        sent + NEVER
    } else {
        // The commit came after `sent`: its variables live at least this.
        sent + held.duration
    };
    let fence = reply.get("fence").unwrap_or_default();
    let vars = [
        ("SNAPLOCK_TX_NAMESPACE", args.namespace.as_bytes()),
        ("SNAPLOCK_TX_FENCE", fence),
        ("SNAPLOCK_TX_RESULTS", results.as_bytes()),
    ];
    run::supervise(client, &held, held.duration, lease_end, command, &vars)
}

/// Far beyond any command's run: the end of a lease that nothing holds.
const NEVER: Duration = Duration::from_secs(100 * 365 * 86_400);

#[cfg(test)]
mod tests {
    use super::*;
    use snaplock_client::wire::parse;

    fn args(stmts: &[&str]) -> TxArgs {
        TxArgs {
            namespace: "Clinical".to_owned(),
            duration: Some(Duration::from_millis(1500)),
            pid: Some(7),
            statements: stmts.iter().map(|s| s.as_bytes().to_vec()).collect(),
            command: None,
        }
    }

    #[test]
    fn the_statements_become_s1_s2_in_order() {
        let msg = message(&args(&["assert not exists A;B", "set C dup"]), 5);
        let line = String::from_utf8(snaplock_client::wire::encode_to_vec(&msg)).unwrap();
        assert_eq!(
            line,
            "TRANSACTION duration=1.5;namespace=Clinical;pid=7;s1=\"assert not exists A;B\";s2=set C dup;tag=5\n"
        );
    }

    #[test]
    fn a_commit_prints_its_fence_and_results_and_exits_0() {
        let reply = parse(b"TRANSACTIONOK fence=12;namespace=Clinical;results=1,0;tag=5").unwrap();
        let (out, err, code) = outcome(&args(&["exists A", "exists B"]), &reply);
        assert_eq!(
            (out.as_str(), err.as_str(), code),
            ("fence: 12\nresults: 1,0\n", "", 0)
        );
    }

    #[test]
    fn a_failed_assert_prints_the_statement_and_exits_1() {
        let reply = parse(
            b"TRANSACTIONFAILED description=s2: x is false;error=failed;failed=2;namespace=Clinical;tag=5",
        )
        .unwrap();
        let (out, err, code) = outcome(&args(&["exists A", "assert exists B"]), &reply);
        assert_eq!(out, "");
        assert_eq!(err, "snaplock-cli: tx: s2 is false: assert exists B\n");
        assert_eq!(code, ASSERT_FAILED);
    }

    #[test]
    fn other_failures_follow_the_exit_codes_of_lock() {
        for (error, code) in [
            ("invalid", 70),
            ("overflow", 70),
            ("unavailable", 69),
            ("untrusted", 69),
        ] {
            let line = format!(
                "TRANSACTIONFAILED description=why;error={error};failed=0;namespace=Clinical;tag=5"
            );
            let (_, err, got) = outcome(&args(&["exists A"]), &parse(line.as_bytes()).unwrap());
            assert_eq!(got, code, "{error}");
            assert!(err.contains(error) && err.contains("why"), "{err}");
        }
        let (_, _, got) = outcome(
            &args(&["exists A"]),
            &parse(b"UNKNOWN command=TRANSACTION").unwrap(),
        );
        assert_eq!(got, 70);
    }

    fn stmts(texts: &[&str]) -> Vec<Vec<u8>> {
        texts.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn names(held: &[(Var, bool)]) -> Vec<(String, bool)> {
        held.iter().map(|(v, dup)| (v.to_string(), *dup)).collect()
    }

    #[test]
    fn the_variables_held_are_the_sets_that_took_effect_less_later_deletes() {
        let s = stmts(&[
            "assert not exists Month-End/C",
            "assert set Entry/C/R dup",
            "set Taken",
            "anyway not set Review/%43",
            "set Gone",
            "delete Gone",
            "exists Entry/C/R",
        ]);
        // `set Taken` was false (another session has it); `not set
        // Review/C` is 0 because the set took effect.
        let held = held_after(&s, "1,1,0,0,1,1,1").expect("fits");
        assert_eq!(
            names(&held),
            [
                ("Entry/C/R".to_owned(), true),
                ("Review/C".to_owned(), false)
            ]
        );
    }

    #[test]
    fn results_that_do_not_fit_the_statements_are_refused() {
        let s = stmts(&["set A", "set B"]);
        assert!(held_after(&s, "1").unwrap_err().contains("2 statements"));
        assert!(held_after(&s, "1,x").unwrap_err().contains("1 and 0"));
        assert!(held_after(&s, "").is_err());
        assert!(held_after(&stmts(&["frob A"]), "1").is_err());
    }

    fn variables() -> Variables {
        let mut a = args(&["assert set A/B dup", "set C%2FD"]);
        a.command = Some(vec!["true".into()]);
        let held = held_after(&a.statements, "1,1").expect("fits");
        Variables::new(&a, held)
    }

    #[test]
    fn a_renewal_asserts_each_variable_set_again_with_its_dup_pid_and_duration() {
        let line = snaplock_client::wire::encode_to_vec(&variables().renewal(9));
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "TRANSACTION duration=1.5;namespace=Clinical;pid=7;s1=assert set A/B dup;\
             s2=assert set C%2FD;tag=9\n"
        );
    }

    #[test]
    fn a_renewal_that_fails_or_is_not_understood_means_the_variables_are_lost() {
        let v = variables();
        let ok = parse(b"TRANSACTIONOK fence=13;namespace=Clinical;results=1,1;tag=9").unwrap();
        assert_eq!(v.renewed(&ok), Ok(None));
        let failed = parse(
            b"TRANSACTIONFAILED description=s2 is false;error=failed;failed=2;namespace=Clinical;tag=9",
        )
        .unwrap();
        let why = v.renewed(&failed).unwrap_err();
        assert!(
            why.contains("failed") && why.contains("s2 is false"),
            "{why}"
        );
        assert!(
            v.renewed(&parse(b"UNKNOWN command=TRANSACTION").unwrap())
                .is_err()
        );
    }

    #[test]
    fn an_untagged_failure_about_the_namespace_is_a_revocation() {
        let v = variables();
        let revoked = parse(
            b"TRANSACTIONFAILED description=\"revoked: no contact with the leaders\";\
              error=unavailable;failed=0;namespace=Clinical",
        )
        .unwrap();
        let why = v.lost_by(&revoked).expect("lost");
        assert!(why.contains("revoked: no contact"), "{why}");
        let elsewhere = parse(
            b"TRANSACTIONFAILED description=revoked;error=unavailable;failed=0;namespace=Other",
        )
        .unwrap();
        assert_eq!(v.lost_by(&elsewhere), None);
        let tagged = parse(
            b"TRANSACTIONFAILED description=x;error=failed;failed=1;namespace=Clinical;tag=4",
        )
        .unwrap();
        assert_eq!(v.lost_by(&tagged), None, "a late reply to a request");
        assert_eq!(
            v.lost_by(&parse(b"UNLOCKED object_name=A/B").unwrap()),
            None
        );
    }
}
