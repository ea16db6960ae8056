//! When a burst's outcome reaches the bench, as the API server's watches deliver it:
//! the count label on the node and the burst's `Counted` Events. A watch reports the
//! moment to the millisecond and costs the API server one stream; polling lists
//! every 100 ms quantised the times and, at 10,000 Events, made the API server read
//! every Event ten times a second while the controllers competed for it.

use std::collections::HashSet;
use std::time::Instant;

use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{PartialObjectMeta, WatchEvent, WatchParams};
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;
use wcm_control_plane::NODE_NAME;

use super::{COUNT, LIMIT};

/// When the node's count label first reads `count`.
pub fn label_reaches(client: &Client, count: usize) -> JoinHandle<Result<Instant>> {
    let nodes: Api<Node> = Api::all(client.clone());
    let params = WatchParams::default().fields(&format!("metadata.name={NODE_NAME}"));
    let count = count.to_string();
    tokio::spawn(first_arrival(nodes, params, move |node| {
        node.labels().get(COUNT) == Some(&count)
    }))
}

/// When the `n`-th distinct `Counted` Event in `namespace` arrives.
pub fn events_reach(client: &Client, namespace: &str, n: usize) -> JoinHandle<Result<Instant>> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let params = WatchParams::default().fields("reason=Counted");
    let mut seen = HashSet::new();
    tokio::spawn(first_arrival(events, params, move |event| {
        seen.insert(event.name_any());
        seen.len() >= n
    }))
}

/// Watches `api`'s metadata from resource version "0" (the current objects arrive as
/// additions, with no list) until `done` holds for an added or changed object; a
/// watch the API server ends is opened again, so `done` must tolerate repeats.
async fn first_arrival<K>(
    api: Api<K>,
    params: WatchParams,
    mut done: impl FnMut(&PartialObjectMeta<K>) -> bool,
) -> Result<Instant>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let watching = async {
        loop {
            let mut stream = api.watch_metadata(&params, "0").await?.boxed();
            while let Some(event) = stream.try_next().await? {
                if let WatchEvent::Added(o) | WatchEvent::Modified(o) = event
                    && done(&o)
                {
                    return anyhow::Ok(Instant::now());
                }
            }
        }
    };
    tokio::time::timeout(LIMIT, watching)
        .await
        .context("not within the bench's limit")?
}
