//! `tx -N NS STATEMENT...`: one lock transaction (snaplock(7),
//! TRANSACTIONS), its outcome printed and turned into the exit status.

use std::io::{self, Write};

use snaplock_client::wire::Message;
use snaplock_client::{Client, Error};

use crate::args::TxArgs;
use crate::exit;

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
            let line = String::from_utf8_lossy(&snaplock_client::wire::encode_to_vec(reply))
                .trim_end()
                .to_owned();
            let text = format!("snaplock-cli: error: tx: unexpected reply: {line}\n");
            (String::new(), text, exit::SOFTWARE)
        }
    }
}

/// Sends the transaction and reports its outcome.
pub fn run(client: &mut Client, args: &TxArgs) -> u8 {
    let tag = client.new_tag();
    let timeout = client.reply_timeout();
    let reply = match client.request(&message(args, tag), timeout) {
        Ok(reply) => reply,
        Err(e) => {
            eprintln!("snaplock-cli: error: tx: {e}");
            return match e {
                Error::Protocol(_) => exit::SOFTWARE,
                _ => exit::UNAVAILABLE,
            };
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use snaplock_client::wire::parse;

    fn args(stmts: &[&str]) -> TxArgs {
        TxArgs {
            namespace: "Clinical".to_owned(),
            duration: Some(std::time::Duration::from_millis(1500)),
            pid: Some(7),
            statements: stmts.iter().map(|s| s.as_bytes().to_vec()).collect(),
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
}
