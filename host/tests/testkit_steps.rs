//! `wasm-controller-manager test --steps`: a plugin followed through a sequence of
//! changes, converging after each. deployment-reconcile's WebApp scaled, its
//! Deployment's status written by another controller, a missing Secret created, a
//! Secret rotated and a WebApp deleted each show up in their own step of the report
//! as a user expects; a step that cannot be made is refused naming the file, the
//! step and the object. Needs no cluster.

use crate::support;

use std::path::PathBuf;

use anyhow::{Context, Result, ensure};
use serde_json::Value;
use support::plugin_file;
use support::testkit_cli::{fixture, repo, test_command, text};

/// deployment-reconcile's fixtures, settings and steps, with `more` arguments.
fn webapp_steps(more: &[&str]) -> Vec<PathBuf> {
    let dir = "plugins/deployment-reconcile";
    let mut args = vec![
        plugin_file("deployment-reconcile"),
        repo(&format!("{dir}/webapp-crd.yaml")),
        repo(&format!("{dir}/testdata/webapps.yaml")),
        "--settings".into(),
        repo(&format!("{dir}/testdata/settings.yaml")),
        "--steps".into(),
        repo(&format!("{dir}/testdata/steps.yaml")),
    ];
    args.extend(more.iter().map(PathBuf::from));
    args
}

/// The writes of the step named `name` in `report`.
fn writes_of<'a>(report: &'a Value, name: &str) -> Result<&'a Vec<Value>> {
    let steps = report["steps"]
        .as_array()
        .context("no steps in the report")?;
    let step = steps.iter().find(|s| s["step"] == name);
    let step = step.with_context(|| format!("no step {name:?}"))?;
    step["writes"].as_array().context("no writes")
}

/// The `apply` of `object` among `writes`, the last if several.
fn applied<'a>(writes: &'a [Value], object: &str) -> Result<&'a Value> {
    let found = (writes.iter().rev()).find(|w| w["call"] == "apply" && w["object"] == object);
    let found = found.with_context(|| format!("no apply of {object}: {writes:#?}"));
    Ok(&found?["applied"])
}

#[support::test]
fn a_webapp_followed_step_by_step_does_in_each_step_what_a_user_expects() -> Result<()> {
    let expected = repo("plugins/deployment-reconcile/testdata/steps-expected.yaml");
    let expected = expected.to_str().context("path")?;
    let out = test_command(&webapp_steps(&["--expect", expected]))?;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    ensure!(out.status.success(), "{stderr}\n{stdout}");
    let report: Value = serde_saphyr::from_str(&stdout)?;

    // The user scales the WebApp: the Deployment is applied with three replicas.
    let scaled = writes_of(&report, "shop scales to three")?;
    let deployment = applied(scaled, "apps/v1/Deployment demo/shop")?;
    ensure!(deployment["spec"]["replicas"] == 3, "{deployment:#}");
    // Another controller reports the Pods ready: the WebApp is Ready.
    let ready = writes_of(&report, "the Deployment controller reports three ready")?;
    let status = (ready.iter().find(|w| w["call"] == "patch-status")).context("no status")?;
    let condition = &status["status"]["conditions"][0];
    ensure!(
        condition["status"] == "True" && condition["message"] == "3 of 3 replicas ready",
        "{status:#}"
    );
    // The missing Secret appears: a minute later `pending` gets its Deployment.
    let created = writes_of(&report, "the Secret pending waits for is created")?;
    applied(created, "apps/v1/Deployment demo/pending")?;
    // The rotated Secret rolls vault's Pods: a new secret-version in the template.
    let version = |d: &Value| {
        d["spec"]["template"]["metadata"]["annotations"]
            ["demo.wasm-controller-manager.io/secret-version"]
            .clone()
    };
    let before = version(applied(created, "apps/v1/Deployment demo/vault")?);
    let rotated = writes_of(&report, "vault's Secret is rotated")?;
    let after = version(applied(rotated, "apps/v1/Deployment demo/vault")?);
    ensure!(after.is_string() && before != after, "{before} -> {after}");
    // The WebApp deleted: its registry record goes, then its finalizer.
    let deleted = writes_of(&report, "shop is deleted")?;
    let calls: Vec<(&Value, &Value)> = deleted.iter().map(|w| (&w["call"], &w["object"])).collect();
    ensure!(
        calls
            == [
                (
                    &"delete".into(),
                    &"v1/ConfigMap webapp-registry/demo.shop".into()
                ),
                (
                    &"patch-finalizers".into(),
                    &"demo.wasm-controller-manager.io/v1alpha1/WebApp demo/shop".into()
                )
            ],
        "{calls:?}"
    );
    Ok(())
}

#[support::test]
fn a_step_that_cannot_be_made_is_refused_naming_the_file_the_step_and_the_object() -> Result<()> {
    let (_dir, steps) = fixture(
        "steps:\n- name: scale\n  apply: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}]\n\
         - name: the Secret goes\n  delete:\n  - {apiVersion: v1, kind: Secret, \
         metadata: {name: nope, namespace: demo}}\n",
    )?;
    let mut args = webapp_steps(&[]);
    let at = args.len() - 1;
    args[at] = steps.clone();
    let out = test_command(&args)?;
    let stderr = text(&out.stderr);
    let needle = format!(
        "{}: step 2 (\"the Secret goes\"): v1/Secret demo/nope: not found",
        steps.display()
    );
    ensure!(
        !out.status.success() && stderr.contains(&needle),
        "{stderr}"
    );
    Ok(())
}
