//! Shared by the test harnesses of several packages (included with
//! `#[path]`): builds another package's binary of the workspace.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The binary `bin` of the workspace's package `package`, built now, into
/// the same target directory and profile as `beside` (a binary of the
/// package under test).
///
/// Cargo builds the binaries of the package under test only: `cargo test
/// -p <one package>` alone has no binary of another package, or an old
/// one. So the test builds it with the cargo that runs it (when it is up
/// to date, cargo only checks that).
pub fn build(beside: &Path, workspace: &Path, package: &str, bin: &str) -> PathBuf {
    let profile_dir = beside.parent().expect("the profile's directory");
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("the profile's name");
    let mut target_dir = profile_dir.parent().expect("the target directory");
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into()));
    cargo.arg("build").args(["-p", package, "--bin", bin]);
    // <target>/<triple>/<profile> when a target was named.
    if !target_dir.join("CACHEDIR.TAG").exists() {
        let triple = target_dir.file_name().expect("a target triple").to_owned();
        cargo.arg("--target").arg(triple);
        target_dir = target_dir.parent().expect("the target directory");
    }
    if profile != "debug" {
        cargo.args(["--profile", profile]);
    }
    let out = cargo
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .stdin(Stdio::null())
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cannot build {bin}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = profile_dir.join(bin);
    assert!(path.exists(), "{} was not built", path.display());
    path
}
