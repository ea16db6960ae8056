//! The Helm chart (`charts/wasm-controller-manager`) with the pinned helm: `helm lint
//! --strict` is clean with its defaults and with every option on; `helm template` is
//! the reviewed golden rendering of each; values that cannot work together are refused
//! saying why; rendered with the example plugins' RBAC (`rbac --output chart-values`)
//! it is `deploy/` (kustomize) object for object, so the two cannot drift; and `helm
//! install` on the local cluster (real node) gives two ready replicas, one holding the
//! Lease, with pod-counter (from a ConfigMap) counting the cluster's Pods.

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use support::deployed::{
    NAMESPACE, counts_pods_and_shows_metrics, diagnosis, earlier_pods_gone, lease,
    namespace_gone_or_live, plane_with_node, ready_pods,
};
use support::docs::repo;
use support::helm::{chart, helm, objects};
use support::rbac::{EXAMPLES, rbac_file};
use support::{kubectl, plugin_file};
use wcm_control_plane::{ControlPlane, poll_until};

const EVERY_FEATURE: &str = "charts/wasm-controller-manager/tests/every-feature.yaml";

/// `helm template` of the chart as release `wcm` in `namespace`, CRDs included, with
/// `extra` arguments.
fn template(namespace: &str, extra: &[&str]) -> Result<String> {
    let chart = chart();
    let mut args = vec!["template", "wcm", chart.to_str().context("path")?];
    args.extend(["--namespace", namespace, "--include-crds"]);
    args.extend(["--kube-version", "1.35.4"]);
    args.extend(extra);
    helm(&args, None)
}

#[test]
fn helm_lint_is_clean_with_the_defaults_and_every_option() -> Result<()> {
    let chart = chart();
    let chart = chart.to_str().context("path")?;
    for extra in [&[][..], &["-f", EVERY_FEATURE][..]] {
        let args = [
            &["lint", "--strict", chart, "--namespace", NAMESPACE][..],
            extra,
        ]
        .concat();
        let said = helm(&args, None)?;
        ensure!(said.contains("0 chart(s) failed"), "{said}");
        ensure!(!said.contains("[WARNING]"), "{said}");
    }
    Ok(())
}

#[test]
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

#[test]
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
fn chart_values(namespace: &str, files: &[PathBuf]) -> Result<tempfile::NamedTempFile> {
    let mut args = vec![PathBuf::from("--output=chart-values")];
    args.extend([PathBuf::from("--namespace"), PathBuf::from(namespace)]);
    args.extend(files.iter().cloned());
    rbac_file(&args)
}

#[test]
fn with_the_examples_rbac_the_chart_renders_what_deploy_applies() -> Result<()> {
    let _turn = support::turns::one_file_at_a_time(module_path!());
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

const INSTALLED_WITHIN: Duration = Duration::from_secs(300);

#[tokio::test]
async fn helm_install_gives_two_ready_replicas_with_pod_counter_counting() -> Result<()> {
    let _turn = support::turns::one_file_at_a_time(module_path!());
    let (plane, client) = plane_with_node().await?;
    namespace_gone_or_live(plane)?;
    earlier_pods_gone(&client).await?;
    let result = install_and_check(plane, &client).await;
    let result = match result {
        Err(e) => Err(e.context(diagnosis(&client).await)),
        ok => ok,
    };
    let kubeconfig = Some(plane.admin_kubeconfig());
    let _ = helm(
        &["uninstall", "wcm", "--namespace", NAMESPACE, "--wait"],
        kubeconfig,
    );
    let _ = kubectl(plane, &["delete", "namespace", NAMESPACE, "--wait=false"]);
    result
}

async fn install_and_check(plane: &ControlPlane, client: &kube::Client) -> Result<()> {
    // The namespace enforces the restricted Pod Security profile, as deploy/ has it:
    // the chart's Pods must meet it.
    let namespace = tempfile::NamedTempFile::new()?;
    std::fs::write(
        namespace.path(),
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n  labels:\n    \
             pod-security.kubernetes.io/enforce: restricted\n"
        ),
    )?;
    let path = namespace.path().to_str().context("path")?;
    kubectl(plane, &["apply", "-f", path])?;
    let counter = plugin_file("pod-counter");
    let from_file = format!("--from-file={}", counter.display());
    kubectl(
        plane,
        &[
            "-n",
            NAMESPACE,
            "create",
            "configmap",
            "wcm-plugins",
            &from_file,
        ],
    )?;
    let values = chart_values(NAMESPACE, &[counter])?;
    let local = local_values(plane)?;
    let chart = chart();
    let args = [
        "upgrade",
        "--install",
        "wcm",
        chart.to_str().context("path")?,
        "--namespace",
        NAMESPACE,
        "-f",
        values.path().to_str().context("path")?,
        "-f",
        local.path().to_str().context("path")?,
        "--wait=watcher",
        "--timeout",
        "300s",
        // What another file's test applied with kubectl and left (pod-counter's
        // ClusterRoles, the WasmPlugin CRD) is adopted, as when moving from deploy/ to
        // the chart: its objects taken over, and the CRD's fields kubectl's server-side
        // apply owns applied over.
        "--take-ownership",
        "--force-conflicts",
    ];
    helm(&args, Some(plane.admin_kubeconfig()))?;
    let pods = ready_pods(client).await?;
    ensure!(pods.len() == 2, "{} ready host Pods", pods.len());
    let leader = poll_until(INSTALLED_WITHIN, || {
        support::deployed::leader(client, &pods)
    })
    .await
    .context("no replica holds the Lease")?;
    let holder = lease(client).await?.spec.and_then(|s| s.holder_identity);
    ensure!(holder == leader.metadata.name, "{holder:?}");
    counts_pods_and_shows_metrics(client, &leader).await
}

/// Values for the local cluster: the host's image, as `scripts/image.sh` imports it
/// into the node from this test build's binary, and the API server's address on the
/// node's bridge (the local node has no kube-proxy).
fn local_values(plane: &ControlPlane) -> Result<tempfile::NamedTempFile> {
    let root = repo(".");
    let run = |script: &str| -> Result<String> {
        let out = std::process::Command::new("bash")
            .args(["-c", script])
            .current_dir(&root)
            .env("KUBECONFIG", plane.admin_kubeconfig())
            .env("WCM_CLUSTER_DIR", plane.state_dir())
            .output()?;
        ensure!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)?.trim().to_string())
    };
    let binary = env!("CARGO_BIN_EXE_wasm-controller-manager");
    let image = run(&format!("scripts/image.sh --binary {binary} | tail -n1"))?;
    // On the local node, the image pinned to its digest.
    let (repository, digest) = image.split_once('@').context("an image without a digest")?;
    let gateway = run(
        "source control-plane/scripts/common.sh && source control-plane/scripts/node.sh && node_gateway",
    )?;
    let port = std::fs::read_to_string(plane.state_dir().join("apiserver.port"))?;
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(
        file.path(),
        format!(
            "image: {{repository: {repository}, digest: \"{digest}\"}}\nextraEnv:\n  \
             - {{name: KUBERNETES_SERVICE_HOST, value: \"{gateway}\"}}\n  \
             - {{name: KUBERNETES_SERVICE_PORT, value: \"{}\"}}\n",
            port.trim()
        ),
    )?;
    Ok(file)
}
