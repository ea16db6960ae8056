//! The Helm chart (`charts/wasm-controller-manager`) with the pinned helm: `helm lint
//! --strict` is clean with its defaults and with every option on; `helm template` is
//! the reviewed golden rendering of each; values that cannot work together are refused
//! saying why; rendered with the example plugins' RBAC (`rbac --output chart-values`)
//! it is `deploy/` (kustomize) object for object, so the two cannot drift; Helm 3 lints
//! it as clean and renders the same objects; `helm show readme` is its README. Its
//! install on a cluster is `chart_install`.

use crate::support;

use std::path::PathBuf;

use anyhow::{Context, Result, bail, ensure};
use support::deployed::NAMESPACE;
use support::docs::repo;
use support::helm::{chart, helm, helm3, objects};
use support::plugin_file;
use support::rbac::{EXAMPLES, rbac_file};
use wcm_control_plane::ControlPlane;

const EVERY_FEATURE: &str = "charts/wasm-controller-manager/tests/every-feature.yaml";

/// `helm template` of the chart as release `wcm` in `namespace`, CRDs included, with
/// `extra` arguments.
pub fn template(namespace: &str, extra: &[&str]) -> Result<String> {
    let chart = chart();
    let mut args = vec!["template", "wcm", chart.to_str().context("path")?];
    args.extend(["--namespace", namespace, "--include-crds"]);
    args.extend(["--kube-version", "1.35.4"]);
    args.extend(extra);
    helm(&args, None)
}

#[support::test(offline)]
fn helm_lint_is_clean_with_the_defaults_and_every_option_with_helm_4_and_3() -> Result<()> {
    let chart = chart();
    let chart = chart.to_str().context("path")?;
    for extra in [&[][..], &["-f", EVERY_FEATURE][..]] {
        let args = [
            &["lint", "--strict", chart, "--namespace", NAMESPACE][..],
            extra,
        ]
        .concat();
        for said in [helm(&args, None)?, helm3(&args, None)?] {
            ensure!(said.contains("0 chart(s) failed"), "{said}");
            ensure!(!said.contains("[WARNING]"), "{said}");
        }
    }
    Ok(())
}

/// `helm show readme` is the chart's README: its compatibility and how to install it.
#[support::test(offline)]
fn helm_show_readme_says_what_the_chart_works_with_and_how_to_install_it() -> Result<()> {
    let chart = chart();
    let readme = helm(&["show", "readme", chart.to_str().context("path")?], None)?;
    for part in [
        "## Compatibility",
        "| Helm |",
        "helm upgrade --install wcm oci://",
    ] {
        ensure!(readme.contains(part), "no {part:?} in:\n{readme}");
    }
    Ok(())
}

/// Helm 3 renders the objects Helm 4 does (its YAML differs in blank lines only).
#[support::test(offline)]
fn helm_3_renders_the_objects_helm_4_does() -> Result<()> {
    let chart = chart();
    for extra in [&[][..], &["-f", EVERY_FEATURE][..]] {
        let mut args = vec!["template", "wcm", chart.to_str().context("path")?];
        args.extend([
            "--namespace",
            NAMESPACE,
            "--include-crds",
            "--kube-version",
            "1.35.4",
        ]);
        args.extend(extra);
        let (four, three) = (
            objects(&helm(&args, None)?)?,
            objects(&helm3(&args, None)?)?,
        );
        ensure!(four == three, "Helm 3 renders other objects with {extra:?}");
    }
    Ok(())
}

#[support::test(offline)]
fn helm_template_is_the_reviewed_golden_rendering() -> Result<()> {
    for (golden, extra) in [
        ("default.yaml", &[][..]),
        ("every-feature.yaml", &["-f", EVERY_FEATURE][..]),
    ] {
        let path = format!("charts/wasm-controller-manager/tests/golden/{golden}");
        let rendered = template(NAMESPACE, extra)?;
        let written = std::fs::read_to_string(repo(&path)).unwrap_or_default();
        ensure!(
            rendered == written,
            "the chart's rendering changed; review it and write it with\n  {} template wcm \
             charts/wasm-controller-manager --namespace {NAMESPACE} --include-crds \
             --kube-version 1.35.4 {} > {path}\nnew rendering:\n{rendered}",
            ControlPlane::helm().display(),
            extra.join(" ")
        );
    }
    Ok(())
}

#[support::test(offline)]
fn values_that_cannot_work_together_are_refused_saying_why() -> Result<()> {
    let both = template(
        NAMESPACE,
        &["--set", "plugins.images={registry.example/p:v1}"],
    );
    let said = format!(
        "{:#}",
        both.err().context("ConfigMaps and images both taken")?
    );
    ensure!(
        said.contains("plugins.configMaps and plugins.images cannot both be set"),
        "{said}"
    );
    let elsewhere = template("other", &[])
        .err()
        .context("RBAC for another namespace taken")?;
    let said = format!("{elsewhere:#}");
    ensure!(
        said.contains("the rbac values are for namespace wcm-system, the release is in other")
            && said.contains("--namespace other"),
        "{said}"
    );
    let mode = template(NAMESPACE, &["--set", "leaderElection.mode=leader"]);
    let said = format!("{:#}", mode.err().context("an unknown mode taken")?);
    ensure!(said.contains("it is single or per-plugin"), "{said}");
    let digest = template(NAMESPACE, &["--set", "image.digest=0.1.0"]);
    let said = format!("{:#}", digest.err().context("a tag taken for a digest")?);
    ensure!(
        said.contains("image.digest is \"0.1.0\": it is sha256: and 64 hex digits"),
        "{said}"
    );
    Ok(())
}

/// The chart-values `rbac` writes for `files`, in a file for `helm -f`.
pub fn chart_values(namespace: &str, files: &[PathBuf]) -> Result<tempfile::NamedTempFile> {
    let mut args = vec![PathBuf::from("--output=chart-values")];
    args.extend([PathBuf::from("--namespace"), PathBuf::from(namespace)]);
    args.extend(files.iter().cloned());
    rbac_file(&args)
}

#[support::test]
fn with_the_examples_rbac_the_chart_renders_what_deploy_applies() -> Result<()> {
    let files: Vec<PathBuf> = EXAMPLES.iter().map(|p| plugin_file(p)).collect();
    let values = chart_values(NAMESPACE, &files)?;
    let values_path = values.path().to_str().context("path")?;
    let chart = objects(&template(NAMESPACE, &["-f", values_path])?)?;
    let out = std::process::Command::new(ControlPlane::kubectl())
        .args(["kustomize", repo("deploy").to_str().context("path")?])
        .output()?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut kustomized = objects(&String::from_utf8(out.stdout)?)?;
    // The release's namespace is Helm's to create (`--create-namespace`); deploy/
    // writes it with its Pod Security label.
    kustomized
        .remove(&format!("Namespace /{NAMESPACE}"))
        .context("deploy/ has no Namespace")?;
    let only = |a: &std::collections::BTreeMap<String, serde_json::Value>,
                b: &std::collections::BTreeMap<String, serde_json::Value>| {
        a.keys()
            .filter(|k| !b.contains_key(*k))
            .cloned()
            .collect::<Vec<_>>()
    };
    ensure!(
        chart.keys().eq(kustomized.keys()),
        "only in the chart: {:?}; only in deploy/: {:?}",
        only(&chart, &kustomized),
        only(&kustomized, &chart)
    );
    for (key, object) in &chart {
        let other = &kustomized[key];
        if object != other {
            bail!(
                "{key} differs\nchart:\n{}\ndeploy/:\n{}",
                serde_json::to_string_pretty(object)?,
                serde_json::to_string_pretty(other)?
            );
        }
    }
    Ok(())
}
