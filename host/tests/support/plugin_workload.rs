//! The workload of the per-plugin election tests and of `benches/replicas.rs`: nine
//! plugins — eight copies of label-mirror, `mirror-i` writing the label
//! `wcm.test/m-i`, and deployment-reconcile as `webapps` — over ConfigMaps and Pods
//! labelled `wcm.test/source` and over WebApps, changed in rounds; and the check that
//! every plugin's work is on every object of the last round. Self-contained (the
//! bench includes this file), so it depends on no other test support.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::json;

use kube::api::ApiResource;
use wcm_control_plane::poll_until;

/// The plugins, as many as the Leases the tests expect.
pub const PLUGINS: usize = 9;
const MIRRORS: usize = PLUGINS - 1;

/// How many objects of each kind a round changes.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    pub config_maps: usize,
    /// Pods no node takes (the only node is a tainted control plane), so they cost
    /// no containers: label-mirror only relabels them.
    pub pods: usize,
    /// WebApps of no replicas: deployment-reconcile keeps a Deployment per WebApp
    /// whose image follows the WebApp's, and no Pod runs.
    pub webapps: usize,
}

/// The tests' workload: a few of each.
pub const SMALL: Workload = Workload {
    config_maps: 3,
    pods: 2,
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

/// A plugins directory with the nine plugins, from the files of label-mirror
/// (`mirror`) and deployment-reconcile (`webapps`), and their settings. The WebApp
/// CRD must be installed for `webapps` to start.
pub fn nine_plugins(
    mirror: &std::path::Path,
    webapps: &std::path::Path,
) -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    for i in 0..MIRRORS {
        std::fs::copy(mirror, dir.path().join(format!("mirror-{i}.wasm")))?;
        let settings = json!({ "mirrored-label": format!("wcm.test/m-{i}") });
        let file = dir.path().join(format!("mirror-{i}.settings.json"));
        std::fs::write(file, settings.to_string())?;
    }
    std::fs::copy(webapps, dir.path().join("webapps.wasm"))?;
    Ok(dir)
}

/// Creates `name` from `object` or, if it exists, merges `patch` into it.
async fn create_or_patch<K>(
    api: &Api<K>,
    name: &str,
    object: &K,
    patch: serde_json::Value,
) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.get_opt(name).await? {
        None => drop(api.create(&PostParams::default(), object).await?),
        Some(_) => drop(
            api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                .await?,
        ),
    }
    Ok(())
}

/// Whether every mirror copy has written `value` onto each of `objects` named with
/// `prefix`, and there are `count` of them.
fn mirrored<'a>(
    objects: impl Iterator<Item = &'a kube::api::ObjectMeta>,
    prefix: &str,
    count: usize,
    value: &str,
) -> bool {
    let ours: Vec<_> = objects
        .filter(|m| m.name.as_deref().is_some_and(|n| n.starts_with(prefix)))
        .collect();
    let done = |m: &&kube::api::ObjectMeta| {
        let labels = m.labels.clone().unwrap_or_default();
        (0..MIRRORS)
            .all(|i| labels.get(&format!("wcm.test/m-{i}")).map(String::as_str) == Some(value))
    };
    ours.len() == count && ours.iter().all(done)
}

impl Workload {
    /// One round: ConfigMaps `cm-i` and Pods `pod-i` labelled `wcm.test/source=value`,
    /// WebApps `app-i` running the image `registry.invalid/web:value` (each created, or
    /// changed).
    pub async fn round(&self, client: &Client, ns: &str, value: &str) -> Result<()> {
        let label = json!({"metadata": {"labels": {"wcm.test/source": value}}});
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        for i in 0..self.config_maps {
            let name = format!("cm-{i}");
            let cm = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"wcm.test/source": value}}}))?;
            create_or_patch(&maps, &name, &cm, label.clone()).await?;
        }
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        for i in 0..self.pods {
            let name = format!("pod-{i}");
            let pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"wcm.test/source": value}},
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]}}))?;
            create_or_patch(&pods, &name, &pod, label.clone()).await?;
        }
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

    /// Whether every round's work is done for `value`: each mirror's label on every
    /// ConfigMap and Pod, each WebApp's Deployment on its image.
    async fn done(&self, client: &Client, ns: &str, value: &str) -> Option<()> {
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let maps = maps.list(&ListParams::default()).await.ok()?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let pods = pods.list(&ListParams::default()).await.ok()?;
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
        let deployments = deployments.list(&ListParams::default()).await.ok()?;
        let image = format!("registry.invalid/web:{value}");
        let runs = |d: &&Deployment| {
            let spec = d.spec.as_ref().and_then(|s| s.template.spec.as_ref());
            spec.is_some_and(|s| s.containers[0].image.as_deref() == Some(&image))
        };
        let apps = deployments.items.iter().filter(runs).count();
        let all = mirrored(
            maps.items.iter().map(|m| &m.metadata),
            "cm-",
            self.config_maps,
            value,
        ) && mirrored(
            pods.items.iter().map(|p| &p.metadata),
            "pod-",
            self.pods,
            value,
        ) && apps == self.webapps;
        all.then_some(())
    }

    /// Waits (up to `timeout`) until every plugin has done its work for `value` on every
    /// object; returns how long that took.
    pub async fn converged(
        &self,
        client: &Client,
        ns: &str,
        value: &str,
        timeout: Duration,
    ) -> Result<Duration> {
        let started = std::time::Instant::now();
        let converged = poll_until(timeout, || self.done(client, ns, value)).await;
        converged.with_context(|| format!("the workload did not all converge to {value}"))?;
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
