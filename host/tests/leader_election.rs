//! Leader election against the real API server: candidates racing for one Lease.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::Barrier;
use wcm_control_plane::TestNamespace;
use wcm_host::leader::{Attempt, ElectionConfig, Elector};

const ROUNDS: usize = 50;

/// A Lease held by a candidate that has gone away, valid for one second.
async fn abandoned_lease(client: &Client, ns: &str, name: &str) -> Result<()> {
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"holderIdentity": "departed", "leaseDurationSeconds": 1,
                 "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": 0},
    }))?;
    Api::<Lease>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &lease)
        .await?;
    Ok(())
}

/// Starts together with the other candidate, then tries every 100 ms until the lease
/// is decided; both see it expire at about the same moment and race to write it.
async fn campaign(mut elector: Elector, barrier: Arc<Barrier>) -> Result<Attempt> {
    barrier.wait().await;
    for _ in 0..50 {
        match elector.try_acquire_or_renew().await? {
            Attempt::Following { holder } if holder == "departed" => {}
            decided => return Ok(decided),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("{} never saw the lease expire", elector.identity())
}

#[tokio::test]
async fn two_candidates_racing_for_an_expired_lease_elect_exactly_one() -> Result<()> {
    let ns = TestNamespace::create("election").await?;
    let rounds = (0..ROUNDS).map(|round| {
        let (client, ns) = (ns.client(), ns.name().to_string());
        async move {
            let name = format!("race-{round}");
            abandoned_lease(&client, &ns, &name).await?;
            let barrier = Arc::new(Barrier::new(2));
            let candidates = ["a", "b"].map(|id| {
                let config = ElectionConfig {
                    lease_name: name.clone(),
                    lease_namespace: ns.clone(),
                    ..ElectionConfig::new(&format!("{id}-{round}"))
                };
                tokio::spawn(campaign(
                    Elector::new(client.clone(), config),
                    barrier.clone(),
                ))
            });
            let mut outcomes = Vec::new();
            for c in candidates {
                outcomes.push(c.await??);
            }
            let leaders = outcomes.iter().filter(|o| **o == Attempt::Leading).count();
            ensure!(leaders == 1, "round {round}: {outcomes:?}");
            let lease = Api::<Lease>::namespaced(client, &ns).get(&name).await?;
            let holder = lease
                .spec
                .and_then(|s| s.holder_identity)
                .context("no holder")?;
            ensure!(
                holder.ends_with(&format!("-{round}")),
                "round {round}: holder {holder}"
            );
            Ok::<_, anyhow::Error>(outcomes.contains(&Attempt::LostRace))
        }
    });
    let races = futures::future::try_join_all(rounds).await?;
    let lost = races.iter().filter(|r| **r).count();
    println!(
        "{ROUNDS} rounds, one leader each; in {lost} the loser's write was refused as a conflict"
    );
    Ok(())
}
