//! The WebApp custom resource of the deployment-reconcile plugin: its CRD and a client
//! for it, for the tests that run the plugin.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, Client};

use super::eventually;

pub const CRD_YAML: &str = include_str!("../../../plugins/deployment-reconcile/webapp-crd.yaml");
pub const CRD_NAME: &str = "webapps.demo.wasm-controller-manager.io";

pub fn webapp_resource() -> ApiResource {
    ApiResource {
        group: "demo.wasm-controller-manager.io".into(),
        version: "v1alpha1".into(),
        api_version: "demo.wasm-controller-manager.io/v1alpha1".into(),
        kind: "WebApp".into(),
        plural: "webapps".into(),
    }
}

/// Installs the plugin's CRD (if absent) and waits until WebApps can be listed.
pub async fn install_crd(client: &Client) -> Result<()> {
    let crd: CustomResourceDefinition = serde_saphyr::from_str(CRD_YAML)?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    if crds.get_opt(CRD_NAME).await?.is_none() {
        crds.create(&PostParams::default(), &crd).await?;
    }
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &webapp_resource());
    let served = eventually(Duration::from_secs(60), || async {
        api.list(&Default::default()).await.ok().map(|_| ())
    })
    .await;
    served.context("the WebApp CRD was not served")
}
