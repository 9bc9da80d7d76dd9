//! The command line, parsed into a [`Command`] without touching the world.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use getopts::{Matches, Options, ParsingStyle};
use snaplock_proto::local::trust::{MAX_MIN_UPTIME, fraction_from_wire};
use snaplock_proto::time::parse_duration;

/// The help text (`-h`, `--help`).
pub const USAGE: &str = "\
Usage: snaplock-cli [--socket PATH] COMMAND [ARGS...]

Take cluster-wide named locks from the local snaplock agent (snaplockd).

Commands:
  lock [-w SECS] [-d SECS] [-n] [-v] [-s|-x|--counted N] [--unit] [-E CODE] NAME [--] COMMAND [ARGS...]
  lock [-w SECS] [-d SECS] [-n] [-v] [-s|-x|--counted N] [--unit] [-E CODE] NAME -c SHELL-COMMAND
      Lock NAME, run COMMAND while holding it, unlock when it exits, and exit
      with its status. COMMAND runs in its own process group, and the lock is
      held until every process of that group has ended. COMMAND gets
      SNAPLOCK_OBJECT, SNAPLOCK_FENCE and SNAPLOCK_TIMEOUT_DATE (the end of
      the first lease only) in its environment. SIGINT, SIGTERM and SIGHUP
      are passed on to its group. If the lock is lost while it runs, the
      group gets SIGTERM at once, SIGKILL after a grace period, and the exit
      status is 75. If snaplock-cli is killed, the group is killed before
      the lock is released.
      -w, --wait SECS       wait at most SECS for the lock (decimals allowed;
                            default: as long as the agent allows, 7 days;
                            0 means -n); says so on stderr when it gives up
      -d, --lease SECS      lease length, renewed every SECS/3 while COMMAND
                            runs (decimals allowed; 1 to 604800; default 60)
      -n, --nonblock        fail at once if the lock is taken, or if the
                            agent cannot grant locks now (exit 69)
      -v, --verbose         while waiting, say on stderr where the request
                            is in line (1: next) and why nothing can be
                            granted, when nothing can (progress=true)
      -s, --shared          take a shared lock
      --counted N           take a counted lock: granted while fewer than N
                            hold NAME, N from this run's own view of the
                            capacity (1 to 1000000)
      -x, -e, --exclusive   take an exclusive lock (the default)
      --min-uptime SECS     refuse to lock unless the agent has run at least
                            SECS (decimals allowed; 0 to 315360000; exit 69)
      --min-trust X         refuse to lock unless the agent's trust is at
                            least X (0 to 1; exit 69); see snaplock(7), TRUST
      --unit                the lock belongs to the cgroup snaplock-cli runs
                            in (a systemd unit or scope; owner=cgroup): if
                            snaplock-cli and its guard are killed, it stays
                            held while any process of the unit runs, until
                            its lease ends; it ends once the unit has no
                            process left. Without cgroup v2, or in the root
                            cgroup, the lock is refused (exit 70)
      -c, --command SHELL-COMMAND
                            run SHELL-COMMAND with sh -c
      -E, --conflict-exit-code CODE
                            exit status on conflict or timeout (0 to 255;
                            default 1; -n -E 0 skips quietly when taken)
  tx -N NS [-d SECS] [-p PID] STATEMENT...
  tx -N NS [-d SECS] [-p PID] STATEMENT... -- COMMAND [ARGS...]
  tx -N NS [-d SECS] [-p PID] -c SHELL-COMMAND STATEMENT...
      Send one lock transaction on namespace NS (snaplock(7), TRANSACTIONS):
      STATEMENT is s1, s2, ... in order (at most 32), for example
      'assert not exists A/B' 'assert set A/C dup'. Without COMMAND: print
      \"fence: F\" and \"results: 1,0,...\" and exit 0 when it committed; exit
      1 when an assert was false, printing that statement. The variables it
      sets belong to snaplock-cli's connection, and vanish when it exits.
      With COMMAND: when it committed, run COMMAND while holding the
      variables it set, renewed every SECS/3, as lock runs its command
      (same process group, signals, stop and exit 75 if they are lost), with
      SNAPLOCK_TX_NAMESPACE, SNAPLOCK_TX_FENCE and SNAPLOCK_TX_RESULTS in its
      environment; they vanish when it exits, and so does snaplock-cli, with
      its status. When the transaction fails, COMMAND does not run.
      -N, --namespace NS    the namespace
      -d, --duration SECS   how long the variables it sets live, and with
                            COMMAND the renewal period times 3 (1 to 604800;
                            default 60)
      -p, --pid PID         the session's pid (default: none)
      -c, --command SHELL-COMMAND
                            run SHELL-COMMAND with sh -c
  status
      Print \"ready\" and exit 0 when the agent can grant locks now, else
      print \"not ready\" and exit 1.
  list
      Print the tickets, one per line: in a cluster, every agent's requests
      as the leaders that own the names know them. A leader that did not
      answer in time is named on stderr.
  who NAME
      Print who holds NAME (agent, key, mode, since when, fence) and the
      requests waiting for it, in the order they will be served. Asks the
      name's owner leader only.
  info
      Print the agent's status, one \"name: value\" line per item; in a
      cluster, then one \"peer ADDR: ...\" line per other member: its
      name, link state, when it was last heard and the ping round trip.
  metrics
      Print the agent's metrics in the Prometheus text format (as its
      metrics_listen serves them), for node_exporter's textfile collector.
  send [-t SECS] LINE
      Send LINE, one raw protocol message, and print the replies: wait at
      most SECS (decimals allowed; default 10) for the first one, then print
      more until none came for 0.25 s. The connection, and any lock it took
      without detach=true, ends when snaplock-cli exits.
      -t, --timeout SECS    how long to wait for the first reply

Options:
      --socket PATH         the agent's socket (default: $SNAPLOCK_SOCKET, else
                            /run/snaplock/snaplock.sock if /run/snaplock exists,
                            else $XDG_RUNTIME_DIR/snaplock.sock, else
                            /tmp/snaplock-UID/snaplock.sock)
  -h, --help                print this help and exit
  -V, --version             print the version and exit

Exit status:
  0       success; for lock and tx with COMMAND, the status of COMMAND;
          who: the owner answered (NAME held or not)
  1       lock: conflict (-n) or timeout (-w), unless -E says otherwise;
          status: the agent is not ready; tx: an assert was false (COMMAND
          did not run)
  64      usage error
  69      agent unavailable: cannot connect, no reply in time, connection
          closed, or LOCKFAILED error=unavailable (no leaders, no quorum,
          leaders changing, lock-delay; the reason is printed), or
          TRANSACTIONFAILED error=unavailable; lock: the agent does not
          meet --min-uptime or --min-trust (error=untrusted); who: the
          name's owner leader did not answer, or there are no leaders
  70      protocol or unexpected error: LOCKFAILED error=invalid, overflow,
          denied or duplicate (TRANSACTIONFAILED error=invalid or overflow),
          an unexpected or unreadable reply
  75      lock: the lock was lost while COMMAND ran (COMMAND was stopped);
          tx: the variables were lost while COMMAND ran (a renewal failed,
          or the agent revoked them; COMMAND was stopped)
  126     lock, tx: COMMAND cannot be executed
  127     lock, tx: COMMAND not found
  128+N   lock, tx: COMMAND was killed by signal N
";

/// Longest wait and lease the agent accepts (7 days, snaplock(7)).
pub const MAX_SECS: u64 = 604_800;
/// `-w` default: as long as the agent allows, since flock(1) waits forever.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(MAX_SECS);
/// `-d` default.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);
/// `-t` default of `send`.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest object name the agent accepts.
const MAX_NAME: usize = 4096;

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// `--socket PATH`.
    pub socket: Option<PathBuf>,
    /// The subcommand.
    pub action: Action,
}

/// The subcommands, and `--help` / `--version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Print [`USAGE`].
    Help,
    /// Print the version.
    Version,
    /// Lock and run a command.
    Lock(LockArgs),
    /// `LOCKSTATUS`.
    Status,
    /// `LISTTICKETS`.
    List,
    /// `LISTTICKETS object_name=NAME`.
    Who(Vec<u8>),
    /// `INFO`.
    Info,
    /// `METRICS`.
    Metrics,
    /// A raw line.
    Send(SendArgs),
    /// One lock transaction.
    Tx(TxArgs),
}

/// `tx -N NS [-d SECS] [-p PID] STATEMENT... [-- COMMAND [ARGS...]]`, or
/// `tx ... -c SHELL-COMMAND STATEMENT...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxArgs {
    /// `-N`: the namespace.
    pub namespace: String,
    /// `-d`: how long the variables it sets live (the agent's default when
    /// absent).
    pub duration: Option<Duration>,
    /// `-p`: the session's pid.
    pub pid: Option<u64>,
    /// The statements, `s1` first (never empty, at most 32).
    pub statements: Vec<Vec<u8>>,
    /// The command to run while holding the variables, with its
    /// arguments (never empty when given).
    pub command: Option<Vec<OsString>>,
}

/// Most statements in one transaction (snaplock(7)).
pub const MAX_STATEMENTS: usize = 32;

/// `lock [-w SECS] [-d SECS] [-n] [-s|-x|--counted N] [--unit] [-E CODE] NAME [--] COMMAND [ARGS...]`,
/// or `... NAME -c SHELL-COMMAND`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockArgs {
    /// The object name, as given (any bytes).
    pub name: Vec<u8>,
    /// `-w`: how long to wait for the lock.
    pub wait: Duration,
    /// `-d`: the lease, renewed while the command runs.
    pub lease: Duration,
    /// `-n` (or `-w 0`): fail at once when taken.
    pub try_once: bool,
    /// `-s`: shared mode.
    pub shared: bool,
    /// `--counted N`: counted mode, with its limit.
    pub counted: Option<u32>,
    /// `--min-uptime SECS`: the agent must have run this long.
    pub min_uptime: Option<Duration>,
    /// `--min-trust X`: the agent's trust must be at least this, in
    /// millionths.
    pub min_trust: Option<u32>,
    /// `--unit`: the lock is owned by snaplock-cli's cgroup
    /// (`owner=cgroup`), and outlives snaplock-cli while that unit runs.
    pub unit: bool,
    /// `-E`: exit status on conflict or timeout.
    pub conflict_code: u8,
    /// `-v`: say on stderr where the request is in line while it waits.
    pub verbose: bool,
    /// The command and its arguments (never empty).
    pub command: Vec<OsString>,
}

/// `send [-t SECS] LINE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendArgs {
    /// The line, without its newline.
    pub line: Vec<u8>,
    /// `-t`: how long to wait for the first reply.
    pub timeout: Duration,
}

/// A command line that cannot be run; the text says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

/// The global options, before the subcommand.
pub fn make_opts() -> Options {
    let mut opts = Options::new();
    opts.parsing_style(ParsingStyle::StopAtFirstFree);
    opts.optopt("", "socket", "the agent's socket", "PATH");
    opts.optflag("h", "help", "print this help and exit");
    opts.optflag("V", "version", "print the version and exit");
    opts
}

/// The options of `lock`; parsing stops at NAME so that COMMAND keeps its own.
pub fn lock_opts() -> Options {
    let mut opts = Options::new();
    opts.parsing_style(ParsingStyle::StopAtFirstFree);
    opts.optopt("w", "wait", "wait at most SECS for the lock", "SECS");
    opts.optopt(
        "d",
        "lease",
        "lease length, renewed while COMMAND runs",
        "SECS",
    );
    opts.optflag("n", "nonblock", "fail at once if the lock is taken");
    opts.optflag(
        "v",
        "verbose",
        "say on stderr where the request is in line while it waits",
    );
    opts.optflag("s", "shared", "take a shared lock");
    opts.optopt(
        "",
        "counted",
        "take a counted lock: granted while fewer than N hold NAME",
        "N",
    );
    opts.optflag("x", "exclusive", "take an exclusive lock (the default)");
    opts.optflag("e", "", "take an exclusive lock (the default)");
    opts.optopt(
        "",
        "min-uptime",
        "refuse unless the agent has run at least SECS",
        "SECS",
    );
    opts.optopt(
        "",
        "min-trust",
        "refuse unless the agent's trust is at least X",
        "X",
    );
    opts.optflag(
        "",
        "unit",
        "the lock belongs to snaplock-cli's cgroup (owner=cgroup)",
    );
    opts.optopt(
        "c",
        "command",
        "run SHELL-COMMAND with sh -c",
        "SHELL-COMMAND",
    );
    opts.optopt(
        "E",
        "conflict-exit-code",
        "exit status on conflict or timeout",
        "CODE",
    );
    opts.optflag("h", "help", "print the help and exit");
    opts
}

/// The options of `send`.
pub fn send_opts() -> Options {
    let mut opts = Options::new();
    opts.parsing_style(ParsingStyle::StopAtFirstFree);
    opts.optopt(
        "t",
        "timeout",
        "how long to wait for the first reply",
        "SECS",
    );
    opts.optflag("h", "help", "print the help and exit");
    opts
}

/// The options of `tx`.
pub fn tx_opts() -> Options {
    let mut opts = Options::new();
    opts.parsing_style(ParsingStyle::StopAtFirstFree);
    opts.optopt("N", "namespace", "the namespace", "NS");
    opts.optopt(
        "d",
        "duration",
        "how long the variables it sets live",
        "SECS",
    );
    opts.optopt("p", "pid", "the session's pid", "PID");
    opts.optopt(
        "c",
        "command",
        "run SHELL-COMMAND with sh -c",
        "SHELL-COMMAND",
    );
    opts.optflag("h", "help", "print the help and exit");
    opts
}

/// The options of `status`, `list`, `info` and `metrics`.
fn plain_opts() -> Options {
    let mut opts = Options::new();
    opts.optflag("h", "help", "print the help and exit");
    opts
}

/// Parses the arguments after the program name.
pub fn parse_command<I>(args: I) -> Result<Command, UsageError>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let (m, rest) = getopts_parse(&make_opts(), &args)?;
    let socket = m.opt_str("socket").map(PathBuf::from);
    if socket.as_ref().is_some_and(|s| s.as_os_str().is_empty()) {
        return Err(usage("--socket needs a path"));
    }
    let action = if m.opt_present("help") {
        Action::Help
    } else if m.opt_present("version") {
        Action::Version
    } else {
        let Some((sub, sub_args)) = rest.split_first() else {
            return Err(usage(
                "missing command (lock, tx, status, list, who, info, metrics or send)",
            ));
        };
        match sub.to_str() {
            Some("lock") => parse_lock(sub_args)?,
            Some("send") => parse_send(sub_args)?,
            Some("tx") => parse_tx(sub_args)?,
            Some("who") => parse_who(sub_args)?,
            Some(name @ ("status" | "list" | "info" | "metrics")) => parse_plain(name, sub_args)?,
            _ => {
                return Err(usage(format!(
                    "unknown command '{}'",
                    sub.to_string_lossy()
                )));
            }
        }
    };
    Ok(Command { socket, action })
}

/// Runs getopts over `args`. getopts reads arguments as UTF-8, but NAME and
/// COMMAND are any bytes: the free arguments are returned as the tail of
/// `args` itself, which they are with `StopAtFirstFree`.
fn getopts_parse<'a>(
    opts: &Options,
    args: &'a [OsString],
) -> Result<(Matches, &'a [OsString]), UsageError> {
    let lossy: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let m = opts.parse(&lossy).map_err(|e| usage(e.to_string()))?;
    let split = args.len() - m.free.len();
    if args[..split].iter().any(|a| a.to_str().is_none()) {
        return Err(usage("options and their values must be valid UTF-8"));
    }
    Ok((m, &args[split..]))
}

fn parse_tx(args: &[OsString]) -> Result<Action, UsageError> {
    let (m, rest) = getopts_parse(&tx_opts(), args)?;
    if m.opt_present("help") {
        return Ok(Action::Help);
    }
    let Some(namespace) = m.opt_str("namespace") else {
        return Err(usage("tx: missing -N NS"));
    };
    if namespace.is_empty() {
        return Err(usage("tx: the namespace must not be empty"));
    }
    let duration = match m.opt_str("duration") {
        None => None,
        Some(v) => Some(seconds("-d", &v, 1)?),
    };
    let pid = match m.opt_str("pid") {
        None => None,
        Some(v) => match v.parse::<u64>() {
            Ok(p) if p >= 1 && p <= i64::MAX as u64 => Some(p),
            _ => return Err(usage(format!("-p: '{v}' is not a positive integer"))),
        },
    };
    // getopts takes the `--` that ends the options; one `--` ends them
    // either way, and then the statements come.
    let took_dashes = args.len() > rest.len() && args[args.len() - rest.len() - 1] == "--";
    let rest = match rest.split_first() {
        Some((dashes, tail)) if dashes == "--" && !took_dashes => tail,
        _ => rest,
    };
    // No statement is `--`: the next one ends the statements.
    let (rest, command) = match rest.iter().position(|a| a == "--") {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    // `-c SHELL-COMMAND` before the statements, or after them as lock
    // takes it after NAME.
    let mut shell = m.opt_str("command").map(OsString::from);
    let mut rest = rest;
    if let [head @ .., flag, line] = rest {
        if shell.is_none() && command.is_none() && (flag == "-c" || flag == "--command") {
            shell = Some(line.clone());
            rest = head;
        }
    }
    if rest.last().is_some_and(|a| a == "-c" || a == "--command") {
        return Err(usage("tx: -c needs a SHELL-COMMAND"));
    }
    let command = match (shell, command) {
        (Some(_), Some(_)) => {
            return Err(usage(
                "tx: give either -c SHELL-COMMAND or -- COMMAND, not both",
            ));
        }
        (Some(line), None) => Some(vec!["sh".into(), "-c".into(), line]),
        (None, Some([])) => return Err(usage("tx: missing COMMAND after --")),
        (None, Some(command)) => Some(command.to_vec()),
        (None, None) => None,
    };
    if rest.is_empty() {
        return Err(usage("tx: missing STATEMENT"));
    }
    if rest.len() > MAX_STATEMENTS {
        return Err(usage(format!(
            "tx: at most {MAX_STATEMENTS} statements, not {}",
            rest.len()
        )));
    }
    let statements = rest.iter().map(|a| a.as_bytes().to_vec()).collect();
    Ok(Action::Tx(TxArgs {
        namespace,
        duration,
        pid,
        statements,
        command,
    }))
}

fn parse_lock(args: &[OsString]) -> Result<Action, UsageError> {
    let (m, rest) = getopts_parse(&lock_opts(), args)?;
    if m.opt_present("help") {
        return Ok(Action::Help);
    }
    let wait = match m.opt_str("wait") {
        None => DEFAULT_WAIT,
        Some(v) => seconds("-w", &v, 0)?,
    };
    let lease = match m.opt_str("lease") {
        None => DEFAULT_LEASE,
        Some(v) => seconds("-d", &v, 1)?,
    };
    let conflict_code = match m.opt_str("conflict-exit-code") {
        None => 1,
        Some(v) => match v.parse::<u8>() {
            Ok(code) => code,
            _ => {
                return Err(usage(format!(
                    "-E: '{v}' is not an exit status from 0 to 255"
                )));
            }
        },
    };
    let Some((name, mut command)) = rest.split_first() else {
        return Err(usage("lock: missing NAME and COMMAND"));
    };
    if name.is_empty() {
        return Err(usage("lock: NAME must not be empty"));
    }
    if name.len() > MAX_NAME {
        return Err(usage(format!("lock: NAME is longer than {MAX_NAME} bytes")));
    }
    let exclusive = m.opt_present("exclusive") || m.opt_present("e");
    if exclusive && m.opt_present("shared") {
        return Err(usage("lock: -s and -x (or -e) exclude each other"));
    }
    let counted = match m.opt_str("counted") {
        None => None,
        Some(v) => match v.parse::<u32>() {
            Ok(n) if (1..=1_000_000).contains(&n) => Some(n),
            _ => {
                return Err(usage(format!(
                    "--counted: '{v}' is not a number of holders from 1 to 1000000"
                )));
            }
        },
    };
    if counted.is_some() && (exclusive || m.opt_present("shared")) {
        return Err(usage(
            "lock: --counted, -s and -x (or -e) exclude each other",
        ));
    }
    let min_uptime = match m.opt_str("min-uptime") {
        None => None,
        Some(v) => Some(
            parse_duration(v.as_bytes(), MAX_MIN_UPTIME)
                .filter(|d| *d <= Duration::from_secs(MAX_MIN_UPTIME))
                .ok_or_else(|| {
                    usage(format!(
                        "--min-uptime: '{v}' is not a number of seconds from 0 to {MAX_MIN_UPTIME}"
                    ))
                })?,
        ),
    };
    let min_trust = match m.opt_str("min-trust") {
        None => None,
        Some(v) => Some(
            fraction_from_wire(v.as_bytes())
                .ok_or_else(|| usage(format!("--min-trust: '{v}' is not a number from 0 to 1")))?,
        ),
    };
    // `-c` before NAME, or after it as flock(1) writes it.
    let mut shell = m.opt_str("command").map(OsString::from);
    if shell.is_none()
        && command
            .first()
            .is_some_and(|a| a == "-c" || a == "--command")
    {
        match &command[1..] {
            [line] => shell = Some(line.clone()),
            [] => return Err(usage("lock: -c needs a SHELL-COMMAND")),
            _ => return Err(usage("lock: give SHELL-COMMAND as one argument (quote it)")),
        }
        command = &[];
    }
    let command = match shell {
        Some(line) => {
            if !command.is_empty() {
                return Err(usage(
                    "lock: give either -c SHELL-COMMAND or COMMAND, not both",
                ));
            }
            vec![OsString::from("sh"), OsString::from("-c"), line]
        }
        None => {
            if command.first().is_some_and(|a| a == "--") {
                command = &command[1..];
            }
            if command.is_empty() {
                return Err(usage("lock: missing COMMAND"));
            }
            command.to_vec()
        }
    };
    Ok(Action::Lock(LockArgs {
        name: name.as_bytes().to_vec(),
        wait,
        lease,
        try_once: m.opt_present("nonblock") || wait.is_zero(),
        shared: m.opt_present("shared"),
        counted,
        min_uptime,
        min_trust,
        unit: m.opt_present("unit"),
        conflict_code,
        verbose: m.opt_present("verbose"),
        command,
    }))
}

fn parse_send(args: &[OsString]) -> Result<Action, UsageError> {
    let (m, rest) = getopts_parse(&send_opts(), args)?;
    if m.opt_present("help") {
        return Ok(Action::Help);
    }
    let timeout = match m.opt_str("timeout") {
        None => DEFAULT_SEND_TIMEOUT,
        Some(v) => seconds("-t", &v, 0)?,
    };
    let line = match rest {
        [line] => OsStr::as_bytes(line).to_vec(),
        [] => return Err(usage("send: missing LINE")),
        _ => return Err(usage("send: give LINE as one argument (quote it)")),
    };
    if line.is_empty() || line.contains(&b'\n') || line.contains(&b'\r') {
        return Err(usage("send: LINE must be one non-empty line"));
    }
    Ok(Action::Send(SendArgs { line, timeout }))
}

fn parse_who(args: &[OsString]) -> Result<Action, UsageError> {
    let (m, rest) = getopts_parse(&plain_opts(), args)?;
    if m.opt_present("help") {
        return Ok(Action::Help);
    }
    let name = match rest {
        [] => return Err(usage("who: missing NAME")),
        [name] => name,
        [_, extra, ..] => {
            return Err(usage(format!(
                "who: unexpected argument '{}'",
                extra.to_string_lossy()
            )));
        }
    };
    if name.is_empty() {
        return Err(usage("who: NAME must not be empty"));
    }
    if name.len() > MAX_NAME {
        return Err(usage(format!("who: NAME is longer than {MAX_NAME} bytes")));
    }
    Ok(Action::Who(name.as_bytes().to_vec()))
}

fn parse_plain(name: &str, args: &[OsString]) -> Result<Action, UsageError> {
    let (m, rest) = getopts_parse(&plain_opts(), args)?;
    if m.opt_present("help") {
        return Ok(Action::Help);
    }
    if let Some(extra) = rest.first() {
        return Err(usage(format!(
            "{name}: unexpected argument '{}'",
            extra.to_string_lossy()
        )));
    }
    Ok(match name {
        "status" => Action::Status,
        "list" => Action::List,
        "metrics" => Action::Metrics,
        _ => Action::Info,
    })
}

/// Seconds, integer or decimal as on the wire, from `min` to [`MAX_SECS`].
fn seconds(option: &str, value: &str, min: u64) -> Result<Duration, UsageError> {
    match parse_duration(value.as_bytes(), MAX_SECS) {
        Some(d) if d >= Duration::from_secs(min) => Ok(d),
        _ => Err(usage(format!(
            "{option}: '{value}' is not a number of seconds from {min} to {MAX_SECS}"
        ))),
    }
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
