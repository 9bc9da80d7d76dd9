//! `snaplock-cli`: lock-and-run like flock(1), and the agent's status, ticket
//! list and raw protocol lines, for shell scripts and operators.
//!
//! `main` parses ([`args::parse_command`], pure), runs ([`execute`]) and
//! turns the outcome into the documented exit status ([`exit`]).

mod args;
mod exit;
mod guard;
mod query;
mod run;
mod spawn;
mod tx;
mod who;

use std::ffi::OsString;
use std::process::ExitCode;

use snaplock_client::{Client, default_socket_path};

use crate::args::{Action, Command, USAGE, parse_command};

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match parse_command(args) {
        Ok(cmd) => execute(&cmd),
        Err(e) => {
            eprintln!("snaplock-cli: error: {e}");
            eprintln!("Try 'snaplock-cli --help' for more information.");
            ExitCode::from(exit::USAGE)
        }
    }
}

/// Runs a parsed command line; errors are reported on stderr as
/// `snaplock-cli: error: ...`.
fn execute(cmd: &Command) -> ExitCode {
    let action = match &cmd.action {
        Action::Help => {
            print!("{USAGE}");
            return ExitCode::from(exit::OK);
        }
        Action::Version => {
            println!("snaplock-cli {}", snaplock_proto::VERSION);
            return ExitCode::from(exit::OK);
        }
        action => action,
    };
    let path = default_socket_path(cmd.socket.as_deref());
    let mut client = match Client::connect(&path) {
        Ok(client) => client,
        Err(e) => {
            eprintln!(
                "snaplock-cli: error: cannot connect to the agent at {}: {e}",
                path.display()
            );
            return ExitCode::from(exit::UNAVAILABLE);
        }
    };
    let code = match action {
        Action::Lock(lock) => run::lock_and_run(&mut client, lock),
        Action::Status => query::status(&mut client),
        Action::List => query::list(&mut client),
        Action::Info => query::info(&mut client),
        Action::Metrics => query::metrics(&mut client),
        Action::Who(name) => who::who(&mut client, name, query::LIST_TIMEOUT),
        Action::Send(send) => query::send(&mut client, send),
        Action::Tx(tx) => tx::run(&mut client, tx),
        Action::Help | Action::Version => exit::OK,
    };
    ExitCode::from(code)
}
