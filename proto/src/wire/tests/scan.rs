//! The scanner against the parser: whatever line `scan` reads, it reads as
//! `parse` does; the plain lines agents write, it reads.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::super::scan::{Fields, SCAN_FIELDS, scan};
use super::{AWKWARD, COMMAND_FIRST, COMMAND_REST, NAME_REST, gen_message, line_of, pick, show};
use crate::wire::{Message, parse};

/// The names a line could be asked for: those it has, and a few it may not.
fn names_in(line: &[u8]) -> Vec<String> {
    let mut names: Vec<String> = line
        .split(|&b| b == b';' || b == b' ')
        .filter_map(|part| part.split(|&b| b == b'=').next())
        .filter_map(|n| std::str::from_utf8(n).ok())
        .map(str::to_owned)
        .collect();
    names.extend(["epoch", "object_name", "home", "req", "fence", "x"].map(str::to_owned));
    names
}

/// `scan` read `line`: `parse` must read it too, to the same fields, and
/// taking a field must leave both without it.
fn assert_same(case: usize, line: &[u8]) {
    let Some(mut s) = scan(line) else { return };
    let mut m = match parse(line) {
        Ok(m) => m,
        Err(e) => panic!("case {case}: scanned, but {e}: {:?}", show(line)),
    };
    assert_eq!(Fields::command(&s), m.command.as_str(), "case {case}");
    let names = names_in(line);
    for name in &names {
        assert_eq!(
            Fields::get(&s, name),
            Message::get(&m, name),
            "case {case}: {name} in {:?}",
            show(line)
        );
    }
    for name in names.iter().step_by(2) {
        assert_eq!(s.take(name), m.remove(name), "case {case}: take {name}");
        assert_eq!(Fields::get(&s, name), None, "case {case}: {name} taken");
    }
    for name in &names {
        assert_eq!(
            Fields::get(&s, name),
            Message::get(&m, name),
            "case {case}: {name}"
        );
    }
}

#[test]
fn whatever_scan_reads_parse_reads_the_same() {
    let mut rng = StdRng::seed_from_u64(0x5eed_0005);
    let mut scanned = 0;
    for case in 0..100_000 {
        let mut line = format!(
            "{} ",
            super::gen_name(&mut rng, COMMAND_FIRST, COMMAND_REST)
        )
        .into_bytes();
        for _ in 0..rng.random_range(0..20) {
            // Short names, so that some repeat.
            let name: String = (0..rng.random_range(1..3))
                .map(|_| char::from(pick(&mut rng, b"abe_")))
                .collect();
            line.extend_from_slice(name.as_bytes());
            if rng.random_bool(0.95) {
                line.push(b'=');
            }
            for _ in 0..rng.random_range(0..6) {
                line.push(match rng.random_range(0..12) {
                    0 => pick(&mut rng, AWKWARD),
                    1 => rng.random(),
                    _ => pick(&mut rng, NAME_REST),
                });
            }
            if rng.random_bool(0.9) {
                line.push(b';');
            }
        }
        if rng.random_bool(0.05) {
            line.insert(0, pick(&mut rng, AWKWARD));
        }
        scanned += usize::from(scan(&line).is_some());
        assert_same(case, &line);
    }
    assert!(
        scanned > 10_000,
        "the generator reaches scanned lines ({scanned})"
    );
}

#[test]
fn whatever_scan_reads_of_any_encoded_message_parse_reads_the_same() {
    let mut rng = StdRng::seed_from_u64(0x5eed_0006);
    for case in 0..20_000 {
        assert_same(case, &line_of(&gen_message(&mut rng)));
    }
}

#[test]
fn every_plain_line_is_scanned() {
    let mut rng = StdRng::seed_from_u64(0x5eed_0007);
    for case in 0..20_000 {
        let mut msg = Message::new("ADDTICKET");
        while msg.param_count() < rng.random_range(0..=SCAN_FIELDS) {
            let value: Vec<u8> = (0..rng.random_range(0..30))
                .map(|_| pick(&mut rng, b"az09_.-:/ |!"))
                .collect();
            msg.set(&super::gen_param_name(&mut rng), value);
        }
        let line = line_of(&msg);
        assert!(scan(&line).is_some(), "case {case}: {:?}", show(&line));
        assert_same(case, &line);
    }
}

#[test]
fn lines_that_are_not_plain_are_left_to_the_parser() {
    let many: String = (0..=SCAN_FIELDS).map(|i| format!("p{i}=1;")).collect();
    for line in [
        "<a:b LOCK epoch=1".to_owned(),
        "a:b/LOCK epoch=1".to_owned(),
        "b/LOCK epoch=1".to_owned(),
        "LOCK object_name=\"a;b\"".to_owned(),
        "LOCK object_name=a\\\\b".to_owned(),
        "LOCK epoch".to_owned(),
        "LOCK epoch=1;;".to_owned(),
        "LOCK a=1;a=2".to_owned(),
        "LOCK object_name_x=1;object_name_x=2".to_owned(),
        "LOCK 1x=2".to_owned(),
        "lock epoch=1".to_owned(),
        format!("LOCK {many}"),
        format!("LOCK {}=1", "n".repeat(65)),
    ] {
        assert!(scan(line.as_bytes()).is_none(), "{line:?} is scanned");
    }
    for line in [
        "LOCK",
        "LOCK ",
        "LOCK a=",
        "LOCK a=1;",
        "LOCK a=1;b=2",
        "LOCK object_name_x=1;object_name_y=2",
    ] {
        assert!(scan(line.as_bytes()).is_some(), "{line:?} is not scanned");
        assert_same(0, line.as_bytes());
    }
}
