//! Registrations a host must not run as they are: resync periods of 1 ms and of
//! `u64::MAX`, a selector that does not parse and too many watches are refused at
//! load with the reason in the plugin table and the log; a field selector the API
//! server does not support for the kind degrades the plugin with the API's words; a plugin watching a kind the
//! host may not list is shown `degraded` with the API server's error and starts
//! working by itself once the right is granted.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::{ControlPlane, TestNamespace};
use wcm_daemon::status::{PluginStatus, State};

const WAIT: Duration = Duration::from_secs(60);

/// Waits until `file`'s row is in `state` and returns it.
async fn row_in(host: &HostProcess, file: &str, state: State) -> Result<PluginStatus> {
    host.row_in(file, state, WAIT).await
}

#[support::test]
async fn registrations_a_host_cannot_serve_are_refused_with_the_reason() -> Result<()> {
    let dir = plugins_dir(&[
        ("resync-1ms.wasm", plugin_bytes("hostile-resync-1ms")),
        ("resync-max.wasm", plugin_bytes("hostile-resync-max")),
        ("bad-selector.wasm", plugin_bytes("hostile-bad-selector")),
        (
            "too-many-watches.wasm",
            plugin_bytes("hostile-too-many-watches"),
        ),
        ("harmless.wasm", plugin_bytes("hostile-registration")),
        (
            "unsupported-field.wasm",
            plugin_bytes("hostile-unsupported-field"),
        ),
    ])?;
    let host = HostProcess::start(dir.path(), &[])?;
    for (file, reason) in [
        (
            "resync-1ms.wasm",
            "resync-period-ms 1 is outside 1000 to 604800000".to_string(),
        ),
        (
            "resync-max.wasm",
            format!("resync-period-ms {} is outside 1000 to 604800000", u64::MAX),
        ),
        (
            "bad-selector.wasm",
            "watch 0: invalid label selector \"app in web\"".into(),
        ),
        (
            "too-many-watches.wasm",
            "17 watches, more than the 16 this plugin may have".into(),
        ),
    ] {
        let failed = row_in(&host, file, State::Failed).await?;
        let why = failed.reason.unwrap_or_default();
        ensure!(why.contains(&reason), "{file}: {why}");
        host.wait_for_log(&["plugin failed to load", file, &reason], WAIT)
            .await?;
    }
    // A field selector the API server does not support for the kind loads (it is
    // well-formed) and is degraded with the API server's words.
    let degraded = row_in(&host, "unsupported-field.wasm", State::Degraded).await?;
    let why = degraded.reason.unwrap_or_default();
    ensure!(
        why.contains("v1/ConfigMap") && why.contains("spec.nodeName"),
        "{why}"
    );
    let harmless = row_in(&host, "harmless.wasm", State::Running).await?;
    let limits = harmless.limits.context("a running row shows its limits")?;
    ensure!(limits.budget.api.qps == 20.0 && limits.budget.api.burst == 30);
    ensure!(limits.budget.watches.max_watches == 16);
    Ok(())
}

/// A kubeconfig acting as `user` (impersonated by the admin), with no rights but
/// those RBAC grants `user`.
fn kubeconfig_as(user: &str, dir: &std::path::Path) -> Result<std::path::PathBuf> {
    let admin = std::fs::read_to_string(ControlPlane::shared()?.admin_kubeconfig())?;
    let mut config: serde_json::Value = serde_saphyr::from_str(&admin)?;
    for entry in config["users"].as_array_mut().context("users")? {
        entry["user"]["as"] = json!(user);
    }
    let path = dir.join(format!("{user}.kubeconfig"));
    std::fs::write(&path, serde_json::to_string(&config)?)?;
    Ok(path)
}

async fn grant(client: &Client, name: &str, user: &str, rules: serde_json::Value) -> Result<()> {
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name}, "rules": rules,
    }))?;
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }))?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(())
}

async fn revoke(client: &Client, name: &str) {
    let _ = Api::<ClusterRoleBinding>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
    let _ = Api::<ClusterRole>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

#[support::test]
async fn a_kind_the_host_may_not_list_degrades_the_plugin_until_granted() -> Result<()> {
    let ns = TestNamespace::create("no-list").await?;
    let admin = ns.client();
    let user = format!("wcm-limited-{}", ns.name());
    let dir = plugins_dir(&[("hostile-secrets.wasm", plugin_bytes("hostile-secrets"))])?;
    let kubeconfig = kubeconfig_as(&user, dir.path())?;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "watched", "labels": {"wcm.test/hostile-secret": ""}},
        "stringData": {"k": "v"},
    }))?;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), ns.name());
    secrets.create(&PostParams::default(), &secret).await?;

    // About the host's own identity: the plugin shares it (reviewing the plugin's
    // rights would need the host to create SubjectAccessReviews, which it may not).
    let shared = ["--impersonate-plugins=false"];
    let host = HostProcess::start_with(&kubeconfig, dir.path(), &shared)?;
    let degraded = row_in(&host, "hostile-secrets.wasm", State::Degraded).await?;
    let why = degraded.reason.unwrap_or_default();
    ensure!(
        why.contains("v1/Secret") && why.contains("forbidden"),
        "{why}"
    );
    ensure!(why.contains(&user), "the API's error names the user: {why}");
    host.wait_for_log(
        &["plugin degraded", "plugin=\"hostile-secrets\"", "forbidden"],
        WAIT,
    )
    .await?;
    let state = host
        .metric(
            "wcm_plugin_state",
            &[("plugin", "hostile-secrets"), ("state", "degraded")],
        )
        .await?;
    ensure!(state == 1.0, "wcm_plugin_state degraded = {state}");

    let role = format!("{user}-secrets");
    let rules = json!([{"apiGroups": [""], "resources": ["secrets"],
                        "verbs": ["list", "watch", "patch"]}]);
    grant(&admin, &role, &user, rules).await?;
    let recovered = async {
        row_in(&host, "hostile-secrets.wasm", State::Running).await?;
        let seen = eventually(WAIT, || async {
            let s = secrets.get("watched").await.ok()?;
            s.metadata.labels?.get("wcm.test/seen").cloned()
        })
        .await;
        ensure!(
            seen.as_deref() == Some("true"),
            "the granted plugin never worked"
        );
        host.wait_for_log(&["plugin recovered", "plugin=\"hostile-secrets\""], WAIT)
            .await?;
        Ok(())
    }
    .await;
    revoke(&admin, &role).await;
    recovered
}

#[support::test]
async fn a_plugin_that_multiplies_the_hosts_caches_is_stopped_at_its_bound() -> Result<()> {
    let ns = TestNamespace::create("many-informers").await?;
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(ns.client(), ns.name());
    // 200 ConfigMaps of about 1 KiB: some 200 KiB for each of its sixteen informers.
    for i in 0..200 {
        let cm = serde_json::from_value(json!({
            "metadata": {"name": format!("cm-{i}"), "labels": {"wcm.test/many": ""}},
            "data": {"payload": "x".repeat(1024)},
        }))?;
        configmaps.create(&PostParams::default(), &cm).await?;
    }
    let dir = plugins_dir(&[
        ("many.wasm", plugin_bytes("hostile-many-informers")),
        ("harmless.wasm", plugin_bytes("hostile-registration")),
    ])?;
    let host = HostProcess::start(dir.path(), &["--max-cache-mib-per-plugin", "2"])?;
    let stopped = row_in(&host, "many.wasm", State::Failed).await?;
    let why = stopped.reason.unwrap_or_default();
    ensure!(
        why.contains("of the host's caches") && why.contains("more than its limit of 2 MiB"),
        "{why}"
    );
    host.wait_for_log(
        &[
            "plugin stopped: it makes the host cache too much",
            "many.wasm",
        ],
        WAIT,
    )
    .await?;
    // Its informers went with it; the other plugin runs on, its share counted.
    row_in(&host, "harmless.wasm", State::Running).await?;
    let gone = eventually(WAIT, || async {
        let text = host.metrics().await.ok()?;
        (!text.contains("wcm.test/many")).then_some(())
    })
    .await;
    gone.context("the stopped plugin's informers still run")?;
    let cached = host
        .metric("wcm_plugin_cache_bytes", &[("plugin", "harmless")])
        .await;
    ensure!(
        cached.is_ok(),
        "no cache bytes of the running plugin: {cached:?}"
    );
    Ok(())
}

#[support::test]
async fn plugin_names_and_values_never_break_or_forge_the_exposition() -> Result<()> {
    let ns = TestNamespace::create("hostile-metrics").await?;
    let bytes = plugin_bytes("hostile-metrics");
    let settings = |metric: &str| format!(r#"{{"metric": "{metric}"}}"#).into_bytes();
    // `missing` + `rights` was the host's own `wcm_plugin_missing_rights`; `a-b` + `c`
    // and `a` + `b_c` were one family.
    let dir = plugins_dir(&[
        ("missing.wasm", bytes.clone()),
        ("missing.settings.json", settings("rights")),
        ("a-b.wasm", bytes.clone()),
        ("a-b.settings.json", settings("c")),
        ("a.wasm", bytes),
        ("a.settings.json", settings("b_c")),
    ])?;
    let host = HostProcess::start(dir.path(), &[])?;
    let text = r#"a "quoted" \back\slash} # HELP forged"#;
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(ns.client(), ns.name());
    let cm = serde_json::from_value(json!({
        "metadata": {"name": "hostile", "labels": {"wcm.test/hostile-metrics": ""}},
        "data": {"text": text},
    }))?;
    configmaps.create(&PostParams::default(), &cm).await?;
    let value = format!("text={text:?}");
    let families = [
        "wcm_plugin_missing__rights",
        "wcm_plugin_a_b__c",
        "wcm_plugin_a__b_c",
    ];
    let samples = eventually(WAIT, || async {
        let samples = support::check_metrics(&host.metrics().await.ok()?).ok()?;
        let all = (families.iter()).all(|f| {
            samples
                .iter()
                .any(|s| s.starts_with(&format!("{f}{{")) && s.contains(&value))
        });
        all.then_some(samples)
    })
    .await;
    let metrics = host.metrics().await?;
    let samples = match samples {
        Some(samples) => samples,
        None => support::check_metrics(&metrics)?, // says why it does not parse
    };
    ensure!(
        (families.iter()).all(|f| samples.iter().any(|s| s.starts_with(&format!("{f}{{")))),
        "the plugins' series are missing: {samples:#?}"
    );
    // No series but those the plugins declared is named as a plugin's metric, and the
    // host's own series of the plugin `missing` is still the host's.
    let plugins_own: Vec<&String> = (samples.iter())
        .filter(|s| {
            s.starts_with("wcm_plugin_") && s.split('{').next().is_some_and(|n| n.contains("__"))
        })
        .collect();
    ensure!(
        plugins_own
            .iter()
            .all(|s| families.iter().any(|f| s.starts_with(&format!("{f}{{")))),
        "series no plugin declared: {plugins_own:#?}"
    );
    ensure!(
        samples.iter().any(
            |s| s.starts_with("wcm_plugin_missing_rights{") && s.contains("plugin=\"missing\"")
        ),
        "the host's missing-rights series of plugin missing: {samples:#?}"
    );
    // The informer's field selector, escapes and all, is a label value like any other.
    ensure!(
        samples
            .iter()
            .any(|s| s.starts_with("wcm_informer_objects{")
                && s.contains(r#"fields="metadata.name!=a\\,b\\=c\\\\d""#)),
        "no informer series with the field selector: {samples:#?}"
    );
    Ok(())
}
