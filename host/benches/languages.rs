//! What a plugin costs by the language it is written in: component size, first
//! compile, load from the compile cache, `register`, and one reconcile in a fresh
//! instance, for the example plugins in Rust, Go (plain structs, and `k8s.io/api`
//! types), Python and JavaScript. Offline: each reconcile runs against the test kit's
//! in-memory cluster of the plugin's own fixtures (its steady state: the first
//! reconcile's writes are done, later ones read and find nothing to change). Medians;
//! `make bench`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use wcm_core::config::Limits;
use wcm_tooling::testkit::{Session, TestOptions};

const COMPILES: usize = 3;
const CACHED_LOADS: usize = 5;
const REGISTERS: usize = 20;
const RECONCILES: usize = 50;

/// Plugin, language, component, fixtures.
const PLUGINS: [(&str, &str, &str, &str); 5] = [
    (
        "pod-counter",
        "Rust",
        "target/plugins/pod-counter.wasm",
        "plugins/pod-counter/testdata/cluster.yaml",
    ),
    (
        "config-reloader",
        "Go",
        "target/plugins/config-reloader.wasm",
        "plugins/go/config-reloader/testdata/cluster.yaml",
    ),
    (
        "go-sdk-exerciser",
        "Go + k8s.io/api",
        "target/test-plugins/go-sdk-exerciser.wasm",
        "host/tests/go-plugins/go-sdk-exerciser/testdata/cluster.yaml",
    ),
    (
        "phase-labeller",
        "Python",
        "target/plugins/phase-labeller.wasm",
        "plugins/python/phase-labeller/testdata/pods.yaml",
    ),
    (
        "data-hash",
        "JavaScript",
        "target/plugins/data-hash.wasm",
        "plugins/javascript/data-hash/testdata/config-maps.yaml",
    ),
];

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Loads `options` `rounds` times; the median time of a whole load.
async fn loads(options: &TestOptions, rounds: usize) -> Result<Duration> {
    let mut samples = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        Session::load(options).await?;
        samples.push(started.elapsed());
    }
    Ok(median(samples))
}

async fn measure(plugin: &str, component: &Path, fixtures: &Path) -> Result<[String; 5]> {
    let size = std::fs::metadata(component)
        .with_context(|| format!("{}: run `make plugins`", component.display()))?
        .len();
    let cache = tempfile::tempdir()?;
    let mut options = TestOptions {
        plugin: component.to_path_buf(),
        fixtures: vec![fixtures.to_path_buf()],
        max_reconciles: 1,
        limits: Limits::default(),
        compile_cache: None,
        settings: None,
        not_fixtures: Vec::new(),
        run_for: None,
        steps: None,
    };
    let compile = loads(&options, COMPILES).await?;
    options.compile_cache = Some(cache.path().to_path_buf());
    Session::load(&options).await?; // fills the cache
    let cached = loads(&options, CACHED_LOADS).await?;
    let session = Session::load(&options).await?;
    let mut registers = Vec::new();
    for _ in 0..REGISTERS {
        let started = Instant::now();
        session.code.register(plugin).await?;
        registers.push(started.elapsed());
    }
    let key = (session.initial_keys().into_iter().next()).context("no key to reconcile")?;
    let mut reconciles = Vec::new();
    for _ in 0..=RECONCILES {
        let started = Instant::now();
        session.reconcile(&key).await?;
        reconciles.push(started.elapsed());
    }
    reconciles.remove(0); // the first one writes; the rest are the steady state
    Ok([
        format!("{:.1} MB", size as f64 / 1e6),
        format!("{:.2} s", compile.as_secs_f64()),
        ms(cached),
        ms(median(registers)),
        ms(median(reconciles)),
    ])
}

#[tokio::main]
async fn main() -> Result<()> {
    println!(
        "{:<18} {:<16} {:>8} {:>14} {:>12} {:>10} {:>12}",
        "plugin", "language", "size", "first compile", "cached load", "register", "reconcile"
    );
    for (plugin, language, component, fixtures) in PLUGINS {
        let [size, compile, cached, register, reconcile] =
            measure(plugin, &repo(component), &repo(fixtures)).await?;
        println!(
            "{plugin:<18} {language:<16} {size:>8} {compile:>14} {cached:>12} {register:>10} \
             {reconcile:>12}"
        );
    }
    println!(
        "(medians: compile of {COMPILES}, cached load of {CACHED_LOADS}, register of \
         {REGISTERS}, reconcile of {RECONCILES}; a reconcile is a fresh instance)"
    );
    Ok(())
}
