//! The wire format: snapcommunicator's one-message-per-line grammar.
//!
//! - [`LineFramer`] cuts a byte stream into lines (bounded, `\r\n` tolerant).
//! - [`parse()`] turns one line into a [`Message`]; it is total and bounded.
//! - [`encode()`] writes a [`Message`] back; `parse(encode(m)) == m`.
//! - `Line` (inside the crate) writes the same line from parameters,
//!   without a [`Message`].
//! - `scan` (inside the crate) reads a plain line in place, as [`parse()`]
//!   would; `Fields` reads the one or the other.

mod encode;
mod framer;
mod line;
mod message;
mod parse;
mod scan;

pub use encode::{encode, encode_to_vec};
pub use framer::{Frame, LineFramer};
pub(crate) use line::{Line, Params};
pub use message::{Command, MAX_NAME_LEN, MAX_PARAMS, Message, is_valid_command, is_valid_name};
pub(crate) use message::{decimal, decimal_bytes, put_u64};
pub use parse::{ParseError, ParseErrorKind, command_of, parse, parse_line};
pub use scan::Fields;
pub(crate) use scan::scan;

#[cfg(test)]
mod tests;
