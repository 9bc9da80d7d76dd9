//! Unit tests of the link tokens; the links themselves are tested with
//! real agents in `tests/peers/`.

use super::*;

#[test]
fn link_tokens_are_apart_from_client_tokens() {
    assert!(owns(token(1)));
    assert!(!owns(Token(16)));
    assert!(!owns(LISTENER));
    assert_eq!(token(7).0 - FIRST_TOKEN, 7);
}

#[test]
fn a_refuse_is_told_from_the_core_s_lines_whatever_its_prefixes() {
    for line in [
        &b"REFUSE reason=x"[..],
        b"REFUSE",
        b"<alpha:snaplock REFUSE reason=x",
        b"alpha:snaplock/REFUSE reason=x",
        b"snaplock/REFUSE",
    ] {
        assert!(is_refuse(line), "{}", line.escape_ascii());
    }
    for line in [
        &b"LOCKPING serial=1"[..],
        b"REFUSED reason=x",
        b"XREFUSE",
        b"<alpha:snaplock LOCKPING serial=1",
        b"LOCK object_name=REFUSE",
        b"",
    ] {
        assert!(!is_refuse(line), "{}", line.escape_ascii());
    }
}
