//! `who NAME`: the holder and the queue of one name, from the name's owner
//! (`LISTTICKETS object_name=NAME`, snaplock(7) "LISTTICKETS"), read from
//! the cluster-wide lines.

use snaplock_client::wire::Message;
use snaplock_client::{Client, Error};

use crate::exit;

/// One request of the name, from its line.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub mode: String,
    pub agent: String,
    pub position: u64,
    /// `held since DATE`: the date; empty when unknown or waiting.
    pub since: String,
    pub fence: Option<String>,
}

/// Reads one cluster-wide line: `... key: K  mode: M  <state>  agent: A
/// position: P`, fields after the object name separated by two spaces;
/// fields it does not know are skipped (later versions add them at the
/// end). `None` for a line of another form (a cut marker).
pub fn parse_line(line: &str) -> Option<Entry> {
    // The object name is the one asked for, and may hold anything: the
    // fields start after its last closing quote.
    let at = line.rfind("\"  key: ")?;
    let mut fields = line[at + "\"  key: ".len()..].split("  ");
    let mut e = Entry {
        key: fields.next()?.to_owned(),
        ..Entry::default()
    };
    let mut position = None;
    for f in fields {
        if let Some(v) = f.strip_prefix("mode: ") {
            v.clone_into(&mut e.mode);
        } else if let Some(v) = f.strip_prefix("agent: ") {
            v.clone_into(&mut e.agent);
        } else if let Some(v) = f.strip_prefix("position: ") {
            position = v.parse().ok();
        } else if let Some(v) = f.strip_prefix("fence: ") {
            e.fence = Some(v.to_owned());
        } else if let Some(v) = f.strip_prefix("held since ") {
            v.clone_into(&mut e.since);
        }
    }
    e.position = position?;
    Some(e)
}

/// The text `who` prints.
pub fn render(name: &[u8], list: &str) -> String {
    let entries: Vec<Entry> = list.lines().filter_map(parse_line).collect();
    let mut out = format!("name: {}\n", String::from_utf8_lossy(name));
    let (held, waiting): (Vec<&Entry>, Vec<&Entry>) = entries.iter().partition(|e| e.position == 0);
    if held.is_empty() {
        out.push_str("holder: none\n");
    }
    for e in held {
        let since = if e.since.is_empty() {
            "unknown (granted before the current leaders)"
        } else {
            &e.since
        };
        out.push_str(&format!(
            "holder: {}  key: {}  mode: {}  since: {since}  fence: {}\n",
            e.agent,
            e.key,
            e.mode,
            e.fence.as_deref().unwrap_or("?"),
        ));
    }
    if waiting.is_empty() {
        out.push_str("queue: empty\n");
    }
    for e in waiting {
        out.push_str(&format!(
            "waiting {}: {}  key: {}  mode: {}\n",
            e.position, e.agent, e.key, e.mode
        ));
    }
    if list.lines().any(|l| l.starts_with("... ")) {
        out.push_str("... and more (the list was cut)\n");
    }
    out
}

/// Asks, prints, and says how it went: 0 when the owner answered, 69 when
/// it did not (or there are no leaders).
pub fn who(client: &mut Client, name: &[u8], timeout: std::time::Duration) -> u8 {
    let msg = Message::new("LISTTICKETS").with("object_name", name);
    let reply = match client.request(&msg, timeout) {
        Ok(reply) => reply,
        Err(e) => return crate::query::failed("who", &e),
    };
    match (reply.command.as_str(), reply.get_str("list")) {
        ("TICKETLIST", _) if reply.get("error").is_some() => {
            let e = Error::Refused {
                error: reply.get_str("error").unwrap_or_default().to_owned(),
                description: reply.get_str("description").unwrap_or_default().to_owned(),
            };
            crate::query::failed("who", &e)
        }
        ("TICKETLIST", _) if reply.get("missing").is_some() => {
            eprintln!(
                "snaplock-cli: error: who: the owner of the name could not answer (silent, unreachable, or the leaders are changing): {}",
                reply.get_str("missing").unwrap_or("?")
            );
            exit::UNAVAILABLE
        }
        ("TICKETLIST", Some(list)) => crate::query::print(render(name, list).as_bytes())
            .map_or_else(|code| code, |()| exit::OK),
        _ => {
            let e = Error::Protocol(format!("unexpected reply {}", reply.command));
            crate::query::failed("who", &e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = "ticket id: 4  object name: \"a\"  key: \"  key: x/1  mode: exclusive  held since 2026-11-22 10:03:05  fence: 18825  agent: alpha  position: 0  later: field\n\
        ticket id: 6  object name: \"a\"  key: \"  key: beta/9  mode: shared  waiting  agent: beta  position: 1\n";

    #[test]
    fn a_line_gives_its_fields_whatever_the_name_holds() {
        let e = parse_line(LIST.lines().next().unwrap()).unwrap();
        assert_eq!(e.key, "x/1");
        assert_eq!(e.mode, "exclusive");
        assert_eq!(e.since, "2026-11-22 10:03:05");
        assert_eq!(e.fence.as_deref(), Some("18825"));
        assert_eq!((e.agent.as_str(), e.position), ("alpha", 0));
        assert_eq!(
            parse_line("... and more tickets (cut at max_list_bytes)"),
            None
        );
    }

    #[test]
    fn the_holder_comes_first_then_the_queue_with_positions() {
        let text = render(b"a\"  key: ", LIST);
        assert_eq!(
            text,
            "name: a\"  key: \n\
             holder: alpha  key: x/1  mode: exclusive  since: 2026-11-22 10:03:05  fence: 18825\n\
             waiting 1: beta  key: beta/9  mode: shared\n"
        );
        assert_eq!(
            render(b"free", ""),
            "name: free\nholder: none\nqueue: empty\n"
        );
    }
}
