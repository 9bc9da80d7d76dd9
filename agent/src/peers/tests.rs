//! Unit tests of the address rules; the links themselves are tested with
//! real agents in `tests/peers/`.

use super::*;

fn addrs(list: &[&str]) -> Vec<SocketAddr> {
    list.iter().map(|a| a.parse().unwrap()).collect()
}

#[test]
fn a_cluster_of_one_needs_nothing() {
    assert_eq!(check_members(None, &[], false), Ok(()));
    let me: SocketAddr = "192.0.2.1:4040".parse().unwrap();
    assert_eq!(check_members(Some(me), &[me], false), Ok(()));
    assert_eq!(check_members(Some(me), &[], false), Ok(()));
}

#[test]
fn other_members_need_a_listen_address_they_can_dial() {
    let e = check_members(None, &addrs(&["127.0.0.1:4041"]), true).unwrap_err();
    assert!(e.contains("listen= is not set"), "{e}");
    let e = check_members(
        Some("0.0.0.0:4040".parse().unwrap()),
        &addrs(&["127.0.0.1:4041"]),
        true,
    )
    .unwrap_err();
    assert!(e.starts_with("listen=0.0.0.0:4040"), "{e}");
}

#[test]
fn without_a_secret_only_loopback_members_are_allowed() {
    let me = Some("127.0.0.1:4040".parse().unwrap());
    assert_eq!(
        check_members(me, &addrs(&["127.0.0.2:4041", "[::1]:4042"]), false),
        Ok(())
    );
    let e = check_members(me, &addrs(&["127.0.0.1:4041", "192.0.2.7:4040"]), false).unwrap_err();
    assert!(
        e.contains("192.0.2.7:4040") && e.contains("needs secret_file="),
        "{e}"
    );
    assert!(!e.contains("127.0.0.1:4041"), "{e}");
    assert_eq!(check_members(me, &addrs(&["192.0.2.7:4040"]), true), Ok(()));
    let remote_me = Some("192.0.2.1:4040".parse().unwrap());
    let e = check_members(remote_me, &addrs(&["127.0.0.1:4041"]), false).unwrap_err();
    assert!(e.contains("192.0.2.1:4040"), "{e}");
}

#[test]
fn mapped_ipv4_loopback_counts_as_loopback() {
    assert!(is_loopback("::ffff:127.0.0.5".parse().unwrap()));
    assert!(is_loopback("::1".parse().unwrap()));
    assert!(is_loopback("127.1.2.3".parse().unwrap()));
    assert!(!is_loopback("::ffff:192.0.2.1".parse().unwrap()));
    assert!(!is_loopback("10.0.0.1".parse().unwrap()));
}

#[test]
fn link_tokens_are_apart_from_client_tokens() {
    assert!(owns(token(1)));
    assert!(!owns(Token(16)));
    assert!(!owns(LISTENER));
    assert_eq!(token(7).0 - FIRST_TOKEN, 7);
}
