//! `wasm-controller-manager rbac`: the RBAC of the example plugins is the reviewed file
//! `deploy/rbac.yaml` that `kubectl apply -k deploy/` applies, and the real API server
//! accepts it (`kubectl apply --dry-run=server`); a file that is no plugin is refused
//! by name; one plugin's RBAC is granted and removed without touching another's.

use crate::support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use support::objects::{create_config_map, events_about};
use support::rbac::{EXAMPLES, account_flags, apply_rbac_args, delete_rbac, rbac, rbac_file};
use support::{HostProcess, eventually, kubectl, plugin_bytes, plugin_file, plugins_dir};
use tempfile::NamedTempFile;
use wcm_control_plane::{ControlPlane, TestNamespace};
use wcm_daemon::status::State;

const WAIT: Duration = Duration::from_secs(60);
const EXPECTED: &str = include_str!("../../deploy/rbac.yaml");

#[support::test]
fn the_examples_rbac_is_the_reviewed_file() -> Result<()> {
    let files: Vec<PathBuf> = EXAMPLES.iter().map(|p| plugin_file(p)).collect();
    let out = rbac(&files)?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout)?;
    ensure!(
        yaml == EXPECTED,
        "the examples' RBAC changed; review it and regenerate with\n  \
         target/debug/wasm-controller-manager rbac target/plugins > deploy/rbac.yaml\n\
         new output:\n{yaml}"
    );
    Ok(())
}

#[support::test]
async fn the_api_server_accepts_the_output_for_any_namespace() -> Result<()> {
    let plane = ControlPlane::shared()?;
    let ns = TestNamespace::create("rbac").await?;
    let mut args = vec![PathBuf::from("--namespace"), PathBuf::from(ns.name())];
    args.extend(EXAMPLES.iter().map(|p| plugin_file(p)));
    let file = rbac_file(&args)?;
    let apply = ["apply", "--dry-run=server", "-f"].map(OsStr::new);
    let said = kubectl(plane, &[&apply[..], &[file.path().as_os_str()]].concat())?;
    let account = "serviceaccount/wcm-plugin-pod-counter created (server dry run)";
    ensure!(said.contains(account), "{said}");
    // Cluster-scoped: a test of another file running at the same time may have granted
    // pod-counter already, and then the server says so instead of `created`.
    let binding = "clusterrolebinding.rbac.authorization.k8s.io/wcm-plugin-pod-counter";
    let accepted = ["created", "configured", "unchanged"]
        .map(|verb| format!("{binding} {verb} (server dry run)"));
    ensure!(accepted.iter().any(|line| said.contains(line)), "{said}");
    Ok(())
}

#[support::test]
fn a_file_that_is_no_plugin_is_refused_by_name() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let bad = dir.path().join("broken.wasm");
    std::fs::write(&bad, b"not wasm")?;
    let out = rbac(&[plugin_file("pod-counter"), bad])?;
    let said = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success() && out.stdout.is_empty(), "{said}");
    ensure!(
        said.contains("broken.wasm: not a WebAssembly file"),
        "{said}"
    );
    Ok(())
}

/// `rbac`'s `--username` is one registry's: WasmPlugins naming two registries are
/// refused, naming both, before any password is read or sent.
#[support::test]
fn one_user_for_two_registries_is_refused_naming_them() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let plugins = dir.path().join("plugins.yaml");
    let plugin = |name: &str, image: &str| {
        format!(
            "apiVersion: wasm-controller-manager.io/v1alpha1\nkind: WasmPlugin\n\
             metadata: {{name: {name}, namespace: wcm-system}}\nspec: {{image: \"{image}\"}}\n"
        )
    };
    let text = [
        plugin("one", "registry-a.example:5000/p/one:v1"),
        plugin("two", "registry-b.example/p/two:v1"),
    ]
    .join("---\n");
    std::fs::write(&plugins, text)?;
    let args = [
        plugins.to_str().context("path")?,
        "--username",
        "me",
        "--password-stdin",
    ];
    let out = rbac(&args)?;
    let said = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success() && out.stdout.is_empty(), "{said}");
    let both = "these WasmPlugins name registry-a.example:5000, registry-b.example";
    ensure!(
        said.contains("--username is for one registry") && said.contains(both),
        "{said}"
    );
    Ok(())
}

/// Two plugins whose RBAC is granted one at a time, in either order, as the docs say
/// to add a plugin later, with the host running as its own ServiceAccount: both work;
/// without the host's right to impersonate one, that one is `forbidden` saying so;
/// removing one's RBAC (by its label) makes it `forbidden` and leaves the other
/// working. (The host's rights were once one role for all plugins, so granting the
/// second took them from the first.)
#[support::test]
async fn granting_or_removing_one_plugins_rbac_leaves_the_others() -> Result<()> {
    let plane = ControlPlane::shared()?;
    let ns = TestNamespace::create("rbac-two").await?;
    let host = format!("{}-host", ns.name());
    let result = two_plugins(plane, &ns, &host).await;
    // The host's own ClusterRole and binding are the only objects outside the
    // namespace that no plugin label removes.
    let roles: Api<ClusterRole> = Api::all(ns.client());
    let bindings: Api<ClusterRoleBinding> = Api::all(ns.client());
    let _ = roles.delete(&host, &DeleteParams::default()).await;
    let _ = bindings.delete(&host, &DeleteParams::default()).await;
    result
}

/// `rbac` for one plugin file, its account and the host's named for the test.
fn grant(plane: &ControlPlane, ns: &str, host: &str, plugin: &Path) -> Result<NamedTempFile> {
    let prefix = format!("{ns}-");
    let args = [
        "--namespace",
        ns,
        "--service-account-prefix",
        &prefix,
        "--host-service-account",
        host,
        "--pod-security",
        "privileged",
    ];
    let mut args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    args.push(plugin.as_os_str());
    apply_rbac_args(plane, &args)
}

/// Creates the ConfigMap `name` both plugins watch and waits for the Event of each of
/// `working` about it; then none of `forbidden` may have recorded one.
async fn each_works(
    ns: &TestNamespace,
    name: &str,
    working: &[&str],
    forbidden: &[&str],
) -> Result<()> {
    let client = ns.client();
    create_config_map(&client, ns.name(), name, &[("wcm.test/step", "1")]).await?;
    for plugin in working {
        let seen = eventually(WAIT, || async {
            let events = events_about(&client, ns.name(), name, "Seen1").await.ok()?;
            by(&events, plugin).then_some(())
        });
        seen.await
            .with_context(|| format!("plugin {plugin} did not see ConfigMap {name}"))?;
    }
    let events = events_about(&client, ns.name(), name, "Seen1").await?;
    for plugin in forbidden {
        ensure!(!by(&events, plugin), "{plugin} worked without its RBAC");
    }
    Ok(())
}

/// Whether one of `events` was recorded by `plugin`.
fn by(events: &[Event], plugin: &str) -> bool {
    (events.iter()).any(|e| e.reporting_controller.as_deref() == Some(plugin))
}

async fn two_plugins(plane: &ControlPlane, ns: &TestNamespace, host: &str) -> Result<()> {
    let accounts: Api<ServiceAccount> = Api::namespaced(ns.client(), ns.name());
    let account = serde_json::from_value(serde_json::json!({"metadata": {"name": host}}))?;
    accounts.create(&PostParams::default(), &account).await?;
    let settings = format!("namespaces: [{}]\n", ns.name()).into_bytes();
    let code = plugin_bytes("watch-options");
    let dir = plugins_dir(&[
        ("a.wasm", code.clone()),
        ("a.settings.yaml", settings.clone()),
        ("b.wasm", code),
        ("b.settings.yaml", settings),
    ])?;
    let (a, b) = (dir.path().join("a.wasm"), dir.path().join("b.wasm"));
    let b_granted = grant(plane, ns.name(), host, &b)?;
    grant(plane, ns.name(), host, &a)?;
    let kubeconfig = plane.kubeconfig_as(ns.name(), host, dir.path()).await?;
    let prefix = format!("{}-", ns.name());
    let flags = account_flags(ns.name(), &prefix, &["--access-review-interval=1s"]);
    let process = HostProcess::start_with(&kubeconfig, dir.path(), &flags)?;
    let log = || process.logs().join("\n");
    each_works(ns, "both", &["a", "b"], &[])
        .await
        .with_context(|| format!("both granted; log:\n{}", log()))?;

    // The host's rights for A alone revoked: A is forbidden, saying the host may not
    // impersonate it (its own rights are intact); B runs on. Applied again, A runs.
    let bindings: Api<RoleBinding> = Api::namespaced(ns.client(), ns.name());
    let host_for_a = format!("{host}:{prefix}a");
    bindings
        .delete(&host_for_a, &DeleteParams::default())
        .await?;
    let row = process.row_in("a.wasm", State::Forbidden, WAIT).await?;
    let reason = row.reason.unwrap_or_default();
    ensure!(reason.contains("the host may not impersonate"), "{reason}");
    process.row_in("b.wasm", State::Running, WAIT).await?;
    let a_granted = grant(plane, ns.name(), host, &a)?;
    process.row_in("a.wasm", State::Running, WAIT).await?;

    delete_rbac(plane, &a_granted);
    let row = process.row_in("a.wasm", State::Forbidden, WAIT).await?;
    ensure!(row.reason.is_some(), "{row:?}");
    each_works(ns, "without-a", &["b"], &["a"])
        .await
        .with_context(|| format!("a's RBAC removed; log:\n{}", log()))?;

    let _a_again = grant(plane, ns.name(), host, &a)?;
    delete_rbac(plane, &b_granted);
    process.row_in("b.wasm", State::Forbidden, WAIT).await?;
    process.row_in("a.wasm", State::Running, WAIT).await?;
    each_works(ns, "without-b", &["a"], &["b"])
        .await
        .with_context(|| format!("b's RBAC removed, a's again; log:\n{}", log()))
}
