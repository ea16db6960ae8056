//! The `wasm-controller-manager` daemon: runs Kubernetes controllers that are Wasm components.

use clap::Parser;

/// Command-line interface of the daemon.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    Ok(())
}
