//! The `wasm-controller-manager` daemon: runs Kubernetes controllers that are Wasm components.

mod cli;
mod rbac_cli;
mod registry_cli;
mod run_args;
mod test_cli;

#[cfg(test)]
mod module_graph;

use anyhow::Context;
use clap::Parser;
use cli::{Cli, Command, LogFormat};
use kube::config::KubeConfigOptions;
use run_args::RunArgs;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};
use wcm_core::config::{
    Limits, ManagerConfig, WasmPluginSource, default_compile_cache, default_pulled_dir,
};
use wcm_core::queue::Backoff;
use wcm_core::rights::identity::ServiceAccounts;
use wcm_core::runtime::worker::{self, CompileBounds, WorkerProgram};
use wcm_core::traces::TraceExport;
use wcm_daemon::daemon::{self, DaemonConfig};

fn main() -> anyhow::Result<()> {
    let mut cli = Cli::parse();
    // A compile worker bounds itself and compiles before anything else starts: no
    // logging, no async runtime, no threads but the compiler's.
    if let Command::CompileWorker(args) = &cli.command {
        std::process::exit(worker::serve(&args.task()));
    }
    let traces = trace_export(&mut cli)?;
    init_logging(cli.log_format, traces.as_ref());
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run(args).await,
            Command::Plugins(args) => list_plugins(&args.address).await,
            Command::Rbac(args) => rbac_cli::print_rbac(args).await,
            Command::Componentize(args) => componentize(&args),
            Command::Test(args) => test_cli::run(args).await,
            Command::New(args) => new_project(&args),
            Command::GatherPlugins(args) => gather_plugins(&args),
            Command::Push(args) => registry_cli::push(args).await,
            Command::Pull(args) => registry_cli::pull(args).await,
            Command::Transcripts(args) => transcripts(&args),
            Command::CompileWorker(_) => unreachable!("served above"),
            Command::Crd => {
                print!("{}", wcm_daemon::wasmplugin::crd_yaml());
                Ok(())
            }
        }
    });
    // Do not wait for a plugin still compiling on a blocking thread: its result
    // would be dropped anyway, and a stopping host must not hang on it.
    runtime.shutdown_background();
    if let Some(traces) = traces {
        traces.shutdown();
    }
    result
}

/// The span exporter of `run --otlp-endpoint`; `run`'s identity is settled here, so
/// the spans name the replica as its Leases do.
fn trace_export(cli: &mut Cli) -> anyhow::Result<Option<TraceExport>> {
    let Command::Run(args) = &mut cli.command else {
        return Ok(None);
    };
    let Some(endpoint) = args.otlp_endpoint.clone() else {
        return Ok(None);
    };
    let id = (args.election.leader_elect_identity.clone()).unwrap_or_else(identity);
    args.election.leader_elect_identity = Some(id.clone());
    Ok(Some(TraceExport::start(&endpoint, &id)?))
}

/// Logs to standard error, filtered by `RUST_LOG` (default `info`), as text or JSON;
/// with `traces`, their layer beside it
/// (the log never shows the spans, the exporter takes nothing but them).
fn init_logging(format: LogFormat, traces: Option<&TraceExport>) {
    let no_spans = format!("{}=off", wcm_core::traces::TARGET);
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info".into())
        .add_directive(no_spans.parse().expect("a static directive"));
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match format {
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
        LogFormat::Json => logs.json().flatten_event(true).boxed(),
    };
    tracing_subscriber::registry()
        .with(logs.with_filter(filter))
        .with(traces.map(TraceExport::layer))
        .init();
}

/// `run`: the daemon, until a signal or a lost Lease (then non-zero, to restart).
async fn run(args: Box<RunArgs>) -> anyhow::Result<()> {
    let shutdown = shutdown_signal()?;
    let identity = (args.election.leader_elect_identity.clone()).unwrap_or_else(identity);
    let (kube, in_cluster) = kube_config(&identity).await?;
    let election = (args.election)
        .config(&identity, in_cluster)
        .context("invalid leader election settings")?;
    let config = DaemonConfig {
        election,
        http: args.metrics_bind_address.0,
        plugin_accounts: plugin_accounts(&args.identity)?,
        kube,
        manager: manager_config(*args, &identity)?,
        identity,
        pod: own_pod(),
    };
    Ok(daemon::run(config, shutdown).await?)
}

/// Client configuration whose requests carry this replica's identity in their
/// User-Agent (as client-go's `binary/version (...)`), so API audit logs tell replicas
/// apart. It comes from KUBECONFIG or ~/.kube/config, else from the in-cluster
/// service account; the second value says which.
async fn kube_config(identity: &str) -> anyhow::Result<(kube::Config, bool)> {
    let (mut config, in_cluster) =
        match kube::Config::from_kubeconfig(&KubeConfigOptions::default()).await {
            Ok(config) => (config, false),
            Err(kubeconfig) => match kube::Config::incluster() {
                Ok(config) => (config, true),
                Err(_) => {
                    return Err(kubeconfig).context(
                        "no Kubernetes configuration: set KUBECONFIG or run in a cluster",
                    );
                }
            },
        };
    let agent = format!(
        "wasm-controller-manager/{} ({identity})",
        env!("CARGO_PKG_VERSION")
    );
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(&agent).context("identity is not a valid header value")?,
    ));
    Ok((config, in_cluster))
}

/// The ServiceAccounts plugins act as, or none with `--impersonate-plugins=false`.
fn plugin_accounts(args: &run_args::IdentityArgs) -> anyhow::Result<Option<ServiceAccounts>> {
    if !args.impersonate_plugins {
        return Ok(None);
    }
    let accounts = ServiceAccounts::new(
        &args.plugin_service_account_namespace,
        &args.plugin_service_account_prefix,
    )
    .map_err(anyhow::Error::msg)
    .context("--plugin-service-account-namespace / --plugin-service-account-prefix")?;
    Ok(Some(accounts))
}

fn manager_config(args: RunArgs, identity: &str) -> anyhow::Result<ManagerConfig> {
    let mut config = ManagerConfig::new(args.plugins_dir.clone(), identity);
    for given in &args.record_plugin {
        let (plugin, dir) = (given.split_once('='))
            .with_context(|| format!("--record-plugin {given:?}: expected NAME=DIR"))?;
        let max = args.record_max_mib.saturating_mul(1 << 20);
        let recorder =
            wcm_core::tape::Recorder::new(plugin, dir.as_ref(), args.record_secrets, max)
                .with_context(|| format!("--record-plugin {given}"))?;
        config
            .recorders
            .insert(plugin.to_string(), std::sync::Arc::new(recorder));
    }
    config.budgets = args.budgets.settings()?;
    config.limits = Limits {
        reconcile_timeout: args.reconcile_timeout,
        max_memory_bytes: args.max_memory_mib << 20,
        max_concurrent_reconciles: args.max_concurrent_reconciles,
        pooling: !args.no_pooling,
        pool_keep_resident_bytes: args.pool_keep_resident_kib << 10,
        pool_pagemap_scan: Limits::default().pool_pagemap_scan,
        max_plugin_file_bytes: args.max_plugin_file_mib << 20,
    };
    config.retry = Backoff {
        base: args.retry_base_delay,
        max: args.retry_max_delay,
        retry_rate: args.retry_rate,
        retry_burst: args.retry_burst,
    };
    config.shutdown_grace = args.shutdown_grace;
    config.settle = args.file_settle;
    config.missing_kind_retry = args.missing_kind_retry;
    config.access_review_interval = args.access_review_interval;
    config.compile_cache_max_bytes = args.compile_cache_max_mib.saturating_mul(1 << 20);
    config.compile_cache = match args.no_compile_cache {
        true => None,
        false => Some(args.compile_cache_dir.unwrap_or_else(default_compile_cache)),
    };
    config.compile_worker = Some(WorkerProgram {
        program: this_program()?,
        bounds: CompileBounds {
            max_memory_bytes: args.compile_max_memory_mib.saturating_mul(1 << 20),
            timeout: args.compile_timeout,
        },
    });
    // The host's namespace by default: its Lease's (the Pod's, else wcm-system).
    let namespace = (args.wasm_plugin_namespace)
        .unwrap_or_else(|| args.election.leader_elect_resource_namespace.clone());
    let followed = (!args.no_wasm_plugins).then_some(namespace);
    config.wasm_plugins = followed.map(|namespace| WasmPluginSource {
        namespace,
        pulled_dir: args.pulled_plugins_dir.unwrap_or_else(default_pulled_dir),
        pulled_max_bytes: args.pulled_plugins_max_mib.saturating_mul(1 << 20),
        registry: args.registry.options(),
        verify_keys: args.verify_keys,
    });
    Ok(config)
}

/// The program compile workers run as: the running binary itself, even if its file
/// was replaced since it started (an upgrade in place), so the compiled code always
/// suits this daemon's wasmtime.
fn this_program() -> anyhow::Result<std::path::PathBuf> {
    let running = std::path::PathBuf::from("/proc/self/exe");
    if running.exists() {
        return Ok(running);
    }
    std::env::current_exe().context("cannot find this program to compile with")
}

/// Writes the component of a core module (`componentize`).
fn componentize(args: &cli::ComponentizeArgs) -> anyhow::Result<()> {
    let module = std::fs::read(&args.module)
        .with_context(|| format!("cannot read {}", args.module.display()))?;
    let component = wcm_tooling::componentize::componentize(&module)
        .with_context(|| format!("{}", args.module.display()))?;
    std::fs::write(&args.output, component)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    Ok(())
}

/// Gathers plugin images' plugins into the plugins directory (`gather-plugins`).
fn gather_plugins(args: &cli::GatherArgs) -> anyhow::Result<()> {
    let gathered = wcm_daemon::plugin_images::gather(&args.from, &args.to)?;
    for file in gathered {
        println!(
            "installed {} from {}: {} bytes",
            file.name,
            file.from.display(),
            file.bytes
        );
    }
    Ok(())
}

/// Writes the transcripts under `args.dir` to standard output as a tar archive.
fn transcripts(args: &cli::TranscriptsArgs) -> anyhow::Result<()> {
    let out = std::io::stdout().lock();
    let count = wcm_core::tape::write_archive(&args.dir, std::io::BufWriter::new(out))?;
    eprintln!("{count} transcript(s) from {}", args.dir.display());
    Ok(())
}

/// Creates a plugin project (`new`) and says what to do next.
fn new_project(args: &cli::NewArgs) -> anyhow::Result<()> {
    let dir = (args.dir.clone()).unwrap_or_else(|| std::path::PathBuf::from(&args.name));
    let files = wcm_tooling::scaffold::create(&args.name, args.lang, &dir)?;
    println!("created {} ({} files):", dir.display(), files.len());
    println!(
        "  cd {}
  make build   # writes {}.wasm",
        dir.display(),
        args.name
    );
    println!("  make test    # unit tests, then `wasm-controller-manager test` on testdata/");
    println!(
        "then grant it its RBAC (`wasm-controller-manager rbac {0}.wasm | kubectl apply -f -`) \
         and copy {0}.wasm into the host's plugins directory (see {1}/README.md).",
        args.name,
        dir.display()
    );
    Ok(())
}

/// Prints the plugin table of the host listening at `address`.
async fn list_plugins(address: &str) -> anyhow::Result<()> {
    let rows = wcm_daemon::status::fetch(address).await?;
    print!("{}", wcm_daemon::status::render_table(&rows));
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

/// The Pod this host runs in, from the downward API (`POD_NAMESPACE`, `POD_NAME`,
/// and `POD_UID` if given): Events about plugins from files are about it.
fn own_pod() -> Option<(String, String, Option<String>)> {
    let var = |name: &str| {
        let value = std::env::var(name).ok()?;
        let value = value.trim();
        (!value.is_empty()).then(|| value.to_string())
    };
    Some((var("POD_NAMESPACE")?, var("POD_NAME")?, var("POD_UID")))
}

/// This replica's identity unless `--leader-elect-identity` names it: in the Leases,
/// in Events' `reportingInstance` and in the User-Agent. The Pod's name in a cluster
/// (unique among live Pods; a container restarted in its Pod is the same replica,
/// its predecessor gone), else the hostname plus a random suffix, as client-go
/// does, so two processes on one machine never share an identity.
fn identity() -> String {
    if let Some(pod) = std::env::var("POD_NAME")
        .ok()
        .filter(|p| !p.trim().is_empty())
    {
        return pod.trim().to_string();
    }
    let base = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "wasm-controller-manager".into());
    let suffix: String = std::iter::repeat_with(fastrand::lowercase)
        .take(8)
        .collect();
    format!("{base}_{suffix}")
}
