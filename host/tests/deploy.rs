//! The host as users run it, on the local node: `scripts/deploy.sh` (what `make deploy`
//! runs: the image imported into the node, `deploy/` with pod-counter and
//! deployment-reconcile in ConfigMaps, applied with kubectl) gives two ready host Pods,
//! one holding the Lease; pod-counter labels the real node with the cluster's Pod count
//! (the host's own Pods included); a WebApp becomes a Deployment whose web server Pods
//! serve and become Ready, and the WebApp reports `Ready=True`; a new plugin version in
//! the ConfigMap is hot-loaded without a restart; the leader's `/metrics` is scraped on
//! its Pod IP; `kubectl rollout restart` hands the Lease over by release, not by
//! expiry; when the leading Pod is deleted, the other replica takes over and keeps
//! reconciling; and plugins too large for a ConfigMap (the Python one) arrive from a
//! plugin image through an init container; and docs/deploying.md's `WasmPlugin` guide,
//! run as written, takes a new project through `make push` to `Ready` and acting (no
//! host Pod restarted). Each plugin acts as its own ServiceAccount
//! with the RBAC `wasm-controller-manager rbac` generates (the audit log shows it).

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DeleteParams, DynamicObject, ListParams, LogParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use support::audit::writes_by;
use support::deployed::{
    NAMESPACE, counts_pods_and_shows_metrics, crd_is_current, deploy, deploy_binary,
    deployed_image, diagnosis, earlier_pods_gone, holds, leader, lease, make_crd_older, node_count,
    plane_with_node, plugin_image, ready_pods, ready_replicas, rebuilt_binary, running_digests,
    undeploy,
};
use support::docs::{follow, path_with_host};
use support::election::{acquire_time, between, holder, renew_time};
use support::objects::create_labelled_pod;
use support::rbac::rbac_file;
use support::webapp::{install_crd, webapp_resource};
use support::{http_get, kubectl, plugin_bytes, plugin_file};
use wcm_control_plane::{ControlPlane, NODE_NAME, TestNamespace, WEB_IMAGE, poll_until};

const WAIT: Duration = Duration::from_secs(120);
/// `deploy/`'s Lease duration (the host's default): a hand-over faster than this was a
/// release, not an expiry.
const LEASE_DURATION: Duration = Duration::from_secs(15);

#[support::test]
async fn deployed_replicas_count_run_webapps_hot_load_hand_over_and_take_plugin_images()
-> Result<()> {
    let (plane, client) = plane_with_node().await?;
    earlier_pods_gone(&client).await?;
    install_crd(&client).await?;
    let overlay = tempfile::tempdir()?;
    let plugins = [
        plugin_file("pod-counter"),
        plugin_file("deployment-reconcile"),
    ];
    let args: Vec<&str> = plugins.iter().filter_map(|p| p.to_str()).collect();
    deploy(plane, overlay.path(), &args)?;
    let result = scenario(plane, &client, overlay.path()).await;
    let result = match result {
        Err(e) => Err(e.context(diagnosis(&client).await)),
        ok => ok,
    };
    let _ = undeploy(plane, overlay.path());
    result
}

async fn scenario(plane: &'static ControlPlane, client: &Client, overlay: &Path) -> Result<()> {
    let pods = ready_replicas(client, 2, WAIT).await?;
    let first = poll_until(WAIT, || leader(client, &pods))
        .await
        .context("no leader")?;
    counts_pods_and_shows_metrics(client, &first).await?;
    writes_as_the_plugin(plane)?;
    runs_a_webapp(client).await?;
    upgrades_handing_over_by_release(plane, client, overlay).await?;
    hot_loads_from_the_config_map(plane, client).await?;
    fails_over_when_the_leader_goes(client).await?;
    follows_the_wasm_plugin_guide(plane, client).await?;
    takes_plugins_from_an_image(plane, client, overlay).await
}

/// The deployed host's label writes on the node were made by its ServiceAccount
/// impersonating pod-counter's, as `deploy/`'s generated RBAC allows. (Refused
/// requests are no writes: a Pod of another scenario's deployment, still stopping
/// after its RBAC went, is refused the impersonation, and the audit log names no
/// impersonated user for it.)
fn writes_as_the_plugin(plane: &ControlPlane) -> Result<()> {
    let writes = writes_by(&plane.audit_log(), "wasm-controller-manager")?;
    let on_node: Vec<_> = (writes.iter())
        .filter(|w| w.resource == "nodes" && w.name.as_deref() == Some(NODE_NAME))
        .filter(|w| w.code < 400)
        .filter(|w| w.user == format!("system:serviceaccount:{NAMESPACE}:wasm-controller-manager"))
        .collect();
    ensure!(!on_node.is_empty(), "no label write by the deployed host");
    let plugin = format!("system:serviceaccount:{NAMESPACE}:wcm-plugin-pod-counter");
    for write in on_node {
        ensure!(
            write.impersonated.as_deref() == Some(plugin.as_str()),
            "{write:?}"
        );
    }
    Ok(())
}

/// A WebApp running the example web server: its Pods serve and become Ready, and the
/// WebApp says `Ready=True` with both replicas ready.
async fn runs_a_webapp(client: &Client) -> Result<()> {
    let ns = TestNamespace::create_on_node("webapp").await?;
    let webapps: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns.name(), &webapp_resource());
    let app: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "demo.wasm-controller-manager.io/v1alpha1", "kind": "WebApp",
        "metadata": {"name": "shop"},
        "spec": {"image": WEB_IMAGE, "replicas": 2, "port": 8080,
                 "env": [{"name": "MESSAGE", "value": "the shop is open"}]},
    }))?;
    webapps.create(&Default::default(), &app).await?;
    let ready = poll_until(WAIT, || async {
        let status = webapps.get("shop").await.ok()?.data.get("status")?.clone();
        let conditions = status.get("conditions")?.as_array()?.clone();
        let ready = conditions
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        (ready && status["readyReplicas"] == 2).then_some(())
    })
    .await;
    if ready.is_none() {
        let pods = ns.describe_pods().await;
        bail!("the WebApp never became Ready with 2 replicas:\n{pods}");
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    let serving = pods.list(&ListParams::default()).await?.items;
    ensure!(serving.len() == 2, "{} web Pods", serving.len());
    for pod in serving {
        let ip = pod.status.and_then(|s| s.pod_ip).context("no Pod IP")?;
        let page = http_get(&format!("{ip}:8080"), "/").await?;
        ensure!(page.contains("the shop is open"), "{page}");
    }
    Ok(())
}

/// A new version in the ConfigMap: hot-loaded by the running Pods, none restarts. It
/// also watches ConfigMaps, so the operator first grants the new plugin set's RBAC.
async fn hot_loads_from_the_config_map(plane: &ControlPlane, client: &Client) -> Result<()> {
    // The new version's RBAC from the file as it is deployed: its name is its identity.
    let deployed = tempfile::tempdir()?;
    let next_file = deployed.path().join("pod-counter.wasm");
    std::fs::write(&next_file, plugin_bytes("pod-counter-next"))?;
    let plugins = [next_file, plugin_file("deployment-reconcile")];
    let rbac = rbac_file(&plugins)?;
    let apply = ["apply", "-f"].map(std::ffi::OsStr::new);
    kubectl(plane, &[&apply[..], &[rbac.path().as_os_str()]].concat())?;
    let next = ByteString(plugin_bytes("pod-counter-next"));
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "wcm-plugin-pod-counter", "namespace": NAMESPACE},
        "binaryData": {"pod-counter.wasm": next},
    }))?;
    let params = PatchParams::apply("deploy-test").force();
    Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .patch("wcm-plugin-pod-counter", &params, &Patch::Apply(&cm))
        .await?;
    let upgraded = poll_until(WAIT, || async {
        node_count(client).await.filter(|c| c.ends_with("-pods"))
    })
    .await;
    upgraded.context("the new plugin version in the ConfigMap was not loaded")?;
    let after = ready_pods(client).await?;
    let restarts: i32 = after
        .iter()
        .flat_map(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.clone())
                .unwrap_or_default()
        })
        .map(|c| c.restart_count)
        .sum();
    ensure!(
        after.len() == 2 && restarts == 0,
        "hot-load restarted Pods: {restarts}"
    );
    Ok(())
}

/// An upgrade as docs/deploying.md gives it: `deploy.sh` again with a rebuilt host —
/// the same version and commit, so the same tag, but new content. The Pods are pinned
/// to the new digest, so both are replaced (with the tag alone, `IfNotPresent` kept
/// the old image and nothing rolled out); each leader hands the Lease over by
/// releasing it (SIGTERM → drain → release), so the next holder acquires it well
/// within the Lease duration; and a CRD older than this checkout's is brought up to
/// date by the same deploy.
async fn upgrades_handing_over_by_release(
    plane: &'static ControlPlane,
    client: &Client,
    overlay: &Path,
) -> Result<()> {
    let before: Vec<String> = (ready_pods(client).await?.iter())
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let old_image = deployed_image(plane)?;
    ensure!(old_image.contains("@sha256:"), "not pinned: {old_image}");
    make_crd_older(plane)?;
    let rebuilt_dir = tempfile::tempdir()?;
    let rebuilt = rebuilt_binary(rebuilt_dir.path())?;
    let overlay_dir = overlay.to_path_buf();
    let binary = rebuilt.to_str().context("path")?.to_string();
    let args: Vec<String> = ["pod-counter", "deployment-reconcile"]
        .iter()
        .map(|p| plugin_file(p).display().to_string())
        .collect();
    let upgrade = std::thread::spawn(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        deploy_binary(plane, &overlay_dir, &binary, &args)
    });
    let gaps = hand_overs_until_replaced(client, &before).await?;
    upgrade
        .join()
        .map_err(|_| anyhow::anyhow!("deploy panicked"))??;
    let new_image = deployed_image(plane)?;
    ensure!(
        new_image != old_image && new_image.contains("@sha256:"),
        "{new_image}"
    );
    let digest = new_image
        .split_once('@')
        .map(|(_, d)| d)
        .unwrap_or_default();
    let running = running_digests(client).await?;
    ensure!(
        running.iter().all(|d| d == digest),
        "{running:?} run, not {digest}"
    );
    ensure!(crd_is_current(plane)?, "the CRD was not upgraded");
    eprintln!("upgrade: hand-overs (new holder, time from release to acquire): {gaps:?}");
    ensure!(!gaps.is_empty(), "the Lease never changed hands");
    for (to, gap) in &gaps {
        ensure!(
            *gap < LEASE_DURATION,
            "{to} acquired the Lease {gap:?} after the last renewal: it expired, nobody released it"
        );
    }
    Ok(())
}

/// Each change of the Lease's holder until two ready Pods, none of them in `before`,
/// one holding it: the new holder and the time from the last renewal to its
/// acquisition.
async fn hand_overs_until_replaced(
    client: &Client,
    before: &[String],
) -> Result<Vec<(String, Duration)>> {
    let mut last = lease(client).await?;
    let mut gaps = Vec::new();
    let deadline = Instant::now() + WAIT * 3;
    loop {
        ensure!(Instant::now() < deadline, "the rollout did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = lease(client).await?;
        let (old, new) = (
            holder(&last).unwrap_or_default(),
            holder(&now).unwrap_or_default(),
        );
        if !new.is_empty() && new != old {
            let released = renew_time(&last).context("no renewTime")?;
            gaps.push((new.to_string(), between(released, acquire_time(&now)?)));
        }
        last = now;
        let pods = ready_pods(client).await?;
        let replaced = pods.len() == 2
            && (pods.iter())
                .all(|p| !before.contains(p.metadata.name.as_ref().unwrap_or(&String::new())));
        let holder = holder(&last).unwrap_or_default();
        if replaced && pods.iter().any(|p| holds(p, holder)) {
            return Ok(gaps);
        }
    }
}

/// The leading Pod goes: the other replica takes over and keeps counting.
async fn fails_over_when_the_leader_goes(client: &Client) -> Result<()> {
    let pods = ready_pods(client).await?;
    let first = poll_until(WAIT, || leader(client, &pods))
        .await
        .context("no leader")?;
    let name = first.metadata.name.clone().context("name")?;
    Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .delete(&name, &DeleteParams::default())
        .await?;
    let took_over = poll_until(WAIT, || async {
        let replicas = ready_pods(client).await.ok()?;
        let new = leader(client, &replicas).await?;
        (new.metadata.name.as_deref() != Some(name.as_str())).then_some(new)
    })
    .await;
    if took_over.is_none() {
        bail!("no other replica took over");
    }
    let all: Api<Pod> = Api::all(client.clone());
    let recounted = poll_until(WAIT, || async {
        let total = all.list(&ListParams::default()).await.ok()?.items.len();
        let label = node_count(client).await?;
        (label == format!("{total}-pods")).then_some(())
    })
    .await;
    recounted.context("the new leader did not keep the count")
}

/// A plugin image with the Python plugin (far over a ConfigMap's 1 MiB) and
/// pod-counter: the init container installs both, and the Python plugin labels a Pod
/// that asks for it with its phase.
/// The Python example pushed to the local registry and declared as a `WasmPlugin`:
/// the deployed host pulls it through the node's bridge (the registry's CA and
/// credentials from `deploy.sh`), runs it, reports `Ready=True` with the digest, and
/// no host Pod restarts.
/// docs/deploying.md's `WasmPlugin` guide, followed literally on the deployed host:
/// a new Go project pushed with `make push` to the local registry, its RBAC from
/// `rbac` with the registry's credentials, the `WasmPlugin` `Ready` with the pushed
/// digest and its plugin labelling a ConfigMap; no host Pod restarted.
async fn follows_the_wasm_plugin_guide(plane: &ControlPlane, client: &Client) -> Result<()> {
    use wcm_daemon::wasmplugin::WasmPlugin;
    let before = restarts(client).await?;
    let work = tempfile::tempdir()?;
    let applied = Instant::now();
    let out = follow_guide(plane, work.path())?;
    eprintln!(
        "docs/deploying.md's WasmPlugin guide, new project to its label: {:?}",
        applied.elapsed()
    );
    let api: Api<WasmPlugin> = Api::namespaced(client.clone(), NAMESPACE);
    let status = api.get("my-plugin").await?.status.context("no status")?;
    let pushed = out
        .lines()
        .find_map(|l| l.split_once("/plugins/my-plugin:v1@"));
    let (_, digest) = pushed.with_context(|| format!("no pushed reference in:\n{out}"))?;
    ensure!(status.digest.as_deref() == Some(digest), "{status:#?}");
    let after = restarts(client).await?;
    let kept = before.iter().all(|pod| after.contains(pod));
    ensure!(kept, "a host Pod restarted or went: {before:?} → {after:?}");
    api.delete("my-plugin", &Default::default()).await?;
    Ok(())
}

/// Runs the `sh guide` blocks of docs/deploying.md in `work` as a reader's shell
/// after `make cluster-up` would (the host and kubectl on `PATH`, `KUBECONFIG`);
/// what it printed.
fn follow_guide(plane: &ControlPlane, work: &Path) -> Result<String> {
    // A run before this one on the same cluster left its objects.
    kubectl(
        plane,
        &[
            "delete",
            "configmap",
            "my-plugin-demo",
            "--ignore-not-found",
        ],
    )?;
    let kubectl_dir = ControlPlane::kubectl()
        .parent()
        .context("kubectl")?
        .to_owned();
    let path = format!("{}:{}", kubectl_dir.display(), path_with_host());
    let kubeconfig = plane.admin_kubeconfig().display().to_string();
    let env = [("PATH", path), ("KUBECONFIG", kubeconfig)];
    let printed = follow("docs/deploying.md", "sh guide", work, &env)?;
    kubectl(plane, &["delete", "configmap", "my-plugin-demo"])?;
    Ok(printed)
}

/// The phase label phase-labeller gives a Pod it tracks, in a namespace of its own
/// (named from `prefix`), if it does within the wait.
async fn phase_of_a_tracked_pod(client: &Client, prefix: &str) -> Result<Option<String>> {
    let ns = TestNamespace::create(prefix).await?;
    let tracked = [("example.com/track-phase", "yes")];
    create_labelled_pod(client, ns.name(), "tracked", &tracked).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    Ok(poll_until(WAIT, || async {
        let labels = pods.get("tracked").await.ok()?.metadata.labels?;
        labels.get("example.com/phase").cloned()
    })
    .await)
}

/// Each host Pod's name and container restarts.
async fn restarts(client: &Client) -> Result<Vec<(String, i32)>> {
    let pods = ready_pods(client).await?;
    let restarts = |p: &Pod| {
        let statuses = p.status.as_ref().and_then(|s| s.container_statuses.clone());
        statuses
            .unwrap_or_default()
            .iter()
            .map(|c| c.restart_count)
            .sum::<i32>()
    };
    let mut all: Vec<(String, i32)> = (pods.iter())
        .map(|p| (p.metadata.name.clone().unwrap_or_default(), restarts(p)))
        .collect();
    all.sort();
    Ok(all)
}

async fn takes_plugins_from_an_image(
    plane: &ControlPlane,
    client: &Client,
    overlay: &Path,
) -> Result<()> {
    let python = plugin_file("phase-labeller");
    let counter = plugin_file("pod-counter");
    let image = plugin_image(plane, &[&python, &counter])?;
    // The operator's RBAC for what the image holds.
    let rbac = rbac_file(&[&python, &counter])?;
    let rbac = rbac.path().to_str().context("temporary path")?;
    deploy(plane, overlay, &["--plugin-image", &image, "--rbac", rbac])?;
    let pods = ready_pods(client).await?;
    let pod = pods.first().context("no ready host Pod")?;
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let params = LogParams {
        container: Some("plugins-0".into()),
        ..Default::default()
    };
    let installed = Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .logs(name, &params)
        .await?;
    ensure!(
        installed.contains("installed phase-labeller.wasm")
            && installed.contains("installed pod-counter.wasm"),
        "{installed}"
    );
    // Gathered into the plugins folder by the host's own image, not the plugin image.
    let params = LogParams {
        container: Some("gather-plugins".into()),
        ..Default::default()
    };
    let gathered = Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .logs(name, &params)
        .await?;
    ensure!(
        gathered.contains("installed phase-labeller.wasm from /images/0")
            && gathered.contains("installed pod-counter.wasm from /images/0"),
        "{gathered}"
    );
    let labelled = phase_of_a_tracked_pod(client, "phase").await?;
    let phase = labelled.context("the Python plugin from the image never labelled the Pod")?;
    ensure!(phase == "Pending", "phase label {phase}");
    Ok(())
}
