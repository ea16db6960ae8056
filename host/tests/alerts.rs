//! The alerting rules (`charts/wasm-controller-manager/files/alerts.yaml`): promtool
//! (built from pinned modules) accepts them and passes their unit tests — series that
//! fire each alert and series beside them that must not — and every alert has such a
//! case and a runbook section in docs/alerts.md. That their metrics are ones the host
//! exports is checked against a running host in `dashboard`.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use serde_json::Value;
use support::docs::repo;
use wcm_control_plane::ControlPlane;

const RULES: &str = "charts/wasm-controller-manager/files/alerts.yaml";
const CASES: &str = "charts/wasm-controller-manager/tests/alerts_test.yaml";

fn yaml(path: &str) -> Result<Value> {
    let text = std::fs::read_to_string(repo(path)).with_context(|| path.to_string())?;
    serde_saphyr::from_str(&text).with_context(|| format!("{path} is not YAML"))
}

/// Every rule of every group of a rule file.
fn rules(file: &Value) -> Vec<&Value> {
    let groups = file["groups"].as_array().into_iter().flatten();
    groups
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .collect()
}

/// Runs promtool with `args` in `dir`; its output when it fails.
fn promtool(dir: &Path, args: &[&str]) -> Result<String> {
    let binary = ControlPlane::promtool();
    let out = Command::new(&binary)
        .args(args)
        .current_dir(dir)
        .output()
        .with_context(|| {
            format!(
                "{} (built by control-plane/scripts/build.sh)",
                binary.display()
            )
        })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(out.status.success(), "promtool {args:?}:\n{text}");
    Ok(text)
}

#[support::test(offline)]
fn promtool_accepts_the_rules_and_passes_their_tests() -> Result<()> {
    let chart = repo("charts/wasm-controller-manager");
    let checked = promtool(&chart, &["check", "rules", "files/alerts.yaml"])?;
    ensure!(checked.contains("SUCCESS"), "{checked}");
    let tested = promtool(&chart, &["test", "rules", "tests/alerts_test.yaml"])?;
    ensure!(tested.contains("SUCCESS"), "{tested}");
    Ok(())
}

#[support::test(offline)]
fn every_alert_fires_in_a_case_and_has_a_runbook() -> Result<()> {
    let file = yaml(RULES)?;
    let alerts: Vec<&str> = rules(&file)
        .iter()
        .filter_map(|r| r["alert"].as_str())
        .collect();
    ensure!(alerts.len() >= 10, "{alerts:?}");
    let cases = yaml(CASES)?;
    let fired: BTreeSet<&str> = (cases["tests"].as_array().into_iter().flatten())
        .flat_map(|t| t["alert_rule_test"].as_array().into_iter().flatten())
        .filter(|c| c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()))
        .filter_map(|c| c["alertname"].as_str())
        .collect();
    let runbooks = std::fs::read_to_string(repo("docs/alerts.md"))?;
    for rule in rules(&file) {
        let Some(alert) = rule["alert"].as_str() else {
            continue;
        };
        ensure!(fired.contains(alert), "no case of {CASES} fires {alert}");
        let heading = format!("\n## {alert}\n");
        ensure!(
            runbooks.contains(&heading),
            "docs/alerts.md has no `## {alert}`"
        );
        let url = rule["annotations"]["runbook_url"].as_str().unwrap_or("");
        let anchor = format!("docs/alerts.md#{}", alert.to_lowercase());
        ensure!(
            url == anchor,
            "{alert}'s runbook_url is {url:?}, not {anchor}"
        );
        let severity = rule["labels"]["severity"].as_str().unwrap_or("");
        ensure!(
            ["critical", "warning", "info"].contains(&severity),
            "{alert}: severity {severity:?}"
        );
    }
    Ok(())
}

/// The PromQL expression of every rule, for `dashboard`'s check against a running
/// host.
pub fn expressions() -> Result<Vec<String>> {
    let file = yaml(RULES)?;
    Ok(rules(&file)
        .iter()
        .filter_map(|r| r["expr"].as_str().map(str::to_string))
        .collect())
}
