//! Leader election against the real API server: candidates racing for one Lease.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::Barrier;
use wcm_control_plane::TestNamespace;
use wcm_core::metrics::Metrics;
use wcm_daemon::leader::{Attempt, Campaign, ElectionConfig, Elector, Lost};

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

#[support::test]
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

/// The issue's short timings: lease 4 s, renew deadline 2.5 s, retry 0.5 s.
fn short(ns: &str, lease: &str, identity: &str) -> ElectionConfig {
    ElectionConfig {
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_millis(2500),
        retry_period: Duration::from_millis(500),
        lease_name: lease.into(),
        lease_namespace: ns.into(),
        ..ElectionConfig::new(identity)
    }
}

/// Starts a campaign for `config` with metrics of its own.
fn start_campaign(client: Client, config: ElectionConfig) -> (Campaign, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let elector_config = config.clone();
    let campaign = Campaign::start(
        move || Ok(Elector::new(client, elector_config)),
        config,
        metrics.clone(),
    );
    (campaign, metrics)
}

async fn wait_until(leading: &mut tokio::sync::watch::Receiver<bool>, value: bool) -> Result<()> {
    let waited = tokio::time::timeout(Duration::from_secs(30), leading.wait_for(|l| *l == value));
    waited
        .await
        .context("timed out")?
        .context("campaign gone")?;
    Ok(())
}

#[support::test]
async fn a_leader_whose_lease_is_overwritten_stops_at_its_next_renewal() -> Result<()> {
    let ns = TestNamespace::create("overwrite").await?;
    let config = short(ns.name(), "overwritten", "leader");
    let (mut campaign, metrics) = start_campaign(ns.client(), config);
    wait_until(&mut campaign.leading, true).await?;
    assert!(
        metrics
            .encode()
            .contains(r#"leader_election_master_status{name="overwritten"} 1"#)
    );
    let api = Api::<Lease>::namespaced(ns.client(), ns.name());
    let mut lease = api.get("overwritten").await?;
    let spec = lease.spec.as_mut().context("no spec")?;
    spec.holder_identity = Some("intruder".into());
    api.replace("overwritten", &PostParams::default(), &lease)
        .await?;
    let overwritten = std::time::Instant::now();
    wait_until(&mut campaign.leading, false).await?;
    let noticed = overwritten.elapsed();
    assert_eq!(campaign.lost().await, Lost::TakenBy("intruder".into()));
    let exported = metrics.encode();
    assert!(
        exported.contains(r#"leader_election_master_status{name="overwritten"} 0"#),
        "{exported}"
    );
    assert!(
        exported.contains("wcm_leader_election_holder{identity=\"intruder\"} 1"),
        "{exported}"
    );
    assert!(!exported.contains("identity=\"leader\""), "{exported}");
    ensure!(
        noticed < Duration::from_millis(2500),
        "noticed only after {noticed:?}"
    );
    Ok(())
}

#[support::test]
async fn a_released_lease_is_taken_over_well_before_it_would_expire() -> Result<()> {
    let ns = TestNamespace::create("handoff").await?;
    let first = short(ns.name(), "handoff", "first");
    let second = short(ns.name(), "handoff", "second");
    let (mut a, _) = start_campaign(ns.client(), first);
    wait_until(&mut a.leading, true).await?;
    let (mut b, _) = start_campaign(ns.client(), second);
    tokio::time::sleep(Duration::from_secs(1)).await;
    ensure!(!*b.leading.borrow(), "two leaders at once");
    let released = std::time::Instant::now();
    a.stop().await;
    wait_until(&mut b.leading, true).await?;
    let took = released.elapsed();
    println!("standby took over {took:?} after the release (retry period 500 ms)");
    // Without the release the standby would wait a whole lease duration (4 s).
    ensure!(
        took < Duration::from_secs(4),
        "took over only after {took:?}"
    );
    b.stop().await;
    Ok(())
}
