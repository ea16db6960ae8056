//! Building and reading the Kubernetes objects the host tests use.

use std::collections::BTreeMap;

use anyhow::Result;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

/// Creates a Node; `control_plane` adds the control-plane role label.
pub async fn create_node(
    client: &Client,
    name: &str,
    control_plane: bool,
    mut labels: BTreeMap<String, String>,
) -> Result<Node> {
    if control_plane {
        labels.insert(
            "node-role.kubernetes.io/control-plane".into(),
            String::new(),
        );
    }
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))?;
    Ok(Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await?)
}

/// Creates a Pod with one container (no kubelet runs it).
pub async fn create_pod(client: &Client, namespace: &str, name: &str) -> Result<Pod> {
    create_labelled_pod(client, namespace, name, &[]).await
}

/// Creates a Pod with one container and `labels`.
pub async fn create_labelled_pod(
    client: &Client,
    namespace: &str,
    name: &str,
    labels: &[(&str, &str)],
) -> Result<Pod> {
    let labels: BTreeMap<_, _> = labels.iter().copied().collect();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
    }))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    Ok(pods.create(&PostParams::default(), &pod).await?)
}

/// Creates a Pod whose owner is the ConfigMap `owner` (its controller if `controller`).
pub async fn create_owned_pod(
    client: &Client,
    namespace: &str,
    name: &str,
    owner: &ConfigMap,
    controller: bool,
) -> Result<Pod> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "controller": controller,
            "name": owner.metadata.name, "uid": owner.metadata.uid}]},
        "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
    }))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    Ok(pods.create(&PostParams::default(), &pod).await?)
}

/// Deletes a Pod at once (grace period 0: there is no kubelet to wait for).
pub async fn delete_pod(client: &Client, namespace: &str, name: &str) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.delete(name, &DeleteParams::default().grace_period(0))
        .await?;
    Ok(())
}

/// Every Pod in the cluster.
pub async fn all_pods(client: &Client) -> Result<Vec<Pod>> {
    Ok(Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items)
}

/// A label of a Node, if set.
pub async fn node_label(client: &Client, node: &str, key: &str) -> Result<Option<String>> {
    let node = Api::<Node>::all(client.clone()).get(node).await?;
    Ok(node.metadata.labels.and_then(|mut l| l.remove(key)))
}

/// Watch requests on Pods across all namespaces that the API server is serving now,
/// from its `apiserver_longrunning_requests` metric.
pub async fn pod_watch_requests(client: &Client) -> Result<u64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let metrics = client.request_text(request).await?;
    let line = metrics
        .lines()
        .find(|l| {
            l.starts_with("apiserver_longrunning_requests{")
                && l.contains("resource=\"pods\"")
                && l.contains("scope=\"cluster\"")
                && l.contains("verb=\"WATCH\"")
        })
        .unwrap_or("0 0");
    Ok(line.rsplit(' ').next().unwrap_or("0").parse()?)
}

/// events.k8s.io Events with `reason` about the object named `name` in `namespace`.
pub async fn events_about(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
) -> Result<Vec<Event>> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .collect())
}

/// [`events_about`] once there is at least one (up to 30 s): a plugin may record its
/// Event just after the write a test saw first.
pub async fn recorded_events(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
) -> Result<Vec<Event>> {
    let found = super::eventually(std::time::Duration::from_secs(30), || async {
        let events = events_about(client, namespace, name, reason).await.ok()?;
        (!events.is_empty()).then_some(events)
    })
    .await;
    Ok(found.unwrap_or_default())
}

/// Creates a ConfigMap with `labels` and no data.
pub async fn create_config_map(
    client: &Client,
    namespace: &str,
    name: &str,
    labels: &[(&str, &str)],
) -> Result<ConfigMap> {
    let labels: BTreeMap<_, _> = labels.iter().copied().collect();
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    Ok(api.create(&PostParams::default(), &cm).await?)
}

/// Sets one label of a ConfigMap (merge patch).
pub async fn set_config_map_label(
    client: &Client,
    namespace: &str,
    name: &str,
    key: &str,
    value: &str,
) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let patch = json!({"metadata": {"labels": {key: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// A label of a ConfigMap, if set.
pub async fn config_map_label(
    client: &Client,
    namespace: &str,
    name: &str,
    key: &str,
) -> Result<Option<String>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    Ok(api
        .get(name)
        .await?
        .metadata
        .labels
        .and_then(|mut l| l.remove(key)))
}

/// A ConfigMap that tells the `misbehaving` test plugin what to do (`data.behaviour`).
pub async fn create_misbehaving(api: &Api<ConfigMap>, name: &str, data: Value) -> Result<()> {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"wcm.test/misbehave": ""}},
        "data": data,
    }))?;
    api.create(&PostParams::default(), &cm).await?;
    Ok(())
}

/// The label `key` of the object `name`, if it exists and has it.
pub async fn label_of<K>(api: &Api<K>, name: &str, key: &str) -> Option<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get(name)
        .await
        .ok()?
        .meta()
        .labels
        .as_ref()?
        .get(key)
        .cloned()
}
