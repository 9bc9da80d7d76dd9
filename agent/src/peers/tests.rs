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

#[test]
fn lines_read_wait_back_to_back_and_their_room_is_reused_once_handed_over() {
    let mut inputs = VecDeque::new();
    let mut lines = Vec::new();
    let take = |inputs: &mut VecDeque<Pending>, lines: &Vec<u8>| match inputs.pop_front() {
        Some(Pending::Line { peer, at }) => (peer, lines[at].to_vec()),
        _ => panic!("a line was queued"),
    };
    push_line(&mut inputs, &mut lines, PeerId(1), b"LOCK a=1");
    push_line(&mut inputs, &mut lines, PeerId(2), b"UNLOCK b=2");
    assert_eq!(take(&mut inputs, &lines), (PeerId(1), b"LOCK a=1".to_vec()));
    // A line read while another waits goes after it: the waiting one's
    // bytes are not touched.
    push_line(&mut inputs, &mut lines, PeerId(1), b"DROPTICKET c=3");
    assert_eq!(
        take(&mut inputs, &lines),
        (PeerId(2), b"UNLOCK b=2".to_vec())
    );
    assert_eq!(
        take(&mut inputs, &lines),
        (PeerId(1), b"DROPTICKET c=3".to_vec())
    );
    // All handed over: the next line starts the room again.
    push_line(&mut inputs, &mut lines, PeerId(3), b"LOCKPING serial=4");
    assert_eq!(lines, b"LOCKPING serial=4");
    assert_eq!(
        take(&mut inputs, &lines),
        (PeerId(3), b"LOCKPING serial=4".to_vec())
    );
    // A burst's room is given back, but for what is kept.
    let long = vec![b'x'; LINES_KEPT];
    for _ in 0..3 {
        push_line(&mut inputs, &mut lines, PeerId(1), &long);
    }
    assert!(lines.capacity() >= 3 * LINES_KEPT);
    inputs.clear();
    push_line(&mut inputs, &mut lines, PeerId(1), b"LOCKPING serial=5");
    assert!(lines.capacity() <= LINES_KEPT, "{}", lines.capacity());
    assert_eq!(
        take(&mut inputs, &lines),
        (PeerId(1), b"LOCKPING serial=5".to_vec())
    );
}
