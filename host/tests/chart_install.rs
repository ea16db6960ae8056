//! The chart installed as docs/deploying.md says, its Helm blocks run as written on the
//! local cluster (real node): packaged and pushed to the local registry, installed from
//! there with Helm 3 (two ready replicas, one holding the Lease, pod-counter from a
//! ConfigMap counting the cluster's Pods), upgraded with Helm 4 (a rebuilt image, an
//! older CRD applied first), recording a plugin whose transcripts are fetched and
//! replayed as docs/testing-a-plugin.md says, and a second install beside it.

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use support::deployed::{
    NAMESPACE, counts_pods_and_shows_metrics, crd_is_current, diagnosis, earlier_pods_gone, lease,
    local_image, make_crd_older, namespace_gone_or_live, plane_with_node, ready_replicas,
    rebuilt_binary, run_script, running_digests,
};
use support::docs::{checkout_view, follow, path_with_host};
use support::helm::{chart, helm, objects};
use support::rbac::rbac_file;
use support::{kubectl, plugin_file};
use wcm_control_plane::{ControlPlane, poll_until};

use crate::chart::{chart_values, template};

const INSTALLED_WITHIN: Duration = Duration::from_secs(300);

/// docs/deploying.md's Helm blocks, followed literally on the local cluster: the chart
/// packaged and pushed to the local registry, installed from `oci://` with Helm 3 —
/// two ready replicas, one holding the Lease, pod-counter counting — then, with a
/// rebuilt image and a CRD made older, upgraded with Helm 4: the Pods run the new
/// digest, the CRD is the chart's, pod-counter still counts.
#[support::test]
async fn installed_from_the_registry_with_helm_3_and_upgraded_with_helm_4_as_the_docs_say()
-> Result<()> {
    let (plane, client) = plane_with_node().await?;
    namespace_gone_or_live(plane)?;
    earlier_pods_gone(&client).await?;
    let result = install_upgrade_and_check(plane, &client).await;
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

async fn install_upgrade_and_check(plane: &ControlPlane, client: &kube::Client) -> Result<()> {
    let view = checkout_view()?;
    let helm_home = tempfile::tempdir()?;
    leftovers_gone(plane)?;
    let image = local_image(plane, env!("CARGO_BIN_EXE_wasm-controller-manager"))?;
    let env = reader_env(plane, &ControlPlane::helm3(), helm_home.path(), &image)?;
    let said = follow("docs/deploying.md", "sh helm-install", view.path(), &env)?;
    // The NOTES tell how to add a plugin without taking the others' rights away.
    let notes = said
        .split_once("NOTES:")
        .map(|(_, n)| n)
        .unwrap_or_default();
    ensure!(
        notes.contains("over ALL the plugins") && notes.contains("--reset-then-reuse-values"),
        "{said}"
    );
    counts_with_two_replicas(client).await?;
    make_crd_older(plane)?;
    let rebuilt_dir = tempfile::tempdir()?;
    let rebuilt = rebuilt_binary(rebuilt_dir.path())?;
    let upgraded = local_image(plane, rebuilt.to_str().context("path")?)?;
    ensure!(upgraded != image, "the rebuilt image is the same: {image}");
    let env = reader_env(plane, &ControlPlane::helm(), helm_home.path(), &upgraded)?;
    follow("docs/deploying.md", "sh helm-upgrade", view.path(), &env)?;
    let (_, digest) = upgraded.split_once('@').context("no digest")?;
    let running = running_digests(client).await?;
    ensure!(
        running.len() == 2 && running.iter().all(|d| d == digest),
        "{running:?} run, not {digest}"
    );
    ensure!(crd_is_current(plane)?, "the CRD was not upgraded");
    counts_with_two_replicas(client).await?;
    records_in_the_cluster(plane, view.path()).await?;
    let second = a_second_install_beside_it(plane, client, &upgraded).await;
    let _ = helm(
        &["uninstall", "wcm-b", "--namespace", SECOND, "--wait"],
        Some(plane.admin_kubeconfig()),
    );
    let _ = kubectl(plane, &["delete", "namespace", SECOND, "--wait=false"]);
    second
}

/// Recording turned on with the chart's value; docs/testing-a-plugin.md's block, run as
/// written, fetches the leader's transcripts through `kubectl exec` (the image has no
/// shell or tar) and replays them.
async fn records_in_the_cluster(plane: &ControlPlane, view: &std::path::Path) -> Result<()> {
    let chart = chart();
    let record = [
        "upgrade",
        "wcm",
        chart.to_str().context("path")?,
        "-n",
        NAMESPACE,
        "--reuse-values",
        "--set",
        "recording.plugins={pod-counter}",
        "--wait",
        "--timeout",
        "300s",
    ];
    helm(&record, Some(plane.admin_kubeconfig()))?;
    let kubectl_dir = ControlPlane::kubectl()
        .parent()
        .context("kubectl")?
        .display()
        .to_string();
    let env = [
        ("PATH", format!("{kubectl_dir}:{}", path_with_host())),
        ("KUBECONFIG", plane.admin_kubeconfig().display().to_string()),
    ];
    // The new leader records once it has reconciled.
    let mut last = None;
    let replayed = poll_until(INSTALLED_WITHIN, || {
        let said = follow(
            "docs/testing-a-plugin.md",
            "sh fetch-transcripts",
            view,
            &env,
        );
        let ok = said.as_ref().is_ok_and(|s| s.contains("000001.yaml"));
        last = Some(said);
        async move { ok.then_some(()) }
    })
    .await;
    replayed.with_context(|| format!("no transcript fetched and replayed: {last:?}"))
}

/// The namespace of a second install in the same cluster.
const SECOND: &str = "wcm-b";

/// A second install in another namespace, with names of its own (its host account and
/// plugin prefix, as docs/deploying.md says): both run pod-counter, neither takes the
/// other's rights (a second install with the first's names once bound the cluster-wide
/// roles to its own accounts).
async fn a_second_install_beside_it(
    plane: &ControlPlane,
    client: &kube::Client,
    image: &str,
) -> Result<()> {
    let labelled = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {SECOND}\n  labels:\n    \
         pod-security.kubernetes.io/enforce: restricted\n"
    );
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), labelled)?;
    kubectl(
        plane,
        &["apply", "-f", file.path().to_str().context("path")?],
    )?;
    let counter = plugin_file("pod-counter");
    let from_file = format!("--from-file={}", counter.display());
    kubectl(
        plane,
        &[
            "-n",
            SECOND,
            "create",
            "configmap",
            "wcm-plugins",
            &from_file,
        ],
    )?;
    let names = [
        "--host-service-account",
        "wcm-b",
        "--service-account-prefix",
        "wcm-b-plugin-",
    ];
    let mut args: Vec<PathBuf> = names.iter().map(PathBuf::from).collect();
    args.extend(["--output=chart-values", "--namespace", SECOND].map(PathBuf::from));
    args.push(counter);
    let values = rbac_file(&args)?;
    let local = tempfile::NamedTempFile::new()?;
    let values_for_node = run_script(plane, "local-chart-values.sh", &[] as &[&str])?;
    std::fs::write(local.path(), values_for_node)?;
    let (repository, digest) = image.split_once('@').context("no digest")?;
    let (repository, digest) = (
        format!("image.repository={repository}"),
        format!("image.digest={digest}"),
    );
    let chart = chart();
    let install = [
        "upgrade",
        "--install",
        "wcm-b",
        chart.to_str().context("path")?,
        "-n",
        SECOND,
        "-f",
        values.path().to_str().context("path")?,
        "-f",
        local.path().to_str().context("path")?,
        "--set",
        &repository,
        "--set",
        &digest,
        "--wait",
        "--timeout",
        "300s",
        // The CRD is the cluster's, installed and upgraded once for every install.
        "--skip-crds",
    ];
    helm(&install, Some(plane.admin_kubeconfig()))?;
    for namespace in [NAMESPACE, SECOND] {
        runs_pod_counter(client, namespace).await?;
    }
    Ok(())
}

/// The Lease holder of the install in `namespace` runs pod-counter (`running`, not
/// `forbidden`).
async fn runs_pod_counter(client: &kube::Client, namespace: &str) -> Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Pod;
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), namespace);
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), namespace);
    let running = r#"wcm_plugin_state{plugin="pod-counter",state="running"} 1"#;
    let seen = poll_until(INSTALLED_WITHIN, || async {
        let lease = leases.get("wasm-controller-manager").await.ok()?;
        let holder = lease.spec?.holder_identity?;
        let ip = pods.get(&holder).await.ok()?.status?.pod_ip?;
        let metrics = support::http_get(&format!("{ip}:8080"), "/metrics")
            .await
            .ok()?;
        metrics.contains(running).then_some(())
    })
    .await;
    seen.with_context(|| format!("pod-counter is not running in {namespace}"))
}

/// Two ready host Pods, one holding the Lease, pod-counter counting the cluster's Pods.
/// `helm install --wait` returns once the Deployment is available, which one ready
/// replica of two already is; the second follows.
async fn counts_with_two_replicas(client: &kube::Client) -> Result<()> {
    let pods = ready_replicas(client, 2, INSTALLED_WITHIN).await?;
    let leader = poll_until(INSTALLED_WITHIN, || {
        support::deployed::leader(client, &pods)
    })
    .await
    .context("no replica holds the Lease")?;
    let holder = lease(client).await?.spec.and_then(|s| s.holder_identity);
    ensure!(holder == leader.metadata.name, "{holder:?}");
    counts_pods_and_shows_metrics(client, &leader).await
}

/// A reader's shell after `make cluster-up`: `helm` (the given one), kubectl and the
/// host on `PATH`, the cluster's kubeconfig, Helm's files in a home of the test's own,
/// and `image` set as the docs tell the reader to.
fn reader_env(
    plane: &ControlPlane,
    helm: &std::path::Path,
    home: &std::path::Path,
    image: &str,
) -> Result<Vec<(&'static str, String)>> {
    let dirs =
        [helm, &ControlPlane::kubectl()].map(|b| b.parent().map(|d| d.display().to_string()));
    let [Some(helm_dir), Some(kubectl_dir)] = dirs else {
        bail!("no tool directory")
    };
    Ok(vec![
        (
            "PATH",
            format!("{helm_dir}:{kubectl_dir}:{}", path_with_host()),
        ),
        ("KUBECONFIG", plane.admin_kubeconfig().display().to_string()),
        (
            "HELM_CONFIG_HOME",
            home.join("config").display().to_string(),
        ),
        ("HELM_CACHE_HOME", home.join("cache").display().to_string()),
        ("HELM_DATA_HOME", home.join("data").display().to_string()),
        ("image", image.to_string()),
    ])
}

/// What other files' tests left cluster-wide and the chart would create: their
/// ClusterRoles and bindings (pod-counter's, the host's). A fresh cluster has none, and
/// Helm 3 adopts nothing it did not create.
fn leftovers_gone(plane: &ControlPlane) -> Result<()> {
    let values = chart_values(NAMESPACE, &[plugin_file("pod-counter")])?;
    let rendered = template(NAMESPACE, &["-f", values.path().to_str().context("path")?])?;
    for key in objects(&rendered)?.keys() {
        let Some((kind, name)) = key.split_once(" /") else {
            continue;
        };
        if kind == "ClusterRole" || kind == "ClusterRoleBinding" {
            kubectl(plane, &["delete", kind, name, "--ignore-not-found"])?;
        }
    }
    Ok(())
}
