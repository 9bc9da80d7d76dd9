//! The cluster's shared secret and the proofs made with it.
//!
//! A proof is HMAC-SHA256 over a challenge the other side drew and both
//! names, with a label saying which side made it: a proof an acceptor gives
//! (`accept`) can never be replayed as a dialer's (`connect`), so an
//! attacker cannot make an agent answer its own challenge. The secret never
//! goes on the wire, and proofs are compared in constant time.

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::files;

type HmacSha256 = Hmac<Sha256>;

/// The largest secret file read, in bytes (only its first line is used).
pub const MAX_SECRET_FILE: u64 = 64 << 10;

/// Length of a proof, in bytes (SHA-256).
pub const PROOF_LEN: usize = 32;

/// The shared secret; empty when the cluster runs without one (loopback
/// peers only). Its `Debug` never shows it.
#[derive(Clone, Default)]
pub struct Secret(Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("Secret(none)")
        } else {
            f.write_str("Secret(..)")
        }
    }
}

impl Secret {
    /// A secret made of these bytes (tests; the agent reads a file).
    pub fn from_bytes(bytes: &[u8]) -> Secret {
        Secret(bytes.to_vec())
    }

    /// Whether there is no secret: the cluster is unauthenticated.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Reads the first line of `path`, without its surrounding blanks.
    /// Refused when unreadable, empty, not a regular file or larger than
    /// [`MAX_SECRET_FILE`]; the second value is a warning when other users
    /// may read or change it.
    pub fn load(path: &Path) -> Result<(Secret, Option<String>), String> {
        let at = format!("secret_file={}", path.display());
        let (text, meta) = files::read_regular(path, MAX_SECRET_FILE)
            .map_err(|e| format!("{at}: cannot read it: {e}"))?;
        let first = text.split(|&b| b == b'\n').next().unwrap_or_default();
        let secret = first.trim_ascii();
        if secret.is_empty() {
            return Err(format!(
                "{at}: its first line is empty; write the cluster's secret there"
            ));
        }
        let mode = meta.permissions().mode();
        let warning = (mode & 0o006 != 0).then(|| {
            format!(
                "{at}: every user may read or change the cluster's secret (mode {:o}); \
                 make it readable by the agent's user and group only (chmod 0640)",
                mode & 0o7777
            )
        });
        Ok((Secret(secret.to_vec()), warning))
    }

    fn mac(&self, label: &str, challenge: &str, first: &str, second: &str) -> HmacSha256 {
        // HMAC takes keys of any length, the empty one included.
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC accepts any key length");
        for (i, part) in [label, challenge, first, second].into_iter().enumerate() {
            if i > 0 {
                mac.update(b"\n");
            }
            mac.update(part.as_bytes());
        }
        mac
    }

    /// What an acceptor answers to a dialer's challenge:
    /// HMAC(secret, `accept\n<dialer challenge>\n<acceptor name>\n<dialer name>`).
    pub fn accept_proof(&self, dialer_challenge: &str, acceptor: &str, dialer: &str) -> [u8; 32] {
        self.mac("accept", dialer_challenge, acceptor, dialer)
            .finalize()
            .into_bytes()
            .into()
    }

    /// Whether `proof` is [`accept_proof`](Self::accept_proof) (constant time).
    pub fn verify_accept(
        &self,
        dialer_challenge: &str,
        acceptor: &str,
        dialer: &str,
        proof: &[u8],
    ) -> bool {
        self.mac("accept", dialer_challenge, acceptor, dialer)
            .verify_slice(proof)
            .is_ok()
    }

    /// What a dialer answers to an acceptor's challenge:
    /// HMAC(secret, `connect\n<acceptor challenge>\n<dialer name>\n<acceptor name>`).
    pub fn connect_proof(
        &self,
        acceptor_challenge: &str,
        dialer: &str,
        acceptor: &str,
    ) -> [u8; 32] {
        self.mac("connect", acceptor_challenge, dialer, acceptor)
            .finalize()
            .into_bytes()
            .into()
    }

    /// Whether `proof` is [`connect_proof`](Self::connect_proof) (constant time).
    pub fn verify_connect(
        &self,
        acceptor_challenge: &str,
        dialer: &str,
        acceptor: &str,
        proof: &[u8],
    ) -> bool {
        self.mac("connect", acceptor_challenge, dialer, acceptor)
            .verify_slice(proof)
            .is_ok()
    }
}

/// Lower-case hexadecimal.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// The bytes of exactly `len` bytes' worth of hexadecimal digits.
pub fn from_hex(text: &[u8], len: usize) -> Option<Vec<u8>> {
    if text.len() != len * 2 {
        return None;
    }
    let digit = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    text.chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn proofs_are_hmac_sha256_of_the_documented_text() {
        // RFC 4231 test case 2: the crates compute HMAC-SHA256.
        let mut direct = HmacSha256::new_from_slice(b"Jefe").unwrap();
        direct.update(b"what do ya want for nothing?");
        assert_eq!(
            to_hex(&direct.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let s = Secret::from_bytes(b"k");
        let mut expected = HmacSha256::new_from_slice(b"k").unwrap();
        expected.update(b"accept\nc0ffee\nalpha\nbeta");
        assert_eq!(
            s.accept_proof("c0ffee", "alpha", "beta").to_vec(),
            expected.finalize().into_bytes().to_vec()
        );
        let mut expected = HmacSha256::new_from_slice(b"k").unwrap();
        expected.update(b"connect\nc0ffee\nbeta\nalpha");
        assert_eq!(
            s.connect_proof("c0ffee", "beta", "alpha").to_vec(),
            expected.finalize().into_bytes().to_vec()
        );
    }

    #[test]
    fn a_proof_verifies_only_with_the_same_secret_challenge_names_and_side() {
        let s = Secret::from_bytes(b"shared");
        let p = s.accept_proof("aa", "alpha", "beta");
        assert!(s.verify_accept("aa", "alpha", "beta", &p));
        assert!(!Secret::from_bytes(b"other").verify_accept("aa", "alpha", "beta", &p));
        assert!(!s.verify_accept("ab", "alpha", "beta", &p));
        assert!(!s.verify_accept("aa", "beta", "alpha", &p));
        assert!(
            !s.verify_connect("aa", "alpha", "beta", &p),
            "an acceptor's proof is no dialer's proof"
        );
        assert!(!s.verify_accept("aa", "alpha", "beta", &p[..31]));
        let none = Secret::default();
        let q = none.connect_proof("aa", "beta", "alpha");
        assert!(none.verify_connect("aa", "beta", "alpha", &q));
        assert!(!s.verify_connect("aa", "beta", "alpha", &q));
    }

    #[test]
    fn hex_reads_back_and_refuses_other_lengths_or_digits() {
        let bytes = [0u8, 1, 0xab, 0xff];
        assert_eq!(to_hex(&bytes), "0001abff");
        assert_eq!(from_hex(b"0001abff", 4), Some(bytes.to_vec()));
        assert_eq!(from_hex(b"0001ABFF", 4), Some(bytes.to_vec()));
        assert_eq!(from_hex(b"0001abf", 4), None);
        assert_eq!(from_hex(b"0001abfg", 4), None);
        assert_eq!(from_hex(b"+001abff", 4), None);
    }

    #[test]
    fn a_secret_file_that_is_a_fifo_a_device_or_huge_is_refused() {
        let dir = std::env::temp_dir().join(format!("snaplock-secret-big-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = Secret::load(&fifo).unwrap_err();
        assert!(e.contains("not a regular file (a FIFO)"), "{e}");
        let e = Secret::load(Path::new("/dev/zero")).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let big = dir.join("big");
        fs::write(&big, "s".repeat(MAX_SECRET_FILE as usize + 1)).unwrap();
        let e = Secret::load(&big).unwrap_err();
        assert!(e.contains("larger than 65536 bytes"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_secret_file_is_its_first_line_trimmed_and_must_not_be_empty() {
        let dir = std::env::temp_dir().join(format!("snaplock-secret-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("secret");
        fs::write(&path, "  s3cret \nsecond line\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        let (secret, warning) = Secret::load(&path).unwrap();
        assert_eq!(secret.0, b"s3cret");
        assert_eq!(warning, None);
        assert_eq!(format!("{secret:?}"), "Secret(..)", "never printed");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let (_, warning) = Secret::load(&path).unwrap();
        assert!(warning.unwrap().contains("every user may read"));
        fs::write(&path, " \nsecret on the second line\n").unwrap();
        let e = Secret::load(&path).unwrap_err();
        assert!(e.contains("first line is empty"), "{e}");
        let e = Secret::load(&dir.join("missing")).unwrap_err();
        assert!(
            e.starts_with("secret_file=") && e.contains("cannot read it"),
            "{e}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
