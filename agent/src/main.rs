//! `snaplockd`: parse the command line, load the configuration, start the
//! logger, run the agent, and turn the outcome into an exit code
//! (0 stopped cleanly, 1 runtime error, 2 usage or configuration error).

use std::path::Path;
use std::process::ExitCode;

use snaplock_agent::cli::{self, Command};
use snaplock_agent::config::{DEFAULT_CONFIG_FILE, Environment};
use snaplock_agent::{Control, logging, signals};

fn main() -> ExitCode {
    // Before anything else, so no thread ever receives these signals
    // asynchronously: the event loop reads them from its signalfd.
    if let Err(e) = signals::block() {
        eprintln!("snaplockd: error: cannot block signals: {e}");
        return ExitCode::from(1);
    }
    // A panic is a bug: say so and exit, so the service manager restarts a
    // clean agent instead of leaving a half-working one.
    std::panic::set_hook(Box::new(|info| {
        if log::max_level() >= log::LevelFilter::Error {
            log::error!("internal error: {info}");
        } else {
            eprintln!("snaplockd: error: internal error: {info}");
        }
        std::process::exit(1);
    }));
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match cli::parse_args(&args) {
        Ok(c) => c,
        Err(e) => return fail(&e.to_string(), 2),
    };
    let (invocation, check_only) = match command {
        Command::Help => {
            print!("{}", cli::usage());
            return ExitCode::SUCCESS;
        }
        Command::Version => {
            println!("snaplockd {}", snaplock_proto::VERSION);
            return ExitCode::SUCCESS;
        }
        Command::CheckConfig(inv) => (inv, true),
        Command::Run(inv) => (inv, false),
    };
    let env = Environment::from_process();
    let config = match cli::load(
        &invocation,
        &env,
        Path::new(DEFAULT_CONFIG_FILE),
        logging::rust_log_is_set(),
    ) {
        Ok(c) => c,
        Err(e) => return fail(&e.to_string(), 2),
    };
    if check_only {
        return ExitCode::SUCCESS;
    }
    logging::init(config.log_level);
    match snaplock_agent::run(config, Control::process()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string(), e.exit_code()),
    }
}

fn fail(message: &str, code: i32) -> ExitCode {
    eprintln!("snaplockd: error: {message}");
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
