//! The cores' own log lines in a verbose replay (`SIM_LOG=1`), each with
//! the simulated time and the computer that wrote it.

use std::cell::Cell;

thread_local! {
    static AT: Cell<(usize, u64)> = const { Cell::new((0, 0)) };
    static ON: Cell<bool> = const { Cell::new(false) };
}

/// Computer `node` is about to run at simulated time `now`.
pub fn at(node: usize, now: u64) {
    AT.with(|a| a.set((node, now)));
}

struct Logger;

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Debug && m.target().starts_with("snaplock")
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) && ON.with(Cell::get) {
            let (node, now) = AT.with(Cell::get);
            let now = super::checker::secs(now);
            println!("{now:>14} n{node} log {}: {}", r.level(), r.args());
        }
    }

    fn flush(&self) {}
}

/// Prints the cores' log lines of the runs on this thread from now on.
pub fn install() {
    ON.with(|on| on.set(true));
    if log::set_logger(&Logger).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
}
