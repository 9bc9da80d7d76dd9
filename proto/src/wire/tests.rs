//! The wire format's laws and edge cases: the grammar of snaplock(7),
//! the round trip `parse(encode(m)) == m`, and the framer's bounds.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

mod framer;
mod scan;

/// `encode(msg)` without its `\n`: what [`parse`] takes.
fn line_of(msg: &Message) -> Vec<u8> {
    let mut line = encode_to_vec(msg);
    assert_eq!(line.pop(), Some(b'\n'), "an encoded line ends with LF");
    assert!(
        !line.contains(&b'\n'),
        "an encoded line holds one LF: {msg:?}"
    );
    line
}

fn show(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

fn parse_ok(line: &[u8]) -> Message {
    match parse(line) {
        Ok(msg) => msg,
        Err(e) => panic!("{:?} should parse, got {e}", show(line)),
    }
}

fn parse_err(line: &[u8]) -> (ParseErrorKind, usize) {
    match parse(line) {
        Ok(msg) => panic!("{:?} should not parse, got {msg:?}", show(line)),
        Err(e) => (e.reason, e.column),
    }
}

/// Parses `input`, then checks the message encodes to `canonical` and that
/// `canonical` parses back to the same message.
fn assert_canonical(input: &[u8], canonical: &[u8]) -> Message {
    let msg = parse_ok(input);
    assert_eq!(
        show(&line_of(&msg)),
        show(canonical),
        "canonical form of {:?}",
        show(input)
    );
    assert_eq!(parse_ok(canonical), msg);
    msg
}

// ---- seeded generators ----

const NAME_FIRST: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_";
const NAME_REST: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789";
const COMMAND_FIRST: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ_";
const COMMAND_REST: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789";
/// Bytes the grammar gives a meaning to, drawn more often than chance would.
const AWKWARD: &[u8] = b";\"\\\n\r\0 =:/<nr\xff\x80";

fn pick(rng: &mut StdRng, set: &[u8]) -> u8 {
    set[rng.random_range(0..set.len())]
}

fn gen_name(rng: &mut StdRng, first: &[u8], rest: &[u8]) -> String {
    let len = if rng.random_bool(0.05) {
        MAX_NAME_LEN
    } else {
        rng.random_range(1..=12)
    };
    let mut name = vec![pick(rng, first)];
    name.extend((1..len).map(|_| pick(rng, rest)));
    String::from_utf8(name).expect("ASCII")
}

fn gen_param_name(rng: &mut StdRng) -> String {
    gen_name(rng, NAME_FIRST, NAME_REST)
}

fn gen_server(rng: &mut StdRng) -> String {
    match rng.random_range(0..10) {
        0 => ".".to_owned(),
        1 => "*".to_owned(),
        _ => gen_param_name(rng),
    }
}

fn gen_service(rng: &mut StdRng) -> String {
    match rng.random_range(0..10) {
        0 => ".".to_owned(),
        1 => "*".to_owned(),
        2 => "?".to_owned(),
        _ => gen_param_name(rng),
    }
}

fn gen_value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.random_range(0..10) {
        0 => 0,
        1..=7 => rng.random_range(1..12),
        _ => rng.random_range(12..200),
    };
    let mut v: Vec<u8> = (0..len)
        .map(|_| {
            if rng.random_bool(0.4) {
                pick(rng, AWKWARD)
            } else {
                rng.random()
            }
        })
        .collect();
    // The shapes the quoting rules turn on.
    match rng.random_range(0..8) {
        0 => v.insert(0, b'"'),
        1 => v.push(b'\\'),
        2 => {
            v.insert(0, b'"');
            v.push(b'\\');
        }
        3 => v.extend_from_slice(b";\\"),
        _ => {}
    }
    v
}

/// Any message the encoder can express: sent-from both halves or neither,
/// a destination server only with a service.
fn gen_message(rng: &mut StdRng) -> Message {
    let mut msg = Message::new(&gen_name(rng, COMMAND_FIRST, COMMAND_REST));
    if rng.random_bool(0.3) {
        msg.sent_from_server = gen_server(rng);
        msg.sent_from_service = gen_service(rng);
    }
    if rng.random_bool(0.4) {
        msg.service = gen_service(rng);
        if rng.random_bool(0.5) {
            msg.server = gen_server(rng);
        }
    }
    let count = if rng.random_bool(0.02) {
        MAX_PARAMS
    } else {
        rng.random_range(0..8)
    };
    while msg.param_count() < count {
        let value = gen_value(rng);
        msg.set(&gen_param_name(rng), value);
    }
    msg
}

// ---- the round trip ----

#[test]
fn every_generated_message_reads_back_from_its_encoding() {
    let mut rng = StdRng::seed_from_u64(0x5eed_0001);
    for case in 0..5_000 {
        let msg = gen_message(&mut rng);
        let line = line_of(&msg);
        match parse(&line) {
            Ok(back) => assert_eq!(back, msg, "case {case}: line {:?}", show(&line)),
            Err(e) => panic!("case {case}: {e} in {:?}", show(&line)),
        }
        assert_eq!(command_of(&line), Some(msg.command.as_str()), "case {case}");
    }
}

#[test]
fn a_message_with_the_most_parameters_and_longest_names_reads_back() {
    let mut msg = Message::new(&"C".repeat(MAX_NAME_LEN));
    msg.sent_from_server = "s".repeat(MAX_NAME_LEN);
    msg.sent_from_service = "v".repeat(MAX_NAME_LEN);
    for i in 0..MAX_PARAMS {
        msg.set(&format!("{:_<64}", format!("p{i}")), format!("\"v;{i}\\"));
    }
    assert_eq!(msg.param_count(), MAX_PARAMS);
    assert_eq!(parse_ok(&line_of(&msg)), msg);
}

#[test]
fn every_single_byte_value_reads_back() {
    for b in 0..=255u8 {
        for value in [vec![b], vec![b'x', b], vec![b, b';'], vec![b'"', b, b'\\']] {
            let msg = Message::new("SET").with("v", &value);
            assert_eq!(
                parse_ok(&line_of(&msg)).get("v"),
                Some(&value[..]),
                "value {:?}",
                show(&value)
            );
        }
    }
}

// ---- example lines of the original snaplock's messages ----

#[test]
fn snapcommunicator_test_lines_reencode_to_their_canonical_form() {
    let m = assert_canonical(
        b"images/REPROCESS url=http://domain.name/this/one;priority=normal",
        b"images/REPROCESS priority=normal;url=http://domain.name/this/one",
    );
    assert_eq!(
        (m.service.as_str(), m.command.as_str()),
        ("images", "REPROCESS")
    );
    let m = assert_canonical(
        br#"pagelist/RESET url="http://domain.name/this;one;path";priority=-58"#,
        br#"pagelist/RESET priority=-58;url="http://domain.name/this;one;path""#,
    );
    assert_eq!(m.get("url"), Some(&b"http://domain.name/this;one;path"[..]));
    let m = assert_canonical(
        br#"PING url="\"not\naccessible\"";priority=87"#,
        br#"PING priority=87;url="\"not\naccessible\"""#,
    );
    assert_eq!(m.get("url"), Some(&b"\"not\naccessible\""[..]));
    let m = assert_canonical(
        br#"images/PING url="\"quoted URL\"";zindex="3\n-7\r+5";priority=87"#,
        br#"images/PING priority=87;url="\"quoted URL\"";zindex=3\n-7\r+5"#,
    );
    assert_eq!(m.get("url"), Some(&b"\"quoted URL\""[..]));
    assert_eq!(m.get("zindex"), Some(&b"3\n-7\r+5"[..]));
}

#[test]
fn snaplock_reference_lines_are_already_canonical() {
    let lines: [&[u8]; 8] = [
        b"REGISTER service=snaplock;version=1",
        b"snapcommunicator/CLUSTERSTATUS",
        b"*/LOCKSTARTED election_date=1700000000123456;leader0=14|3735928559|10.0.0.1:4040|812|node1;lockid=14|12345|10.0.0.2:4040|901|node2;server_name=node2;starttime=1700000000",
        b"<node1:lock_4321_1 snaplock/LOCK duration=10;object_name=test;pid=4321;timeout=1700000005",
        b"node1:lock_4321_1/LOCKED object_name=test;timeout_date=1700000060",
        b"node2:snaplock/LOCKENTERING duration=60;key=node1/4321;object_name=test;serial=1;source=node1/lock_4321_1;timeout=1700000005",
        b"./LOCKREADY cache=no",
        b"snaplock/LOG",
    ];
    for line in lines {
        assert_canonical(line, line);
    }
    let m = parse_ok(lines[3]);
    assert_eq!(
        (m.sent_from_server.as_str(), m.sent_from_service.as_str()),
        ("node1", "lock_4321_1")
    );
    assert_eq!((m.server.as_str(), m.service.as_str()), ("", "snaplock"));
    assert_eq!(m.get_str("pid"), Some("4321"));
}

// ---- escapes and quoting ----

#[test]
fn a_value_ending_in_a_backslash_is_quoted_and_reads_back() {
    let msg = Message::new("LOCK").with("object_name", b"a;b\\");
    let line = line_of(&msg);
    assert_eq!(show(&line), show(br#"LOCK object_name="a;b\\""#));
    assert_eq!(parse_ok(&line).get("object_name"), Some(&b"a;b\\"[..]));
    // Unquoted, too: a lone trailing backslash is a literal.
    assert_eq!(
        parse_ok(b"LOCK object_name=ab\\").get("object_name"),
        Some(&b"ab\\"[..])
    );
}

#[test]
fn an_escaped_quote_in_an_unquoted_value_is_kept_literally() {
    let m = parse_ok(br#"LOCK object_name=x\"y"#);
    assert_eq!(m.get("object_name"), Some(&br#"x\"y"#[..]));
    // It re-encodes with its backslash escaped, and reads back the same.
    assert_canonical(br#"LOCK object_name=x\"y"#, br#"LOCK object_name=x\\"y"#);
}

#[test]
fn a_quote_after_the_first_byte_needs_no_quoting() {
    let msg = Message::new("LOCK").with("object_name", br#"say "hi" now"#);
    assert_eq!(
        show(&line_of(&msg)),
        show(br#"LOCK object_name=say "hi" now"#)
    );
}

#[test]
fn a_value_starting_with_a_quote_is_quoted_with_its_quotes_escaped() {
    let msg = Message::new("LOCK").with("object_name", br#""x"#);
    assert_eq!(show(&line_of(&msg)), show(br#"LOCK object_name="\"x""#));
}

#[test]
fn unknown_escapes_are_kept_as_two_bytes() {
    let m = parse_ok(br#"LOCK a=\t\x\0;b="\t;\q""#);
    assert_eq!(m.get("a"), Some(&br"\t\x\0"[..]));
    assert_eq!(m.get("b"), Some(&br"\t;\q"[..]));
}

#[test]
fn known_escapes_are_undone_in_one_left_to_right_pass() {
    // `\\n` is a backslash then `n`, not a backslash then LF.
    let m = parse_ok(br"LOCK a=\\n\n\r\\;b=\\\\");
    assert_eq!(m.get("a"), Some(&b"\\n\n\r\\"[..]));
    assert_eq!(m.get("b"), Some(&b"\\\\"[..]));
}

#[test]
fn a_trailing_semicolon_is_accepted() {
    let m = parse_ok(b"LOCK a=1;b=2;");
    assert_eq!(
        (m.get_str("a"), m.get_str("b"), m.param_count()),
        (Some("1"), Some("2"), 2)
    );
    let m = parse_ok(br#"LOCK a="x";"#);
    assert_eq!((m.get_str("a"), m.param_count()), (Some("x"), 1));
}

#[test]
fn a_repeated_parameter_name_keeps_the_last_value() {
    let m = parse_ok(b"LOCK a=1;b=2;a=3");
    assert_eq!(
        (m.get_str("a"), m.get_str("b"), m.param_count()),
        (Some("3"), Some("2"), 2)
    );
}

#[test]
fn replaced_and_removed_values_leave_nothing_visible() {
    // Values share one buffer: what was replaced or removed must neither
    // show, nor be written, nor make two equal messages differ.
    let mut m = Message::new("LOCK").with("b", "2").with("a", "1");
    m.set("b", "twenty-two");
    m.set_u64("c", 3);
    m.set_i64("d", -4);
    assert_eq!(m.remove("a").as_deref(), Some(&b"1"[..]));
    assert_eq!(m.remove("a"), None);
    assert_eq!(show(&line_of(&m)), "LOCK b=twenty-two;c=3;d=-4");
    let fresh = Message::new("LOCK")
        .with("d", "-4")
        .with("c", "3")
        .with("b", "twenty-two");
    assert_eq!(m, fresh);
    assert_eq!(m.clone(), fresh);
    assert_eq!(parse_ok(&line_of(&m)), fresh);
    m.set("b", "x");
    assert_ne!(m, fresh);
    assert_eq!(m.get_str("b"), Some("x"));
}

#[test]
fn the_known_names_are_sorted_and_each_is_found_at_its_place() {
    use super::message::{KNOWN, known_name, known_text};
    assert!(KNOWN.windows(2).all(|w| w[0] < w[1]), "{KNOWN:?}");
    for (i, name) in KNOWN.iter().enumerate() {
        let rank = u16::try_from(i).expect("a few dozen");
        assert_eq!(known_name(name.as_bytes()), Some(rank), "{name}");
        assert_eq!(known_text(rank), *name);
    }
    assert_eq!(known_name(b"epoch_"), None);
    // Known and unknown names, set in any order, are written sorted.
    let mut m = Message::new("X");
    for name in [
        "req",
        "zz",
        "a",
        "epoch",
        "object_name",
        "home",
        "fence",
        "eq",
        "ok",
    ] {
        m.set(name, name);
    }
    let names: Vec<&str> = m.params().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "a",
            "epoch",
            "eq",
            "fence",
            "home",
            "object_name",
            "ok",
            "req",
            "zz"
        ]
    );
}

#[test]
fn empty_values_read_as_empty() {
    let m = parse_ok(br#"LOCK a=;b="";c="#);
    for name in ["a", "b", "c"] {
        assert_eq!(m.get(name), Some(&b""[..]), "{name}");
    }
    assert_eq!(show(&line_of(&m)), "LOCK a=;b=;c=");
}

#[test]
fn spaces_and_equal_signs_stay_inside_unquoted_values() {
    let m = parse_ok(b"LOCK a=x y=z ;b= ");
    assert_eq!(
        (m.get("a"), m.get("b")),
        (Some(&b"x y=z "[..]), Some(&b" "[..]))
    );
}

#[test]
fn a_command_with_a_space_and_no_parameter_is_accepted() {
    assert_eq!(parse_ok(b"LOCKSTATUS "), Message::new("LOCKSTATUS"));
}

// ---- prefixes ----

#[test]
fn every_prefix_form_is_read_and_written_back() {
    let m = assert_canonical(b"<a:b LOCK", b"<a:b LOCK");
    assert_eq!(
        (m.sent_from_server.as_str(), m.sent_from_service.as_str()),
        ("a", "b")
    );
    let m = assert_canonical(b"a:b/LOCK", b"a:b/LOCK");
    assert_eq!((m.server.as_str(), m.service.as_str()), ("a", "b"));
    let m = assert_canonical(b"b/LOCK", b"b/LOCK");
    assert_eq!((m.server.as_str(), m.service.as_str()), ("", "b"));
    for special in ["*", ".", "?"] {
        let line = format!("{special}/LOCK");
        let m = assert_canonical(line.as_bytes(), line.as_bytes());
        assert_eq!(m.service, special);
    }
    let m = assert_canonical(b"<.:* ./LOCK x=1", b"<.:* ./LOCK x=1");
    assert_eq!(
        (m.sent_from_server.as_str(), m.sent_from_service.as_str()),
        (".", "*")
    );
    assert_eq!(m.get_str("x"), Some("1"));
}

#[test]
fn a_server_without_a_service_is_read_but_not_written() {
    // `node1:LOCK` names a server and no service (snaplock(7), GRAMMAR); the
    // serializer writes `server:` only together with a service.
    let m = parse_ok(b"node1:LOCK");
    assert_eq!(
        (m.server.as_str(), m.service.as_str(), m.command.as_str()),
        ("node1", "", "LOCK")
    );
    assert_eq!(show(&line_of(&m)), "LOCK");
}

// ---- every error, at its column ----

#[test]
fn a_line_without_a_command_is_rejected_where_the_command_should_be() {
    assert_eq!(parse_err(b""), (ParseErrorKind::MissingCommand, 0));
    assert_eq!(parse_err(b"snaplock/"), (ParseErrorKind::MissingCommand, 9));
    assert_eq!(parse_err(b"<a:b "), (ParseErrorKind::MissingCommand, 5));
    assert_eq!(parse_err(b" LOCK"), (ParseErrorKind::MissingCommand, 0));
}

#[test]
fn a_lowercase_command_is_rejected() {
    for line in [
        &b"lock"[..],
        b"Lock",
        b"LOCk",
        b"snaplock/lock object_name=x",
    ] {
        let col = if line.starts_with(b"snaplock/") { 9 } else { 0 };
        assert_eq!(
            parse_err(line),
            (ParseErrorKind::BadCommand, col),
            "{:?}",
            show(line)
        );
        assert_eq!(command_of(line), None);
    }
}

#[test]
fn a_command_that_is_not_a_name_is_rejected() {
    assert_eq!(parse_err(b"9LOCK"), (ParseErrorKind::BadCommand, 0));
    assert_eq!(parse_err(b"LO-CK a=1"), (ParseErrorKind::BadCommand, 0));
    assert_eq!(parse_err(b"<a:b LOCK\"").0, ParseErrorKind::BadCommand);
    let long = "L".repeat(MAX_NAME_LEN + 1);
    assert_eq!(parse_err(long.as_bytes()), (ParseErrorKind::BadCommand, 0));
    assert!(
        parse(&long.as_bytes()[1..]).is_ok(),
        "64 bytes is the longest command"
    );
}

#[test]
fn a_broken_sent_from_prefix_is_rejected_where_it_breaks() {
    assert_eq!(parse_err(b"<ab LOCK"), (ParseErrorKind::BadSentFrom, 3));
    assert_eq!(parse_err(b"<abc"), (ParseErrorKind::BadSentFrom, 4));
    assert_eq!(parse_err(b"<a:b"), (ParseErrorKind::BadSentFrom, 4));
    assert_eq!(parse_err(b"<"), (ParseErrorKind::BadSentFrom, 1));
}

#[test]
fn a_bad_server_or_service_name_is_rejected_at_its_start() {
    assert_eq!(
        parse_err(b"<a-b:c LOCK"),
        (ParseErrorKind::BadDestination, 1)
    );
    assert_eq!(parse_err(b"<:c LOCK"), (ParseErrorKind::BadDestination, 1));
    assert_eq!(
        parse_err(b"<a:b-c LOCK"),
        (ParseErrorKind::BadDestination, 3)
    );
    assert_eq!(parse_err(b"<a: LOCK"), (ParseErrorKind::BadDestination, 3));
    assert_eq!(parse_err(b"a-b/LOCK"), (ParseErrorKind::BadDestination, 0));
    assert_eq!(parse_err(b"/LOCK"), (ParseErrorKind::BadDestination, 0));
    assert_eq!(parse_err(b":LOCK"), (ParseErrorKind::BadDestination, 0));
    assert_eq!(
        parse_err(b"a:b-c/LOCK"),
        (ParseErrorKind::BadDestination, 2)
    );
    assert_eq!(
        parse_err(b"?:b/LOCK"),
        (ParseErrorKind::BadDestination, 0),
        "? is a service only"
    );
    let long = format!("{}/LOCK", "s".repeat(MAX_NAME_LEN + 1));
    assert_eq!(
        parse_err(long.as_bytes()),
        (ParseErrorKind::BadDestination, 0)
    );
}

#[test]
fn a_repeated_destination_is_rejected_at_the_second_separator() {
    assert_eq!(
        parse_err(b"a:b:LOCK"),
        (ParseErrorKind::RepeatedDestination, 3)
    );
    assert_eq!(
        parse_err(b"a/b/LOCK"),
        (ParseErrorKind::RepeatedDestination, 3)
    );
    assert_eq!(
        parse_err(b"a/b:LOCK"),
        (ParseErrorKind::RepeatedDestination, 3)
    );
}

#[test]
fn a_bad_parameter_name_is_rejected_at_its_start() {
    assert_eq!(
        parse_err(b"LOCK 1a=2"),
        (ParseErrorKind::BadParameterName, 5)
    );
    assert_eq!(parse_err(b"LOCK =2"), (ParseErrorKind::BadParameterName, 5));
    assert_eq!(
        parse_err(b"LOCK a=1;b-c=2"),
        (ParseErrorKind::BadParameterName, 9)
    );
    assert_eq!(
        parse_err(b"LOCK a b=2"),
        (ParseErrorKind::BadParameterName, 5)
    );
    assert_eq!(
        parse_err(b"LOCK a=1;;b=2"),
        (ParseErrorKind::MissingEquals, 9)
    );
}

#[test]
fn a_parameter_name_longer_than_64_bytes_is_rejected() {
    let ok = format!("LOCK {}=1", "n".repeat(MAX_NAME_LEN));
    assert_eq!(parse_ok(ok.as_bytes()).param_count(), 1);
    let long = format!("LOCK a=1;{}=1", "n".repeat(MAX_NAME_LEN + 1));
    assert_eq!(
        parse_err(long.as_bytes()),
        (ParseErrorKind::BadParameterName, 9)
    );
    // The scan for `=` is bounded: a long run without one stops early too.
    let runaway = format!("LOCK {}", "n".repeat(100_000));
    assert_eq!(
        parse_err(runaway.as_bytes()),
        (ParseErrorKind::BadParameterName, 5)
    );
}

#[test]
fn a_parameter_without_equals_is_rejected_where_the_equals_should_be() {
    assert_eq!(parse_err(b"LOCK abc"), (ParseErrorKind::MissingEquals, 8));
    assert_eq!(
        parse_err(b"LOCK abc;x=1"),
        (ParseErrorKind::MissingEquals, 8)
    );
    assert_eq!(
        parse_err(b"LOCK x=1;abc"),
        (ParseErrorKind::MissingEquals, 12)
    );
}

#[test]
fn an_unterminated_quote_is_rejected_at_the_opening_quote() {
    assert_eq!(
        parse_err(br#"LOCK a="abc"#),
        (ParseErrorKind::UnterminatedQuote, 7)
    );
    assert_eq!(
        parse_err(br#"LOCK a="abc\""#),
        (ParseErrorKind::UnterminatedQuote, 7)
    );
    assert_eq!(
        parse_err(br#"LOCK x=1;a="abc\"#),
        (ParseErrorKind::UnterminatedQuote, 11)
    );
    assert_eq!(
        parse_err(br#"LOCK a=""#),
        (ParseErrorKind::UnterminatedQuote, 7)
    );
}

#[test]
fn text_after_a_closing_quote_is_rejected_right_after_it() {
    assert_eq!(
        parse_err(br#"LOCK a="x"y"#),
        (ParseErrorKind::MissingSemicolon, 10)
    );
    assert_eq!(
        parse_err(br#"LOCK a="x" ;b=1"#),
        (ParseErrorKind::MissingSemicolon, 10)
    );
}

#[test]
fn more_than_64_distinct_parameters_are_rejected_at_the_first_extra_one() {
    let mut line = String::from("LOCK ");
    for i in 0..MAX_PARAMS {
        line.push_str(&format!("p{i}=1;"));
    }
    assert_eq!(parse_ok(line.as_bytes()).param_count(), MAX_PARAMS);
    // Repeating a name already there is no new parameter.
    let repeated = format!("{line}p0=2");
    assert_eq!(parse_ok(repeated.as_bytes()).get_str("p0"), Some("2"));
    let column = line.len();
    line.push_str("extra=1");
    assert_eq!(
        parse_err(line.as_bytes()),
        (ParseErrorKind::TooManyParameters, column)
    );
}

#[test]
fn errors_print_one_based_columns() {
    let e = parse(b"LOCK abc").expect_err("no equals");
    assert_eq!(e.to_string(), "parameter without '=' at column 9");
}

// ---- totality ----

#[test]
fn parse_never_panics_on_random_bytes_and_what_it_accepts_reads_back() {
    let mut rng = StdRng::seed_from_u64(0x5eed_0002);
    let mut accepted = 0;
    for case in 0..100_000 {
        let len = rng.random_range(0..48);
        let mut line: Vec<u8> = (0..len)
            .map(|_| match rng.random_range(0..4) {
                0 => pick(&mut rng, AWKWARD),
                1 => pick(&mut rng, COMMAND_REST),
                2 => pick(&mut rng, NAME_REST),
                _ => rng.random(),
            })
            .collect();
        if rng.random_bool(0.5) {
            // Most lines then start like a message, to reach the parameters.
            let head = gen_name(&mut rng, COMMAND_FIRST, COMMAND_REST);
            line.splice(0..0, format!("{head} ").into_bytes());
        }
        match parse(&line) {
            Ok(msg) => {
                accepted += 1;
                assert_eq!(
                    command_of(&line),
                    Some(msg.command.as_str()),
                    "case {case}: {:?}",
                    show(&line)
                );
                let mut expressible = msg.clone();
                if expressible.service.is_empty() {
                    expressible.server.clear();
                }
                assert_eq!(
                    parse(&line_of(&msg)),
                    Ok(expressible),
                    "case {case}: {:?}",
                    show(&line)
                );
            }
            Err(e) => assert!(e.column <= line.len(), "case {case}: {e:?} past the end"),
        }
    }
    assert!(
        accepted > 1_000,
        "the generator reaches valid lines ({accepted})"
    );
}

#[test]
fn command_of_names_the_command_of_lines_whose_parameters_are_broken() {
    assert_eq!(
        command_of(b"<a:b snaplock/LOCK object_name=\"x"),
        Some("LOCK")
    );
    assert_eq!(command_of(b"node1:snaplock/UNLOCK 1=2"), Some("UNLOCK"));
    assert_eq!(command_of(b"INFO x"), Some("INFO"));
    assert_eq!(command_of(b""), None);
    assert_eq!(command_of(b"<broken"), None);
}

#[test]
fn numbers_are_written_in_decimal() {
    let powers = (0..20).flat_map(|k| {
        let p = 10u64.pow(k);
        [p - 1, p, p + 1, p.wrapping_mul(10).wrapping_sub(1) / 9]
    });
    let some = [1_234_567_890, u64::MAX - 1, u64::MAX];
    for v in (0..=10_000).chain(powers).chain(some) {
        let mut m = Message::new("X");
        m.set_u64("n", v);
        assert_eq!(m.get_str("n"), Some(v.to_string().as_str()), "{v}");
    }
}

#[test]
fn signed_numbers_are_written_in_decimal() {
    for v in [0, 7, -1, -10, 123_456, -123_456, i64::MAX, i64::MIN] {
        let mut m = Message::new("X");
        m.set_i64("n", v);
        assert_eq!(m.get_str("n"), Some(v.to_string().as_str()), "{v}");
    }
}
