//! Fixture files: the objects the in-memory cluster starts with, as Kubernetes YAML
//! (several documents per file, `kind: List` too, directories read in name order),
//! and which kinds are namespaced.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::store::ObjectId;
use wcm_core::kube::discovery::split_api_version;

/// Why the fixtures could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// A file or directory could not be read.
    #[error("{}: cannot read it: {cause}", path.display())]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// A file is not YAML.
    #[error("{}: not YAML: {cause}", path.display())]
    Yaml { path: PathBuf, cause: String },
    /// A document is not a Kubernetes object the test kit can hold.
    #[error("{}: object {index}: {cause}", path.display())]
    Object {
        path: PathBuf,
        index: usize,
        cause: String,
    },
    /// Two fixtures are the same object.
    #[error("fixtures: {object}: {cause}")]
    Duplicate { object: String, cause: String },
}

/// Kinds that are cluster-scoped in every Kubernetes release this host supports, by
/// group; any other kind is namespaced unless a CustomResourceDefinition among the
/// fixtures says otherwise.
const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("networking.k8s.io", "IngressClass"),
    ("node.k8s.io", "RuntimeClass"),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("apiregistration.k8s.io", "APIService"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
];

/// Which kinds are namespaced: the built-in table, and the fixtures' CRDs.
#[derive(Debug, Clone)]
pub struct Scopes {
    namespaced: BTreeMap<(String, String), bool>,
}

impl Default for Scopes {
    fn default() -> Scopes {
        let namespaced = (CLUSTER_SCOPED.iter())
            .map(|(g, k)| ((g.to_string(), k.to_string()), false))
            .collect();
        Scopes { namespaced }
    }
}

impl Scopes {
    /// Whether objects of `kind` in `group` live in namespaces.
    pub fn namespaced(&self, group: &str, kind: &str) -> bool {
        let key = (group.to_string(), kind.to_string());
        self.namespaced.get(&key).copied().unwrap_or(true)
    }

    /// Learns the scope of the kind a CustomResourceDefinition defines.
    fn learn(&mut self, crd: &Value) {
        let text = |p: &str| crd.pointer(p).and_then(Value::as_str).map(str::to_string);
        if let (Some(group), Some(kind), Some(scope)) = (
            text("/spec/group"),
            text("/spec/names/kind"),
            text("/spec/scope"),
        ) {
            self.namespaced.insert((group, kind), scope == "Namespaced");
        }
    }

    /// The address of `object`: a namespaced kind without a namespace is in
    /// `default` (as `kubectl apply` puts it); a cluster-scoped one may have none.
    pub fn address(&self, object: &Value) -> Result<ObjectId, String> {
        let text = |p: &str| object.pointer(p).and_then(Value::as_str);
        let api_version = text("/apiVersion").ok_or("it has no apiVersion")?;
        let kind = text("/kind").ok_or("it has no kind")?;
        let name = text("/metadata/name").ok_or("it has no metadata.name")?;
        let (group, _) = split_api_version(api_version);
        let namespace = match (self.namespaced(group, kind), text("/metadata/namespace")) {
            (true, ns) => Some(ns.unwrap_or("default").to_string()),
            (false, None) => None,
            (false, Some(_)) => {
                return Err(format!("{kind} is cluster-scoped but has a namespace"));
            }
        };
        Ok(ObjectId {
            group: group.to_string(),
            kind: kind.to_string(),
            namespace,
            name: name.to_string(),
        })
    }
}

/// The objects of the fixture files, in the order given, and the scopes they imply.
/// A directory stands for its fixture files but those in `not_fixtures`.
pub fn read(
    paths: &[PathBuf],
    not_fixtures: &[PathBuf],
) -> Result<(Vec<(ObjectId, Value)>, Scopes), FixtureError> {
    let mut documents = Vec::new();
    for file in files(paths, not_fixtures)? {
        let text = std::fs::read_to_string(&file).map_err(|cause| FixtureError::Read {
            path: file.clone(),
            cause,
        })?;
        let values: Vec<Value> = serde_saphyr::from_multiple_with_options(&text, yaml_options())
            .map_err(|e| FixtureError::Yaml {
                path: file.clone(),
                cause: e.to_string(),
            })?;
        documents.extend(
            values
                .into_iter()
                .flat_map(items)
                .map(|v| (file.clone(), v)),
        );
    }
    let mut scopes = Scopes::default();
    for (_, object) in &documents {
        if object["kind"] == "CustomResourceDefinition" {
            scopes.learn(object);
        }
    }
    let mut objects = Vec::new();
    for (index, (path, object)) in documents.into_iter().enumerate() {
        let id = scopes
            .address(&object)
            .map_err(|cause| FixtureError::Object {
                path: path.clone(),
                index: index + 1,
                cause,
            })?;
        objects.push((id, object));
    }
    Ok((objects, scopes))
}

/// The YAML parser's limits, raised for fixtures and reports of a large cluster
/// (tens of thousands of objects); the defaults stop at 1,024 documents.
pub fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_documents: 200_000,
            max_nodes: 20_000_000,
            max_events: 100_000_000,
        },
    }
}

/// A `kind: List`'s items, or the object itself.
fn items(document: Value) -> Vec<Value> {
    match (document.get("kind"), document.get("items")) {
        (Some(kind), Some(Value::Array(items))) if kind == "List" => items.clone(),
        _ => vec![document],
    }
}

/// Files as given; directories replaced by their `.yaml`/`.yml`/`.json` files, sorted,
/// but those in `not_fixtures` and a directory's expected report and steps
/// (`expected.yaml`, `steps.yaml`, whatever flags name them; a file named on its own
/// is always taken).
fn files(paths: &[PathBuf], not_fixtures: &[PathBuf]) -> Result<Vec<PathBuf>, FixtureError> {
    let left_out: Vec<PathBuf> = not_fixtures.iter().map(|p| same_file(p)).collect();
    let mut found = Vec::new();
    for path in paths {
        if !path.is_dir() {
            found.push(path.clone());
            continue;
        }
        let read = |cause| FixtureError::Read {
            path: path.clone(),
            cause,
        };
        let mut inside: Vec<PathBuf> = (std::fs::read_dir(path).map_err(read)?)
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_fixture(p) && !left_out.contains(&same_file(p)))
            .collect();
        inside.sort();
        found.extend(inside);
    }
    Ok(found)
}

/// `path` made comparable: `testdata/expected.yaml` and `./testdata/expected.yaml` are
/// one file (a file not yet written, as `--update`'s, compares as given).
fn same_file(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn is_fixture(path: &Path) -> bool {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let report = NOT_FIXTURES.contains(&stem);
    path.is_file() && matches!(ext, "yaml" | "yml" | "json") && !report
}

/// Names (without their ending) a directory of fixtures keeps for what is not one:
/// the expected report (`--expect`) and the steps (`--steps`), as `new` lays them out.
const NOT_FIXTURES: [&str; 2] = ["expected", "steps"];

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_directorys_expected_report_and_steps_are_never_fixtures() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["cluster.yaml", "expected.yaml", "steps.yml", "more.json"] {
            std::fs::write(dir.path().join(name), "{}").expect("write");
        }
        let found = files(&[dir.path().to_path_buf()], &[]).expect("files");
        let names: Vec<_> = found
            .iter()
            .filter_map(|p| p.file_name()?.to_str())
            .collect();
        assert_eq!(names, ["cluster.yaml", "more.json"]);
        let named = files(&[dir.path().join("expected.yaml")], &[]).expect("files");
        assert_eq!(named.len(), 1, "a file named on its own is taken");
    }

    #[test]
    fn namespaced_kinds_default_to_the_default_namespace_and_nodes_have_none() {
        let scopes = Scopes::default();
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}});
        assert_eq!(
            scopes.address(&pod).expect("ok").namespace.as_deref(),
            Some("default")
        );
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}});
        assert_eq!(scopes.address(&node).expect("ok").namespace, None);
        let wrong = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "namespace": "x"}});
        assert_eq!(
            scopes.address(&wrong).expect_err("refused"),
            "Node is cluster-scoped but has a namespace"
        );
    }

    #[test]
    fn a_crd_among_the_fixtures_says_whether_its_kind_is_namespaced() {
        let mut scopes = Scopes::default();
        assert!(scopes.namespaced("demo.example.com", "Cluster"));
        scopes.learn(
            &json!({"spec": {"group": "demo.example.com", "scope": "Cluster",
            "names": {"kind": "Cluster"}}}),
        );
        assert!(!scopes.namespaced("demo.example.com", "Cluster"));
    }

    #[test]
    fn a_list_is_read_as_its_items() {
        let list = json!({"kind": "List", "items": [{"a": 1}, {"b": 2}]});
        assert_eq!(items(list).len(), 2);
    }

    #[test]
    fn a_directory_leaves_out_the_runs_own_files_but_a_file_named_alone_is_taken() {
        let dir = tempfile::tempdir().expect("dir");
        let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n";
        std::fs::write(dir.path().join("cluster.yaml"), pod).expect("write");
        std::fs::write(dir.path().join("expected.yaml"), "reconciles: []\n").expect("write");
        std::fs::write(dir.path().join("settings.yaml"), "mode: x\n").expect("write");
        // As a user names them: relative to where they stand, with a `./` or not.
        let dotted = dir.path().join(".").join("settings.yaml");
        let own = [dir.path().join("expected.yaml"), dotted];
        let (objects, _) = read(&[dir.path().to_path_buf()], &own).expect("read");
        assert_eq!(objects.len(), 1, "{objects:?}");
        let named = [dir.path().join("cluster.yaml"), own[0].clone()];
        let refused = read(&named, &own).expect_err("expected.yaml is no object");
        assert!(refused.to_string().contains("expected.yaml"), "{refused}");
    }
}
