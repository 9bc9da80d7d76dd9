//! `snaplock.conf` and the settings it shares with the command line.
//!
//! The file is `name=value` lines, `#` comments and blank lines. Every key
//! has one parser, used for the file and for the options that mirror it, so
//! a value means the same wherever it is written. Errors name the file and
//! line (or the option), the key and the range allowed.
//!
//! [`build`] merges the file with the options (options win), fills in the
//! defaults from the [`Environment`] and checks what only makes sense as a
//! whole (the cluster's members, secret and timings, the socket path).

use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use log::LevelFilter;
use snaplock_proto::ClusterConfig;
use snaplock_proto::paths::{self, SocketSources};
use snaplock_proto::wire::is_valid_name;

use crate::files::{self, shown};
use crate::members;
use crate::secret::Secret;
use crate::state::{self, StateDir};

/// Where the packaged configuration lives.
pub const DEFAULT_CONFIG_FILE: &str = "/etc/snaplock/snaplock.conf";

/// Every key of `snaplock.conf`, in documentation order.
pub const KEYS: &[&str] = &[
    "server_name",
    "socket",
    "socket_group",
    "socket_mode",
    "state_dir",
    "cluster_name",
    "listen",
    "neighbors",
    "communicator_listen",
    "metrics_listen",
    "metrics_top_names",
    "metrics_prefixes",
    "candidate_priority",
    "secret_file",
    "acl_file",
    "peer_timeout",
    "grace",
    "clock_drift",
    "max_clients",
    "max_tickets_per_object",
    "max_tickets",
    "max_line_length",
    "max_pending_output",
    "max_pending_total",
    "busy_poll",
    "log_level",
];

/// The range of `max_line_length`, in bytes.
pub const LINE_LENGTH_RANGE: (usize, usize) = (256, 16 << 20);
/// The range of `max_pending_output`, in bytes.
pub const PENDING_OUTPUT_RANGE: (usize, usize) = (64 << 10, 1 << 30);
/// The range of `max_pending_total`, in bytes.
pub const PENDING_TOTAL_RANGE: (usize, usize) = (1 << 20, 1 << 40);
const MAX_CLIENTS_RANGE: (usize, usize) = (1, 1_000_000);
const MAX_TICKETS_PER_OBJECT_RANGE: (usize, usize) = (1, 1_000_000);
const MAX_TICKETS_RANGE: (usize, usize) = (1, 100_000_000);
/// The range of `busy_poll`, in microseconds.
pub const BUSY_POLL_RANGE: (usize, usize) = (0, 1000);
/// The range of `peer_timeout`, in milliseconds: at least two of the
/// core's 250 ms ping intervals.
pub const PEER_TIMEOUT_RANGE_MS: (u64, u64) = (500, 60_000);
/// The range of `grace`, in milliseconds.
pub const GRACE_RANGE_MS: (u64, u64) = (500, 3_600_000);
/// `clock_drift` must stay under this many parts per million (10 %).
pub const CLOCK_DRIFT_LIMIT_PPM: u64 = 100_000;
/// The default `cluster_name`.
pub const DEFAULT_CLUSTER_NAME: &str = "snaplock";

/// A configuration that cannot be used; the message says where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Why one `key=value` was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// No such key.
    Unknown,
    /// The value is out of range or malformed; the text names the key.
    Invalid(String),
}

/// `socket_group=`: a group name or a numeric gid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupSpec {
    /// Looked up in the group database when the socket is created.
    Name(String),
    /// Used as is.
    Gid(u32),
}

/// `candidate_priority=`: 1 (most eager) to 15, or `off` (never a leader).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// Takes part in elections with this priority.
    Level(u8),
    /// Never a leader.
    Off,
}

/// Values set in one place (the file or the options); `None` is "not set
/// here". An empty value of an optional key (`listen=`) is "not set" too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// `server_name`.
    pub server_name: Option<String>,
    /// `socket`.
    pub socket: Option<PathBuf>,
    /// `socket_group`.
    pub socket_group: Option<GroupSpec>,
    /// `socket_mode`.
    pub socket_mode: Option<u32>,
    /// `state_dir`.
    pub state_dir: Option<PathBuf>,
    /// `cluster_name`.
    pub cluster_name: Option<String>,
    /// `listen`.
    pub listen: Option<SocketAddr>,
    /// `neighbors`.
    pub neighbors: Option<Vec<SocketAddr>>,
    /// `communicator_listen`.
    pub communicator_listen: Option<SocketAddr>,
    /// `metrics_listen`.
    pub metrics_listen: Option<SocketAddr>,
    /// `metrics_top_names`.
    pub metrics_top_names: Option<usize>,
    /// `metrics_prefixes`.
    pub metrics_prefixes: Option<Vec<Vec<u8>>>,
    /// `candidate_priority`.
    pub candidate_priority: Option<Priority>,
    /// `secret_file`.
    pub secret_file: Option<PathBuf>,
    /// `acl_file`.
    pub acl_file: Option<PathBuf>,
    /// `peer_timeout`.
    pub peer_timeout: Option<Duration>,
    /// `grace`.
    pub grace: Option<Duration>,
    /// `clock_drift`, in parts per million.
    pub clock_drift: Option<u32>,
    /// `max_clients`.
    pub max_clients: Option<usize>,
    /// `max_tickets_per_object`.
    pub max_tickets_per_object: Option<usize>,
    /// `max_tickets`.
    pub max_tickets: Option<usize>,
    /// `max_line_length`.
    pub max_line_length: Option<usize>,
    /// `max_pending_output`.
    pub max_pending_output: Option<usize>,
    /// `max_pending_total`.
    pub max_pending_total: Option<usize>,
    /// `busy_poll`, in microseconds.
    pub busy_poll: Option<usize>,
    /// `log_level`.
    pub log_level: Option<LevelFilter>,
}

impl Settings {
    /// Sets `key` from its text form.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), KeyError> {
        let value = value.trim();
        let bad = |why: &str| KeyError::Invalid(format!("{key}={}: {why}", shown(value)));
        const NAME_RULE: &str =
            "must be 1 to 64 ASCII letters, digits or '_', not starting with a digit";
        match key {
            "server_name" => {
                if !is_valid_name(value.as_bytes()) {
                    return Err(bad(NAME_RULE));
                }
                self.server_name = Some(value.to_owned());
            }
            "cluster_name" => {
                if !is_valid_name(value.as_bytes()) {
                    return Err(bad(NAME_RULE));
                }
                self.cluster_name = Some(value.to_owned());
            }
            "socket" => self.socket = non_empty(value).map(PathBuf::from),
            "state_dir" => self.state_dir = non_empty(value).map(PathBuf::from),
            "socket_group" => {
                self.socket_group = non_empty(value)
                    .map(|v| match unsigned(v) {
                        Some(gid) => match u32::try_from(gid) {
                            Ok(gid) => Ok(GroupSpec::Gid(gid)),
                            Err(_) => Err(()),
                        },
                        None => Ok(GroupSpec::Name(v.to_owned())),
                    })
                    .transpose()
                    .map_err(|()| bad("a numeric group must be a gid from 0 to 4294967295"))?;
            }
            "socket_mode" => {
                let digits = value.strip_prefix("0o").unwrap_or(value);
                let octal =
                    !digits.is_empty() && digits.bytes().all(|b| (b'0'..=b'7').contains(&b));
                match u32::from_str_radix(digits, 8) {
                    Ok(mode) if octal && mode <= 0o777 => self.socket_mode = Some(mode),
                    _ => return Err(bad("must be an octal mode from 0 to 0777, such as 0660")),
                }
            }
            "listen" | "communicator_listen" | "metrics_listen" => {
                let addr = match non_empty(value) {
                    None => None,
                    Some(v) => Some(parse_addr(v).map_err(|()| {
                        bad("must be IP:PORT, such as 192.0.2.1:4040 or [2001:db8::1]:4040")
                    })?),
                };
                match key {
                    "listen" => self.listen = addr,
                    "metrics_listen" => self.metrics_listen = addr,
                    _ => self.communicator_listen = addr,
                }
            }
            "metrics_top_names" => {
                let range = (0, snaplock_proto::metrics::MAX_TOP_NAMES);
                self.metrics_top_names = Some(number(value, range, "").map_err(|w| bad(&w))?);
            }
            "metrics_prefixes" => self.metrics_prefixes = Some(parse_prefixes(value).map_err(bad)?),
            "neighbors" => {
                let mut list = Vec::new();
                for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    let addr = parse_addr(item).map_err(|()| {
                        bad(&format!(
                            "{} is not IP:PORT; neighbors is a comma separated list of IP:PORT",
                            shown(item)
                        ))
                    })?;
                    list.push(addr);
                }
                self.neighbors = if list.is_empty() { None } else { Some(list) };
            }
            "candidate_priority" => {
                self.candidate_priority = Some(match value {
                    "off" => Priority::Off,
                    v => match unsigned(v) {
                        Some(p @ 1..=15) => Priority::Level(p as u8),
                        _ => return Err(bad("must be from 1 to 15, or off")),
                    },
                });
            }
            "secret_file" => self.secret_file = non_empty(value).map(PathBuf::from),
            "acl_file" => self.acl_file = non_empty(value).map(PathBuf::from),
            "peer_timeout" | "grace" => {
                let (min, max) = if key == "grace" {
                    GRACE_RANGE_MS
                } else {
                    PEER_TIMEOUT_RANGE_MS
                };
                let ms = match decimal(value, 3) {
                    Some(ms) if (min..=max).contains(&ms) => ms,
                    _ => {
                        return Err(bad(&format!(
                            "must be a number of seconds from {} to {} (at most 3 decimals)",
                            min as f64 / 1000.0,
                            max as f64 / 1000.0
                        )));
                    }
                };
                let d = Some(Duration::from_millis(ms));
                if key == "grace" {
                    self.grace = d;
                } else {
                    self.peer_timeout = d;
                }
            }
            "clock_drift" => match decimal(value, 4) {
                // 4 decimals of a percent are exactly parts per million.
                Some(ppm) if ppm < CLOCK_DRIFT_LIMIT_PPM => self.clock_drift = Some(ppm as u32),
                _ => {
                    return Err(bad(
                        "must be a percentage from 0 to under 10, such as 1 or 0.5 (at most 4 decimals)",
                    ));
                }
            },
            "max_clients" => {
                self.max_clients = Some(number(value, MAX_CLIENTS_RANGE, "").map_err(|w| bad(&w))?)
            }
            "max_tickets_per_object" => {
                self.max_tickets_per_object =
                    Some(number(value, MAX_TICKETS_PER_OBJECT_RANGE, "").map_err(|w| bad(&w))?);
            }
            "max_tickets" => {
                self.max_tickets = Some(number(value, MAX_TICKETS_RANGE, "").map_err(|w| bad(&w))?)
            }
            "max_line_length" => {
                self.max_line_length =
                    Some(number(value, LINE_LENGTH_RANGE, " bytes").map_err(|w| bad(&w))?);
            }
            "max_pending_output" => {
                self.max_pending_output =
                    Some(number(value, PENDING_OUTPUT_RANGE, " bytes").map_err(|w| bad(&w))?);
            }
            "max_pending_total" => {
                self.max_pending_total =
                    Some(number(value, PENDING_TOTAL_RANGE, " bytes").map_err(|w| bad(&w))?);
            }
            "busy_poll" => {
                self.busy_poll =
                    Some(number(value, BUSY_POLL_RANGE, " microseconds").map_err(|w| bad(&w))?);
            }
            "log_level" => {
                self.log_level = Some(
                    parse_log_level(value)
                        .ok_or_else(|| bad("must be error, warn, info, debug or trace"))?,
                );
            }
            _ => return Err(KeyError::Unknown),
        }
        Ok(())
    }

    /// `self`, with every value set in `over` replacing this one.
    pub fn overridden_by(self, over: Settings) -> Settings {
        Settings {
            server_name: over.server_name.or(self.server_name),
            socket: over.socket.or(self.socket),
            socket_group: over.socket_group.or(self.socket_group),
            socket_mode: over.socket_mode.or(self.socket_mode),
            state_dir: over.state_dir.or(self.state_dir),
            cluster_name: over.cluster_name.or(self.cluster_name),
            listen: over.listen.or(self.listen),
            neighbors: over.neighbors.or(self.neighbors),
            communicator_listen: over.communicator_listen.or(self.communicator_listen),
            metrics_listen: over.metrics_listen.or(self.metrics_listen),
            metrics_top_names: over.metrics_top_names.or(self.metrics_top_names),
            metrics_prefixes: over.metrics_prefixes.or(self.metrics_prefixes),
            candidate_priority: over.candidate_priority.or(self.candidate_priority),
            secret_file: over.secret_file.or(self.secret_file),
            acl_file: over.acl_file.or(self.acl_file),
            peer_timeout: over.peer_timeout.or(self.peer_timeout),
            grace: over.grace.or(self.grace),
            clock_drift: over.clock_drift.or(self.clock_drift),
            max_clients: over.max_clients.or(self.max_clients),
            max_tickets_per_object: over.max_tickets_per_object.or(self.max_tickets_per_object),
            max_tickets: over.max_tickets.or(self.max_tickets),
            max_line_length: over.max_line_length.or(self.max_line_length),
            max_pending_output: over.max_pending_output.or(self.max_pending_output),
            max_pending_total: over.max_pending_total.or(self.max_pending_total),
            busy_poll: over.busy_poll.or(self.busy_poll),
            log_level: over.log_level.or(self.log_level),
        }
    }
}

/// Reads `name=value` lines; `origin` names the file in errors.
pub fn parse_text(origin: &str, text: &str) -> Result<Settings, ConfigError> {
    let mut settings = Settings::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = format!("{origin}:{}", i + 1);
        let Some((key, value)) = line.split_once('=') else {
            return Err(ConfigError(format!(
                "{at}: expected name=value, found {}",
                shown(line)
            )));
        };
        let key = key.trim();
        match settings.set(key, value) {
            Ok(()) => {}
            Err(KeyError::Unknown) => {
                return Err(ConfigError(format!(
                    "{at}: unknown key {} (known keys: {})",
                    shown(key),
                    KEYS.join(", ")
                )));
            }
            Err(KeyError::Invalid(why)) => return Err(ConfigError(format!("{at}: {why}"))),
        }
    }
    Ok(settings)
}

/// The largest configuration file read, in bytes: far more than any
/// real one, and a bound on what a wrong path can make the agent read.
pub const MAX_CONFIG_FILE: u64 = 1 << 20;

/// Reads a configuration file: a regular file of at most
/// [`MAX_CONFIG_FILE`] bytes ([`files::read_regular`]).
pub fn read_file(path: &Path) -> Result<Settings, ConfigError> {
    let (text, _) = files::read_regular(path, MAX_CONFIG_FILE).map_err(|e| {
        ConfigError(format!(
            "cannot read the configuration file {}: {e}",
            path.display()
        ))
    })?;
    let text = String::from_utf8(text).map_err(|_| {
        ConfigError(format!(
            "{}: the configuration file is not UTF-8 text",
            path.display()
        ))
    })?;
    parse_text(&path.display().to_string(), &text)
}

/// What the agent learns from its process and computer, read once by
/// [`Environment::from_process`]; tests build one by hand.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// The host name (`gethostname`).
    pub hostname: Option<String>,
    /// `$SNAPLOCK_SOCKET`.
    pub env_socket: Option<PathBuf>,
    /// Whether `/run/snaplock` exists.
    pub run_dir_exists: bool,
    /// `$XDG_RUNTIME_DIR`.
    pub xdg_runtime_dir: Option<PathBuf>,
    /// The real uid.
    pub uid: u32,
    /// `$NOTIFY_SOCKET`, where systemd listens for `READY=1`.
    pub notify_socket: Option<OsString>,
    /// `$STATE_DIRECTORY`, set by systemd's `StateDirectory=`.
    pub state_directory: Option<PathBuf>,
    /// Whether `/var/lib/snaplock` exists.
    pub var_lib_exists: bool,
    /// `$XDG_STATE_HOME`.
    pub xdg_state_home: Option<PathBuf>,
    /// `$HOME`.
    pub home: Option<PathBuf>,
}

impl Environment {
    /// Reads the environment variables, the host name and the uid.
    pub fn from_process() -> Environment {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        Environment {
            hostname: nix::unistd::gethostname()
                .ok()
                .map(|h| h.to_string_lossy().into_owned()),
            env_socket: var(paths::SOCKET_ENV).map(PathBuf::from),
            run_dir_exists: Path::new(paths::RUN_DIR).is_dir(),
            xdg_runtime_dir: var("XDG_RUNTIME_DIR").map(PathBuf::from),
            uid: nix::unistd::getuid().as_raw(),
            notify_socket: var("NOTIFY_SOCKET"),
            state_directory: var("STATE_DIRECTORY").map(PathBuf::from),
            var_lib_exists: Path::new(state::VAR_LIB_DIR).is_dir(),
            xdg_state_home: var("XDG_STATE_HOME").map(PathBuf::from),
            home: var("HOME").map(PathBuf::from),
        }
    }
}

/// Where the log level comes from on `SIGHUP`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogSource {
    /// `--log-level`: when given, it wins over the file, now and on reload.
    pub option: Option<LevelFilter>,
    /// The configuration file that was read, if any.
    pub file: Option<PathBuf>,
    /// `RUST_LOG` was set: it decides, and `SIGHUP` leaves the level alone.
    pub from_env: bool,
}

impl LogSource {
    /// The level to apply on `SIGHUP`: the option, else the file's
    /// `log_level` (default `info`). `None` when `RUST_LOG` decides.
    pub fn reload(&self) -> Result<Option<LevelFilter>, ConfigError> {
        if self.from_env {
            return Ok(None);
        }
        if let Some(level) = self.option {
            return Ok(Some(level));
        }
        let from_file = match &self.file {
            Some(path) => read_file(path)?.log_level,
            None => None,
        };
        Ok(Some(from_file.unwrap_or(LevelFilter::Info)))
    }
}

/// Everything the agent runs with: the core's configuration plus the
/// shell's (socket, limits, logging, systemd).
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Handed to the core as is.
    pub core: snaplock_proto::Config,
    /// The client socket's path.
    pub socket: PathBuf,
    /// The socket is in `/tmp/snaplock-<uid>`: create that directory (0700)
    /// when missing, and refuse it when somebody else owns it.
    pub private_socket_dir: bool,
    /// The group the socket is given to, as a gid.
    pub socket_group: Option<u32>,
    /// The socket's permission bits.
    pub socket_mode: u32,
    /// The cluster's name, checked in every peer handshake. The rest of
    /// the cluster's settings (`listen`, `neighbors`, the priority, the
    /// timings) are the core's: `core.cluster`.
    pub cluster_name: String,
    /// The file of the cluster's shared secret; read when the agent
    /// starts. Without it, only loopback peers may link up.
    pub secret_file: Option<PathBuf>,
    /// The file of the access rules, read again on `SIGHUP`; its rules as
    /// loaded are `core.acl`.
    pub acl_file: Option<PathBuf>,
    /// Where the snapcommunicator compatibility session listens
    /// ([`crate::communicator`]); off when `None`.
    pub communicator_listen: Option<SocketAddr>,
    /// Where `GET /metrics` is served ([`crate::metrics_http`]); off
    /// when `None`.
    pub metrics_listen: Option<SocketAddr>,
    /// Longest request line, in bytes; longer: `INVALID` and closed.
    pub max_line_length: usize,
    /// Unsent reply bytes a client may have before it is closed.
    pub max_pending_output: usize,
    /// Bytes all clients together may hold (unsent replies, requests not
    /// served yet) before the one paused the longest is closed.
    pub max_pending_total: usize,
    /// How long the loop keeps polling without sleeping after it served
    /// something (0: it sleeps at once).
    pub busy_poll: Duration,
    /// The log level at start.
    pub log_level: LevelFilter,
    /// Where the log level comes from on `SIGHUP`.
    pub log_source: LogSource,
    /// `$NOTIFY_SOCKET`: where to send `READY=1` and `STOPPING=1`.
    pub notify_socket: Option<OsString>,
    /// Where the record of epoch and fences is kept ([`crate::state`]).
    pub state_dir: StateDir,
}

impl AgentConfig {
    /// The single-computer defaults, listening on `socket`, with the
    /// server name `localhost`: what in-process tests start from.
    pub fn new(socket: impl Into<PathBuf>) -> AgentConfig {
        AgentConfig {
            core: snaplock_proto::Config::default(),
            socket: socket.into(),
            private_socket_dir: false,
            socket_group: None,
            socket_mode: 0o660,
            cluster_name: DEFAULT_CLUSTER_NAME.to_owned(),
            secret_file: None,
            acl_file: None,
            communicator_listen: None,
            metrics_listen: None,
            max_line_length: 65_536,
            max_pending_output: 4 << 20,
            max_pending_total: 256 << 20,
            busy_poll: Duration::ZERO,
            log_level: LevelFilter::Info,
            log_source: LogSource::default(),
            notify_socket: None,
            state_dir: StateDir::Off,
        }
    }
}

impl AgentConfig {
    /// Checks the client buffer limits against each other: the reply to a
    /// request (an `ALIVE` echoes up to a line) must fit in
    /// `max_pending_output` with room to spare, else a client that reads
    /// its replies could be closed for one of them; and one client's
    /// allowance must fit in the total.
    pub fn check_buffer_limits(&self) -> Result<(), String> {
        if self.max_pending_output < 2 * self.max_line_length {
            return Err(format!(
                "max_pending_output={} is less than twice max_line_length={}: the reply to one \
                 long request could exceed it",
                self.max_pending_output, self.max_line_length
            ));
        }
        if self.max_pending_total < self.max_pending_output {
            return Err(format!(
                "max_pending_total={} is less than max_pending_output={}",
                self.max_pending_total, self.max_pending_output
            ));
        }
        Ok(())
    }

    /// The longest `TICKETLIST` text: a quarter of `max_pending_output`
    /// at most, so the list, escaped, fits with the replies before it.
    pub fn max_list_bytes(&self) -> usize {
        self.core.max_list_bytes.min(self.max_pending_output / 4)
    }
}

/// The default `server_name`: the host name cut at its first `.`,
/// lowercased, with `-` made `_`.
pub fn server_name_from_hostname(hostname: &str) -> Result<String, ConfigError> {
    let short = hostname
        .split('.')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
        .replace('-', "_");
    if is_valid_name(short.as_bytes()) {
        Ok(short)
    } else {
        Err(ConfigError(format!(
            "the host name {hostname:?} does not make a valid server name ({short:?}: it must be letters, \
             digits or '_', not starting with a digit, at most 64); set server_name= in the configuration \
             file or use --server-name"
        )))
    }
}

/// `1.5 s`: a duration as the keys write it.
fn seconds(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// Looks a group up by name, or takes a gid as is.
pub fn resolve_group(group: &GroupSpec) -> Result<u32, ConfigError> {
    match group {
        GroupSpec::Gid(gid) => Ok(*gid),
        GroupSpec::Name(name) => match nix::unistd::Group::from_name(name) {
            Ok(Some(g)) => Ok(g.gid.as_raw()),
            Ok(None) => Err(ConfigError(format!(
                "socket_group={}: no such group",
                shown(name)
            ))),
            Err(e) => Err(ConfigError(format!(
                "socket_group={}: cannot look the group up: {e}",
                shown(name)
            ))),
        },
    }
}

/// Merges the file's settings with the options' (options win), applies the
/// defaults and checks the whole.
pub fn build(
    file: Settings,
    options: Settings,
    env: &Environment,
    log_source: LogSource,
) -> Result<AgentConfig, ConfigError> {
    let s = file.overridden_by(options);
    let server_name = match s.server_name {
        Some(name) => name,
        None => match &env.hostname {
            Some(h) => server_name_from_hostname(h)?,
            None => {
                return Err(ConfigError(
                    "cannot read the host name; set server_name= in the configuration file or use --server-name"
                        .to_owned(),
                ));
            }
        },
    };
    let neighbors = s.neighbors.unwrap_or_default();
    let has_secret = match &s.secret_file {
        Some(path) => {
            Secret::load(path).map_err(ConfigError)?;
            true
        }
        None => false,
    };
    members::check_members(s.listen, &neighbors, has_secret).map_err(ConfigError)?;
    let keys = [
        ("listen", s.listen),
        ("communicator_listen", s.communicator_listen),
        ("metrics_listen", s.metrics_listen),
    ];
    for (i, (key_a, a)) in keys.iter().enumerate() {
        for (key_b, b) in &keys[i + 1..] {
            let (Some(a), Some(b)) = (a, b) else { continue };
            let same_ip = a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified();
            if same_ip && a.port() == b.port() {
                return Err(ConfigError(format!(
                    "{key_b}={b} takes the port of {key_a}={a}: each needs an address of its own"
                )));
            }
        }
    }
    let cluster_defaults = ClusterConfig::default();
    let peer_timeout = s.peer_timeout.unwrap_or(cluster_defaults.peer_timeout);
    let grace = s.grace.unwrap_or(cluster_defaults.grace);
    if grace < peer_timeout {
        return Err(ConfigError(format!(
            "grace={} is shorter than peer_timeout={}: an agent must not give its clients' locks up \
             before it could even tell that its peers are gone",
            seconds(grace),
            seconds(peer_timeout)
        )));
    }
    let cluster = ClusterConfig {
        listen: s.listen,
        neighbors,
        candidate_priority: match s.candidate_priority {
            None => cluster_defaults.candidate_priority,
            Some(Priority::Level(p)) => Some(p),
            Some(Priority::Off) => None,
        },
        drift_ppm: s.clock_drift.unwrap_or(cluster_defaults.drift_ppm),
        peer_timeout,
        grace,
        ..cluster_defaults
    };
    let socket_group = s.socket_group.as_ref().map(resolve_group).transpose()?;
    let private_dir = PathBuf::from(format!("/tmp/snaplock-{}", env.uid)).join(paths::SOCKET_NAME);
    let socket = paths::resolve_socket(&SocketSources {
        explicit: s.socket,
        env_socket: env.env_socket.clone(),
        run_dir_exists: env.run_dir_exists,
        xdg_runtime_dir: env.xdg_runtime_dir.clone(),
        uid: env.uid,
    });
    let defaults = AgentConfig::new(PathBuf::new());
    let core = snaplock_proto::Config {
        server_name,
        max_clients: s.max_clients.unwrap_or(defaults.core.max_clients),
        max_tickets_per_object: s
            .max_tickets_per_object
            .unwrap_or(defaults.core.max_tickets_per_object),
        max_tickets: s.max_tickets.unwrap_or(defaults.core.max_tickets),
        cluster,
        acl: s
            .acl_file
            .as_deref()
            .map(|path| acl::load(path, &acl::System))
            .transpose()?,
        metrics: snaplock_proto::metrics::MetricsConfig {
            top_names: (s.metrics_top_names).unwrap_or(defaults.core.metrics.top_names),
            prefixes: s.metrics_prefixes.unwrap_or_default(),
        },
        ..defaults.core
    };
    core.validate().map_err(ConfigError)?;
    let cfg = AgentConfig {
        core,
        private_socket_dir: socket == private_dir,
        socket,
        socket_group,
        socket_mode: s.socket_mode.unwrap_or(defaults.socket_mode),
        cluster_name: s.cluster_name.unwrap_or(defaults.cluster_name),
        secret_file: s.secret_file,
        acl_file: s.acl_file,
        communicator_listen: s.communicator_listen,
        metrics_listen: s.metrics_listen,
        max_line_length: s.max_line_length.unwrap_or(defaults.max_line_length),
        max_pending_output: s.max_pending_output.unwrap_or(defaults.max_pending_output),
        max_pending_total: s.max_pending_total.unwrap_or(defaults.max_pending_total),
        busy_poll: s
            .busy_poll
            .map_or(defaults.busy_poll, |us| Duration::from_micros(us as u64)),
        log_level: s.log_level.unwrap_or(defaults.log_level),
        log_source,
        notify_socket: env.notify_socket.clone(),
        state_dir: match s.state_dir {
            Some(dir) => StateDir::Given(dir),
            None => StateDir::Defaults(state::default_dirs(
                env.state_directory.as_deref(),
                env.var_lib_exists,
                env.xdg_state_home.as_deref(),
                env.home.as_deref(),
            )),
        },
    };
    cfg.check_buffer_limits().map_err(ConfigError)?;
    Ok(cfg)
}

pub mod acl;
mod values;

pub use values::parse_log_level;
use values::{decimal, non_empty, number, parse_addr, parse_prefixes, unsigned};

#[cfg(test)]
mod tests;
