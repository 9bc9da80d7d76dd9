//! The handshake's decisions: what a line means in each state of a link,
//! who is admitted, which of two links for one pair is kept, and when a
//! link is up (see the diagram in [`super::handshake`]).

use std::net::SocketAddr;

use log::Level;
use mio::Registry;
use snaplock_proto::cluster::config::addr_key;
use snaplock_proto::wire::Message;
use snaplock_proto::{Input, Now, PeerId};

use super::link::{Link, State};
use super::{BACKOFF_MIN, Peers, REFUSE_LINGER, handshake};
use crate::members::is_loopback;

impl Peers {
    pub(super) fn on_message(&mut self, registry: &Registry, now: Now, id: u64, msg: Message) {
        let Some(link) = self.links.get(&id) else {
            return;
        };
        match link.state {
            // Only a REFUSE comes here from a link that is up (any other
            // line went to the core). The core never sends one: it can only
            // be the other side taking back its acceptance (a failed proof).
            State::Up => {
                let why = format!("refused: {}", msg.get_str("reason").unwrap_or("no reason"));
                self.drop_link(registry, now, id, Level::Warn, &why);
            }
            State::AwaitConnect => self.on_connect(registry, now, id, &msg),
            State::AwaitProof => self.on_proof(registry, now, id, &msg),
            State::AwaitAccept => self.on_accept(registry, now, id, &msg),
            State::Connecting | State::Refusing => {}
        }
    }

    /// Answers `REFUSE reason=...` and closes once it is written.
    fn refuse(&mut self, now: Now, id: u64, level: Level, reason: &str) {
        let Some(link) = self.links.get(&id) else {
            return;
        };
        let line = format!("peer {}: refused: {reason}", link.describe());
        self.log_stranger(now.mono, level, &line);
        let Some(link) = self.links.get_mut(&id) else {
            return;
        };
        link.queue(&handshake::refuse(reason));
        link.state = State::Refusing;
        link.deadline = Some(now.mono + REFUSE_LINGER);
        Self::mark_dirty(&mut self.dirty, id, link);
    }

    /// An up link of another member already uses `name`: its description.
    fn name_holder(&self, name: &str, member: SocketAddr) -> Option<String> {
        self.links
            .values()
            .find(|l| {
                l.state == State::Up && l.name.as_deref() == Some(name) && l.member != Some(member)
            })
            .map(Link::describe)
    }

    /// Acceptor: checks a `CONNECT`, applies the one-link rule, answers.
    fn on_connect(&mut self, registry: &Registry, now: Now, id: u64, msg: &Message) {
        let Some(local) = self.local.clone() else {
            return;
        };
        let hello = match handshake::read_connect(msg, &local.cluster) {
            Ok(h) => h,
            Err(reason) => return self.refuse(now, id, Level::Warn, &reason),
        };
        let remote = self.links[&id].remote;
        let problem = if hello.listen == local.listen
            || !self.members.iter().any(|m| m.addr == hello.listen)
        {
            Some(format!("{} is not a member of this cluster", hello.listen))
        } else if self.secret.is_empty() && !is_loopback(remote.ip()) {
            Some("this agent has no secret_file and links up with loopback peers only".to_owned())
        } else if hello.name == local.name {
            Some(format!("server name {} is this agent's own", hello.name))
        } else {
            self.name_holder(&hello.name, hello.listen)
                .map(|other| format!("server name {} is already connected: {other}", hello.name))
        };
        if let Some(reason) = problem {
            return self.refuse(now, id, Level::Warn, &reason);
        }
        let rivals: Vec<u64> = self
            .links
            .iter()
            .filter(|&(&other, l)| {
                other != id
                    && l.outbound
                    && l.member == Some(hello.listen)
                    && !matches!(l.state, State::Up | State::Refusing)
            })
            .map(|(&other, _)| other)
            .collect();
        if !rivals.is_empty() && addr_key(local.listen) < addr_key(hello.listen) {
            let reason = format!(
                "duplicate link: the one dialed by {}, the smaller address, is kept",
                local.listen
            );
            return self.refuse(now, id, Level::Debug, &reason);
        }
        let Some(link) = self.links.get_mut(&id) else {
            return;
        };
        link.member = Some(hello.listen);
        link.name = Some(hello.name.clone());
        let proof = self
            .secret
            .accept_proof(&hello.challenge, &local.name, &hello.name);
        link.queue(&handshake::accept(&local, &link.challenge, &proof));
        link.state = State::AwaitProof;
        Self::mark_dirty(&mut self.dirty, id, link);
        let why = format!(
            "duplicate link: the one dialed by {}, the smaller address, is kept",
            hello.listen
        );
        for rival in rivals {
            self.drop_link(registry, now, rival, Level::Debug, &why);
        }
    }

    /// Acceptor: checks the dialer's `PROOF`.
    fn on_proof(&mut self, registry: &Registry, now: Now, id: u64, msg: &Message) {
        let Some(local) = &self.local else {
            return;
        };
        let proof = match handshake::read_proof(msg) {
            Ok(p) => p,
            Err(reason) => return self.refuse(now, id, Level::Warn, &reason),
        };
        let link = &self.links[&id];
        let dialer = link.name.clone().unwrap_or_default();
        let member = link.member.expect("set by CONNECT");
        if !self
            .secret
            .verify_connect(&link.challenge, &dialer, &local.name, &proof)
        {
            let reason = "authentication failed (is secret_file the same on both computers?)";
            return self.refuse(now, id, Level::Warn, reason);
        }
        if let Some(other) = self.name_holder(&dialer, member) {
            let reason = format!("server name {dialer} is already connected: {other}");
            return self.refuse(now, id, Level::Warn, &reason);
        }
        self.link_up(registry, now, id);
    }

    /// Dialer: checks the `ACCEPT` (or takes the `REFUSE`), sends `PROOF`.
    fn on_accept(&mut self, registry: &Registry, now: Now, id: u64, msg: &Message) {
        let Some(local) = self.local.clone() else {
            return;
        };
        if msg.command == "REFUSE" {
            let reason = msg.get_str("reason").unwrap_or("no reason");
            let level = if reason.starts_with("duplicate link") {
                Level::Debug
            } else {
                Level::Warn
            };
            let why = format!("refused by the other side: {reason}");
            return self.drop_link(registry, now, id, level, &why);
        }
        let accept = match handshake::read_accept(msg) {
            Ok(a) => a,
            Err(why) => return self.drop_link(registry, now, id, Level::Warn, &why),
        };
        let hello = &accept.hello;
        let link = &self.links[&id];
        let problem = if Some(hello.listen) != link.member {
            Some(format!(
                "answered as member {}, not the one dialed",
                hello.listen
            ))
        } else if hello.name == local.name {
            Some(format!("server name {} is this agent's own", hello.name))
        } else if !self.secret.verify_accept(
            &link.challenge,
            &hello.name,
            &local.name,
            &accept.proof,
        ) {
            Some("authentication failed (is secret_file the same on both computers?)".to_owned())
        } else {
            self.name_holder(&hello.name, hello.listen)
                .map(|other| format!("server name {} is already connected: {other}", hello.name))
        };
        if let Some(why) = problem {
            return self.drop_link(registry, now, id, Level::Warn, &why);
        }
        let proof = self
            .secret
            .connect_proof(&hello.challenge, &local.name, &hello.name);
        let Some(link) = self.links.get_mut(&id) else {
            return;
        };
        link.name = Some(hello.name.clone());
        link.queue(&handshake::proof(&proof));
        Self::mark_dirty(&mut self.dirty, id, link);
        self.link_up(registry, now, id);
    }

    fn link_up(&mut self, registry: &Registry, now: Now, id: u64) {
        let link = &self.links[&id];
        let member = link.member.expect("an identified link");
        let name = link.name.clone().expect("an identified link");
        let others: Vec<u64> = self
            .links
            .iter()
            .filter(|&(&other, l)| other != id && l.member == Some(member))
            .map(|(&other, _)| other)
            .collect();
        for other in others {
            let level = if self.links[&other].state == State::Up {
                Level::Info
            } else {
                Level::Debug
            };
            self.drop_link(registry, now, other, level, "replaced by a newer link");
        }
        if let Some(m) = self.members.iter_mut().find(|m| m.addr == member) {
            m.backoff = BACKOFF_MIN;
            m.unreachable_logged = false;
        }
        let Some(link) = self.links.get_mut(&id) else {
            return;
        };
        link.state = State::Up;
        link.deadline = None;
        log::info!(
            "peer {}: link up (dialed by {})",
            link.describe(),
            if link.outbound {
                "this agent"
            } else {
                "the other agent"
            }
        );
        self.push_input(Input::PeerUp {
            peer: PeerId(id),
            name,
            addr: member,
        });
    }
}
