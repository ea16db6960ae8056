//! `push` and `pull`: a plugin to and from an OCI registry, in the CNCF Wasm layout,
//! with credentials as `oras` and `crane` take them.

use std::io::Read;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use wcm_host::registry::{DockerConfig, Reference, Registry, RegistryAuth};

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
    #[command(flatten)]
    pub access: RegistryAccess,
}

/// `push`: prints the pushed reference pinned to its digest, as the last line.
pub async fn push(args: PushArgs) -> anyhow::Result<()> {
    let reference = wcm_host::registry::reference(&args.reference)?;
    anyhow::ensure!(
        reference.digest().is_none(),
        "{}: push to a tag; the digest is the registry's answer",
        args.reference
    );
    let bytes = std::fs::read(&args.plugin)
        .with_context(|| format!("cannot read {}", args.plugin.display()))?;
    let auth = auth_for(&reference, &args.access)?;
    let registry = Registry::new(&args.access.ca_files)?;
    let digest = registry.push(&reference, bytes, &auth).await?;
    println!("{}@{digest}", args.reference);
    Ok(())
}

/// `pull`: writes the component and prints its pinned reference.
pub async fn pull(args: PullArgs) -> anyhow::Result<()> {
    let reference = wcm_host::registry::reference(&args.reference)?;
    let auth = auth_for(&reference, &args.access)?;
    let registry = Registry::new(&args.access.ca_files)?;
    let pulled = registry.pull(&reference, &auth, args.max_mib << 20).await?;
    std::fs::write(&args.output, &pulled.bytes)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    match reference.digest() {
        Some(_) => println!("{}", args.reference),
        None => println!("{}@{}", args.reference, pulled.digest),
    }
    Ok(())
}

/// The credentials of `--username` and standard input, else the Docker config's.
fn auth_for(reference: &Reference, access: &RegistryAccess) -> anyhow::Result<RegistryAuth> {
    let registry = reference.resolve_registry();
    if let Some(user) = &access.username {
        let mut password = String::new();
        std::io::stdin()
            .read_to_string(&mut password)
            .context("cannot read the password from standard input")?;
        let password = password.trim_end_matches(['\r', '\n']).to_string();
        return Ok(RegistryAuth::Basic(user.clone(), password));
    }
    Ok(DockerConfig::of_user()?.auth_for(registry, "the Docker config file")?)
}
