//! The controller-owner key mapping end to end: changes of owned Pods, deletions
//! included, wake the ConfigMap that controls them; non-controller owners are not woken;
//! a Pod that moves to another owner, or loses its owner, wakes the owner it had.
//! (Its own binary: it opens a Pod watch, which would disturb the watch count that
//! `shared_informers.rs` asserts.)

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use support::objects::{config_map_label, create_config_map, create_owned_pod, delete_pod};
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::TestNamespace;

const WAIT: Duration = Duration::from_secs(60);

#[support::test]
async fn changes_of_owned_pods_wake_their_controller_owner() -> Result<()> {
    let ns = TestNamespace::create("owners").await?;
    let (client, n) = (ns.client(), ns.name());
    let owner = [("wcm.test/owner", "")];
    let a = create_config_map(&client, n, "owner-a", &owner).await?;
    let b = create_config_map(&client, n, "owner-b", &owner).await?;
    let dir = plugins_dir(&[("owner-counter.wasm", plugin_bytes("owner-counter"))])?;
    let _host = HostProcess::start(dir.path(), &[])?;
    owned_pods(&client, n, "owner-a", "0").await?;

    for i in 0..3 {
        create_owned_pod(&client, n, &format!("a-{i}"), &a, true).await?;
    }
    create_owned_pod(&client, n, "b-0", &b, true).await?;
    // Owned, but not by a controller: it maps to no key and is not counted.
    create_owned_pod(&client, n, "b-not-controller", &b, false).await?;
    owned_pods(&client, n, "owner-a", "3").await?;
    owned_pods(&client, n, "owner-b", "1").await?;

    delete_pod(&client, n, "a-1").await?;
    owned_pods(&client, n, "owner-a", "2").await?;

    // a-0 moves to owner-b, a-2 loses its owner: owner-a must hear of both.
    set_owner(&client, n, "a-0", Some(&b)).await?;
    owned_pods(&client, n, "owner-b", "2").await?;
    owned_pods(&client, n, "owner-a", "1").await?;
    set_owner(&client, n, "a-2", None).await?;
    owned_pods(&client, n, "owner-a", "0").await
}

/// Replaces the owner references of Pod `name` by a controller reference to `owner`,
/// or by none.
async fn set_owner(client: &Client, ns: &str, name: &str, owner: Option<&ConfigMap>) -> Result<()> {
    let references = match owner {
        Some(owner) => json!([{"apiVersion": "v1", "kind": "ConfigMap", "controller": true,
            "name": owner.metadata.name, "uid": owner.metadata.uid}]),
        None => json!(null),
    };
    let patch = json!({"metadata": {"ownerReferences": references}});
    Api::<Pod>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Waits until owner-counter has written `count` on the ConfigMap `owner`.
async fn owned_pods(client: &Client, ns: &str, owner: &str, count: &str) -> Result<()> {
    let label = || config_map_label(client, ns, owner, "wcm.test/owned-pods");
    let reached = eventually(WAIT, || async {
        (label().await.ok()?? == count).then_some(())
    })
    .await;
    let last = label().await?;
    reached.with_context(|| format!("{owner}: owned-pods label is {last:?}, wanted {count}"))
}
