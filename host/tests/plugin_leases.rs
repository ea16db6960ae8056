//! `--leader-elect-mode=per-plugin` on the real control plane: three host processes
//! share nine plugins (copies of label-mirror, each writing a label of its own), a
//! Lease per plugin. Every plugin is held by exactly one replica and each replica
//! holds three ± one; a replica killed with SIGKILL loses its plugins to the others
//! within the lease duration and two jittered retries, and every ConfigMap changed
//! meanwhile converges; a replica added takes its share, each plugin released by its
//! holder (drained), not left to expire.

use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use wcm_control_plane::TestNamespace;
use wcm_host::leader::JITTER_FACTOR;

use crate::support::election::{CONVERGE, SHORT, SLACK};
use crate::support::{self, HostProcess, eventually, plugin_bytes};

const PLUGINS: usize = 9;
const CONFIG_MAPS: usize = 6;

/// `mirror-0` … `mirror-8`: label-mirror under nine names, `mirror-i` writing
/// `wcm.test/m-i`.
fn nine_plugins() -> Result<tempfile::TempDir> {
    let bytes = plugin_bytes("label-mirror");
    let dir = tempfile::tempdir()?;
    for i in 0..PLUGINS {
        std::fs::write(dir.path().join(format!("mirror-{i}.wasm")), &bytes)?;
        let settings = json!({ "mirrored-label": format!("wcm.test/m-{i}") });
        let file = dir.path().join(format!("mirror-{i}.settings.json"));
        std::fs::write(file, settings.to_string())?;
    }
    Ok(dir)
}

/// A replica named `identity` in per-plugin mode, its Leases in `ns`.
fn replica(ns: &TestNamespace, dir: &std::path::Path, identity: &str) -> Result<HostProcess> {
    let name = ns.name();
    let flags = [
        "--leader-elect".to_string(),
        "--leader-elect-mode=per-plugin".to_string(),
        format!("--leader-elect-identity={identity}"),
        format!(
            "--leader-elect-lease-duration={}ms",
            SHORT.lease.as_millis()
        ),
        format!(
            "--leader-elect-renew-deadline={}ms",
            SHORT.renew.as_millis()
        ),
        format!("--leader-elect-retry-period={}ms", SHORT.retry.as_millis()),
        format!("--leader-elect-resource-name={name}"),
        format!("--leader-elect-resource-namespace={name}"),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    HostProcess::start(dir, &flags)
}

/// Each plugin's Lease holder (empty when released), from the labelled Leases.
async fn holders(client: &Client, ns: &str) -> Result<BTreeMap<String, (String, Lease)>> {
    let api: Api<Lease> = Api::namespaced(client.clone(), ns);
    let leases = api
        .list(&ListParams::default().labels("wasm-controller-manager.io/plugin"))
        .await?;
    let mut holders = BTreeMap::new();
    for lease in leases {
        let labels = lease.metadata.labels.clone().unwrap_or_default();
        let plugin = labels["wasm-controller-manager.io/plugin"].clone();
        let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
        holders.insert(plugin, (holder.unwrap_or_default(), lease));
    }
    Ok(holders)
}

/// Waits until every plugin is held by one of `replicas`, each holding its share
/// ± 1 (3 ± 1 of nine over three); returns who holds what.
async fn spread_over(
    client: &Client,
    ns: &str,
    replicas: &[&str],
) -> Result<BTreeMap<String, String>> {
    let spread = eventually(CONVERGE, || async {
        let held = holders(client, ns).await.ok()?;
        let by: BTreeMap<String, String> = (held.into_iter())
            .map(|(plugin, (holder, _))| (plugin, holder))
            .collect();
        let per = |r: &&str| by.values().filter(|h| h == r).count();
        let share = PLUGINS / replicas.len()..=PLUGINS.div_ceil(replicas.len());
        let fair = share.start().saturating_sub(1)..=share.end() + 1;
        let even = replicas.iter().all(|r| fair.contains(&per(r)));
        let all = by.len() == PLUGINS && by.values().all(|h| replicas.contains(&h.as_str()));
        (all && even).then_some(by)
    })
    .await;
    match spread {
        Some(by) => Ok(by),
        None => anyhow::bail!(
            "never spread over {replicas:?}: {:?}",
            holders(client, ns).await
        ),
    }
}

/// ConfigMaps `cm-0`… labelled `wcm.test/source=value` (created, or relabelled).
async fn sources(ns: &TestNamespace, value: &str) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    for i in 0..CONFIG_MAPS {
        let name = format!("cm-{i}");
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"wcm.test/source": value}}}))?;
        match api.get_opt(&name).await? {
            None => drop(api.create(&PostParams::default(), &cm).await?),
            Some(_) => {
                let patch =
                    Patch::Merge(json!({"metadata": {"labels": {"wcm.test/source": value}}}));
                api.patch(&name, &PatchParams::default(), &patch).await?;
            }
        }
    }
    Ok(())
}

/// Waits until every plugin has mirrored `value` onto every ConfigMap.
async fn converged(ns: &TestNamespace, value: &str) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let done = eventually(CONVERGE, || async {
        let cms = api.list(&ListParams::default()).await.ok()?;
        let mirrored = |cm: &ConfigMap| {
            let labels = cm.metadata.labels.clone().unwrap_or_default();
            (0..PLUGINS)
                .all(|i| labels.get(&format!("wcm.test/m-{i}")).map(String::as_str) == Some(value))
        };
        let ours = cms.items.iter().filter(|cm| {
            cm.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("cm-"))
        });
        (ours.clone().count() == CONFIG_MAPS && ours.into_iter().all(mirrored)).then_some(())
    })
    .await;
    done.with_context(|| format!("the ConfigMaps did not all converge to {value}"))
}

#[tokio::test]
async fn nine_plugins_spread_over_three_replicas_and_a_killed_one_loses_its_share() -> Result<()> {
    let _turn = support::turns::one_file_at_a_time(module_path!());
    let ns = TestNamespace::create("plugin-leases").await?;
    let (client, name) = (ns.client(), ns.name().to_string());
    let dir = nine_plugins()?;
    let mut a = replica(&ns, dir.path(), "replica-a")?;
    let b = replica(&ns, dir.path(), "replica-b")?;
    let c = replica(&ns, dir.path(), "replica-c")?;
    let by = spread_over(&client, &name, &["replica-a", "replica-b", "replica-c"]).await?;
    eprintln!("nine plugins over three replicas: {by:?}");
    // Exactly one replica acts for each plugin: its gauge, and no other's, says so.
    for (plugin, holder) in &by {
        let lease = format!("{name}-{plugin}");
        let mut acting = Vec::new();
        for (identity, host) in [("replica-a", &a), ("replica-b", &b), ("replica-c", &c)] {
            let labels = [("name", lease.as_str())];
            if host
                .metric("leader_election_master_status", &labels)
                .await?
                == 1.0
            {
                acting.push(identity);
            }
        }
        ensure!(
            acting == [holder.as_str()],
            "{plugin}: held by {holder}, acting: {acting:?}"
        );
    }
    sources(&ns, "one").await?;
    converged(&ns, "one").await?;

    // SIGKILL replica-a: its plugins go to b and c within the lease and two retries.
    let lost: Vec<String> = (by.iter())
        .filter(|(_, h)| *h == "replica-a")
        .map(|(p, _)| p.clone())
        .collect();
    let killed = Timestamp::now();
    a.kill()?;
    sources(&ns, "two").await?;
    let by = spread_over(&client, &name, &["replica-b", "replica-c"]).await?;
    let held = holders(&client, &name).await?;
    let bound = SHORT.lease + SHORT.retry.mul_f64(2.0 * JITTER_FACTOR) + SLACK;
    for plugin in &lost {
        let (holder, lease) = &held[plugin];
        let acquired = (lease.spec.as_ref())
            .and_then(|s| s.acquire_time.as_ref())
            .context("no acquire time")?;
        let took = acquired.0.duration_since(killed);
        ensure!(
            took <= k8s_openapi::jiff::SignedDuration::try_from(bound)?,
            "{plugin} taken by {holder} {took:?} after the kill (bound {bound:?})"
        );
    }
    converged(&ns, "two").await?;
    eprintln!("after the kill: {by:?}");

    // A replica added takes its share, each plugin handed over by release.
    let d = replica(&ns, dir.path(), "replica-d")?;
    let after = spread_over(&client, &name, &["replica-b", "replica-c", "replica-d"]).await?;
    eprintln!("after a replica was added: {after:?}");
    for (plugin, holder) in after.iter().filter(|(_, h)| *h == "replica-d") {
        let giver = if by[plugin] == "replica-b" { &b } else { &c };
        let needles = ["plugin lease released", &format!("plugin={plugin}")];
        let released = giver.wait_for_log(&needles, CONVERGE).await;
        released.with_context(|| format!("{plugin} reached {holder} without a release"))?;
    }
    sources(&ns, "three").await?;
    converged(&ns, "three").await?;
    drop((b, c, d));
    Ok(())
}
