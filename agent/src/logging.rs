//! Logging: `env_logger` to stderr (journald adds its own metadata).
//!
//! The logger lets every record through and [`log::set_max_level`] does the
//! filtering, so `SIGHUP` can raise or lower the level at run time. When
//! `RUST_LOG` is set it decides instead, as users of Rust programs expect.

use log::LevelFilter;

/// Whether `RUST_LOG` is set (and so decides the log level).
pub fn rust_log_is_set() -> bool {
    std::env::var_os("RUST_LOG").is_some_and(|v| !v.is_empty())
}

/// Installs the logger at `level` (or `RUST_LOG`'s filters when set).
/// Call once, from `main`.
pub fn init(level: LevelFilter) {
    let mut builder = env_logger::Builder::new();
    builder.target(env_logger::Target::Stderr);
    if rust_log_is_set() {
        builder.parse_default_env();
        builder.init();
    } else {
        builder.filter_level(LevelFilter::Trace);
        builder.init();
        log::set_max_level(level);
    }
}
