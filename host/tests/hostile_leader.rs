//! Nothing a plugin does may delay leader election: with two replicas on short lease
//! timings, a plugin spinning in four reconciles at once (each allowed 20 s) never
//! costs the leader its Lease, the leader's `/healthz` answers at once, and
//! pod-counter in the same process counts new Pods within seconds.

use crate::support;

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use support::election::{CONVERGE, Scene, holder, transitions};
use support::{http_get, plugin_bytes};

/// How long the loops run before the test looks back: five lease durations.
const SPINNING: Duration = Duration::from_secs(20);
/// How long pod-counter may take to count new Pods while the loops spin.
const POD_COUNTER_PACE: Duration = Duration::from_secs(10);
/// How long `/healthz` may take to answer while the loops spin.
const HEALTHZ_PACE: Duration = Duration::from_secs(1);

#[support::test]
async fn a_plugin_looping_on_four_keys_never_costs_the_leader_its_lease() -> Result<()> {
    let mut scene = Scene::new("le-loop").await?;
    std::fs::write(
        scene.dir.path().join("misbehaving.wasm"),
        plugin_bytes("misbehaving"),
    )?;
    scene.extra = vec!["--reconcile-timeout=20s".into()];
    let (a, b) = scene.leader_and_standby().await?;
    let first = scene.create_pods("first", 3).await?;
    scene.counted(&first).await?;
    let lease = scene.lease().await?;
    let transitions_before = transitions(&lease);

    let cms: Api<ConfigMap> = Api::namespaced(scene.client(), scene.ns.name());
    for i in 0..4 {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("loop-{i}"), "labels": {"wcm.test/misbehave": ""}},
            "data": {"behaviour": "loop"},
        }))?;
        cms.create(&PostParams::default(), &cm).await?;
    }
    let spinning_since = Instant::now();
    let address = a.host.metrics_address().await?;
    let mut round = 0;
    while spinning_since.elapsed() < SPINNING {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let asked = Instant::now();
        http_get(&address, "/healthz").await?;
        let answered = asked.elapsed();
        ensure!(answered < HEALTHZ_PACE, "/healthz took {answered:?}");
        let lease = scene.lease().await?;
        ensure!(
            holder(&lease) == Some(a.identity.as_str())
                && transitions(&lease) == transitions_before,
            "the Lease moved to {:?} while a plugin spun",
            holder(&lease)
        );
        if round % 3 == 0 {
            let created = Instant::now();
            let pods = scene.create_pods(&format!("during-{round}"), 2).await?;
            scene.counted(&pods).await?;
            let took = created.elapsed();
            println!("pod-counter counted 2 new Pods in {took:?} while 4 reconciles spun");
            ensure!(took < POD_COUNTER_PACE, "pod-counter took {took:?}");
        }
        round += 1;
    }
    for i in 0..4 {
        let key = format!("v1/ConfigMap {}/loop-{i}", scene.ns.name());
        a.host
            .wait_for_log(&["reconcile failed", &key, "timed out after 20s"], CONVERGE)
            .await
            .context("the spinning reconciles were not stopped at their deadline")?;
    }
    for replica in [&a, &b] {
        let lost = replica.host.lines_with(&["leadership lost"]);
        ensure!(lost.is_empty(), "{}: {lost:?}", replica.identity);
    }
    Ok(())
}
