//! The WebApp custom resource of the deployment-reconcile plugin: its CRD and a client
//! for it, for the tests that run the plugin.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use wcm_control_plane::TestNamespace;

use super::eventually;
pub use super::plugin_workload::webapp_resource;

/// How long a WebApp scenario waits for the controller (and kube-controller-manager).
pub const CONVERGE: Duration = Duration::from_secs(60);

pub const CRD_YAML: &str = include_str!("../../../plugins/deployment-reconcile/webapp-crd.yaml");
pub const CRD_NAME: &str = "webapps.demo.wasm-controller-manager.io";

/// Installs the plugin's CRD, or brings one installed by an earlier version of the
/// file up to date (a kept cluster would otherwise prune the fields it lacks), and
/// waits until WebApps can be listed.
pub async fn install_crd(client: &Client) -> Result<()> {
    let crd: CustomResourceDefinition = serde_saphyr::from_str(CRD_YAML)?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    if let Some(old) = crds.get_opt(CRD_NAME).await?
        && old.metadata.deletion_timestamp.is_some()
    {
        release_webapps(client).await?;
        let removed = super::gone(&crds, CRD_NAME, CONVERGE).await;
        removed.context("the terminating WebApp CRD did not go")?;
    }
    let params = PatchParams::apply("wcm-tests").force();
    crds.patch(CRD_NAME, &params, &Patch::Apply(&crd)).await?;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &webapp_resource());
    let served = eventually(Duration::from_secs(60), || async {
        api.list(&Default::default()).await.ok().map(|_| ())
    })
    .await;
    served.context("the WebApp CRD was not served")
}

/// Removes every WebApp's finalizers, as an operator would for objects whose
/// controller is gone: a scenario that failed while a WebApp carried the registry's
/// finalizer would otherwise hold the WebApp, its namespace and the CRD forever.
pub async fn release_webapps(client: &Client) -> Result<()> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &webapp_resource());
    let Ok(list) = api.list(&Default::default()).await else {
        return Ok(()); // not served: nothing to release
    };
    let none = json!({"metadata": {"finalizers": null}});
    for app in list
        .items
        .iter()
        .filter(|a| a.metadata.finalizers.is_some())
    {
        let (Some(ns), Some(name)) = (&app.metadata.namespace, &app.metadata.name) else {
            continue;
        };
        let namespaced: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), ns, &webapp_resource());
        let patch = Patch::Merge(&none);
        namespaced
            .patch(name, &PatchParams::default(), &patch)
            .await?;
    }
    Ok(())
}

/// The WebApps of the test's namespace.
pub fn webapps(ns: &TestNamespace) -> Api<DynamicObject> {
    Api::namespaced_with(ns.client(), ns.name(), &webapp_resource())
}

/// Creates the WebApp `name` with `spec` in the test's namespace.
pub async fn create_webapp(ns: &TestNamespace, name: &str, spec: Value) -> Result<DynamicObject> {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "demo.wasm-controller-manager.io/v1alpha1",
        "kind": "WebApp",
        "metadata": {"name": name},
        "spec": spec,
    }))?;
    Ok(webapps(ns).create(&PostParams::default(), &object).await?)
}

/// Waits until `check` accepts the Deployment named `name` and returns it.
pub async fn deployment_where(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    check: impl Fn(&Deployment) -> bool,
) -> Result<Deployment> {
    let api: Api<Deployment> = Api::namespaced(ns.client(), ns.name());
    let found = eventually(CONVERGE, || async {
        let d = api.get_opt(name).await.ok()??;
        check(&d).then_some(d)
    })
    .await;
    let last = api.get_opt(name).await?;
    found.with_context(|| format!("no Deployment {name} with {what}; last seen: {last:?}"))
}

/// Waits until the WebApp's status satisfies `check` and returns the status.
pub async fn status_where(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Result<Value> {
    let found = eventually(CONVERGE, || async {
        let app = webapps(ns).get(name).await.ok()?;
        let status = app.data.get("status")?.clone();
        check(&status).then_some(status)
    })
    .await;
    let last = webapps(ns).get(name).await?.data.get("status").cloned();
    found.with_context(|| format!("WebApp {name} status never had {what}; last: {last:?}"))
}

/// The `Ready` condition of a WebApp's status.
pub fn ready_condition(status: &Value) -> Option<&Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
}
