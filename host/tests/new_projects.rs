//! `wasm-controller-manager new` as a plugin author uses it, in every language: the
//! generated project builds with its language's toolchain, passes its own `make test`
//! (unit test, then `wasm-controller-manager test` on its fixtures) and, dropped into a
//! host's plugins directory, acts in the real cluster. Prints the time `new` plus
//! `make test` take, per language, and when each plugin acted after the host started.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use support::{HostProcess, eventually};
use wcm_control_plane::TestNamespace;

/// Compiling the Python (CPython inside) and JavaScript (SpiderMonkey inside)
/// components takes ~11-12 s each with a debug host.
const CONVERGE: Duration = Duration::from_secs(180);
const LANGUAGES: [&str; 4] = ["rust", "go", "python", "javascript"];

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// The pinned componentize-py and componentize-js that `scripts/setup.sh` installs.
fn tool(variable: &str, inside: &str) -> Result<String> {
    let script = format!("source scripts/tools.env && echo \"${variable}\"");
    let out = Command::new("bash")
        .args(["-c", &script])
        .current_dir(repo(""))
        .output()?;
    let dir = String::from_utf8(out.stdout)?.trim().to_string();
    Ok(format!("{dir}/{inside}"))
}

/// Runs `make TARGET` in `project` the way an author would, the host binary on PATH.
fn make(project: &Path, target: &str) -> Result<String> {
    let host = Path::new(env!("CARGO_BIN_EXE_wasm-controller-manager"));
    let path = format!(
        "{}:{}",
        host.parent().context("host dir")?.display(),
        std::env::var("PATH")?
    );
    let out = Command::new("make")
        .arg(target)
        .arg(format!(
            "COMPONENTIZE_PY={}",
            tool("PYTHON_TOOLS", "bin/componentize-py")?
        ))
        .arg(format!(
            "COMPONENTIZE_JS={}",
            tool("JS_TOOLS", "node_modules/.bin/componentize-js")?
        ))
        .env("PATH", path)
        // Rust projects share one target directory across runs, so only the first
        // builds the SDK's dependencies for wasm32-wasip2.
        .env("CARGO_TARGET_DIR", repo("target/new-projects"))
        .current_dir(project)
        .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(
        out.status.success(),
        "make {target} in {}:\n{text}",
        project.display()
    );
    Ok(text)
}

fn new_project(root: &Path, name: &str, language: &str) -> Result<PathBuf> {
    let out = Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"))
        .args(["new", name, "--lang", language])
        .current_dir(root)
        .output()?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(root.join(name))
}

async fn keys_label(config_maps: &Api<ConfigMap>, plugin: &str) -> Option<String> {
    let cm = config_maps.get("settings").await.ok()?;
    let key = format!("{plugin}.example.com/keys");
    cm.metadata.labels?.get(&key).cloned()
}

#[tokio::test]
async fn a_new_project_in_every_language_builds_passes_its_tests_and_acts_in_the_cluster()
-> Result<()> {
    let root = tempfile::tempdir()?;
    let plugins = tempfile::tempdir()?;
    let mut started = Vec::new();
    for language in LANGUAGES {
        let name = format!("{language}-keys");
        let begun = Instant::now();
        let project = new_project(root.path(), &name, language)?;
        let tested = make(&project, "test")?;
        ensure!(
            tested.contains("KeysCounted"),
            "{language}: the report shows no Event:\n{tested}"
        );
        let file = format!("{name}.wasm");
        std::fs::copy(project.join(&file), plugins.path().join(&file))?;
        eprintln!("{name}: `new`, `make test`: {:?}", begun.elapsed());
        started.push(name);
    }

    let ns = TestNamespace::create("new-projects").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let mut labels = serde_json::Map::new();
    for name in &started {
        labels.insert(format!("{name}.example.com/enabled"), json!("true"));
    }
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "settings", "labels": labels},
        "data": {"mode": "production", "workers": "4"},
    }))?;
    config_maps.create(&PostParams::default(), &cm).await?;
    let host = HostProcess::start(plugins.path(), &[])?;
    let begun = Instant::now();
    for name in &started {
        let acted = eventually(CONVERGE, || async {
            (keys_label(&config_maps, name).await? == "2").then_some(())
        })
        .await;
        acted.with_context(|| format!("{name} did not act; log:\n{}", host.logs().join("\n")))?;
        eprintln!(
            "{name}: from `new` to acting in the cluster: {:?}",
            begun.elapsed()
        );
    }
    Ok(())
}
