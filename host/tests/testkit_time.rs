//! `wasm-controller-manager test --for`: a plugin's life in virtual time. A
//! `requeue-after` runs again when its delay is up, a failed reconcile is retried
//! with the host's backoff, each reconcile says when it ran, keys still scheduled when
//! the time is up are listed, and a key that requeues itself at once forever is
//! reported as a loop instead of run to the bound, and a resync queues every watched
//! object again each period. Needs no cluster.

use crate::support;

use std::path::PathBuf;

use anyhow::{Result, ensure};
use serde_json::Value;
use support::plugin_file;
use support::testkit_cli::{fixture, misbehaving, repo, test_command, text};

/// One run of `test` with `--for`: whether it passed, its report, and the text of
/// both streams.
struct Run {
    passed: bool,
    report: Value,
    stdout: String,
    stderr: String,
}

/// Runs `test ARGS... --for TIME`.
fn run_for(mut args: Vec<PathBuf>, time: &str) -> Result<Run> {
    args.extend(["--for".into(), time.into()]);
    let out = test_command(&args)?;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    Ok(Run {
        passed: out.status.success(),
        report: serde_saphyr::from_str(&stdout)?,
        stdout,
        stderr,
    })
}

/// The reconciles of a report as (key, at, result).
fn reconciles(report: &Value) -> Vec<(String, String, String)> {
    let field = |r: &Value, f: &str| r[f].as_str().unwrap_or_default().to_string();
    let all = report["reconciles"].as_array().cloned().unwrap_or_default();
    (all.iter())
        .map(|r| (field(r, "key"), field(r, "at"), field(r, "result")))
        .collect()
}

#[support::test]
fn a_requeue_after_runs_again_on_the_virtual_clock_until_the_time_is_up() -> Result<()> {
    let args = vec![
        plugin_file("deployment-reconcile"),
        repo("plugins/deployment-reconcile/webapp-crd.yaml"),
        repo("plugins/deployment-reconcile/testdata/webapps.yaml"),
        "--settings".into(),
        repo("plugins/deployment-reconcile/testdata/settings.yaml"),
    ];
    let Run {
        passed,
        report,
        stdout,
        stderr,
    } = run_for(args, "3m")?;
    ensure!(passed, "{stderr}\n{stdout}");
    // The WebApp whose Secret is not there yet checks again every minute.
    let pending = "demo.wasm-controller-manager.io/v1alpha1/WebApp demo/pending";
    let times: Vec<String> = (reconciles(&report).into_iter())
        .filter(|(key, _, _)| key == pending)
        .map(|(_, at, result)| format!("{at} {result}"))
        .collect();
    let every_minute = ["0s", "1m", "2m", "3m"].map(|at| format!("{at} requeue-after 1m"));
    ensure!(times == every_minute, "{times:?}\n{stdout}");
    let left = &report["pending"];
    let still =
        (left.as_array().into_iter().flatten()).any(|p| p["key"] == pending && p["at"] == "4m");
    ensure!(still, "{pending} not listed as due at 4m: {left}");
    let warned = format!("{pending} still scheduled when the time was up (next at 4m)");
    ensure!(stderr.contains(&warned), "no {warned:?} in:\n{stderr}");
    Ok(())
}

#[support::test]
fn a_failed_reconcile_is_retried_with_the_hosts_backoff() -> Result<()> {
    let (_dir, file) = fixture(&misbehaving("trap"))?;
    let Run {
        passed,
        report,
        stdout,
        stderr,
    } = run_for(vec![plugin_file("misbehaving"), file], "1s")?;
    ensure!(!passed, "a run of failures passed:\n{stdout}");
    let runs = reconciles(&report);
    // 5 ms doubled after each failure: 5, 10, 20, ... after the one before.
    let at: Vec<&str> = runs.iter().map(|(_, at, _)| at.as_str()).collect();
    let expected = [
        "0s", "5ms", "15ms", "35ms", "75ms", "155ms", "315ms", "635ms",
    ];
    ensure!(at == expected, "{at:?}");
    ensure!(
        runs.iter()
            .all(|(_, _, result)| result.starts_with("trapped: ")),
        "{runs:?}"
    );
    ensure!(
        report["pending"][0]["at"] == "1s 275ms",
        "{}",
        report["pending"]
    );
    let needle = "plugin misbehaving, step 8, reconcile of v1/ConfigMap shop/trap: trapped";
    ensure!(stderr.contains(needle), "no {needle:?} in:\n{stderr}");
    Ok(())
}

#[support::test]
fn a_key_that_requeues_itself_at_once_forever_is_reported_not_looped() -> Result<()> {
    let (_dir, file) = fixture(&misbehaving("requeue"))?;
    let Run {
        passed,
        report,
        stdout,
        stderr,
    } = run_for(vec![plugin_file("misbehaving"), file], "10m")?;
    ensure!(!passed, "a loop passed:\n{stdout}");
    let needle = "plugin misbehaving: v1/ConfigMap shop/requeue requeues itself at once \
                  without end: 20 reconciles in a row at 0s";
    ensure!(stderr.contains(needle), "no {needle:?} in:\n{stderr}");
    let runs = reconciles(&report);
    ensure!(runs.len() == 20, "{} reconciles, not 20", runs.len());
    ensure!(
        report["pending"].is_null(),
        "dropped, yet {}",
        report["pending"]
    );
    Ok(())
}

#[support::test]
fn a_resync_queues_every_watched_object_again_each_period() -> Result<()> {
    // key-recorder resyncs every second and records `Seen` about each Pod it gets.
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: shop}\n";
    let (_dir, file) = fixture(pod)?;
    let Run {
        passed,
        report,
        stdout,
        stderr,
    } = run_for(vec![plugin_file("key-recorder"), file], "3s")?;
    ensure!(passed, "{stderr}\n{stdout}");
    let at: Vec<String> = reconciles(&report)
        .into_iter()
        .map(|(_, at, _)| at)
        .collect();
    ensure!(at == ["0s", "1s", "2s", "3s"], "{at:?}");
    ensure!(report["events"][0]["count"] == 4, "{}", report["events"]);
    ensure!(
        report["pending"].is_null(),
        "a resync is no key: {}",
        report["pending"]
    );
    Ok(())
}
