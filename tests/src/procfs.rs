//! What the load tools read of a running agent from `/proc`.

/// The resident set size of process `pid`, in KiB (`VmRSS`).
pub fn rss_kib(pid: i32) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmRSS".to_owned())
}
