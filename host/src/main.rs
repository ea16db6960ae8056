//! The `wasm-controller-manager` daemon: runs Kubernetes controllers that are Wasm components.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use wcm_host::config::{Limits, ManagerConfig};
use wcm_host::manager::Manager;
use wcm_host::metrics::Metrics;
use wcm_host::queue::Backoff;

/// Command-line interface of the daemon.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Load the plugins of a directory and run them against the cluster
    /// (KUBECONFIG, ~/.kube/config, then in-cluster configuration).
    Run(RunArgs),
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Directory holding plugin components (`*.wasm`).
    #[arg(long, env = "WCM_PLUGINS_DIR")]
    plugins_dir: PathBuf,
    /// Deadline of one reconcile, host calls included (e.g. `30s`, `500ms`).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    reconcile_timeout: Duration,
    /// Maximum linear memory of one plugin instance, in MiB.
    #[arg(long, default_value_t = 64)]
    max_memory_mib: usize,
    /// Upper bound on the concurrent reconciles a plugin may declare.
    #[arg(long, default_value_t = 4)]
    max_concurrent_reconciles: u32,
    /// Allocate instances on demand instead of from wasmtime's pooling allocator.
    #[arg(long)]
    no_pooling: bool,
    /// Delay before the first retry of a failed key; doubles with each failure.
    #[arg(long, default_value = "5ms", value_parser = humantime::parse_duration)]
    retry_base_delay: Duration,
    /// Longest delay between retries of one key.
    #[arg(long, default_value = "1000s", value_parser = humantime::parse_duration)]
    retry_max_delay: Duration,
    /// Retries per second over all keys of a plugin (token bucket rate).
    #[arg(long, default_value_t = 10.0)]
    retry_rate: f64,
    /// Retries allowed in a burst before --retry-rate applies.
    #[arg(long, default_value_t = 100)]
    retry_burst: u32,
    /// How long in-flight reconciles may run after SIGTERM or Ctrl-C.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    shutdown_grace: Duration,
    /// Address of the `/metrics` and `/healthz` endpoint; `0` turns it off.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_bind_address: BindAddress,
}

/// `host:port`, or `0` for "do not serve" (as controller-runtime's flag).
#[derive(Debug, Clone, PartialEq)]
struct BindAddress(Option<SocketAddr>);

impl std::str::FromStr for BindAddress {
    type Err = String;

    fn from_str(s: &str) -> Result<BindAddress, String> {
        if s == "0" {
            return Ok(BindAddress(None));
        }
        s.parse()
            .map(|a| BindAddress(Some(a)))
            .map_err(|e| format!("{s:?} is not host:port or 0: {e}"))
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match Cli::parse().command {
        Command::Run(args) => run(args).await,
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let client = kube::Client::try_default()
        .await
        .context("no Kubernetes configuration: set KUBECONFIG or run in a cluster")?;
    let config = ManagerConfig {
        plugins_dir: args.plugins_dir,
        limits: Limits {
            reconcile_timeout: args.reconcile_timeout,
            max_memory_bytes: args.max_memory_mib << 20,
            max_concurrent_reconciles: args.max_concurrent_reconciles,
            pooling: !args.no_pooling,
        },
        retry: Backoff {
            base: args.retry_base_delay,
            max: args.retry_max_delay,
            retry_rate: args.retry_rate,
            retry_burst: args.retry_burst,
        },
        shutdown_grace: args.shutdown_grace,
        instance: instance_name(),
    };
    let metrics = Arc::new(Metrics::new());
    let _server = match args.metrics_bind_address.0 {
        Some(addr) => Some(wcm_host::server::serve(addr, metrics.clone()).await?),
        None => None,
    };
    let manager = Manager::start(config, client, metrics).await?;
    tracing::info!(
        running = manager.running().len(),
        failed = manager.failed().len(),
        "manager started"
    );
    shutdown_signal().await?;
    tracing::info!("shutting down: no new reconciles; waiting for in-flight ones");
    manager.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}

/// This replica's name in Events: the pod name in a cluster, else the hostname.
fn instance_name() -> String {
    std::env::var("POD_NAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "wasm-controller-manager".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(extra: &[&str]) -> Result<RunArgs, clap::Error> {
        let base = ["wasm-controller-manager", "run", "--plugins-dir", "p"];
        let cli = Cli::try_parse_from(base.iter().chain(extra))?;
        let Command::Run(args) = cli.command;
        Ok(args)
    }

    #[test]
    fn metrics_are_served_on_8080_unless_turned_off() {
        let default = run_args(&[]).expect("defaults parse");
        assert_eq!(default.metrics_bind_address.0, "0.0.0.0:8080".parse().ok());
        let off = run_args(&["--metrics-bind-address", "0"]).expect("0 parses");
        assert_eq!(off.metrics_bind_address, BindAddress(None));
        let err = run_args(&["--metrics-bind-address", "localhost"]).expect_err("no port");
        assert!(err.to_string().contains("is not host:port or 0"), "{err}");
    }
}
