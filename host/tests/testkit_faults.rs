//! `wasm-controller-manager test --faults`: every example plugin ends every run with
//! a fault (a crash right after each write, a stale cache, a held-back watch event,
//! an error answering each call) in the state its run without faults ends in, and
//! each of three bugs controllers really have is found by the fault that shows it —
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

#[test]
fn every_example_plugin_ends_each_run_with_a_fault_as_it_ends_the_run_without() -> Result<()> {
    let _turn = support::turns::one_file_at_a_time(module_path!());
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

/// A parent ConfigMap asking classic-bugs for `bug`.
fn parent(bug: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: app, namespace: shop, \
         uid: 0b000000-0000-4000-8000-000000000001, labels: {{wcm.test/classic: \"\"}}}}\n\
         data: {{bug: {bug}}}\n"
    )
}

/// `test PLUGIN.wasm --faults all` on a parent asking for `bug`: whether it passed,
/// and its standard error.
fn explore(plugin: &str, bug: &str) -> Result<(bool, String)> {
    let (_dir, fixtures) = fixture(&parent(bug))?;
    let args = [
        plugin_file(plugin),
        fixtures,
        "--faults".into(),
        "all".into(),
    ];
    let out = test_command(&args)?;
    Ok((out.status.success(), text(&out.stderr)))
}

#[test]
fn each_classic_bug_is_found_by_the_fault_that_shows_it_and_its_fixed_twin_passes() -> Result<()> {
    let _turn = support::turns::one_file_at_a_time(module_path!());
    // (bug, fixed twin, what the report says: the fault and the objects, a line of
    // the diff, and the calls that show it)
    let cases: [(&str, &str, &[&str]); 3] = [
        (
            "create-from-cache",
            "create-by-name",
            &[
                "with stale cache after write 1, the run ends in another state: \
                 v1/ConfigMap shop/app-… #2",
                "+  \"v1/ConfigMap shop/app-… #2\":",
                "    create v1/ConfigMap shop/app-\n      the cache keeps the object as it was\n  \
                 reconcile v1/ConfigMap shop/app\n    list v1/ConfigMap in shop matching \
                 wcm.test/child-of=app (from the cache): 0 found\n    \
                 create v1/ConfigMap shop/app-\n",
            ],
        ),
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
    // The same bugs in Rust and in Python: the host finds them whatever the language.
    for plugin in ["classic-bugs", "classic-bugs-py"] {
        for (bug, fixed, said) in cases {
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

#[test]
fn an_unknown_fault_is_refused_naming_the_ones_there_are() -> Result<()> {
    let (_dir, fixtures) = fixture(&parent("check-state"))?;
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
