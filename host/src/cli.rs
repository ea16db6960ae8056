//! The daemon's command line: its subcommands and their flags (`run`'s in
//! [`crate::run_args`]).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use wcm_core::rights::PodSecurity;

use crate::run_args::RunArgs;

/// Command-line interface of the daemon.
#[derive(Debug, Parser)]
#[command(version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log lines as text for people, or one JSON object per line for log pipelines.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// How log lines are written (to standard error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `2026-12-03T10:00:00Z  INFO target: message field=value`.
    Text,
    /// `{"timestamp":...,"level":"INFO","fields":{"message":...},"target":...}`.
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load the plugins of a directory and run them against the cluster
    /// (KUBECONFIG, ~/.kube/config, then in-cluster configuration); files added,
    /// replaced or removed later are loaded, upgraded or stopped without a restart.
    Run(Box<RunArgs>),
    /// List the plugins a running host has loaded, with state, version and hash.
    Plugins(PluginsArgs),
    /// Print the RBAC the given plugins need (a ServiceAccount, roles and bindings per
    /// plugin, and the host's own rights), derived from their registrations, as YAML
    /// for `kubectl apply -f -`. Needs no cluster.
    Rbac(RbacArgs),
    /// Make a plugin component of a WASI preview 1 core module that implements the
    /// contract through the canonical ABI (a Go plugin built with `GOOS=wasip1
    /// GOARCH=wasm go build -buildmode=c-shared`). Needs no other tool.
    Componentize(ComponentizeArgs),
    /// Run a plugin offline against an in-memory cluster made of YAML fixtures:
    /// reconcile every key its watches produce until none is queued, and print its
    /// reconciles, writes and Events as YAML. With --expect, compare them with a file
    /// and fail on a difference. Needs no cluster.
    Test(TestArgs),
    /// Create a plugin project in a new directory: an example controller in Rust, Go,
    /// Python or JavaScript, a unit test, fixtures for `test`, a Makefile (`make
    /// build`, `make test`) and a README; the contract and SDK come from this binary.
    New(NewArgs),
    /// Copy the plugins of several plugin images, each installed into a directory of
    /// its own by its image's init container, into the plugins directory: run from the
    /// host's image, so no plugin image can write another's plugins. A file name two
    /// images both ship is refused and nothing is installed.
    GatherPlugins(GatherArgs),
    /// Push a plugin to an OCI registry in the CNCF Wasm layout (one `application/wasm`
    /// layer, a config naming its exports and imports); the last line printed is the
    /// pushed reference pinned to its digest (`REF@sha256:...`).
    Push(crate::registry_cli::PushArgs),
    /// Pull a plugin from an OCI registry (either Wasm layer media type), its digests
    /// checked, and write it to a file; prints the reference pinned to its digest.
    Pull(crate::registry_cli::PullArgs),
    /// Write the transcripts under a recording directory (`run --record-plugin`) to
    /// standard output as a tar archive: `kubectl exec POD -- wasm-controller-manager
    /// transcripts DIR > transcripts.tar` fetches them from a Pod whose image has no
    /// shell or tar.
    Transcripts(TranscriptsArgs),
    /// Print the `WasmPlugin` CustomResourceDefinition (what `deploy/crds/` holds), as
    /// YAML for `kubectl apply -f -`.
    Crd,
    /// What `run` starts to compile one plugin: the component on standard input, a
    /// compile-cache entry written to --output. Not for people.
    #[command(hide = true, name = "compile-worker")]
    CompileWorker(CompileWorkerArgs),
}

#[derive(Debug, Args)]
pub struct CompileWorkerArgs {
    /// The file to write the compiled entry into (the daemon created it).
    #[arg(long)]
    pub output: PathBuf,
    /// The memory bound the worker sets on itself.
    #[arg(long)]
    pub max_memory_bytes: u64,
    /// The CPU-time bound the worker sets on itself.
    #[arg(long)]
    pub cpu_seconds: u64,
    /// The directory of compiled functions to reuse and add to.
    #[arg(long)]
    pub functions: Option<PathBuf>,
}

impl CompileWorkerArgs {
    /// The task these flags describe.
    pub fn task(&self) -> wcm_core::runtime::worker::WorkerTask {
        wcm_core::runtime::worker::WorkerTask {
            output: self.output.clone(),
            max_memory_bytes: self.max_memory_bytes,
            cpu_seconds: self.cpu_seconds,
            functions: self.functions.clone(),
        }
    }
}

#[derive(Debug, Args)]
pub struct TranscriptsArgs {
    /// The recording directory: its transcripts (`*.yaml`), and those of one
    /// directory per plugin in it.
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct GatherArgs {
    /// A plugin image's directory (repeat for each image).
    #[arg(long = "from", required = true)]
    pub from: Vec<PathBuf>,
    /// The plugins directory the host watches.
    #[arg(long, default_value = "/plugins")]
    pub to: PathBuf,
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The plugin's name (a DNS label such as `config-check`); also the directory's.
    pub name: String,
    /// The language of the project.
    #[arg(long, value_enum)]
    pub lang: wcm_tooling::scaffold::Language,
    /// Where to create the project [default: ./NAME].
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// The plugin component.
    pub plugin: PathBuf,
    /// Fixture files (Kubernetes objects as YAML, several documents per file), or
    /// directories whose `.yaml`, `.yml` and `.json` files are all taken, in name order.
    pub fixtures: Vec<PathBuf>,
    /// The expected report: the run fails when its report differs, and passes even
    /// if reconciles failed, when the file expects them to.
    #[arg(long)]
    pub expect: Option<PathBuf>,
    /// Write the report to the --expect file instead of comparing with it.
    #[arg(long, requires = "expect")]
    pub update: bool,
    /// Reconciles after which a run that still has keys queued fails.
    #[arg(long, default_value_t = 1000)]
    pub max_reconciles: usize,
    /// Run in virtual time for this long (`10m`): `requeue-after`, retries after a
    /// failure and resyncs happen on a virtual clock, and each reconcile in the
    /// report says when it ran. Without it, time does not pass.
    #[arg(long = "for", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub run_for: Option<Duration>,
    /// A steps file: changes made one after another (objects applied, statuses
    /// written by another controller, objects deleted, time passing), the plugin
    /// converging in between; the report then has what it did in each step.
    #[arg(long, value_name = "FILE")]
    pub steps: Option<PathBuf>,
    /// Replay the transcripts `run --record-plugin NAME=DIR` wrote into DIR instead
    /// of running on fixtures: each recorded reconcile again, every host call
    /// answered from its transcript strictly in order; the first call that differs,
    /// or another outcome, fails the run.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["steps", "faults", "expect"])]
    pub replay: Option<PathBuf>,
    /// Explore faults: `crash`, `stale`, `coalesce`, `errors` (comma-separated) or
    /// `all`. The run is made again with each fault at every point it can strike;
    /// any run that ends in another cluster state than the run without faults fails
    /// the test, with the fault, the diff and the calls that show it.
    #[arg(long, value_name = "LIST", value_parser = wcm_tooling::testkit::FaultKind::parse_list)]
    pub faults: Option<std::collections::BTreeSet<wcm_tooling::testkit::FaultKind>>,
    /// A field the fault exploration does not compare, as a JSON pointer
    /// (`/status/lastRun`, `/metadata/annotations/example.com~1stamp`); repeat it.
    #[arg(long = "ignore", value_name = "POINTER", requires = "faults")]
    pub ignore: Vec<String>,
    /// Runs with a fault at most; past it, faults are taken evenly from the points.
    #[arg(long, default_value_t = 500, requires = "faults")]
    pub max_fault_runs: usize,
    /// Deadline of one reconcile, as `run`'s flag.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub reconcile_timeout: Duration,
    /// Maximum linear memory of one plugin instance, in MiB, as `run`'s flag.
    #[arg(long, default_value_t = 64)]
    pub max_memory_mib: usize,
    /// The plugin's settings (JSON or YAML mapping); by default the
    /// `<plugin>.settings.json` or `.settings.yaml` beside the plugin, if there is one.
    #[arg(long)]
    pub settings: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ComponentizeArgs {
    /// The core module.
    pub module: PathBuf,
    /// Where to write the component.
    #[arg(short, long)]
    pub output: PathBuf,
}

#[derive(Debug, Args)]
pub struct RbacArgs {
    /// Plugin files (`*.wasm`), directories whose plugin files are all taken, or
    /// YAML/JSON files of `WasmPlugin`s (`-` for standard input), each pulled from its
    /// registry (credentials from `--username`, else the Docker config file) and named
    /// by the resource.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// How to reach the `WasmPlugin`s' registry: `--username` with `--password-stdin`
    /// (for WasmPlugins of one registry), `--ca-file`, `--plain-http`.
    #[command(flatten)]
    pub access: crate::registry_cli::RegistryAccess,
    /// Namespace of the host and of the plugins' ServiceAccounts.
    #[arg(long, default_value = "wcm-system")]
    pub namespace: String,
    /// Prefix of each plugin's ServiceAccount, roles and bindings.
    #[arg(long, default_value = "wcm-plugin-")]
    pub service_account_prefix: String,
    /// The host's ServiceAccount (and the name of its roles and bindings).
    #[arg(long, default_value = "wasm-controller-manager")]
    pub host_service_account: String,
    /// The Pod Security level the namespace enforces (its label
    /// `pod-security.kubernetes.io/enforce`): the host's Pods meet `restricted`; a
    /// namespace that also holds other Pods may need `baseline` or `privileged`.
    #[arg(long, value_enum, default_value_t = PodSecurity::Restricted)]
    pub pod_security: PodSecurity,
    /// `kubectl`: RBAC objects for `kubectl apply -f -`; `chart-values`: the same
    /// rights as values of the Helm chart (`helm install -f`).
    #[arg(long, value_enum, default_value_t = RbacOutput::Kubectl)]
    pub output: RbacOutput,
}

/// What `rbac` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RbacOutput {
    /// The objects, as YAML for `kubectl apply -f -`.
    Kubectl,
    /// Values of the chart `charts/wasm-controller-manager`.
    ChartValues,
}

#[derive(Debug, Args)]
pub struct PluginsArgs {
    /// The host's `--metrics-bind-address` (`host:port`).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub address: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_args::{BindAddress, RunArgs};
    use wcm_daemon::leader::ElectionConfig;

    fn run_args(extra: &[&str]) -> Result<RunArgs, clap::Error> {
        let base = ["wasm-controller-manager", "run", "--plugins-dir", "p"];
        match Cli::try_parse_from(base.iter().chain(extra))?.command {
            Command::Run(args) => Ok(*args),
            _ => unreachable!("parsed a run command"),
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

    #[test]
    fn leader_election_is_on_in_a_cluster_and_off_outside_unless_told() {
        let default = run_args(&[]).expect("defaults parse").election;
        assert_eq!(default.config("me", false), Ok(None));
        let on = default.config("me", true).expect("valid").expect("on");
        assert_eq!(
            on,
            ElectionConfig::new("me"),
            "kube-controller-manager's defaults"
        );
        let forced = run_args(&["--leader-elect"]).expect("parses").election;
        assert!(forced.config("me", false).expect("valid").is_some());
        let off = run_args(&["--leader-elect=false"])
            .expect("parses")
            .election;
        assert_eq!(off.config("me", true), Ok(None));
    }

    #[test]
    fn the_lease_and_the_plugins_accounts_are_where_rbac_grants_them_by_default() {
        let run = run_args(&[]).expect("defaults parse");
        let rbac = match Cli::try_parse_from(["wasm-controller-manager", "rbac", "p.wasm"]) {
            Ok(Cli {
                command: Command::Rbac(rbac),
                ..
            }) => rbac,
            other => panic!("not an rbac command: {other:?}"),
        };
        assert_eq!(rbac.namespace, "wcm-system");
        assert_eq!(run.election.leader_elect_resource_namespace, rbac.namespace);
        assert_eq!(
            run.identity.plugin_service_account_namespace,
            rbac.namespace
        );
        assert_eq!(
            run.identity.plugin_service_account_prefix,
            rbac.service_account_prefix
        );
    }

    #[test]
    fn budgets_have_defaults_and_per_plugin_overrides() {
        let args = run_args(&[
            "--plugin-api-qps=5",
            "--plugin-override",
            "pod-counter:api-qps=200,api-burst=400",
        ])
        .expect("parses");
        let settings = args.budgets.settings().expect("valid");
        assert_eq!(settings.for_plugin("other").api.qps, 5.0);
        assert_eq!(settings.for_plugin("other").api.burst, 30);
        let pc = settings.for_plugin("pod-counter");
        assert_eq!((pc.api.qps, pc.api.burst), (200.0, 400));
        let bad = run_args(&["--plugin-override", "pod-counter:qps=1"]).expect("parses");
        let err = bad.budgets.settings().expect_err("unknown key").to_string();
        assert!(err.contains("unknown key \"qps\""), "{err}");
    }

    #[test]
    fn election_timings_that_could_overlap_two_leaders_are_refused() {
        let args = run_args(&[
            "--leader-elect",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=2500ms",
            "--leader-elect-retry-period=2100ms",
        ])
        .expect("parses");
        let err = args
            .election
            .config("me", false)
            .expect_err("retry too slow");
        assert!(
            err.to_string()
                .starts_with("--leader-elect-retry-period (2.1s) × 1.2"),
            "{err}"
        );
    }
}
