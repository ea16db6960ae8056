//! The local control plane is a real kube-apiserver: objects round-trip, watches stream
//! modifications, and RBAC denies an identity that has no permissions.

use std::time::Duration;

use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use wcm_control_plane::{ControlPlane, TestNamespace, poll_until};

#[tokio::test]
async fn node_and_pod_round_trip_and_watch_sees_a_modification() -> Result<()> {
    let ns = TestNamespace::create("cluster-rt").await?;
    let nodes: Api<Node> = Api::all(ns.client());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": format!("{}-node", ns.name()), "labels": ns.labels()},
    }))?;
    nodes.create(&PostParams::default(), &node).await?;
    let read = nodes.get(&node.name_any()).await?;
    assert_eq!(read.labels(), &ns.labels());

    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
    }))?;
    let created = pods.create(&PostParams::default(), &pod).await?;
    let read = pods.get("web").await?;
    assert_eq!(read.uid(), created.uid());
    let image = read.spec.context("pod spec")?.containers[0].image.clone();
    assert_eq!(image.as_deref(), Some("nginx:1.27"));

    let rv = created.resource_version().context("resourceVersion")?;
    let mut events = pods
        .watch(&WatchParams::default().fields("metadata.name=web"), &rv)
        .await?
        .boxed();
    let patch = json!({"metadata": {"labels": {"tier": "frontend"}}});
    pods.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let modified = tokio::time::timeout(Duration::from_secs(20), async {
        // The scheduler may write the Pod's status first; wait for the label.
        while let Some(event) = events.try_next().await? {
            if let WatchEvent::Modified(pod) = event
                && pod.labels().contains_key("tier")
            {
                return Ok::<_, kube::Error>(Some(pod));
            }
        }
        Ok(None)
    })
    .await
    .context("no watch event within 20 s")??
    .context("watch ended without a modification")?;
    assert_eq!(
        modified.labels().get("tier").map(String::as_str),
        Some("frontend")
    );
    Ok(())
}

#[tokio::test]
async fn rbac_forbids_the_restricted_identity_and_allows_the_admin() -> Result<()> {
    let ns = TestNamespace::create("cluster-rbac").await?;
    let cp = ControlPlane::shared()?;
    let restricted: Api<Secret> = Api::namespaced(cp.restricted_client().await?, ns.name());
    match restricted.list(&Default::default()).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "unexpected status: {status:?}");
            assert!(
                status.message.contains("wcm-restricted"),
                "{}",
                status.message
            );
        }
        other => panic!("restricted user listed Secrets: {other:?}"),
    }
    let admin: Api<Secret> = Api::namespaced(ns.client(), ns.name());
    admin.list(&Default::default()).await?;
    Ok(())
}

#[tokio::test]
async fn the_controller_manager_runs_deployments_and_collects_garbage() -> Result<()> {
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use kube::api::{DeleteParams, ListParams};

    let ns = TestNamespace::create("kcm").await?;
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), ns.name());
    let replica_sets: Api<ReplicaSet> = Api::namespaced(ns.client(), ns.name());
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}
            }
        }
    }))?;
    deployments
        .create(&PostParams::default(), &deployment)
        .await?;
    // The Deployment controller creates a ReplicaSet it owns and reports status.
    let owned = poll_until(Duration::from_secs(60), || async {
        let listed = replica_sets.list(&ListParams::default()).await.ok()?;
        let rs = listed.items.into_iter().next()?;
        let owner = rs.owner_references().first()?.name.clone();
        let status = deployments.get("web").await.ok()?.status?;
        (status.replicas == Some(2)).then_some(owner)
    })
    .await
    .context("no ReplicaSet or Deployment status from kube-controller-manager")?;
    assert_eq!(owned, "web");
    // The garbage collector deletes the ReplicaSet once its owner is gone.
    deployments
        .delete("web", &DeleteParams::background())
        .await?;
    poll_until(Duration::from_secs(60), || async {
        let listed = replica_sets.list(&ListParams::default()).await.ok()?;
        listed.items.is_empty().then_some(())
    })
    .await
    .context("the ReplicaSet outlived its Deployment: no garbage collection")?;
    Ok(())
}
