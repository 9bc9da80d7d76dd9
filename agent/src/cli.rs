//! The command line of `snaplockd` (getopts), and loading the configuration
//! it points at.
//!
//! Parsing is pure ([`parse_args`]) so it is unit-tested; [`load`] reads
//! the configuration file and merges it with the options.

use std::path::{Path, PathBuf};

use crate::config::{self, AgentConfig, ConfigError, Environment, KeyError, LogSource, Settings};

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run the agent.
    Run(Invocation),
    /// Check the configuration and the options, print nothing, exit 0.
    CheckConfig(Invocation),
    /// Print the usage.
    Help,
    /// Print the version.
    Version,
}

/// The configuration file to read and the settings given as options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invocation {
    /// `-c/--config`: this file must exist.
    pub config_file: Option<PathBuf>,
    /// The options that mirror configuration keys.
    pub options: Settings,
}

/// Options that mirror a configuration key: (long option, key).
const KEY_OPTIONS: &[(&str, &str)] = &[
    ("socket", "socket"),
    ("state-dir", "state_dir"),
    ("listen", "listen"),
    ("neighbors", "neighbors"),
    ("communicator-listen", "communicator_listen"),
    ("metrics-listen", "metrics_listen"),
    ("server-name", "server_name"),
    ("candidate-priority", "candidate_priority"),
    ("secret-file", "secret_file"),
    ("cluster-name", "cluster_name"),
    ("peer-timeout", "peer_timeout"),
    ("grace", "grace"),
    ("clock-drift", "clock_drift"),
    ("log-level", "log_level"),
];

/// The options of `snaplockd`.
pub fn make_opts() -> getopts::Options {
    let mut opts = getopts::Options::new();
    opts.optopt(
        "c",
        "config",
        "configuration file (default: /etc/snaplock/snaplock.conf, when it exists)",
        "FILE",
    );
    opts.optopt("", "socket", "client socket path", "PATH");
    opts.optopt(
        "",
        "state-dir",
        "where the record of epoch and fences is kept (default: /var/lib/snaplock)",
        "DIR",
    );
    opts.optopt(
        "",
        "listen",
        "TCP address for the other agents of the cluster",
        "ADDR:PORT",
    );
    opts.optopt(
        "",
        "neighbors",
        "the cluster's agents, this one included",
        "A:P,B:P,...",
    );
    opts.optopt(
        "",
        "communicator-listen",
        "TCP address for the original snaplock's clients (snapcommunicator session; default: off)",
        "ADDR:PORT",
    );
    opts.optopt(
        "",
        "metrics-listen",
        "TCP address serving GET /metrics to Prometheus (default: off)",
        "ADDR:PORT",
    );
    opts.optopt(
        "n",
        "server-name",
        "this computer's name in the cluster (default: the host name)",
        "NAME",
    );
    opts.optopt(
        "p",
        "candidate-priority",
        "election priority, 1 (first) to 15, or off (default: 14)",
        "1..15|off",
    );
    opts.optopt(
        "",
        "secret-file",
        "file holding the cluster's shared secret",
        "FILE",
    );
    opts.optopt(
        "",
        "cluster-name",
        "the cluster's name, the same on every agent of it (default: snaplock)",
        "NAME",
    );
    opts.optopt(
        "",
        "peer-timeout",
        "seconds of silence after which a peer counts as gone (default: 2)",
        "SECS",
    );
    opts.optopt(
        "",
        "grace",
        "seconds without a majority of leaders before local locks are given up (default: 5)",
        "SECS",
    );
    opts.optopt(
        "",
        "clock-drift",
        "largest clock rate error between two computers, in percent (default: 1)",
        "PERCENT",
    );
    opts.optopt(
        "",
        "log-level",
        "error, warn, info, debug or trace (default: info)",
        "LEVEL",
    );
    opts.optflag(
        "",
        "check-config",
        "check the configuration and the options, then exit",
    );
    opts.optflag("h", "help", "print this help and exit");
    opts.optflag("V", "version", "print the version and exit");
    opts
}

/// The text of `--help`.
pub fn usage() -> String {
    make_opts().usage("Usage: snaplockd [OPTION]...\n\nThe snaplock agent: cluster-wide named locks for local processes.")
}

/// Reads the arguments (without the program name).
pub fn parse_args(args: &[String]) -> Result<Command, ConfigError> {
    let m = make_opts()
        .parse(args)
        .map_err(|e| ConfigError(format!("{e} (see snaplockd --help)")))?;
    if let Some(extra) = m.free.first() {
        return Err(ConfigError(format!(
            "unexpected argument {} (see snaplockd --help)",
            crate::files::shown(extra)
        )));
    }
    if m.opt_present("help") {
        return Ok(Command::Help);
    }
    if m.opt_present("version") {
        return Ok(Command::Version);
    }
    let mut inv = Invocation {
        config_file: m.opt_str("config").map(PathBuf::from),
        options: Settings::default(),
    };
    for (long, key) in KEY_OPTIONS {
        if let Some(value) = m.opt_str(long) {
            match inv.options.set(key, &value) {
                Ok(()) => {}
                Err(KeyError::Invalid(why)) => return Err(ConfigError(format!("--{long}: {why}"))),
                Err(KeyError::Unknown) => unreachable!("every option names a key"),
            }
        }
    }
    Ok(if m.opt_present("check-config") {
        Command::CheckConfig(inv)
    } else {
        Command::Run(inv)
    })
}

/// Reads the configuration file (the one given, which must exist, or
/// `default_file` when it exists) and merges the options over it.
pub fn load(
    inv: &Invocation,
    env: &Environment,
    default_file: &Path,
    rust_log_set: bool,
) -> Result<AgentConfig, ConfigError> {
    let file = match &inv.config_file {
        Some(path) => Some(path.clone()),
        None if default_file.exists() => Some(default_file.to_owned()),
        None => None,
    };
    let settings = match &file {
        Some(path) => config::read_file(path)?,
        None => Settings::default(),
    };
    let log_source = LogSource {
        option: inv.options.log_level,
        file,
        from_env: rust_log_set,
    };
    config::build(settings, inv.options.clone(), env, log_source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use log::LevelFilter;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn every_option_sets_its_key() {
        let cmd = parse_args(&args(&[
            "-c",
            "/x.conf",
            "--socket",
            "/s.sock",
            "--listen",
            "127.0.0.1:4040",
            "--neighbors",
            "127.0.0.1:4040",
            "-n",
            "alpha",
            "-p",
            "off",
            "--secret-file",
            "/secret",
            "--log-level",
            "debug",
        ]))
        .unwrap();
        let Command::Run(inv) = cmd else {
            panic!("{cmd:?}")
        };
        assert_eq!(inv.config_file, Some(PathBuf::from("/x.conf")));
        let o = &inv.options;
        assert_eq!(o.socket, Some(PathBuf::from("/s.sock")));
        assert_eq!(o.listen, Some("127.0.0.1:4040".parse().unwrap()));
        assert_eq!(o.neighbors, Some(vec!["127.0.0.1:4040".parse().unwrap()]));
        assert_eq!(o.server_name.as_deref(), Some("alpha"));
        assert_eq!(o.candidate_priority, Some(config::Priority::Off));
        assert_eq!(o.secret_file, Some(PathBuf::from("/secret")));
        assert_eq!(o.log_level, Some(LevelFilter::Debug));
        let long = parse_args(&args(&[
            "--config",
            "/y",
            "--server-name",
            "b",
            "--candidate-priority",
            "3",
        ]))
        .unwrap();
        let Command::Run(inv) = long else { panic!() };
        assert_eq!(inv.config_file, Some(PathBuf::from("/y")));
        assert_eq!(
            inv.options.candidate_priority,
            Some(config::Priority::Level(3))
        );
    }

    #[test]
    fn help_version_and_check_config_are_recognized() {
        assert_eq!(parse_args(&args(&["-h"])).unwrap(), Command::Help);
        assert_eq!(parse_args(&args(&["--help"])).unwrap(), Command::Help);
        assert_eq!(parse_args(&args(&["-V"])).unwrap(), Command::Version);
        assert_eq!(parse_args(&args(&["--version"])).unwrap(), Command::Version);
        assert!(matches!(
            parse_args(&args(&["--check-config"])).unwrap(),
            Command::CheckConfig(_)
        ));
        assert!(matches!(parse_args(&args(&[])).unwrap(), Command::Run(_)));
        let help = usage();
        for long in [
            "--config",
            "--socket",
            "--listen",
            "--neighbors",
            "--server-name",
            "--candidate-priority",
            "--secret-file",
            "--log-level",
            "--check-config",
            "--help",
            "--version",
        ] {
            assert!(help.contains(long), "{long} missing from --help");
        }
    }

    #[test]
    fn bad_options_are_usage_errors_that_name_the_option() {
        let e = parse_args(&args(&["-p", "0"])).unwrap_err().0;
        assert_eq!(
            e,
            "--candidate-priority: candidate_priority=\"0\": must be from 1 to 15, or off"
        );
        let e = parse_args(&args(&["--log-level", "loud"])).unwrap_err().0;
        assert!(e.starts_with("--log-level: log_level=\"loud\""), "{e}");
        let e = parse_args(&args(&["--frobnicate"])).unwrap_err().0;
        assert!(e.contains("frobnicate"), "{e}");
        let e = parse_args(&args(&["extra"])).unwrap_err().0;
        assert!(e.contains("unexpected argument \"extra\""), "{e}");
        let e = parse_args(&args(&["--socket"])).unwrap_err().0;
        assert!(e.contains("socket"), "{e}");
    }

    #[test]
    fn a_named_config_file_must_exist_but_the_default_one_may_not() {
        let env = Environment {
            hostname: Some("h".into()),
            uid: 5,
            ..Environment::default()
        };
        let missing = Path::new("/nonexistent/snaplock.conf");
        let inv = Invocation {
            config_file: Some(missing.to_owned()),
            options: Settings::default(),
        };
        let e = load(&inv, &env, Path::new("/nonexistent/default.conf"), false)
            .unwrap_err()
            .0;
        assert!(
            e.contains("cannot read the configuration file /nonexistent/snaplock.conf"),
            "{e}"
        );
        let cfg = load(&Invocation::default(), &env, missing, false).unwrap();
        assert_eq!(cfg.core.server_name, "h");
        assert_eq!(
            cfg.log_source,
            LogSource {
                option: None,
                file: None,
                from_env: false
            }
        );
    }

    #[test]
    fn the_default_file_is_read_when_it_exists_and_options_override_it() {
        let dir = std::env::temp_dir().join(format!("snaplock-cli-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("snaplock.conf");
        std::fs::write(&file, "server_name=from_file\nlog_level=warn\n").unwrap();
        let env = Environment {
            hostname: Some("h".into()),
            uid: 5,
            ..Environment::default()
        };
        let cfg = load(&Invocation::default(), &env, &file, true).unwrap();
        assert_eq!(cfg.core.server_name, "from_file");
        assert_eq!(cfg.log_level, LevelFilter::Warn);
        assert_eq!(
            cfg.log_source,
            LogSource {
                option: None,
                file: Some(file.clone()),
                from_env: true
            }
        );
        let Command::Run(inv) =
            parse_args(&args(&["-n", "from_option", "--log-level", "error"])).unwrap()
        else {
            panic!()
        };
        let cfg = load(&inv, &env, &file, false).unwrap();
        assert_eq!(cfg.core.server_name, "from_option");
        assert_eq!(cfg.log_level, LevelFilter::Error);
        assert_eq!(cfg.log_source.option, Some(LevelFilter::Error));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
