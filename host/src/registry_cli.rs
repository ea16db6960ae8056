//! `push` and `pull`: a plugin to and from an OCI registry, in the CNCF Wasm layout,
//! with credentials as `oras` and `crane` take them.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use wcm_core::registry::{
    DockerConfig, Reference, Registry, RegistryAuth, RegistryLimits, RegistryOptions,
};

/// How the daemon reaches the registries of `WasmPlugin`s, which it may reach, and
/// how much it reads from them.
#[derive(Debug, Args)]
pub struct RegistryArgs {
    /// A PEM file of a CA that registries may use besides the system's (repeatable).
    #[arg(long = "registry-ca-file")]
    pub ca_files: Vec<PathBuf>,
    /// A registry (`host[:port]`) spoken to over plain http instead of https, such as
    /// a local `registry:2` (repeatable); redirects and token realms over http are
    /// followed only to these.
    #[arg(long = "plain-http-registry")]
    pub plain_http: Vec<String>,
    /// The only registries (`host[:port]`) `WasmPlugin`s may name (repeatable or
    /// comma-separated); any other is refused in the `WasmPlugin`'s status. Unset:
    /// every registry.
    #[arg(long = "allowed-registries", value_delimiter = ',')]
    pub allowed: Vec<String>,
    /// How long one pull (resolving its tag, signatures, manifest and component) may
    /// take before it fails.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub registry_pull_timeout: Duration,
    /// How many pulls run at once; the others wait their turn (within their timeout).
    #[arg(long, default_value_t = wcm_core::registry::DEFAULT_CONCURRENT_PULLS)]
    pub registry_max_concurrent_pulls: usize,
    /// How many MiB of components the pulls in flight may hold together.
    #[arg(long, default_value_t = wcm_core::registry::DEFAULT_PULL_MEMORY_BYTES >> 20)]
    pub registry_max_pull_mib: u64,
}

impl RegistryArgs {
    /// The registry client's options these flags give.
    pub fn options(&self) -> RegistryOptions {
        let allowed = (!self.allowed.is_empty())
            .then(|| self.allowed.iter().map(|r| r.trim().to_string()).collect());
        RegistryOptions {
            ca_files: self.ca_files.clone(),
            plain_http: self.plain_http.iter().cloned().collect(),
            allowed,
            limits: RegistryLimits {
                pull_timeout: self.registry_pull_timeout,
                max_concurrent_pulls: self.registry_max_concurrent_pulls,
                max_pull_memory_bytes: self.registry_max_pull_mib.saturating_mul(1 << 20),
                ..RegistryLimits::default()
            },
        }
    }
}

/// How to reach a registry: credentials and CAs.
#[derive(Debug, Args)]
pub struct RegistryAccess {
    /// The user to log in as; the password is read from standard input
    /// (`--password-stdin`). Without it, the entry for the registry in the Docker
    /// config file (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`), if
    /// any, else anonymous.
    #[arg(long, requires = "password_stdin")]
    pub username: Option<String>,
    /// Read the password of `--username` from standard input (one line).
    #[arg(long, requires = "username")]
    pub password_stdin: bool,
    /// A PEM file of a CA to trust besides the system's, for a registry with its own
    /// (repeatable).
    #[arg(long = "ca-file")]
    pub ca_files: Vec<PathBuf>,
    /// Speak plain http to the registry, not https (a local `registry:2`).
    #[arg(long)]
    pub plain_http: bool,
}

impl RegistryAccess {
    /// A client for `reference`'s registry as these flags say, with the host's bounds
    /// and a pull taking at most `timeout`.
    fn registry(&self, reference: &Reference, timeout: Duration) -> anyhow::Result<Registry> {
        self.registry_of(reference.resolve_registry(), timeout)
    }

    /// A client for the registry `host` as these flags say (`--plain-http` for it
    /// only), with the host's bounds and a pull taking at most `timeout`.
    pub fn registry_of(&self, host: &str, timeout: Duration) -> anyhow::Result<Registry> {
        let mut options = RegistryOptions::with_ca_files(&self.ca_files);
        if self.plain_http {
            options.plain_http.insert(host.to_string());
        }
        options.limits.pull_timeout = timeout;
        Ok(Registry::with(options)?)
    }

    /// The credentials for `registry`: `--username` and the password read from
    /// standard input, else the Docker config file's entry, else anonymous.
    pub fn auth(&self, registry: &str) -> anyhow::Result<RegistryAuth> {
        match &self.username {
            Some(user) => Ok(RegistryAuth::Basic(user.clone(), read_password()?)),
            None => Ok(DockerConfig::of_user()?.auth_for_user(registry, "the Docker config file")?),
        }
    }
}

/// The password on standard input, without its line ending.
fn read_password() -> anyhow::Result<String> {
    let mut password = String::new();
    std::io::stdin()
        .read_to_string(&mut password)
        .context("cannot read the password from standard input")?;
    Ok(password.trim_end_matches(['\r', '\n']).to_string())
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The plugin component.
    pub plugin: PathBuf,
    /// Where to push it: `registry[:port]/repository:tag`.
    pub reference: String,
    #[command(flatten)]
    pub access: RegistryAccess,
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// What to pull: `registry[:port]/repository:tag` or `...@sha256:<digest>`.
    pub reference: String,
    /// Where to write the component.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Refuse a component larger than this (MiB).
    #[arg(long, default_value_t = 128)]
    pub max_mib: u64,
    /// How long the pull may take, from its first request to its last byte.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub access: RegistryAccess,
}

/// How long a push may take: a plugin of the largest size over a slow link.
const PUSH_TIMEOUT: Duration = Duration::from_secs(600);

/// `push`: prints the pushed reference pinned to its digest, as the last line.
pub async fn push(args: PushArgs) -> anyhow::Result<()> {
    let reference = wcm_core::registry::reference(&args.reference)?;
    anyhow::ensure!(
        reference.digest().is_none(),
        "{}: push to a tag; the digest is the registry's answer",
        args.reference
    );
    let bytes = std::fs::read(&args.plugin)
        .with_context(|| format!("cannot read {}", args.plugin.display()))?;
    let auth = args.access.auth(reference.resolve_registry())?;
    let registry = args.access.registry(&reference, PUSH_TIMEOUT)?;
    let digest = registry.push(&reference, bytes, &auth).await?;
    println!("{}@{digest}", args.reference);
    Ok(())
}

/// `pull`: writes the component and prints its pinned reference.
pub async fn pull(args: PullArgs) -> anyhow::Result<()> {
    let reference = wcm_core::registry::reference(&args.reference)?;
    let auth = args.access.auth(reference.resolve_registry())?;
    let registry = args.access.registry(&reference, args.timeout)?;
    let pulled = registry.pull(&reference, &auth, args.max_mib << 20).await?;
    std::fs::write(&args.output, &pulled.bytes)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    match reference.digest() {
        Some(_) => println!("{}", args.reference),
        None => println!("{}@{}", args.reference, pulled.digest),
    }
    Ok(())
}
