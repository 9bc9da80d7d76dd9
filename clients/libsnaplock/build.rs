//! Gives the shared library its soname: programs linked against
//! `libsnaplock.so` record `libsnaplock.so.1`, the name the runtime package
//! ships, so an ABI break can be a new soname beside the old one.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsnaplock.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
