//! RBAC decides what a plugin may read, though its informers are shared: a plugin
//! that declares and watches Secrets, whose ServiceAccount may not list them, is
//! `forbidden` in the plugin table (with the rule it lacks, in the log and the state
//! metric) and is never served a Secret from the cache another plugin fills, though
//! the host itself may list Secrets; granted the rule, it starts by itself; when the
//! rule is revoked again, it is no longer served Secrets. And a plugin granted a
//! Role in one namespace has its writes in another refused by the API server. A new
//! version needing a right not granted yet waits for it while the old one runs.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use support::objects::{
    all_pods, config_map_label, create_config_map, create_node, create_pod, label_of, node_label,
};
use support::rbac::{account_flags, apply_rbac, delete_rbac, set_verbs};
use support::{HostProcess, eventually, plugin_bytes, plugin_file, plugins_dir};
use wcm_control_plane::{ControlPlane, TestNamespace};
use wcm_daemon::status::State;

const WAIT: Duration = Duration::from_secs(60);
const COUNT: &str = "pod-counter.example.com/count";
const SELECTOR: &str = "wcm.test/hostile-secret";
const SECRET_READ: [&str; 4] = ["get", "list", "patch", "watch"];
const NO_LIST: [&str; 2] = ["get", "patch"];

async fn create_secret(client: &Client, ns: &str, name: &str) -> Result<()> {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {SELECTOR: ""}},
        "stringData": {"password": "hunter2"},
    }))?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    secrets.create(&PostParams::default(), &secret).await?;
    Ok(())
}

async fn secret_label(client: &Client, ns: &str, name: &str, key: &str) -> Option<String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    label_of(&secrets, name, key).await
}

#[support::test]
async fn a_plugin_is_served_only_the_kinds_its_service_account_may_list() -> Result<()> {
    let plane = ControlPlane::shared()?;
    let ns = TestNamespace::create("reads").await?;
    let prefix = format!("{}-", ns.name());
    let plugins = [
        plugin_file("hostile-secrets"),
        plugin_file("hostile-secrets-peek"),
    ];
    let granted = apply_rbac(plane, ns.name(), &prefix, &plugins)?;
    let result = secrets_scenario(&ns, &prefix).await;
    delete_rbac(plane, &granted);
    result
}

async fn secrets_scenario(ns: &TestNamespace, prefix: &str) -> Result<()> {
    let client = ns.client();
    let peek_role = format!("{prefix}hostile-secrets-peek");
    set_verbs(&client, &peek_role, "secrets", &NO_LIST).await?;
    create_secret(&client, ns.name(), "first").await?;
    let dir = plugins_dir(&[
        ("hostile-secrets.wasm", plugin_bytes("hostile-secrets")),
        (
            "hostile-secrets-peek.wasm",
            plugin_bytes("hostile-secrets-peek"),
        ),
    ])?;
    let flags = account_flags(
        ns.name(),
        prefix,
        &["--access-review-interval=1s", "--missing-kind-retry=1s"],
    );
    let host = HostProcess::start(dir.path(), &flags)?;

    // The granted plugin reads the Secret from the shared cache...
    let seen = eventually(WAIT, || {
        secret_label(&client, ns.name(), "first", "wcm.test/seen")
    })
    .await;
    seen.context("hostile-secrets never read the Secret")?;
    // ... the other is refused, with the rule it lacks.
    let row = host
        .row_in("hostile-secrets-peek.wasm", State::Forbidden, WAIT)
        .await?;
    let why = row.reason.clone().unwrap_or_default();
    let rule = "list resource \"secrets\" in API group \"\" at the cluster scope";
    ensure!(why.contains(rule), "{why}");
    ensure!(why.contains(&format!("{}:{peek_role}", ns.name())), "{why}");
    let rights = row.rights.context("no rights in the row")?;
    ensure!(rights.denied.iter().any(|d| d == rule), "{rights:?}");
    host.wait_for_log(
        &[
            "plugin does not start yet",
            "hostile-secrets-peek",
            "not granted: list",
        ],
        WAIT,
    )
    .await?;
    let state = [("plugin", "hostile-secrets-peek"), ("state", "forbidden")];
    ensure!(host.metric("wcm_plugin_state", &state).await? == 1.0);
    let peeked = secret_label(&client, ns.name(), "first", "wcm.test/peeked").await;
    ensure!(peeked.is_none(), "a forbidden plugin read the Secret");

    // Granted, it starts by itself.
    set_verbs(&client, &peek_role, "secrets", &SECRET_READ).await?;
    let peeked = eventually(WAIT, || {
        secret_label(&client, ns.name(), "first", "wcm.test/peeked")
    })
    .await;
    peeked.context("granted the rule, the plugin did not start")?;
    host.row_in("hostile-secrets-peek.wasm", State::Running, WAIT)
        .await?;

    // Revoked again, it is no longer served Secrets, while the other plugin is.
    set_verbs(&client, &peek_role, "secrets", &NO_LIST).await?;
    let row = host
        .row_in("hostile-secrets-peek.wasm", State::Forbidden, WAIT)
        .await?;
    ensure!(row.reason.unwrap_or_default().contains(rule));
    host.wait_for_log(
        &["lost a right it needs to read", "hostile-secrets-peek"],
        WAIT,
    )
    .await?;
    create_secret(&client, ns.name(), "second").await?;
    let seen = eventually(WAIT, || {
        secret_label(&client, ns.name(), "second", "wcm.test/seen")
    })
    .await;
    seen.context("hostile-secrets did not read the second Secret")?;
    // Several review intervals later, still nothing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let peeked = secret_label(&client, ns.name(), "second", "wcm.test/peeked").await;
    ensure!(
        peeked.is_none(),
        "a plugin that lost the right read a Secret"
    );
    Ok(())
}

/// The fixed namespaces the `hostile-namespace-a` plugin knows.
const NAMESPACE_A: &str = "wcm-rights-a";
const NAMESPACE_B: &str = "wcm-rights-b";

async fn fresh_namespace(client: &Client, name: &str) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(name, &DeleteParams::default()).await;
    let created = eventually(WAIT, || async {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).ok()?;
        namespaces.create(&PostParams::default(), &ns).await.ok()
    })
    .await;
    created.with_context(|| format!("namespace {name} was not created"))?;
    Ok(())
}

#[support::test]
async fn a_plugin_granted_one_namespace_cannot_write_in_another() -> Result<()> {
    let plane = ControlPlane::shared()?;
    let ns = TestNamespace::create("one-ns").await?;
    let client = ns.client();
    fresh_namespace(&client, NAMESPACE_A).await?;
    fresh_namespace(&client, NAMESPACE_B).await?;
    let prefix = format!("{}-", ns.name());
    let plugin = plugin_file("hostile-namespace-a");
    let granted = apply_rbac(plane, ns.name(), &prefix, &[plugin])?;
    let result = one_namespace_scenario(&client, ns.name(), &prefix).await;
    delete_rbac(plane, &granted);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in [NAMESPACE_A, NAMESPACE_B] {
        let _ = namespaces.delete(name, &DeleteParams::default()).await;
    }
    result
}

async fn one_namespace_scenario(client: &Client, home: &str, prefix: &str) -> Result<()> {
    let touch = "wcm.test/touch";
    create_config_map(client, NAMESPACE_A, "here", &[(touch, NAMESPACE_A)]).await?;
    create_config_map(client, NAMESPACE_B, "there", &[]).await?;
    let dir = plugins_dir(&[(
        "hostile-namespace-a.wasm",
        plugin_bytes("hostile-namespace-a"),
    )])?;
    let flags = account_flags(home, prefix, &[]);
    let host = HostProcess::start(dir.path(), &flags)?;
    let touched = eventually(WAIT, || async {
        config_map_label(client, NAMESPACE_A, "here", "wcm.test/touched")
            .await
            .ok()?
    })
    .await;
    touched.context("the plugin did not write in the namespace it is granted")?;
    // Told to write in the other namespace, it is refused by the API server.
    create_config_map(client, NAMESPACE_A, "there", &[(touch, NAMESPACE_B)]).await?;
    let account = format!("system:serviceaccount:{home}:{prefix}hostile-namespace-a");
    let refused = host
        .wait_for_log(&["cannot patch resource", "configmaps", NAMESPACE_B], WAIT)
        .await?;
    ensure!(refused.contains(&account), "{refused}");
    ensure!(refused.contains("forbidden"), "{refused}");
    let label = config_map_label(client, NAMESPACE_B, "there", "wcm.test/touched").await?;
    ensure!(label.is_none(), "the write in {NAMESPACE_B} went through");
    Ok(())
}

#[support::test]
async fn an_upgrade_that_needs_a_new_right_waits_for_it_while_the_old_version_runs() -> Result<()> {
    let plane = ControlPlane::shared()?;
    let ns = TestNamespace::create("upgrade-rights").await?;
    let prefix = format!("{}-", ns.name());
    let granted = apply_rbac(plane, ns.name(), &prefix, &[plugin_file("pod-counter")])?;
    let result = upgrade_scenario(plane, &ns, &prefix).await;
    delete_rbac(plane, &granted);
    result
}

/// pod-counter's next version also watches ConfigMaps: dropped in before RBAC lets
/// it, it waits while 0.1.0 keeps counting; once the operator applies its RBAC, it
/// takes over by itself.
async fn upgrade_scenario(plane: &ControlPlane, ns: &TestNamespace, prefix: &str) -> Result<()> {
    let client = ns.client();
    let node = format!("{}-control-plane", ns.name());
    create_node(&client, &node, true, ns.labels()).await?;
    let dir = plugins_dir(&[("pod-counter.wasm", plugin_bytes("pod-counter"))])?;
    let flags = account_flags(
        ns.name(),
        prefix,
        &["--missing-kind-retry=1s", "--access-review-interval=2s"],
    );
    let host = HostProcess::start(dir.path(), &flags)?;
    host.row_in("pod-counter.wasm", State::Running, WAIT)
        .await?;
    // `mv` of a complete file, as the docs say to drop a plugin in.
    let staged = dir.path().join(".next.tmp");
    std::fs::write(&staged, plugin_bytes("pod-counter-next"))?;
    std::fs::rename(&staged, dir.path().join("pod-counter.wasm"))?;
    let waits = eventually(WAIT, || async {
        let row = host.row("pod-counter.wasm").await.ok()??;
        let reason = row.reason.clone()?;
        (row.state == State::Running && reason.contains("upgrade to 0.1.0-next waits"))
            .then_some(reason)
    })
    .await;
    let reason = waits.context("the upgrade did not wait for its right")?;
    ensure!(reason.contains("list resource \"configmaps\""), "{reason}");
    create_pod(&client, ns.name(), "counted-by-the-old-version").await?;
    let counting = eventually(WAIT, || async {
        let pods = all_pods(&client).await.ok()?.len();
        (node_label(&client, &node, COUNT).await.ok()?? == pods.to_string()).then_some(())
    })
    .await;
    counting.context("the running version stopped counting")?;
    // Its RBAC, generated as the operator would: from the file as it is deployed (its
    // name is its identity).
    let deployed = tempfile::tempdir()?;
    let next_file = deployed.path().join("pod-counter.wasm");
    std::fs::write(&next_file, plugin_bytes("pod-counter-next"))?;
    let next = apply_rbac(plane, ns.name(), prefix, &[next_file])?;
    let upgraded = host
        .wait_for_log(&["plugin upgraded", "version=0.1.0-next"], WAIT)
        .await;
    delete_rbac(plane, &next);
    upgraded?;
    Ok(())
}

/// pod-counter acting as its own ServiceAccount, granted what `rbac` generates in a
/// namespace of its own (`prefix`), reviewed only every five minutes, counting onto a
/// Node of its own: the scene of the rights-change scenarios.
struct Counting {
    ns: TestNamespace,
    node: String,
    role: String,
    host: HostProcess,
    _dir: tempfile::TempDir,
}

impl Counting {
    async fn start(ns: TestNamespace, prefix: &str) -> Result<Counting> {
        let node = format!("{}-control-plane", ns.name());
        create_node(&ns.client(), &node, true, ns.labels()).await?;
        let dir = plugins_dir(&[("pod-counter.wasm", plugin_bytes("pod-counter"))])?;
        let flags = account_flags(ns.name(), prefix, &["--access-review-interval=5m"]);
        let host = HostProcess::start(dir.path(), &flags)?;
        host.row_in("pod-counter.wasm", State::Running, WAIT)
            .await?;
        let role = format!("{prefix}pod-counter");
        Ok(Counting {
            ns,
            node,
            role,
            host,
            _dir: dir,
        })
    }

    /// Waits until the Node's count is the cluster's Pods; `what` says why not.
    async fn counted(&self, what: &'static str) -> Result<()> {
        let client = self.ns.client();
        let counted = eventually(WAIT, || async {
            let pods = all_pods(&client).await.ok()?.len();
            let label = node_label(&client, &self.node, COUNT).await.ok()??;
            (label == pods.to_string()).then_some(())
        })
        .await;
        counted.context(what)
    }
}

/// Runs `scenario` in a namespace `name-…` with pod-counter's RBAC applied, removed
/// afterwards whatever the outcome.
async fn with_pod_counter_rbac<F, Fut>(name: &str, scenario: F) -> Result<()>
where
    F: FnOnce(TestNamespace, String) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let plane = ControlPlane::shared()?;
    let ns = TestNamespace::create(name).await?;
    let prefix = format!("{}-", ns.name());
    let granted = apply_rbac(plane, ns.name(), &prefix, &[plugin_file("pod-counter")])?;
    let result = scenario(ns, prefix).await;
    delete_rbac(plane, &granted);
    result
}

#[support::test]
async fn a_change_of_rights_is_seen_at_once_and_a_recovered_plugin_acts_at_once() -> Result<()> {
    with_pod_counter_rbac("rights-change", rights_change_scenario).await
}

/// pod-counter, reviewed only every five minutes: its `patch` on Nodes revoked, it is
/// `forbidden` naming the rule within seconds; a burst of Pods meanwhile fails its
/// key over and over, growing its backoff to minutes; the rule restored, it counts
/// again within seconds, not after that backoff.
async fn rights_change_scenario(ns: TestNamespace, prefix: String) -> Result<()> {
    let scene = Counting::start(ns, &prefix).await?;
    let (client, host, role) = (scene.ns.client(), &scene.host, &scene.role);
    set_verbs(&client, role, "nodes", &["get", "list", "watch"]).await?;
    let row = host
        .row_in("pod-counter.wasm", State::Forbidden, WAIT)
        .await?;
    let why = row.reason.unwrap_or_default();
    ensure!(why.contains("patch resource \"nodes\""), "{why}");
    // Each Pod wakes the key at once and fails it again: 16 failures in a row put
    // its next retry more than five minutes away.
    for i in 0..16 {
        create_pod(&client, scene.ns.name(), &format!("burst-{i}")).await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    set_verbs(&client, role, "nodes", &["get", "list", "patch", "watch"]).await?;
    host.row_in("pod-counter.wasm", State::Running, WAIT)
        .await?;
    let late = "the restored plugin did not count again before its backoff ran out";
    scene.counted(late).await?;
    host.wait_for_log(&["plugin recovered", "failed keys retried now"], WAIT)
        .await?;
    Ok(())
}

#[support::test]
async fn a_plugin_served_a_kind_again_reconciles_what_changed_while_it_was_not() -> Result<()> {
    with_pod_counter_rbac("rights-missed", missed_while_forbidden_scenario).await
}

/// pod-counter, its read of Pods revoked: `forbidden`, so the Pods created meanwhile
/// queue nothing; the read restored, every cached Pod goes through its mapping once
/// and the count is right, though no Pod changed after the restore.
async fn missed_while_forbidden_scenario(ns: TestNamespace, prefix: String) -> Result<()> {
    let scene = Counting::start(ns, &prefix).await?;
    let (client, host, role) = (scene.ns.client(), &scene.host, &scene.role);
    set_verbs(&client, role, "pods", &["get", "patch"]).await?;
    host.row_in("pod-counter.wasm", State::Forbidden, WAIT)
        .await?;
    for i in 0..2 {
        create_pod(&client, scene.ns.name(), &format!("missed-{i}")).await?;
    }
    // The host's own informer sees them (it may list Pods); the plugin is not told.
    tokio::time::sleep(Duration::from_secs(2)).await;
    set_verbs(&client, role, "pods", &["get", "list", "patch", "watch"]).await?;
    host.row_in("pod-counter.wasm", State::Running, WAIT)
        .await?;
    let missed = "the Pods created while the plugin was forbidden were never counted";
    scene.counted(missed).await?;
    host.wait_for_log(&["served a watch again", "Pod"], WAIT)
        .await?;
    Ok(())
}
