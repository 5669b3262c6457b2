//! Gives the shared library (cdylib) an soname on Linux, so that installed copies are versioned:
//! `libtrie.so.MAJOR`, and before 1.0, when the ABI may change with the minor version, `libtrie.so.0.MINOR`.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" || os.ends_with("bsd") {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
        let minor = std::env::var("CARGO_PKG_VERSION_MINOR").unwrap_or_else(|_| "0".into());
        let soname = if major == "0" { format!("libtrie.so.0.{minor}") } else { format!("libtrie.so.{major}") };
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    }
}
