//! `wasm-controller-manager test`, as a plugin author runs it: every example plugin
//! (and the Go SDK's exerciser, with `k8s.io/api` types) does what its reviewed
//! report says against its fixtures; a changed expectation
//! fails with a diff; conflicts, forbidden calls, traps and self-waking loops are
//! reported naming the plugin, the key and the step. Needs no cluster.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Result, ensure};
use support::docs::{guide_steps, path_with_host};
use support::plugin_file;
use support::testkit_cli::{fixture, misbehaving, repo, test_command, text};

/// Each example plugin, and the SDKs' exercisers (Go: every import with `k8s.io/api`
/// types; Python and JavaScript twins: owner references, conditions, status, errors by
/// case, exceptions returned as `other`), and the contract plugins (0.2's error case
/// and delete; 0.3's terminal error, Event action and related object, refused
/// conditional delete with its 409), with its fixtures and reviewed report.
const REVIEWED: [(&str, &[&str], &str); 11] = [
    (
        "pod-counter",
        &["plugins/pod-counter/testdata/cluster.yaml"],
        "plugins/pod-counter/testdata/expected.yaml",
    ),
    (
        "deployment-reconcile",
        &[
            "plugins/deployment-reconcile/webapp-crd.yaml",
            "plugins/deployment-reconcile/testdata/webapps.yaml",
        ],
        "plugins/deployment-reconcile/testdata/expected.yaml",
    ),
    (
        "phase-labeller",
        &["plugins/python/phase-labeller/testdata/pods.yaml"],
        "plugins/python/phase-labeller/testdata/expected.yaml",
    ),
    (
        "data-hash",
        &["plugins/javascript/data-hash/testdata/config-maps.yaml"],
        "plugins/javascript/data-hash/testdata/expected.yaml",
    ),
    (
        "config-reloader",
        &["plugins/go/config-reloader/testdata/cluster.yaml"],
        "plugins/go/config-reloader/testdata/expected.yaml",
    ),
    (
        "go-sdk-exerciser",
        &["host/tests/go-plugins/go-sdk-exerciser/testdata/cluster.yaml"],
        "host/tests/go-plugins/go-sdk-exerciser/testdata/expected.yaml",
    ),
    (
        "contract-v0-2",
        &["host/tests/fixtures/contracts.yaml"],
        "host/tests/plugins/contract-v0-2/expected.yaml",
    ),
    (
        "contract-v0-3",
        &["host/tests/fixtures/contracts.yaml"],
        "host/tests/plugins/contract-v0-3/expected.yaml",
    ),
    (
        "watch-options",
        &["host/tests/fixtures/watch-options.yaml"],
        "host/tests/plugins/watch-options/expected.yaml",
    ),
    (
        "sdk-exerciser-py",
        &["host/tests/fixtures/sdk-exerciser.yaml"],
        "host/tests/python-plugins/sdk-exerciser-py/expected.yaml",
    ),
    (
        "sdk-exerciser-js",
        &["host/tests/fixtures/sdk-exerciser.yaml"],
        "host/tests/javascript-plugins/sdk-exerciser-js/expected.yaml",
    ),
];

/// The operator's settings a reviewed run gives a plugin (`--settings`).
const SETTINGS: [(&str, &str); 1] = [(
    "deployment-reconcile",
    "plugins/deployment-reconcile/testdata/settings.yaml",
)];

#[support::test]
fn every_plugin_does_what_its_reviewed_report_says() -> Result<()> {
    for (plugin, fixtures, expected) in REVIEWED {
        let mut args = vec![plugin_file(plugin)];
        args.extend(fixtures.iter().map(|f| repo(f)));
        args.extend([PathBuf::from("--expect"), repo(expected)]);
        if let Some((_, settings)) = SETTINGS.iter().find(|(p, _)| *p == plugin) {
            args.extend([PathBuf::from("--settings"), repo(settings)]);
        }
        let out = test_command(&args)?;
        ensure!(
            out.status.success(),
            "{plugin}: {}\n{}",
            text(&out.stderr),
            text(&out.stdout)
        );
    }
    Ok(())
}

/// The commands `docs/testing-a-plugin.md` opens with, run literally in a plugin's
/// project (here pod-counter's file and `testdata/`, which holds the expected report
/// beside the fixtures, as `new` writes it): they pass, and `--update` rewrites the
/// same report.
#[support::test]
fn the_documented_commands_work_as_written() -> Result<()> {
    let steps = guide_steps("docs/testing-a-plugin.md");
    ensure!(steps.len() == 1, "{steps:?}");
    let project = tempfile::tempdir()?;
    std::fs::copy(
        plugin_file("pod-counter"),
        project.path().join("my-plugin.wasm"),
    )?;
    let testdata = project.path().join("testdata");
    std::fs::create_dir(&testdata)?;
    for file in ["cluster.yaml", "expected.yaml"] {
        let from = repo("plugins/pod-counter/testdata").join(file);
        std::fs::copy(from, testdata.join(file))?;
    }
    let out = Command::new("bash")
        .args(["-c", &format!("set -euo pipefail\n{}", steps[0])])
        .env("PATH", path_with_host())
        .current_dir(project.path())
        .output()?;
    ensure!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let reviewed = std::fs::read_to_string(repo("plugins/pod-counter/testdata/expected.yaml"))?;
    ensure!(std::fs::read_to_string(testdata.join("expected.yaml"))? == reviewed);
    Ok(())
}

#[support::test]
fn a_changed_expectation_fails_with_a_diff_of_the_changed_lines() -> Result<()> {
    let expected = std::fs::read_to_string(repo("plugins/pod-counter/testdata/expected.yaml"))?;
    let changed = expected.replace("count: \"3\"", "count: \"4\"");
    ensure!(changed != expected, "the expected report has no count 3");
    let (_dir, file) = fixture(&changed)?;
    let cluster = repo("plugins/pod-counter/testdata/cluster.yaml");
    let out = test_command(&[
        plugin_file("pod-counter"),
        cluster,
        "--expect".into(),
        file.clone(),
    ])?;
    let stderr = text(&out.stderr);
    ensure!(!out.status.success(), "passed: {stderr}");
    for needle in [
        "-    pod-counter.example.com/count: \"4\"",
        "+    pod-counter.example.com/count: \"3\"",
        &format!(
            "plugin pod-counter: the report differs from {}",
            file.display()
        ),
    ] {
        ensure!(stderr.contains(needle), "no {needle:?} in:\n{stderr}");
    }
    // `--update` writes what the plugin does now, and the run then passes.
    let update = |extra: &[&str]| {
        let mut args: Vec<PathBuf> = vec![plugin_file("pod-counter")];
        args.push(repo("plugins/pod-counter/testdata/cluster.yaml"));
        args.extend(["--expect".into(), file.clone()]);
        args.extend(extra.iter().map(PathBuf::from));
        test_command(&args)
    };
    ensure!(update(&["--update"])?.status.success(), "update failed");
    ensure!(
        std::fs::read_to_string(&file)? == expected,
        "updated file differs"
    );
    ensure!(update(&[])?.status.success(), "fails after --update");
    Ok(())
}

/// A Deployment of `replicas` that replica-pinner pins to `pin` replicas.
fn pinned(name: &str, pin: u32, replicas: u32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: shop, labels: {{wcm.test/pin-replicas: "{pin}"}}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec: {{containers: [{{name: {name}, image: nginx:1.27}}]}}
"#
    )
}

#[support::test]
fn an_apply_of_a_field_another_manager_set_differently_is_a_conflict_naming_both() -> Result<()> {
    let pinned = [pinned("web", 1, 3), pinned("same", 2, 2)].join("---\n");
    let (_dir, file) = fixture(&pinned)?;
    let out = test_command(&[plugin_file("replica-pinner"), file])?;
    let stdout = text(&out.stdout);
    ensure!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    let report: serde_json::Value = serde_saphyr::from_str(&stdout)?;
    let write_to = |name: &str| {
        (report["writes"].as_array().into_iter().flatten())
            .find(|w| w["object"] == format!("apps/v1/Deployment shop/{name}"))
            .ok_or_else(|| anyhow::anyhow!("no apply of {name}:\n{stdout}"))
    };
    let conflict = "apply apps/v1/Deployment shop/web: Apply failed with 1 conflict: \
                    conflict with \"fixtures\" using apps/v1: .spec.replicas";
    let error = &write_to("web")?["error"];
    ensure!(*error == format!("conflict: {conflict}"), "{error}");
    let event = &report["events"][0];
    ensure!(
        event["reason"] == "ApplyConflict" && event["note"] == conflict,
        "{event}"
    );
    // The same value is no conflict: `same` is applied without an error.
    let same = write_to("same")?;
    ensure!(same.get("error").is_none(), "{same}");
    Ok(())
}

#[support::test]
fn events_about_kinds_not_its_own_are_forbidden_and_floods_are_cut() -> Result<()> {
    let (_dir, file) = fixture(&misbehaving("events"))?;
    let out = test_command(&[plugin_file("misbehaving"), file])?;
    let stdout = text(&out.stdout);
    ensure!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    let report: serde_json::Value = serde_saphyr::from_str(&stdout)?;
    let events = report["events"].as_array().map_or(0, Vec::len);
    ensure!(
        events == 25,
        "{events} Events kept of 2,000; the burst is 25"
    );
    ensure!(
        stdout.contains("wcm.test/event-forbidden: \"true\""),
        "the Secret's Event was not refused:\n{stdout}"
    );
    Ok(())
}

#[support::test]
fn a_trap_fails_the_run_naming_the_plugin_the_step_and_the_key() -> Result<()> {
    let (_dir, file) = fixture(&misbehaving("trap"))?;
    let out = test_command(&[plugin_file("misbehaving"), file])?;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    ensure!(!out.status.success(), "passed:\n{stdout}");
    let needle = "plugin misbehaving, step 1, reconcile of v1/ConfigMap shop/trap: trapped";
    ensure!(stderr.contains(needle), "no {needle:?} in:\n{stderr}");
    let report: serde_json::Value = serde_saphyr::from_str(&stdout)?;
    let result = report["reconciles"][0]["result"]
        .as_str()
        .unwrap_or_default();
    ensure!(
        result.starts_with("trapped: ") && result.contains("deliberate panic"),
        "{result}"
    );
    Ok(())
}

#[support::test]
fn a_plugin_whose_writes_keep_waking_it_is_stopped_at_the_bound() -> Result<()> {
    let (_dir, file) = fixture(&misbehaving("bump"))?;
    let out = test_command(&[
        plugin_file("misbehaving"),
        file,
        "--max-reconciles".into(),
        "20".into(),
    ])?;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    ensure!(!out.status.success(), "passed:\n{stdout}");
    let needle = "plugin misbehaving: keys still queued after 20 reconciles (--max-reconciles), \
                  next v1/ConfigMap shop/bump";
    ensure!(stderr.contains(needle), "no {needle:?} in:\n{stderr}");
    ensure!(
        stdout.contains("wcm.test/bumps: \"20\"") && !stdout.contains("\"21\""),
        "{stdout}"
    );
    Ok(())
}

#[support::test]
fn bad_fixtures_and_files_that_are_no_plugin_are_refused_by_name() -> Result<()> {
    let (_dir, file) = fixture("apiVersion: v1\nkind: Pod\nmetadata: {}\n")?;
    let out = test_command(&[plugin_file("pod-counter"), file.clone()])?;
    let stderr = text(&out.stderr);
    let needle = format!("{}: object 1: it has no metadata.name", file.display());
    ensure!(
        !out.status.success() && stderr.contains(&needle),
        "{stderr}"
    );
    let out = test_command(&[file.clone(), file.clone()])?;
    let stderr = text(&out.stderr);
    let needle = format!("{}: not a WebAssembly file", file.display());
    ensure!(
        !out.status.success() && stderr.contains(&needle),
        "{stderr}"
    );
    Ok(())
}

/// 3,000 Deployments that reload on one ConfigMap, as one `kind: List` (JSON).
fn many_deployments(count: usize) -> String {
    let mut items = vec![serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "shop"}, "data": {"a": "b"}})];
    for i in 0..count {
        items.push(
            serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": format!("d{i}"), "namespace": "shop",
                "labels": {"example.com/reload-on": "cfg"},
                "annotations": {"padding": "x".repeat(500)}},
            "spec": {"selector": {"matchLabels": {"app": format!("d{i}")}},
                "template": {"metadata": {"labels": {"app": format!("d{i}")}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
        );
    }
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// A Go plugin's heap grows while the host writes a large answer into it: before the
/// Go SDK kept Go's collector out of that callback, the instance trapped ("cannot
/// leave component instance").
#[support::test]
fn a_go_plugin_reads_a_list_of_thousands_of_objects() -> Result<()> {
    let (_dir, file) = fixture(&many_deployments(3000))?;
    let out = test_command(&[plugin_file("config-reloader"), file])?;
    let stdout = text(&out.stdout);
    ensure!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_saphyr::from_str(&stdout)?;
    let applied = report["writes"].as_array().map_or(0, Vec::len);
    ensure!(applied == 3000, "{applied} applies of 3,000");
    Ok(())
}

/// A control-plane Node and `count` Pods, none counted yet.
fn many_pods(count: usize) -> String {
    let node = "apiVersion: v1\nkind: Node\nmetadata:\n  name: cp\n  labels: \
                {node-role.kubernetes.io/control-plane: \"\"}\n";
    let pod = |i: usize| {
        format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p-{i:03}, namespace: burst}}\n\
             spec: {{containers: [{{name: c, image: nginx:1.27}}]}}\n"
        )
    };
    std::iter::once(node.to_string())
        .chain((0..count).map(pod))
        .collect()
}

/// More uncounted Pods than one batch: pod-counter takes them a batch at a time
/// (`list-first`, one more than the batch to learn that more remain) and asks to run
/// again, until every Pod has its one Event and its mark.
#[support::test]
fn pod_counter_counts_a_burst_larger_than_a_batch_in_several_reconciles() -> Result<()> {
    let (_dir, file) = fixture(&many_pods(120))?;
    let out = test_command(&[plugin_file("pod-counter"), file])?;
    ensure!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_saphyr::from_str(&text(&out.stdout))?;
    let reconciles = report["reconciles"].as_array().map_or(0, Vec::len);
    ensure!(
        reconciles >= 3,
        "120 Pods in batches of 50 need 3 reconciles: {reconciles}"
    );
    let events = report["events"].as_array().cloned().unwrap_or_default();
    let counted: std::collections::BTreeSet<_> = events
        .iter()
        .filter_map(|e| e["regarding"].as_str())
        .collect();
    ensure!(
        events.len() == 120 && counted.len() == 120,
        "{} Events",
        events.len()
    );
    let label = (report["writes"].as_array().into_iter().flatten())
        .filter_map(|w| w["set"]["pod-counter.example.com/count"].as_str())
        .next_back();
    ensure!(label == Some("120"), "count label {label:?}");
    Ok(())
}

#[support::test]
fn settings_beside_the_plugin_or_given_decide_what_it_registers_and_bad_ones_are_named()
-> Result<()> {
    let dir = tempfile::tempdir()?;
    let plugin = dir.path().join("watch-options.wasm");
    std::fs::copy(plugin_file("watch-options"), &plugin)?;
    let fixtures = repo("host/tests/fixtures/watch-options.yaml");
    let run = |extra: &[&Path]| {
        let mut args: Vec<&Path> = vec![&plugin, &fixtures];
        args.extend(extra);
        test_command(&args)
    };
    let reconciled = |out: &Output| -> Vec<String> {
        (text(&out.stdout).lines())
            .filter_map(|l| l.strip_prefix("- key: ").map(str::to_string))
            .collect()
    };
    let default = run(&[])?;
    ensure!(reconciled(&default).contains(&"v1/ConfigMap wcm-watch-a/one".to_string()));

    // Beside the plugin: it watches the namespace the settings name, and no other.
    let beside = dir.path().join("watch-options.settings.yaml");
    std::fs::write(&beside, "namespaces: [wcm-watch-c]\n")?;
    let out = run(&[])?;
    let keys = reconciled(&out);
    ensure!(
        keys.iter().all(|k| k == "v1/ConfigMap wcm-watch-c/one") && !keys.is_empty(),
        "{keys:?}\n{}",
        text(&out.stderr)
    );

    // Given with --settings, in place of the file beside it.
    let given = dir.path().join("other.json");
    std::fs::write(&given, r#"{"namespaces": ["wcm-watch-b"]}"#)?;
    let flag = Path::new("--settings");
    let keys = reconciled(&run(&[flag, &given])?);
    ensure!(
        keys.iter().all(|k| k.contains("wcm-watch-b/")) && !keys.is_empty(),
        "{keys:?}"
    );

    // Settings that are not a mapping fail the run, naming the file.
    std::fs::write(&beside, "- a\n- b\n")?;
    let out = run(&[])?;
    let stderr = text(&out.stderr);
    ensure!(!out.status.success(), "ran with broken settings");
    ensure!(
        stderr.contains("watch-options.settings.yaml") && stderr.contains("must be a mapping"),
        "{stderr}"
    );
    Ok(())
}
