//! Gives the shared library (cdylib) an soname on Linux, so that installed copies are versioned:
//! `libtrie.so.MAJOR` (for 0.x releases: `libtrie.so.0`).
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" || os.ends_with("bsd") {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtrie.so.{major}");
    }
}
