//! The plugin itself, run by `wasm-controller-manager test` on the objects in
//! testdata/: what it does must be what testdata/expected.yaml says, and it must end
//! in the same state whatever fault strikes (a crash right after a write, a stale
//! cache, a late watch event, an API error or timeout). Build {{name}}.wasm first
//! (`make test` does); the host binary is `$WCM`, else `wasm-controller-manager` on
//! PATH.

use std::process::Command;

#[test]
fn the_plugin_does_what_testdata_expects_whatever_fault_strikes() {
    let wcm = std::env::var("WCM").unwrap_or_else(|_| "wasm-controller-manager".into());
    let out = Command::new(&wcm)
        .args(["test", "{{name}}.wasm", "testdata/cluster.yaml"])
        .args(["--expect", "testdata/expected.yaml", "--faults", "all"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {wcm}: {e}"));
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
