//! The workload of the per-plugin election tests and of `benches/replicas.rs`: nine
//! plugins — the five examples, each under a name of its own (pod-counter as
//! `counter`, deployment-reconcile as `webapps`, the Go config-reloader as
//! `reloader`, the JavaScript data-hash as `hashes`, the Python phase-labeller as
//! `phases`), and four copies of label-mirror, `mirror-i` writing the label
//! `wcm.test/m-i` — over ConfigMaps, Pods, Deployments and WebApps changed in
//! rounds; and the check that every plugin's work is on every object of the last
//! round, each plugin's work told apart from the others'. Self-contained (the bench
//! includes this file), so it depends on no other test support.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::json;

use kube::api::ApiResource;
use wcm_control_plane::poll_until;

/// The plugins, as many as the Leases the tests expect.
pub const PLUGINS: usize = 9;
const MIRRORS: usize = PLUGINS - EXAMPLES.len();

/// The examples: (plugin name, file name in `target/plugins`).
const EXAMPLES: [(&str, &str); 5] = [
    ("counter", "pod-counter"),
    ("webapps", "deployment-reconcile"),
    ("reloader", "config-reloader"),
    ("hashes", "data-hash"),
    ("phases", "phase-labeller"),
];

/// How many objects of each kind a round changes.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// ConfigMaps, their data changed each round: label-mirror relabels them,
    /// data-hash labels them with a hash of their data.
    pub config_maps: usize,
    /// Pods no node takes (the only node is a tainted control plane), so they cost
    /// no containers: label-mirror relabels them, phase-labeller labels them
    /// `Pending` again (a round removes that label), pod-counter counts them.
    pub pods: usize,
    /// Deployments of no replicas, each reloaded on a ConfigMap's data by
    /// config-reloader.
    pub reloads: usize,
    /// WebApps of no replicas: deployment-reconcile keeps a Deployment per WebApp
    /// whose image follows the WebApp's, and no Pod runs.
    pub webapps: usize,
}

/// The tests' workload: a few of each.
pub const SMALL: Workload = Workload {
    config_maps: 3,
    pods: 2,
    reloads: 1,
    webapps: 2,
};

/// The API resource of deployment-reconcile's WebApps.
pub fn webapp_resource() -> ApiResource {
    ApiResource {
        group: "demo.wasm-controller-manager.io".into(),
        version: "v1alpha1".into(),
        api_version: "demo.wasm-controller-manager.io/v1alpha1".into(),
        kind: "WebApp".into(),
        plural: "webapps".into(),
    }
}

/// The built plugin files the nine come from: `file(name)` is the path of
/// `<name>.wasm` (an example, or the test plugin label-mirror).
pub fn plugin_files(file: impl Fn(&str) -> PathBuf) -> Vec<PathBuf> {
    let examples = EXAMPLES.iter().map(|(_, f)| file(f));
    examples.chain([file("label-mirror")]).collect()
}

/// A plugins directory with the nine plugins, from the files `file` names, and
/// their settings. The WebApp CRD must be installed for `webapps` to start.
pub fn nine_plugins(file: impl Fn(&str) -> PathBuf) -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    for (name, example) in EXAMPLES {
        std::fs::copy(file(example), dir.path().join(format!("{name}.wasm")))?;
    }
    for i in 0..MIRRORS {
        let mirror = dir.path().join(format!("mirror-{i}.wasm"));
        std::fs::copy(file("label-mirror"), mirror)?;
        let settings = json!({ "mirrored-label": format!("wcm.test/m-{i}") });
        let file = dir.path().join(format!("mirror-{i}.settings.json"));
        std::fs::write(file, settings.to_string())?;
    }
    Ok(dir)
}

/// Compiles `files` into the default compile cache (by `wasm-controller-manager
/// rbac`, which loads each), so replicas started side by side load them from it
/// instead of each compiling the Python and JavaScript examples at once.
pub fn compile_once(host: &Path, files: &[PathBuf]) -> Result<()> {
    let out = std::process::Command::new(host)
        .arg("rbac")
        .args(files)
        .output()?;
    ensure!(
        out.status.success(),
        "compiling the plugins: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Merges `patch` into `name` or, if it does not exist, creates it from `object`:
/// one request for an object that exists, as after the first round.
async fn create_or_patch<K>(
    api: &Api<K>,
    name: &str,
    object: &K,
    patch: serde_json::Value,
) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let (params, patch) = (PatchParams::default(), Patch::Merge(patch));
    match api.patch(name, &params, &patch).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            drop(api.create(&PostParams::default(), object).await?);
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether every mirror copy has written `value` onto each of `objects` named with
/// `prefix`, and there are `count` of them.
fn mirrored<'a>(
    objects: impl Iterator<Item = &'a ObjectMeta>,
    prefix: &str,
    count: usize,
    value: &str,
) -> bool {
    let ours: Vec<_> = objects.filter(|m| named(m, prefix)).collect();
    let done = |m: &&ObjectMeta| {
        let labels = m.labels.clone().unwrap_or_default();
        (0..MIRRORS)
            .all(|i| labels.get(&format!("wcm.test/m-{i}")).map(String::as_str) == Some(value))
    };
    ours.len() == count && ours.iter().all(done)
}

/// Whether `meta` is of an object named with `prefix` (the namespace holds others:
/// its root CA ConfigMap, the WebApps' Deployments).
fn named(meta: &ObjectMeta, prefix: &str) -> bool {
    meta.name.as_deref().is_some_and(|n| n.starts_with(prefix))
}

/// The label `key` of `meta`.
fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

/// data-hash's label for a ConfigMap whose data is `{"round": value}`: 32-bit
/// FNV-1a of the data as JSON, keys sorted, in 8 hex digits.
fn data_hash(value: &str) -> String {
    let json = json!({ "round": value }).to_string();
    let hash = json.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("{hash:08x}")
}

/// config-reloader's annotation for the same data: 64-bit FNV-1a of each sorted
/// `key=value` entry followed by a zero byte, in 16 hex digits.
fn config_hash(value: &str) -> String {
    let entry = format!("round={value}\0");
    let hash = entry.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// Lists every `K` in `ns`.
async fn all<K>(client: &Client, ns: &str) -> Option<Vec<K>>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    Some(api.list(&ListParams::default()).await.ok()?.items)
}

impl Workload {
    /// One round: ConfigMaps `cm-i` labelled `wcm.test/source=value` with the data
    /// `round: value`; Pods `pod-i` labelled the same, without phase-labeller's
    /// label; Deployments `reload-i` reloaded on `cm-i`; WebApps `app-i` running the
    /// image `registry.invalid/web:value` (each created, or changed).
    pub async fn round(&self, client: &Client, ns: &str, value: &str) -> Result<()> {
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        for i in 0..self.config_maps {
            let name = format!("cm-{i}");
            let change = json!({
                "metadata": {"labels": {"wcm.test/source": value, "example.com/hash-data": "yes"}},
                "data": {"round": value}});
            let mut cm = change.clone();
            cm["metadata"]["name"] = json!(name);
            let cm = serde_json::from_value(cm)?;
            create_or_patch(&maps, &name, &cm, change).await?;
        }
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        for i in 0..self.pods {
            let name = format!("pod-{i}");
            let labels = json!({"wcm.test/source": value, "example.com/track-phase": "yes"});
            let pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]}}))?;
            let change = json!({"metadata": {"labels": {
                "wcm.test/source": value, "example.com/phase": null}}});
            create_or_patch(&pods, &name, &pod, change).await?;
        }
        self.reloads_exist(client, ns).await?;
        let apps: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &webapp_resource());
        let image = format!("registry.invalid/web:{value}");
        for i in 0..self.webapps {
            let name = format!("app-{i}");
            let app: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "demo.wasm-controller-manager.io/v1alpha1", "kind": "WebApp",
            "metadata": {"name": name}, "spec": {"image": image, "replicas": 0}}))?;
            create_or_patch(&apps, &name, &app, json!({"spec": {"image": image}})).await?;
        }
        Ok(())
    }

    /// Creates the Deployments `reload-i` (no replicas), labelled to be reloaded on
    /// `cm-i`, if they do not exist.
    async fn reloads_exist(&self, client: &Client, ns: &str) -> Result<()> {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
        for i in 0..self.reloads {
            let name = format!("reload-{i}");
            let on = format!("cm-{}", i % self.config_maps.max(1));
            let labels = json!({"app": name});
            let deployment = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"example.com/reload-on": on}},
                "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                        {"name": "app", "image": "registry.invalid/app:1"}]}}}}))?;
            if deployments.get_opt(&name).await?.is_none() {
                deployments
                    .create(&PostParams::default(), &deployment)
                    .await?;
            }
        }
        Ok(())
    }

    /// The plugins whose work for `value` is not done yet (none once each mirror's
    /// label and data-hash's are on every ConfigMap, each mirror's label and
    /// phase-labeller's on every Pod, config-reloader's hash on every reloaded
    /// Deployment, each WebApp's Deployment on its image, and pod-counter's count of
    /// the cluster's Pods on the control-plane Nodes, every Pod here counted), or
    /// why it cannot tell.
    async fn undone(&self, client: &Client, ns: &str, value: &str) -> Vec<&'static str> {
        let (Some(maps), Some(pods), Some(deployments)) = (
            all::<ConfigMap>(client, ns).await,
            all::<Pod>(client, ns).await,
            all::<Deployment>(client, ns).await,
        ) else {
            return vec!["(the objects could not be listed)"];
        };
        let image = format!("registry.invalid/web:{value}");
        let runs = |d: &&Deployment| {
            let spec = d.spec.as_ref().and_then(|s| s.template.spec.as_ref());
            spec.is_some_and(|s| s.containers[0].image.as_deref() == Some(&image))
        };
        let (config_hash, data_hash) = (config_hash(value), data_hash(value));
        let reloaded = |d: &&Deployment| {
            let template = d.spec.as_ref().and_then(|s| s.template.metadata.as_ref());
            let annotations = template.and_then(|m| m.annotations.as_ref());
            let hash = annotations.and_then(|a| a.get("example.com/config-hash"));
            named(&d.metadata, "reload-") && hash == Some(&config_hash)
        };
        let hashed =
            |m: &ConfigMap| label(&m.metadata, "example.com/data-hash") == Some(&data_hash);
        let phased = |p: &Pod| label(&p.metadata, "example.com/phase") == Some("Pending");
        let checks = [
            (
                mirrored(
                    maps.iter().map(|m| &m.metadata),
                    "cm-",
                    self.config_maps,
                    value,
                ) && mirrored(pods.iter().map(|p| &p.metadata), "pod-", self.pods, value),
                "mirror-*",
            ),
            (
                maps.iter()
                    .filter(|m| named(&m.metadata, "cm-"))
                    .all(hashed),
                "hashes",
            ),
            (pods.iter().all(phased), "phases"),
            (
                deployments.iter().filter(reloaded).count() == self.reloads,
                "reloader",
            ),
            (
                deployments.iter().filter(runs).count() == self.webapps,
                "webapps",
            ),
            (counted(client, &pods).await == Some(true), "counter"),
        ];
        (checks.into_iter())
            .filter(|(done, _)| !done)
            .map(|(_, plugin)| plugin)
            .collect()
    }

    /// Waits (up to `timeout`) until every plugin has done its work for `value` on
    /// every object; returns how long that took, or names the plugins that did not.
    pub async fn converged(
        &self,
        client: &Client,
        ns: &str,
        value: &str,
        timeout: Duration,
    ) -> Result<Duration> {
        let started = std::time::Instant::now();
        let last = std::sync::Mutex::new(Vec::new());
        let converged = poll_until(timeout, || async {
            let undone = self.undone(client, ns, value).await;
            let done = undone.is_empty();
            *last.lock().unwrap_or_else(|p| p.into_inner()) = undone;
            done.then_some(())
        })
        .await;
        converged.with_context(|| {
            let undone = last.lock().unwrap_or_else(|p| p.into_inner()).clone();
            format!("the workload did not all converge to {value}: {undone:?} not done")
        })?;
        Ok(started.elapsed())
    }

    /// Runs a round every 500 ms until `stop`; returns how many rounds. (Each round is
    /// some sixty writes by the nine plugins: faster, and on a 2-core machine the API
    /// server starts to delay the Lease renewals the tests time.)
    pub fn churn(
        self,
        client: &Client,
        ns: &str,
        stop: &Arc<AtomicBool>,
    ) -> tokio::task::JoinHandle<Result<usize>> {
        let (stop, client, name) = (stop.clone(), client.clone(), ns.to_string());
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                self.round(&client, &name, &format!("v{n}")).await?;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            anyhow::Ok(n)
        })
    }
}

/// Whether pod-counter has done its work: every Pod of `ours` marked counted, and
/// every control-plane Node labelled with the number of Pods in the cluster.
async fn counted(client: &Client, ours: &[Pod]) -> Option<bool> {
    let marked = |p: &Pod| label(&p.metadata, "pod-counter.example.com/counted").is_some();
    let pods: Api<Pod> = Api::all(client.clone());
    let total = pods
        .list_metadata(&ListParams::default())
        .await
        .ok()?
        .items
        .len();
    let nodes: Api<Node> = Api::all(client.clone());
    let planes = ListParams::default().labels("node-role.kubernetes.io/control-plane");
    let nodes = nodes.list_metadata(&planes).await.ok()?.items;
    let count = total.to_string();
    let labelled = |n: &kube::core::PartialObjectMeta<Node>| {
        label(&n.metadata, "pod-counter.example.com/count") == Some(count.as_str())
    };
    Some(ours.iter().all(marked) && !nodes.is_empty() && nodes.iter().all(labelled))
}
