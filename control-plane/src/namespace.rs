//! A namespace of its own for one test, deleted with everything the test labelled.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::{ControlPlane, Error, TOLERATE_CONTROL_PLANE};

/// Label put on every object a test creates outside its namespace (Nodes, ...), so the
/// cleanup finds them; its value is the test namespace's name.
pub const TEST_LABEL: &str = "wcm.test/namespace";

/// One test's namespace on the shared control plane, plus an admin client.
///
/// Dropping it deletes the Pods (with no grace period: most never ran, and a running
/// one is stopped by the node in the background) and ConfigMaps in it, the namespace,
/// and every Node carrying [`TestNamespace::labels`]; kube-controller-manager's
/// namespace controller removes what else is left.
pub struct TestNamespace {
    /// Unique namespace name: `<prefix>-<nanoseconds>`.
    name: String,
    /// Admin client bound to the test's own runtime.
    client: Client,
}

impl TestNamespace {
    /// Creates a namespace named after `prefix` on the shared control plane. Its Pods
    /// are not scheduled on the local node (they stay `Pending`), so a test may create
    /// thousands.
    pub async fn create(prefix: &str) -> Result<TestNamespace, Error> {
        TestNamespace::create_with(prefix, BTreeMap::new()).await
    }

    /// Creates a namespace whose Pods tolerate the local node's control-plane taint
    /// ([`TOLERATE_CONTROL_PLANE`]), so they really run there.
    pub async fn create_on_node(prefix: &str) -> Result<TestNamespace, Error> {
        let (key, value) = TOLERATE_CONTROL_PLANE;
        let annotations = BTreeMap::from([(key.to_string(), value.to_string())]);
        TestNamespace::create_with(prefix, annotations).await
    }

    async fn create_with(
        prefix: &str,
        annotations: BTreeMap<String, String>,
    ) -> Result<TestNamespace, Error> {
        let client = ControlPlane::shared()?.admin_client().await?;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let name = format!("{prefix}-{:x}", nanos & 0xffff_ffff_ffff);
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                annotations: Some(annotations),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        Ok(TestNamespace { name, client })
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// An admin client.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// What is known of this namespace's Pods and the node ([`crate::describe_pods`]),
    /// for a test's error when they did not get where it waited for them.
    pub async fn describe_pods(&self) -> String {
        crate::describe_pods(&self.client, &self.name).await
    }

    /// Labels to put on cluster-scoped objects this test creates, so cleanup finds them.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(TEST_LABEL.to_string(), self.name.clone())])
    }

    /// Deletes the test's objects; runs on a thread of its own so `Drop` can call it.
    fn cleanup(&self) {
        let name = self.name.clone();
        let Ok(cp) = ControlPlane::shared() else {
            return;
        };
        let cp = cp.clone();
        let cleanup = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let client = cp.admin_client().await.ok()?;
                delete_test_objects(client, &name).await.ok()
            })
        });
        if cleanup.join().ok().flatten().is_none() {
            tracing::warn!(namespace = %self.name, "test cleanup incomplete");
        }
    }
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace")
            .field("name", &self.name)
            .finish()
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        self.cleanup();
    }
}

async fn delete_test_objects(client: Client, name: &str) -> Result<(), kube::Error> {
    let now = DeleteParams::default().grace_period(0);
    let pods: Api<Pod> = Api::namespaced(client.clone(), name);
    pods.delete_collection(&now, &ListParams::default()).await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), name);
    config_maps
        .delete_collection(&now, &ListParams::default())
        .await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let selector = format!("{TEST_LABEL}={name}");
    nodes
        .delete_collection(&now, &ListParams::default().labels(&selector))
        .await?;
    Api::<Namespace>::all(client)
        .delete(name, &DeleteParams::default())
        .await?;
    Ok(())
}
