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
