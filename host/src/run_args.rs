//! The flags of `run`: where plugins come from, the daemon's endpoints, budgets,
//! leader election and the plugins' identities.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use wcm_core::budget::{
    ApiBudget, Budget, BudgetSettings, LogBudget, MetricBudget, OverrideError, ReuseBudget,
    WatchBudget,
};
use wcm_core::runtime::worker::CompileBounds;
use wcm_daemon::leader::{ConfigError, ElectionConfig, ElectionMode};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Directory holding plugin components (`*.wasm`).
    #[arg(long, env = "WCM_PLUGINS_DIR")]
    pub plugins_dir: PathBuf,
    /// Record every host call of the plugin NAME with its answer, one YAML
    /// transcript per reconcile in DIR (`test PLUGIN.wasm --replay DIR` replays them);
    /// repeat for more plugins. Secrets' data is redacted unless --record-secrets.
    #[arg(long = "record-plugin", value_name = "NAME=DIR")]
    pub record_plugin: Vec<String>,
    /// Keep Secrets' data in transcripts instead of redacting it.
    #[arg(long)]
    pub record_secrets: bool,
    /// MiB of transcripts written per recorded plugin; past it its recording stops.
    #[arg(long, default_value_t = 256)]
    pub record_max_mib: u64,
    /// Deadline of one reconcile, host calls included (e.g. `30s`, `500ms`).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub reconcile_timeout: Duration,
    /// Maximum linear memory of one plugin instance, in MiB.
    #[arg(long, default_value_t = 64)]
    pub max_memory_mib: usize,
    /// Upper bound on the concurrent reconciles a plugin may declare.
    #[arg(long, default_value_t = 4)]
    pub max_concurrent_reconciles: u32,
    /// Allocate instances on demand instead of from wasmtime's pooling allocator.
    #[arg(long)]
    pub no_pooling: bool,
    /// KiB of each pooled instance's memory and table kept resident (the pages it
    /// touched, found with Linux's PAGEMAP_SCAN, zeroed in place) when a reconcile
    /// ends, sparing the next instance in the slot its page faults; 0 hands every
    /// page back to the kernel.
    #[arg(long, default_value_t = wcm_core::config::DEFAULT_KEEP_RESIDENT >> 10)]
    pub pool_keep_resident_kib: usize,
    /// Largest plugin file loaded, in MiB: a file is read whole and compiled.
    #[arg(long, default_value_t = 128)]
    pub max_plugin_file_mib: u64,
    /// Delay before the first retry of a failed key; doubles with each failure.
    #[arg(long, default_value = "5ms", value_parser = humantime::parse_duration)]
    pub retry_base_delay: Duration,
    /// Longest delay between retries of one key.
    #[arg(long, default_value = "1000s", value_parser = humantime::parse_duration)]
    pub retry_max_delay: Duration,
    /// Retries per second over all keys of a plugin (token bucket rate).
    #[arg(long, default_value_t = 10.0)]
    pub retry_rate: f64,
    /// Retries allowed in a burst before --retry-rate applies.
    #[arg(long, default_value_t = 100)]
    pub retry_burst: u32,
    /// How long in-flight reconciles may run after SIGTERM or Ctrl-C.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub shutdown_grace: Duration,
    /// Address of the `/metrics` and `/healthz` endpoint; `0` turns it off.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_bind_address: BindAddress,
    /// Base URL of an OpenTelemetry collector's OTLP/HTTP receiver
    /// (`http://collector:4318`): a span per reconcile and per host call goes to its
    /// `/v1/traces`, and API requests carry their trace context. Off when unset.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Where compiled plugins are cached by content hash
    /// [default: $XDG_CACHE_HOME/wasm-controller-manager/compiled].
    #[arg(long)]
    pub compile_cache_dir: Option<PathBuf>,
    /// Most MiB the compile cache keeps (three quarters for compiled plugins, a
    /// quarter for the compile worker's compiled functions); past it the least
    /// recently used files are removed.
    #[arg(long, default_value_t = wcm_core::config::DEFAULT_COMPILE_CACHE_MAX_BYTES >> 20)]
    pub compile_cache_max_mib: u64,
    /// Compile every plugin on every load; keep nothing on disk.
    #[arg(long, conflicts_with = "compile_cache_dir")]
    pub no_compile_cache: bool,
    /// Most MiB of memory one compilation may use: each plugin compiles in a child
    /// process of its own (this binary, bounded), never in the daemon; past the bound
    /// that plugin is refused, naming it.
    #[arg(long, default_value_t = CompileBounds::default().max_memory_bytes >> 20)]
    pub compile_max_memory_mib: u64,
    /// Longest one compilation may take; past it the child is killed and the plugin
    /// refused.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub compile_timeout: Duration,
    /// Run the `WasmPlugin` resources of this namespace (the host's own; their pull
    /// Secrets live there too) beside the plugins directory: each pulled from its OCI
    /// registry, its status kept [default: the host Pod's namespace, else wcm-system,
    /// as the Lease's].
    #[arg(long, env = "WCM_WASM_PLUGIN_NAMESPACE")]
    pub wasm_plugin_namespace: Option<String>,
    /// Follow no `WasmPlugin`: the plugins directory only.
    #[arg(long, conflicts_with = "wasm_plugin_namespace")]
    pub no_wasm_plugins: bool,
    /// Where plugins pulled from registries are kept by digest
    /// [default: $XDG_CACHE_HOME/wasm-controller-manager/pulled].
    #[arg(long)]
    pub pulled_plugins_dir: Option<PathBuf>,
    /// Most MiB of pulled plugins kept on disk; past it the least recently used are
    /// removed (and pulled again when next needed).
    #[arg(long, default_value_t = wcm_core::registry::DEFAULT_PULLED_MAX_BYTES >> 20)]
    pub pulled_plugins_max_mib: u64,
    #[command(flatten)]
    pub registry: crate::registry_cli::RegistryArgs,
    /// A PEM file of an ECDSA P-256 public key every `WasmPlugin` must be signed by
    /// (cosign's format, over its manifest digest), checked before anything is
    /// compiled (repeatable: each key is required).
    #[arg(long = "verify-key")]
    pub verify_keys: Vec<PathBuf>,
    /// How long a plugin file must stay unchanged before it is (re)loaded.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    pub file_settle: Duration,
    /// How often a plugin waiting for a kind the API server does not serve yet (its
    /// CRD not installed) tries again.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub missing_kind_retry: Duration,
    /// How often a running plugin's rights are reviewed again (SubjectAccessReviews
    /// of its ServiceAccount), and the longest a plugin refused for a missing rule
    /// waits before it tries again (it starts at --missing-kind-retry and doubles).
    #[arg(long, default_value = "1m", value_parser = humantime::parse_duration)]
    pub access_review_interval: Duration,
    #[command(flatten)]
    pub election: ElectionArgs,
    #[command(flatten)]
    pub budgets: BudgetArgs,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

/// Every plugin's budgets, and overrides for single plugins.
#[derive(Debug, Args)]
pub struct BudgetArgs {
    /// API requests per second a plugin may make in the long run (writes, deletions,
    /// Events); more wait, within the reconcile's deadline.
    #[arg(long, default_value_t = Budget::default().api.qps)]
    pub plugin_api_qps: f64,
    /// API requests a plugin may make in a burst before --plugin-api-qps applies.
    #[arg(long, default_value_t = Budget::default().api.burst)]
    pub plugin_api_burst: u32,
    /// Largest answer of one `get` or `list` a plugin may ask for, in MiB of JSON.
    #[arg(long, default_value_t = Budget::default().api.max_result_bytes >> 20)]
    pub max_result_mib: usize,
    /// Most watches one plugin may register.
    #[arg(long, default_value_t = Budget::default().watches.max_watches)]
    pub max_watches_per_plugin: usize,
    /// Log lines per second a plugin may write in the long run; more are dropped
    /// and counted.
    #[arg(long, default_value_t = Budget::default().logs.lines_per_second)]
    pub plugin_log_rate: f64,
    /// Log lines a plugin may write in a burst.
    #[arg(long, default_value_t = Budget::default().logs.burst)]
    pub plugin_log_burst: u32,
    /// Most series a plugin's own metrics may have together; an update that would
    /// make one more is refused and counted.
    #[arg(long, default_value_t = Budget::default().metrics.max_series)]
    pub max_metric_series_per_plugin: usize,
    /// Reconciles one plugin instance serves before it is replaced; 0 gives every
    /// reconcile a fresh instance. Reuse is faster but lets one reconcile's leftovers
    /// reach the next of the same plugin (docs/isolation.md); opt single plugins in
    /// with `--plugin-override NAME:reuse-instance-calls=N`.
    #[arg(long, default_value_t = Budget::default().reuse.calls)]
    pub reuse_instance_calls: u32,
    /// Growth of a reused instance's memory since its first reconcile that retires
    /// it, in MiB.
    #[arg(long, default_value_t = Budget::default().reuse.growth_bytes >> 20)]
    pub reuse_instance_growth_mib: usize,
    /// MiB of the host's informer caches one plugin's watches may hold (an informer
    /// shared with other plugins counted in part); past it the plugin is stopped.
    #[arg(long, default_value_t = Budget::default().watches.max_cache_bytes >> 20)]
    pub max_cache_mib_per_plugin: usize,
    /// Other budgets for one plugin: `NAME:KEY=VALUE[,KEY=VALUE...]` with keys
    /// api-qps, api-burst, max-result-mib, max-watches, max-metric-series, log-rate,
    /// log-burst, reuse-instance-calls, reuse-instance-growth-mib, max-cache-mib.
    /// Repeat for more plugins.
    #[arg(long, value_name = "NAME:KEY=VALUE,...")]
    pub plugin_override: Vec<String>,
}

impl BudgetArgs {
    /// The defaults, then each override on top of them.
    pub fn settings(&self) -> Result<BudgetSettings, OverrideError> {
        let mut settings = BudgetSettings {
            defaults: Budget {
                api: ApiBudget {
                    qps: self.plugin_api_qps,
                    burst: self.plugin_api_burst,
                    max_result_bytes: self.max_result_mib.saturating_mul(1 << 20),
                },
                watches: WatchBudget {
                    max_watches: self.max_watches_per_plugin,
                    max_cache_bytes: self.max_cache_mib_per_plugin.saturating_mul(1 << 20),
                },
                logs: LogBudget {
                    lines_per_second: self.plugin_log_rate,
                    burst: self.plugin_log_burst,
                },
                metrics: MetricBudget {
                    max_series: self.max_metric_series_per_plugin,
                },
                reuse: ReuseBudget {
                    calls: self.reuse_instance_calls,
                    growth_bytes: self.reuse_instance_growth_mib.saturating_mul(1 << 20),
                },
            },
            overrides: Default::default(),
        };
        for given in &self.plugin_override {
            settings.add_override(given)?;
        }
        Ok(settings)
    }
}

/// Leader-election flags, named and defaulted as kube-controller-manager's.
#[derive(Debug, Args)]
pub struct ElectionArgs {
    /// Campaign for a Lease and reconcile only while holding it, so several replicas
    /// can run [default: on in a cluster (in-cluster configuration), off otherwise].
    /// `--leader-elect=false` turns it off.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub leader_elect: Option<bool>,
    /// How long standbys wait after the last renewal they saw before taking over.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps retrying a renewal before it stops acting.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// Time between attempts to acquire or renew.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub leader_elect_retry_period: Duration,
    /// Name of the Lease.
    #[arg(long, default_value = "wasm-controller-manager")]
    pub leader_elect_resource_name: String,
    /// Namespace of the Lease [default: the host Pod's namespace, else wcm-system:
    /// where `wasm-controller-manager rbac` grants the host its Lease].
    #[arg(long, env = "POD_NAMESPACE", default_value = "wcm-system")]
    pub leader_elect_resource_namespace: String,
    /// `single`: one Lease, whose holder runs every plugin. `per-plugin`: a Lease per
    /// plugin (`<resource-name>-<plugin>`), spread over the live replicas, so every
    /// replica works (docs/leader-election.md).
    #[arg(long, value_enum, default_value = "single")]
    pub leader_elect_mode: ModeArg,
    /// This replica's identity in the Leases it holds [default: the Pod's name in a
    /// cluster, else the hostname with `_` and eight random letters].
    #[arg(long)]
    pub leader_elect_identity: Option<String>,
}

/// `--leader-elect-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    /// One Lease for every plugin.
    Single,
    /// A Lease per plugin.
    PerPlugin,
}

/// Whose identity plugins' API calls carry.
#[derive(Debug, Args)]
pub struct IdentityArgs {
    /// Make every API call a plugin causes (writes, Events) as the plugin's own
    /// ServiceAccount, by impersonation, and serve it from the shared caches only
    /// what that account may list and watch (SubjectAccessReviews), so RBAC decides
    /// what it may do and the audit log names it (`wasm-controller-manager rbac`
    /// writes the RBAC). The host's identity must be allowed to impersonate those
    /// accounts and create SubjectAccessReviews. `=false` lets plugins share the
    /// host's rights, with a warning.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "true",
        default_missing_value = "true")]
    pub impersonate_plugins: bool,
    /// Namespace of the plugins' ServiceAccounts [default: the host Pod's namespace,
    /// else wcm-system].
    #[arg(long, env = "POD_NAMESPACE", default_value = "wcm-system")]
    pub plugin_service_account_namespace: String,
    /// Prefix of a plugin's ServiceAccount name, before the plugin's name.
    #[arg(long, default_value = "wcm-plugin-")]
    pub plugin_service_account_prefix: String,
}

impl ElectionArgs {
    /// The election settings for `identity`, or `None` when election is off
    /// (`in_cluster` decides when the flag is not given); invalid settings are refused.
    pub fn config(
        &self,
        identity: &str,
        in_cluster: bool,
    ) -> Result<Option<ElectionConfig>, ConfigError> {
        if !self.leader_elect.unwrap_or(in_cluster) {
            return Ok(None);
        }
        let config = ElectionConfig {
            mode: match self.leader_elect_mode {
                ModeArg::Single => ElectionMode::Single,
                ModeArg::PerPlugin => ElectionMode::PerPlugin,
            },
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
            lease_name: self.leader_elect_resource_name.clone(),
            lease_namespace: self.leader_elect_resource_namespace.clone(),
            identity: identity.to_string(),
        };
        config.validate()?;
        Ok(Some(config))
    }
}

/// `host:port`, or `0` for "do not serve" (as controller-runtime's flag).
#[derive(Debug, Clone, PartialEq)]
pub struct BindAddress(pub Option<SocketAddr>);

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
