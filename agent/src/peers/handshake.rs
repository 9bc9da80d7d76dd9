//! The lines two agents exchange before their link is up.
//!
//! ```text
//! dialer D                                              acceptor A
//!   CONNECT version=1;cluster=C;challenge=CD;listen=LD;name=D ──▶
//!                        checks version, cluster, that LD is a member,
//!                        that the name D is free (loopback only without secret)
//!   ◀── ACCEPT challenge=CA;listen=LA;name=A;proof=HMAC(k, "accept\nCD\nA\nD")
//!       or REFUSE reason=<why>, then A closes
//!   checks LA and the proof
//!   PROOF proof=HMAC(k, "connect\nCA\nD\nA") ──▶
//!   link up                                      checks the proof; link up
//! ```
//!
//! Challenges are 16 random bytes and proofs 32 bytes, both in lower-case
//! hexadecimal. These functions only build and read lines; the decisions
//! that need the other links (names taken, two links for one pair) are the
//! caller's.

use std::net::SocketAddr;

use snaplock_proto::vocab::parse_u64;
use snaplock_proto::wire::{Message, is_valid_name};

use crate::files::shown;

use crate::secret::{PROOF_LEN, from_hex, to_hex};

/// The peer protocol's version, the one this agent speaks.
pub const VERSION: u32 = 1;
/// Random bytes in a challenge.
pub const CHALLENGE_LEN: usize = 16;

/// What this agent says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Local {
    /// `cluster_name`.
    pub cluster: String,
    /// `server_name`.
    pub name: String,
    /// `listen`: how the other members know this one.
    pub listen: SocketAddr,
}

/// What the other side says of itself in `CONNECT` or `ACCEPT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Its `server_name`.
    pub name: String,
    /// Its `listen` address.
    pub listen: SocketAddr,
    /// The challenge it drew, as sent (hexadecimal).
    pub challenge: String,
}

/// `ACCEPT`: the acceptor's [`Hello`] and its proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accept {
    /// Who answered.
    pub hello: Hello,
    /// Its proof of the dialer's challenge.
    pub proof: Vec<u8>,
}

/// A fresh challenge from random bytes.
pub fn challenge(random: [u8; CHALLENGE_LEN]) -> String {
    to_hex(&random)
}

/// The dialer's first line.
pub fn connect(local: &Local, challenge: &str) -> Message {
    Message::new("CONNECT")
        .with("version", VERSION.to_string())
        .with("cluster", &local.cluster)
        .with("name", &local.name)
        .with("listen", local.listen.to_string())
        .with("challenge", challenge)
}

/// The acceptor's answer when it takes the link.
pub fn accept(local: &Local, challenge: &str, proof: &[u8]) -> Message {
    Message::new("ACCEPT")
        .with("name", &local.name)
        .with("listen", local.listen.to_string())
        .with("challenge", challenge)
        .with("proof", to_hex(proof))
}

/// The acceptor's answer when it does not; it closes the link after it.
pub fn refuse(reason: &str) -> Message {
    Message::new("REFUSE").with("reason", reason)
}

/// The dialer's last line.
pub fn proof(proof: &[u8]) -> Message {
    Message::new("PROOF").with("proof", to_hex(proof))
}

/// Reads a `CONNECT` of `cluster`; the error is the `REFUSE` reason.
pub fn read_connect(msg: &Message, cluster: &str) -> Result<Hello, String> {
    if msg.command != "CONNECT" {
        return Err(format!("expected CONNECT, got {}", msg.command));
    }
    let version = msg
        .get_str("version")
        .ok_or_else(|| "CONNECT without version".to_owned())?;
    // Read as every number of the protocol is: digits only.
    if parse_u64(version.as_bytes()) != Some(u64::from(VERSION)) {
        return Err(format!(
            "peer protocol version {} is not supported (this agent speaks {VERSION})",
            shown(version)
        ));
    }
    match msg.get_str("cluster") {
        Some(c) if c == cluster => {}
        Some(c) => {
            return Err(format!("cluster {} is not this agent's cluster", shown(c)));
        }
        None => return Err("CONNECT without cluster".to_owned()),
    }
    read_hello(msg)
}

/// Reads an `ACCEPT`.
pub fn read_accept(msg: &Message) -> Result<Accept, String> {
    if msg.command != "ACCEPT" {
        return Err(format!("expected ACCEPT, got {}", msg.command));
    }
    Ok(Accept {
        hello: read_hello(msg)?,
        proof: read_proof_param(msg)?,
    })
}

/// Reads a `PROOF`.
pub fn read_proof(msg: &Message) -> Result<Vec<u8>, String> {
    if msg.command != "PROOF" {
        return Err(format!("expected PROOF, got {}", msg.command));
    }
    read_proof_param(msg)
}

fn read_hello(msg: &Message) -> Result<Hello, String> {
    let cmd = &msg.command;
    let name = msg
        .get_str("name")
        .ok_or_else(|| format!("{cmd} without name"))?;
    if !is_valid_name(name.as_bytes()) {
        return Err(format!("{cmd}: invalid server name {}", shown(name)));
    }
    let listen = msg
        .get_str("listen")
        .ok_or_else(|| format!("{cmd} without listen"))?;
    let listen = listen
        .parse::<SocketAddr>()
        .map_err(|_| format!("{cmd}: listen {} is not IP:PORT", shown(listen)))?;
    let challenge = msg.get("challenge").unwrap_or_default();
    if from_hex(challenge, CHALLENGE_LEN).is_none() {
        return Err(format!(
            "{cmd}: challenge must be {} hexadecimal digits",
            CHALLENGE_LEN * 2
        ));
    }
    Ok(Hello {
        name: name.to_owned(),
        listen,
        challenge: String::from_utf8_lossy(challenge).into_owned(),
    })
}

fn read_proof_param(msg: &Message) -> Result<Vec<u8>, String> {
    from_hex(msg.get("proof").unwrap_or_default(), PROOF_LEN).ok_or_else(|| {
        format!(
            "{}: proof must be {} hexadecimal digits",
            msg.command,
            PROOF_LEN * 2
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use snaplock_proto::wire::{encode_to_vec, parse};

    fn local() -> Local {
        Local {
            cluster: "prod".into(),
            name: "alpha".into(),
            listen: "192.0.2.1:4040".parse().unwrap(),
        }
    }

    fn round_trip(msg: &Message) -> Message {
        let line = encode_to_vec(msg);
        parse(&line[..line.len() - 1]).unwrap()
    }

    const CH: &str = "00112233445566778899aabbccddeeff";

    #[test]
    fn connect_lines_read_back_as_what_was_sent() {
        let line = encode_to_vec(&connect(&local(), CH));
        assert_eq!(
            String::from_utf8(line.clone()).unwrap(),
            format!(
                "CONNECT challenge={CH};cluster=prod;listen=192.0.2.1:4040;name=alpha;version=1\n"
            )
        );
        let hello = read_connect(&round_trip(&connect(&local(), CH)), "prod").unwrap();
        assert_eq!(
            hello,
            Hello {
                name: "alpha".into(),
                listen: "192.0.2.1:4040".parse().unwrap(),
                challenge: CH.into()
            }
        );
        let mut v6 = local();
        v6.listen = "[2001:db8::1]:4040".parse().unwrap();
        let hello = read_connect(&round_trip(&connect(&v6, CH)), "prod").unwrap();
        assert_eq!(hello.listen, v6.listen);
    }

    #[test]
    fn a_connect_of_another_version_cluster_or_shape_is_refused_with_a_reason() {
        let good = connect(&local(), CH);
        for (tweak, wanted) in [
            (
                good.clone().with("version", "2"),
                "version \"2\" is not supported",
            ),
            (good.clone().with("version", "one"), "is not supported"),
            (
                good.clone().with("cluster", "test"),
                "cluster \"test\" is not this",
            ),
            (good.clone().with("name", "9x"), "invalid server name"),
            (good.clone().with("listen", "alpha:1"), "is not IP:PORT"),
            (
                good.clone().with("challenge", "abc"),
                "challenge must be 32",
            ),
            (Message::new("CONNECT"), "without version"),
            (Message::new("HELLO"), "expected CONNECT"),
        ] {
            let e = read_connect(&tweak, "prod").unwrap_err();
            assert!(e.contains(wanted), "{tweak}: {e}");
        }
    }

    #[test]
    fn accept_and_proof_lines_carry_their_proofs() {
        let p = [7u8; 32];
        let a = read_accept(&round_trip(&accept(&local(), CH, &p))).unwrap();
        assert_eq!(a.hello.name, "alpha");
        assert_eq!(a.proof, p.to_vec());
        assert_eq!(read_proof(&round_trip(&proof(&p))).unwrap(), p.to_vec());
        let e = read_proof(&Message::new("PROOF").with("proof", "00")).unwrap_err();
        assert!(e.contains("proof must be 64"), "{e}");
        let e = read_accept(&refuse("no")).unwrap_err();
        assert!(e.contains("expected ACCEPT"), "{e}");
        let r = round_trip(&refuse("cluster \"x\"; not ours"));
        assert_eq!(r.get_str("reason"), Some("cluster \"x\"; not ours"));
    }
}
