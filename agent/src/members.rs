//! The address rules of the membership: who may be a member, and when a
//! cluster needs its shared secret. The configuration checks them when it
//! is read; the peer listener applies the loopback rule to each connection.

use std::net::{IpAddr, SocketAddr};

/// Checks the members against the address rules; the error names the key.
///
/// With other members, `listen` must be set and be an address they can
/// dial; without a secret, every member must be on a loopback address,
/// since nothing else would tell a member from anybody on the network.
pub fn check_members(
    listen: Option<SocketAddr>,
    neighbors: &[SocketAddr],
    has_secret: bool,
) -> Result<(), String> {
    let others: Vec<SocketAddr> = neighbors
        .iter()
        .copied()
        .filter(|a| Some(*a) != listen)
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    let list = |v: &[SocketAddr]| {
        v.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some(listen) = listen else {
        return Err(format!(
            "neighbors= names {} but listen= is not set: set listen= to this computer's address in the list",
            list(&others)
        ));
    };
    if listen.ip().is_unspecified() {
        return Err(format!(
            "listen={listen}: the other members dial this address, so it must be this computer's own \
             address as neighbors= lists it, not {}",
            listen.ip()
        ));
    }
    let remote: Vec<SocketAddr> = others
        .iter()
        .chain([&listen])
        .copied()
        .filter(|a| !is_loopback(a.ip()))
        .collect();
    if !has_secret && !remote.is_empty() {
        return Err(format!(
            "neighbors= and listen= name {}, not on a loopback address: a cluster of several computers \
             needs secret_file= (without it, only agents of this computer may link up)",
            list(&remote)
        ));
    }
    Ok(())
}

pub(crate) fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(v6.is_loopback(), |v4| v4.is_loopback()),
    }
}

#[cfg(test)]
mod tests {
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
        let e =
            check_members(me, &addrs(&["127.0.0.1:4041", "192.0.2.7:4040"]), false).unwrap_err();
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
}
