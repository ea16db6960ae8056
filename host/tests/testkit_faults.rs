//! `wasm-controller-manager test --faults`: every example plugin ends every run with
//! a fault (a crash right after each write, a stale cache, a held-back watch event,
//! an error answering each call) in the state its run without faults ends in, and
//! each of six bugs controllers really have is found by the fault that shows it —
//! named, with the diff of the end states and the calls that show it, the run failing
//! — while its fixed twin passes, in Rust and in Python. Needs no cluster.

use crate::support;

use std::path::PathBuf;

use anyhow::{Result, ensure};
use support::plugin_file;
use support::testkit_cli::{fixture, repo, test_command, text};

/// Each example plugin with its fixtures (deployment-reconcile through its steps too).
fn examples() -> Vec<(&'static str, Vec<PathBuf>)> {
    let dr = "plugins/deployment-reconcile";
    vec![
        (
            "pod-counter",
            vec![repo("plugins/pod-counter/testdata/cluster.yaml")],
        ),
        (
            "deployment-reconcile",
            vec![
                repo(&format!("{dr}/webapp-crd.yaml")),
                repo(&format!("{dr}/testdata/webapps.yaml")),
                "--settings".into(),
                repo(&format!("{dr}/testdata/settings.yaml")),
                "--steps".into(),
                repo(&format!("{dr}/testdata/steps.yaml")),
            ],
        ),
        (
            "phase-labeller",
            vec![repo("plugins/python/phase-labeller/testdata/pods.yaml")],
        ),
        (
            "data-hash",
            vec![repo(
                "plugins/javascript/data-hash/testdata/config-maps.yaml",
            )],
        ),
        (
            "config-reloader",
            vec![repo("plugins/go/config-reloader/testdata/cluster.yaml")],
        ),
    ]
}

#[support::test]
fn every_example_plugin_ends_each_run_with_a_fault_as_it_ends_the_run_without() -> Result<()> {
    for (plugin, fixtures) in examples() {
        let mut args = vec![plugin_file(plugin)];
        args.extend(fixtures);
        args.extend(["--faults".into(), "all".into()]);
        let out = test_command(&args)?;
        let stderr = text(&out.stderr);
        ensure!(out.status.success(), "{plugin}: {stderr}");
        // Every class had points to strike, and none changed the end state.
        let summary = stderr.lines().find(|l| l.contains("runs with a fault"));
        let summary = summary.unwrap_or_default();
        for class in ["crash", "stale", "coalesce", "errors"] {
            ensure!(
                !summary.contains(&format!("{class} 0")),
                "{plugin}: {summary}"
            );
        }
        ensure!(
            summary.ends_with("; 0 ended in another state than the run without"),
            "{summary}"
        );
    }
    Ok(())
}

/// The ConfigMap `name` asking classic-bugs for `bug`, with `more` data.
fn parent(name: &str, bug: &str, more: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: shop, \
         labels: {{wcm.test/classic: \"\"}}}}\ndata: {{bug: {bug}{more}}}\n---\n"
    )
}

/// The fixtures of `bug`: one parent asking for it; for `lost-update` and its twin,
/// two parents and the `index` they join; for `edge-triggered` and its twin, a
/// parent whose phase is `New`, and the steps making it `Pending`, then `Running`.
fn scene(bug: &str) -> (String, Option<String>) {
    match bug {
        "lost-update" | "update-with-version" => {
            let index = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: index, namespace: shop, \
                 labels: {wcm.test/classic: \"\"}}\ndata: {members: \"\"}\n";
            let parents = parent("app", bug, "") + &parent("web", bug, "");
            (parents + index, None)
        }
        "edge-triggered" | "level-triggered" => {
            let step = |name: &str, phase: &str| {
                format!(
                    "- name: {name}\n  apply:\n  - {{apiVersion: v1, kind: ConfigMap, metadata: \
                     {{name: app, namespace: shop, labels: {{wcm.test/classic: \"\"}}}}, \
                     data: {{bug: {bug}, phase: {phase}}}}}\n"
                )
            };
            let steps = format!(
                "steps:\n{}{}",
                step("pending", "Pending"),
                step("running", "Running")
            );
            (parent("app", bug, ", phase: New"), Some(steps))
        }
        _ => (parent("app", bug, ""), None),
    }
}

/// `test PLUGIN.wasm --faults all` on the scene of `bug`: whether it passed, and its
/// standard error.
fn explore(plugin: &str, bug: &str) -> Result<(bool, String)> {
    let (fixtures, steps) = scene(bug);
    let (dir, fixtures) = fixture(&fixtures)?;
    let mut args = vec![
        plugin_file(plugin),
        fixtures,
        "--faults".into(),
        "all".into(),
    ];
    if let Some(steps) = steps {
        let file = dir.path().join("steps.yaml");
        std::fs::write(&file, steps)?;
        args.extend(["--steps".into(), file]);
    }
    let out = test_command(&args)?;
    Ok((out.status.success(), text(&out.stderr)))
}

/// Each bug, its fixed twin, and what the report says: the fault and the objects,
/// a line of the diff, and calls that show it.
const CLASSIC_BUGS: [(&str, &str, &[&str]); 6] = [
    // Not idempotent after a crash between two writes: a second generated child.
    (
        "generate-then-mark",
        "name-then-mark",
        &[
            "with crash right after write 1, the run ends in another state: \
             v1/ConfigMap shop/app-… #2",
            "+  \"v1/ConfigMap shop/app-… #2\":",
            "    create v1/ConfigMap shop/app-\n      the host crashes\n  \
             reconcile v1/ConfigMap shop/app\n    create v1/ConfigMap shop/app-\n",
        ],
    ),
    // Acts on a stale read without a precondition: one parent's addition lost.
    (
        "lost-update",
        "update-with-version",
        &[
            "with stale cache after write 1, the run ends in another state: \
             v1/ConfigMap shop/index",
            "-      members: app,web\n+      members: web\n",
            "    patch v1/ConfigMap shop/index\n      the cache keeps the object as it was\n",
        ],
    ),
    // Assumes it saw an intermediate state: a `Pending` never told of starts nothing.
    (
        "edge-triggered",
        "level-triggered",
        &[
            "with watch event of change 2 held back, the run ends in another state: \
             v1/ConfigMap shop/app",
            "-        wcm.test/started: \"true\"",
        ],
    ),
    // A create decided from the cache: a second generated child.
    (
        "create-from-cache",
        "create-by-name",
        &[
            "with stale cache after write 1, the run ends in another state: \
             v1/ConfigMap shop/app-… #2",
            "    create v1/ConfigMap shop/app-\n      the cache keeps the object as it was\n  \
             reconcile v1/ConfigMap shop/app\n    list v1/ConfigMap in shop matching \
             wcm.test/child-of=app (from the cache): 0 found\n",
        ],
    ),
    // A marker trusted after a crash: phase `started` for ever, no child.
    (
        "trust-marker",
        "check-state",
        &[
            "with crash right after write 1, the run ends in another state: \
             v1/ConfigMap shop/app, v1/ConfigMap shop/app-work",
            "-        wcm.test/phase: done\n+        wcm.test/phase: started",
            "    patch-labels v1/ConfigMap shop/app\n      the host crashes\n",
        ],
    ),
    // An error swallowed: the child never made.
    (
        "swallow-error",
        "return-error",
        &[
            "with API call 1 answered with a conflict (409), the run ends in another \
             state: v1/ConfigMap shop/app-made",
            "-  v1/ConfigMap shop/app-made:",
            "    create v1/ConfigMap shop/app-made\n      answered: conflict:",
        ],
    ),
];

#[support::test]
fn each_classic_bug_is_found_by_the_fault_that_shows_it_and_its_fixed_twin_passes() -> Result<()> {
    // The same bugs in Rust and in Python: the host finds them whatever the language.
    for plugin in ["classic-bugs", "classic-bugs-py"] {
        for (bug, fixed, said) in CLASSIC_BUGS {
            let (passed, stderr) = explore(plugin, bug)?;
            ensure!(!passed, "{plugin} {bug} passed: {stderr}");
            for needle in said {
                let found = stderr.contains(needle);
                ensure!(found, "{plugin} {bug}: no {needle:?} in:\n{stderr}");
            }
            let (passed, stderr) = explore(plugin, fixed)?;
            ensure!(passed, "{plugin} {fixed} failed: {stderr}");
        }
    }
    Ok(())
}

#[support::test(offline)]
fn an_unknown_fault_is_refused_naming_the_ones_there_are() -> Result<()> {
    let (_dir, fixtures) = fixture(&parent("app", "check-state", ""))?;
    let args = [
        plugin_file("classic-bugs"),
        fixtures,
        "--faults".into(),
        "crash,partition".into(),
    ];
    let out = test_command(&args)?;
    let stderr = text(&out.stderr);
    let needle = "unknown fault \"partition\": crash, stale, coalesce, errors or all";
    ensure!(!out.status.success() && stderr.contains(needle), "{stderr}");
    Ok(())
}
