//! The panic boundary: no Rust panic may unwind into C, where it would be
//! undefined behaviour (or, since Rust 1.81, abort the whole program).

use std::ffi::{c_char, c_int};

use crate::lock::snaplock_lock_options;
use crate::result::snaplock_result;

/// What an exported function returns when its body panicked.
pub(crate) trait OnPanic {
    fn on_panic() -> Self;
}

impl OnPanic for snaplock_result {
    fn on_panic() -> Self {
        snaplock_result::Panic
    }
}

/// `snaplock_conn_last_error` and `snaplock_default_socket_path`: nothing
/// was written.
impl OnPanic for usize {
    fn on_panic() -> Self {
        0
    }
}

/// `snaplock_fd`: -1, never 0, which is a valid descriptor (stdin).
impl OnPanic for c_int {
    fn on_panic() -> Self {
        -1
    }
}

/// The static strings (`snaplock_version`, `snaplock_result_str`) are
/// documented never to be NULL.
impl OnPanic for *const c_char {
    fn on_panic() -> Self {
        c"".as_ptr()
    }
}

impl OnPanic for () {
    fn on_panic() -> Self {}
}

impl OnPanic for snaplock_lock_options {
    fn on_panic() -> Self {
        snaplock_lock_options::DEFAULT
    }
}

/// Runs the body of an exported function, turning a panic into the
/// function's [`OnPanic`] value. `return` inside the body returns from the
/// body, as in the function itself.
///
/// `AssertUnwindSafe`: a connection whose call panicked may be left
/// half-changed; the documentation tells the caller to free it, which is
/// safe in any state.
macro_rules! ffi_boundary {
    ( $($body:tt)* ) => {
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| { $($body)* })) {
            Ok(ret) => ret,
            Err(_) => return $crate::panic::OnPanic::on_panic(),
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn panics_inside(really: bool) -> snaplock_result {
        ffi_boundary! {
            if really {
                panic!("a bug inside the library");
            }
            snaplock_result::Ok
        }
    }

    extern "C" fn fd_at(index: usize) -> c_int {
        ffi_boundary! {
            let fds: [c_int; 3] = [7, 8, 9];
            fds[index]
        }
    }

    #[test]
    fn a_panic_inside_the_boundary_becomes_the_panic_result() {
        assert_eq!(panics_inside(false), snaplock_result::Ok);
        assert_eq!(panics_inside(true), snaplock_result::Panic);
    }

    #[test]
    fn a_panic_where_no_result_is_returned_gives_a_harmless_value() {
        assert_eq!(fd_at(2), 9);
        assert_eq!(fd_at(3), -1, "an index out of bounds");
        let s = <*const c_char as OnPanic>::on_panic();
        assert!(!s.is_null());
    }
}
