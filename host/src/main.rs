//! The `wasm-controller-manager` daemon: runs Kubernetes controllers that are Wasm components.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use wcm_host::config::{Limits, ManagerConfig, default_compile_cache};
use wcm_host::manager::Manager;
use wcm_host::metrics::Metrics;
use wcm_host::queue::Backoff;
use wcm_host::status::{PluginTable, State};

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
    /// (KUBECONFIG, ~/.kube/config, then in-cluster configuration); files added,
    /// replaced or removed later are loaded, upgraded or stopped without a restart.
    Run(RunArgs),
    /// List the plugins a running host has loaded, with state, version and hash.
    Plugins(PluginsArgs),
}

#[derive(Debug, Args)]
struct PluginsArgs {
    /// The host's `--metrics-bind-address` (`host:port`).
    #[arg(long, default_value = "127.0.0.1:8080")]
    address: String,
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
    /// Where compiled plugins are cached by content hash
    /// [default: $XDG_CACHE_HOME/wasm-controller-manager/compiled].
    #[arg(long)]
    compile_cache_dir: Option<PathBuf>,
    /// Compile every plugin on every load; keep nothing on disk.
    #[arg(long, conflicts_with = "compile_cache_dir")]
    no_compile_cache: bool,
    /// How long a plugin file must stay unchanged before it is (re)loaded.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    file_settle: Duration,
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
        Command::Plugins(args) => list_plugins(&args.address).await,
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let shutdown = shutdown_signal()?;
    let client = kube::Client::try_default()
        .await
        .context("no Kubernetes configuration: set KUBECONFIG or run in a cluster")?;
    let metrics = Arc::new(Metrics::new());
    let table = PluginTable::default();
    let _server = match args.metrics_bind_address.0 {
        Some(addr) => Some(wcm_host::server::serve(addr, metrics.clone(), table.clone()).await?),
        None => None,
    };
    let manager = Manager::start(config(args), client, metrics, table).await?;
    tracing::info!(
        running = manager.running().len(),
        "manager started; watching the plugins directory"
    );
    manager.run(shutdown).await;
    tracing::info!("stopped");
    Ok(())
}

fn config(args: RunArgs) -> ManagerConfig {
    let mut config = ManagerConfig::new(args.plugins_dir, &instance_name());
    config.limits = Limits {
        reconcile_timeout: args.reconcile_timeout,
        max_memory_bytes: args.max_memory_mib << 20,
        max_concurrent_reconciles: args.max_concurrent_reconciles,
        pooling: !args.no_pooling,
    };
    config.retry = Backoff {
        base: args.retry_base_delay,
        max: args.retry_max_delay,
        retry_rate: args.retry_rate,
        retry_burst: args.retry_burst,
    };
    config.shutdown_grace = args.shutdown_grace;
    config.settle = args.file_settle;
    config.compile_cache = match args.no_compile_cache {
        true => None,
        false => Some(args.compile_cache_dir.unwrap_or_else(default_compile_cache)),
    };
    config
}

/// Prints the plugin table of the host listening at `address`.
async fn list_plugins(address: &str) -> anyhow::Result<()> {
    let rows = wcm_host::status::fetch(address).await?;
    println!(
        "{:<28} {:<8} {:<24} {:<12} {:<14} {:<21} REASON",
        "FILE", "STATE", "PLUGIN", "VERSION", "HASH", "LOADED"
    );
    for row in rows {
        let state = match row.state {
            State::Running => "running",
            State::Failed => "failed",
        };
        let hash = row.hash.as_deref().map(|h| &h[..h.len().min(12)]);
        println!(
            "{:<28} {:<8} {:<24} {:<12} {:<14} {:<21} {}",
            row.file,
            state,
            row.plugin.as_deref().unwrap_or("-"),
            row.version.as_deref().unwrap_or("-"),
            hash.unwrap_or("-"),
            row.loaded_at.as_deref().unwrap_or("-"),
            row.reason.as_deref().unwrap_or("")
        );
    }
    Ok(())
}

/// Installs the SIGTERM and SIGINT handlers now, before anything slow runs, and
/// returns a future that resolves on either. Installed lazily, a SIGTERM arriving
/// while the first plugins load would kill the process instead of stopping it cleanly.
fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
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
        match Cli::try_parse_from(base.iter().chain(extra))?.command {
            Command::Run(args) => Ok(args),
            Command::Plugins(_) => unreachable!("parsed a run command"),
        }
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
