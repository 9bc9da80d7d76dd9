//! Transcript tests: client lines in, core outputs out, from the files in
//! `tests/transcripts/*.txt`.
//!
//! # Format
//!
//! One directive per line; `#` starts a comment line, blank lines are ignored.
//!
//! ```text
//! config max_tickets_per_object=2      before the first event: a Config field
//!                                      (server_name, max_clients, max_tickets,
//!                                      max_tickets_per_object, max_list_bytes,
//!                                      timeout, duration, unlock_duration in
//!                                      seconds, max_line framer limit,
//!                                      tx_per_client, tx_total,
//!                                      tx_namespaces: Config::tx)
//! @1.5                                 time is 1.5 s: mono = 1.5 s, wall =
//!                                      1700000000 + 1.5 s; may prefix an input
//! open 1 pid=100 uid=1000 gid=1000     Input::ClientOpened
//! 1> LOCK object_name=a;tag=1          a line from client 1: the text and a LF go
//!                                      through the client's LineFramer, each line
//!                                      into the core (handle_client_line)
//! 1>- LOCK obj                         the same, without the LF (a partial read)
//! hangup 1                             Input::ClientClosed
//! tick                                 handle_timeout once, now
//! sleep                                the shell sleeps until the time of the
//!                                      @ prefix, waking at every poll_timeout
//! shutdown                             Core::shutdown
//! 1< LOCKED fence=...;object_name=a    expected: a reply to client 1, encoded
//! close 1                              expected: Output::Close for client 1
//! error <text>                         expected: handle_input returned this error
//! ```
//!
//! In lines in and out, `{{0xNN}}` is the byte NN and `{{c*N}}` is the
//! character c N times; trailing spaces are dropped (write `{{0x20}}`). Every output must be matched, in order, by the
//! expectation lines that follow the input producing it, before the next
//! input. `UPDATE_TRANSCRIPTS=1 cargo test -p snaplock-proto --test
//! transcripts` rewrites the expectation lines from what the core does.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use snaplock_proto::wire::{Frame, LineFramer, encode_to_vec};
use snaplock_proto::{
    ClientId, Config, Core, Credentials, Input, InputError, Malformed, Now, Output, Time, UnixTime,
};

/// Wall-clock date of time zero in every transcript.
const EPOCH_SECS: u64 = 1_700_000_000;
/// Runs of one byte at least this long are written `{{c*N}}`.
const RUN: usize = 16;
/// Most wake-ups one `sleep` may take: a runaway timer is a failure.
const MAX_WAKEUPS: usize = 10_000;

/// Something the core did, rendered the way a transcript writes it.
fn render_output(out: &Output) -> String {
    match out {
        Output::Reply { client, reply } => {
            let mut line = encode_to_vec(&reply.clone().into_message());
            line.pop();
            format!("{}< {}", client.0, render_bytes(&line))
        }
        Output::Close { client } => format!("close {}", client.0),
        // One computer: there are no peers.
        Output::PeerSend { peer, .. } | Output::PeerClose { peer } => format!("peer {}", peer.0),
        Output::Persist(record) => format!("persist {record}"),
        Output::WatchUnit { unit, client } => format!("watch unit {unit} of {}", client.0),
        Output::UnwatchUnit { unit } => format!("unwatch unit {unit}"),
    }
}

fn render_error(e: &InputError) -> String {
    format!("error {e}")
}

/// Printable ASCII as is, other bytes and long runs as `{{...}}`.
fn render_bytes(bytes: &[u8]) -> String {
    let mut s = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let run = bytes[i..].iter().take_while(|&&c| c == b).count();
        if run >= RUN && (0x21..0x7f).contains(&b) && b != b'{' && b != b'}' {
            let _ = write!(s, "{{{{{}*{run}}}}}", b as char);
            i += run;
            continue;
        }
        let opens_macro = b == b'{' && bytes.get(i + 1) == Some(&b'{');
        if (0x20..0x7f).contains(&b) && !opens_macro {
            s.push(b as char);
        } else {
            let _ = write!(s, "{{{{0x{b:02x}}}}}");
        }
        i += 1;
    }
    s
}

/// Undoes [`render_bytes`].
fn expand(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.extend_from_slice(&rest.as_bytes()[..open]);
        let close = rest[open..].find("}}").ok_or("`{{` without `}}`")? + open;
        let inner = &rest[open + 2..close];
        if let Some(hex) = inner.strip_prefix("0x") {
            out.push(u8::from_str_radix(hex, 16).map_err(|_| format!("bad byte {{{{{inner}}}}}"))?);
        } else {
            let mut chars = inner.chars();
            let (Some(c), Some('*')) = (chars.next(), chars.next()) else {
                return Err(format!("bad macro {{{{{inner}}}}}"));
            };
            let n: usize = chars
                .as_str()
                .parse()
                .map_err(|_| format!("bad count in {{{{{inner}}}}}"))?;
            let mut buf = [0; 4];
            out.extend(c.encode_utf8(&mut buf).as_bytes().repeat(n));
        }
        rest = &rest[close + 2..];
    }
    out.extend_from_slice(rest.as_bytes());
    Ok(out)
}

fn parse_time(s: &str) -> Result<Duration, String> {
    let micros = snaplock_proto::time::parse_duration(s.as_bytes(), 1 << 32)
        .ok_or_else(|| format!("bad time @{s}"))?;
    Ok(micros)
}

fn now_at(t: Duration) -> Now {
    let micros = u64::try_from(t.as_micros()).expect("small");
    Now {
        mono: Time::from_micros(micros),
        wall: UnixTime(EPOCH_SECS * 1_000_000 + micros),
    }
}

fn client(s: &str) -> Result<ClientId, String> {
    s.parse()
        .map(ClientId)
        .map_err(|_| format!("bad client number {s:?}"))
}

/// One transcript being played.
struct Player {
    config: Config,
    max_line: usize,
    core: Option<Core>,
    framers: BTreeMap<u64, LineFramer>,
    now: Duration,
    /// Outputs not yet matched by an expectation line.
    pending: Vec<String>,
}

impl Player {
    fn new() -> Player {
        let config = Config {
            server_name: "node1".to_owned(),
            ..Config::default()
        };
        Player {
            config,
            max_line: 64 * 1024,
            core: None,
            framers: BTreeMap::new(),
            now: Duration::ZERO,
            pending: Vec::new(),
        }
    }

    fn core(&mut self) -> &mut Core {
        let now = now_at(self.now);
        let config = self.config.clone();
        self.core.get_or_insert_with(|| Core::new(config, now))
    }

    fn configure(&mut self, setting: &str) -> Result<(), String> {
        if self.core.is_some() {
            return Err("config after the first event".to_owned());
        }
        let (key, value) = setting.split_once('=').ok_or("config needs key=value")?;
        let n = || {
            value
                .parse::<usize>()
                .map_err(|_| format!("bad number {value:?}"))
        };
        let secs = || parse_time(value);
        match key {
            "server_name" => self.config.server_name = value.to_owned(),
            "max_clients" => self.config.max_clients = n()?,
            "max_tickets" => self.config.max_tickets = n()?,
            "max_tickets_per_object" => self.config.max_tickets_per_object = n()?,
            "max_list_bytes" => self.config.max_list_bytes = n()?,
            "max_line" => self.max_line = n()?,
            "timeout" => self.config.defaults.timeout = secs()?,
            "duration" => self.config.defaults.duration = secs()?,
            "unlock_duration" => self.config.defaults.unlock_duration = secs()?,
            "tx_per_client" => self.config.tx.per_client = n()?,
            "tx_total" => self.config.tx.total = n()?,
            "tx_namespaces" => self.config.tx.namespaces = n()?,
            _ => return Err(format!("unknown config key {key:?}")),
        }
        self.config.validate()
    }

    fn drain(&mut self) {
        while let Some(out) = self.core().poll_output() {
            // The record on disk is the shell's business, not a reply.
            if !matches!(out, Output::Persist(_)) {
                self.pending.push(render_output(&out));
            }
        }
    }

    fn input(&mut self, input: Input) {
        let now = now_at(self.now);
        if let Err(e) = self.core().handle_input(now, input) {
            self.pending.push(render_error(&e));
        }
        self.drain();
    }

    fn open(&mut self, args: &str) -> Result<(), String> {
        let mut words = args.split_whitespace();
        let id = client(words.next().ok_or("open needs a client number")?)?;
        let mut cred = Credentials::default();
        for word in words {
            let (k, v) = word.split_once('=').ok_or("open takes pid=, uid=, gid=")?;
            let v: u32 = v.parse().map_err(|_| format!("bad {k}"))?;
            match k {
                "pid" => cred.pid = Some(v),
                "uid" => cred.uid = Some(v),
                "gid" => cred.gid = Some(v),
                _ => return Err(format!("open: unknown {k}")),
            }
        }
        self.framers.insert(id.0, LineFramer::new(self.max_line));
        self.input(Input::ClientOpened { client: id, cred });
        Ok(())
    }

    /// Bytes from a client, through its framer and into the core as the
    /// agent's shell hands them (`Core::handle_client_line`: a plain
    /// `LOCK` or `UNLOCK` read in place, any other line parsed).
    fn receive(&mut self, id: ClientId, bytes: &[u8]) {
        let max_line = self.max_line;
        let framer = self
            .framers
            .entry(id.0)
            .or_insert_with(|| LineFramer::new(max_line));
        framer.buffer_mut().extend_from_slice(bytes);
        let mut frames = Vec::new();
        for _ in 0..=bytes.len() {
            let frame = match framer.next_line() {
                None => break,
                Some(Frame::Line(line)) => Ok(line.to_vec()),
                Some(Frame::TooLong { prefix }) => Err(Input::ClientMalformed {
                    client: id,
                    line: prefix.to_vec(),
                    error: Malformed::TooLong,
                }),
            };
            frames.push(frame);
        }
        for frame in frames {
            match frame {
                Ok(line) => {
                    let now = now_at(self.now);
                    if let Err(e) = self.core().handle_client_line(now, id, &line) {
                        self.pending.push(render_error(&e));
                    }
                    self.drain();
                }
                Err(input) => self.input(input),
            }
        }
    }

    fn sleep(&mut self, until: Duration) -> Result<(), String> {
        for _ in 0..MAX_WAKEUPS {
            let next = self.core().poll_timeout();
            match next {
                Some(t) if Duration::from_micros(t.as_micros()) <= until => {
                    self.now = self.now.max(Duration::from_micros(t.as_micros()));
                    let now = now_at(self.now);
                    self.core().handle_timeout(now);
                    self.drain();
                }
                _ => {
                    self.now = until;
                    return Ok(());
                }
            }
        }
        Err(format!("more than {MAX_WAKEUPS} wake-ups before {until:?}"))
    }

    /// Plays one input directive.
    fn play(&mut self, directive: &str) -> Result<(), String> {
        let (verb, rest) = directive.split_once(' ').unwrap_or((directive, ""));
        if let Some((who, kind)) = verb.split_once('>') {
            let id = client(who)?;
            let mut bytes = expand(rest)?;
            match kind {
                "" => bytes.push(b'\n'),
                "-" => {}
                _ => return Err(format!("unknown input {verb:?}")),
            }
            self.receive(id, &bytes);
            return Ok(());
        }
        match verb {
            "open" => self.open(rest)?,
            "hangup" => {
                let id = client(rest.trim())?;
                self.framers.remove(&id.0);
                self.input(Input::ClientClosed { client: id });
            }
            "tick" => {
                let now = now_at(self.now);
                self.core().handle_timeout(now);
                self.drain();
            }
            "shutdown" => {
                let now = now_at(self.now);
                self.core().shutdown(now);
                self.drain();
            }
            "config" => self.configure(rest.trim())?,
            _ => return Err(format!("unknown directive {verb:?}")),
        }
        Ok(())
    }
}

/// Outputs no expectation line matched: failures, and blessed after the
/// input that produced them.
fn flush(
    player: &mut Player,
    blessed: &mut Vec<String>,
    insert_at: usize,
    failures: &mut Vec<String>,
    input_line: usize,
) {
    for (k, out) in player.pending.drain(..).enumerate() {
        failures.push(format!(
            "{input_line}: unexpected output after this input\n  got:      {out}"
        ));
        blessed.insert(insert_at + k, out);
    }
}

fn is_expectation(line: &str) -> bool {
    let first = line.split(' ').next().unwrap_or("");
    first.ends_with('<') && first[..first.len() - 1].bytes().all(|b| b.is_ascii_digit())
        || first == "close"
        || first == "error"
}

/// Plays `text`; returns the failures (`line: message`) and the text with
/// its expectation lines replaced by what the core did.
fn run(text: &str) -> (Vec<String>, String) {
    let mut player = Player::new();
    let mut failures = Vec::new();
    let mut blessed: Vec<String> = Vec::new();
    // Where the outputs of the last input go in the blessed text.
    let mut insert_at = 0;
    let mut last_input = 0;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim_end();
        if line.is_empty() || line.starts_with('#') {
            blessed.push(raw.to_owned());
            continue;
        }
        if is_expectation(line) {
            insert_at = blessed.len();
            if player.pending.is_empty() {
                failures.push(format!(
                    "{n}: expected output, the core produced nothing more\n  expected: {line}"
                ));
                continue;
            }
            let got = player.pending.remove(0);
            let same = match (expand(line), expand(&got)) {
                (Ok(want), Ok(have)) => want == have,
                _ => false,
            };
            if !same {
                failures.push(format!(
                    "{n}: output differs\n  expected: {line}\n  got:      {got}"
                ));
            }
            blessed.push(got);
            insert_at = blessed.len();
            continue;
        }
        flush(
            &mut player,
            &mut blessed,
            insert_at,
            &mut failures,
            last_input,
        );
        let mut directive = line;
        if let Some(timed) = line.strip_prefix('@') {
            let (t, rest) = timed.split_once(' ').unwrap_or((timed, ""));
            let result = parse_time(t).and_then(|t| {
                if t < player.now {
                    return Err(format!("time goes back to @{}", t.as_secs_f64()));
                }
                if rest.trim() == "sleep" {
                    return player.sleep(t);
                }
                player.now = t;
                Ok(())
            });
            if let Err(e) = result {
                failures.push(format!("{n}: {e}"));
            }
            directive = if rest.trim() == "sleep" {
                ""
            } else {
                rest.trim_start()
            };
        }
        if !directive.is_empty() {
            if let Err(e) = player.play(directive) {
                failures.push(format!("{n}: {e}"));
            }
        }
        blessed.push(raw.to_owned());
        insert_at = blessed.len();
        last_input = n;
    }
    flush(
        &mut player,
        &mut blessed,
        insert_at,
        &mut failures,
        last_input,
    );
    let mut out = blessed.join("\n");
    out.push('\n');
    (failures, out)
}

fn transcript_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/transcripts");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_transcript_plays_as_written() {
    let bless = std::env::var_os("UPDATE_TRANSCRIPTS").is_some_and(|v| v == "1");
    let files = transcript_files();
    let mut report = String::new();
    for path in &files {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (failures, blessed) = run(&text);
        if bless && blessed != text {
            std::fs::write(path, &blessed).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            eprintln!("updated {}", path.display());
            continue;
        }
        let name = path.file_name().expect("file name").to_string_lossy();
        for f in failures {
            let _ = writeln!(report, "{name}:{f}");
        }
    }
    assert!(files.len() >= 10, "transcripts found: {files:?}");
    assert!(
        report.is_empty(),
        "transcripts differ (UPDATE_TRANSCRIPTS=1 rewrites the expectations):\n{report}"
    );
}

#[test]
fn the_transcript_runner_reports_missing_and_unexpected_output() {
    let text = "@0 open 1\n1> HELP\n1< NOT THIS\n1< NOR THIS\n1> LOCKSTATUS\n";
    let (failures, blessed) = run(text);
    assert_eq!(failures.len(), 3, "{failures:#?}");
    assert!(
        failures[0].starts_with("3: output differs"),
        "{}",
        failures[0]
    );
    assert!(
        failures[1].starts_with("4: expected output"),
        "{}",
        failures[1]
    );
    assert!(
        failures[2].starts_with("5: unexpected output"),
        "{}",
        failures[2]
    );
    assert_eq!(
        blessed,
        "@0 open 1\n1> HELP\n1< COMMANDS list=ALIVE,EXTEND,HELP,INFO,LISTTICKETS,LOCK,LOCKSTATUS,METRICS,TRANSACTION,UNLOCK\n\
         1> LOCKSTATUS\n1< LOCKREADY\n"
    );
    let (failures, again) = run(&blessed);
    assert_eq!((failures, again), (vec![], blessed));
}

#[test]
fn bytes_render_and_expand_back() {
    let bytes = b"a{{b\0\xff\n xxxxxxxxxxxxxxxxxxxxxxxx }";
    let text = render_bytes(bytes);
    assert_eq!(text, "a{{0x7b}}{b{{0x00}}{{0xff}}{{0x0a}} {{x*24}} }");
    assert_eq!(expand(&text).as_deref(), Ok(&bytes[..]));
}
