//! The rights derived from registrations, and their YAML.

use super::*;
use crate::contract::{Gvk, KeyMapping, Permission, Registration, Watch};
use crate::rights::identity::ServiceAccounts;

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

fn watch(kind: Gvk, namespace: Option<&str>) -> Watch {
    Watch {
        kind,
        namespaces: namespace.map(str::to_string).into_iter().collect(),
        label_selector: None,
        field_selector: None,
        metadata_only: false,
        predicates: Vec::new(),
        maps_to: KeyMapping::Object,
    }
}

fn registration(name: &str, watches: Vec<Watch>, permissions: Vec<Permission>) -> Registration {
    Registration {
        name: name.into(),
        registered_as: None,
        version: "1.0.0".into(),
        watches,
        permissions,
        max_concurrent_reconciles: 0,
        resync_period_ms: None,
        metrics: Vec::new(),
    }
}

fn naming() -> Naming {
    Naming {
        accounts: ServiceAccounts::new("wcm-system", "wcm-plugin-").expect("valid"),
        host: "wasm-controller-manager".into(),
        pod_security: PodSecurity::Restricted,
    }
}

fn verbs(rights: &Rights, namespace: Option<&str>, group: &str, resource: &str) -> Vec<String> {
    let found = rights.iter().find(|(t, _)| {
        t.namespace.as_deref() == namespace && t.group == group && t.resource == resource
    });
    found.map_or(vec![], |(_, v)| v.iter().map(|v| v.to_string()).collect())
}

/// pod-counter's shape: all Pods and Nodes watched, Node labels patched.
fn pod_counter() -> Registration {
    let patch_nodes = Permission {
        kind: gvk("", "v1", "Node"),
        verbs: vec!["patch".into()],
    };
    let patch_pods = Permission {
        kind: gvk("", "v1", "Pod"),
        verbs: vec!["patch".into()],
    };
    registration(
        "pod-counter",
        vec![
            watch(gvk("", "v1", "Pod"), None),
            watch(gvk("", "v1", "Node"), None),
        ],
        vec![patch_nodes, patch_pods],
    )
}

#[test]
fn a_plugin_watching_everywhere_gets_cluster_wide_rights() {
    let rights = plugin_rights(&pod_counter()).rights;
    assert_eq!(
        verbs(&rights, None, "", "pods"),
        ["get", "list", "patch", "watch"]
    );
    assert_eq!(
        verbs(&rights, None, "", "nodes"),
        ["get", "list", "patch", "watch"]
    );
    assert_eq!(
        verbs(&rights, None, "events.k8s.io", "events"),
        ["create", "patch"]
    );
    // Events about Nodes go to `default`, which the cluster-wide rule covers.
    assert_eq!(rights.len(), 3, "{rights:?}");
}

#[test]
fn events_about_cluster_scoped_objects_go_to_default() {
    let node = gvk("", "v1", "Node");
    let pod = gvk("", "v1", "Pod");
    let reg = registration(
        "node-watcher",
        vec![watch(pod, Some("a")), watch(node, None)],
        vec![],
    );
    let rights = plugin_rights(&reg).rights;
    assert_eq!(
        verbs(&rights, Some("default"), "events.k8s.io", "events"),
        ["create", "patch"]
    );
    assert_eq!(
        verbs(&rights, Some("a"), "events.k8s.io", "events"),
        ["create", "patch"]
    );
    assert_eq!(verbs(&rights, None, "", "nodes"), ["get", "list", "watch"]);
}

#[test]
fn a_plugin_in_one_namespace_gets_a_role_there_and_cluster_scoped_kinds_stay_cluster_wide() {
    let app = gvk("demo.example.com", "v1alpha1", "WebApp");
    let deployment = gvk("apps", "v1", "Deployment");
    let reg = registration(
        "shop-operator",
        vec![
            watch(app.clone(), Some("shop")),
            watch(deployment.clone(), Some("shop")),
        ],
        vec![
            Permission {
                kind: deployment,
                verbs: vec!["apply".into(), "delete".into()],
            },
            Permission {
                kind: app,
                verbs: vec!["patch/status".into()],
            },
            Permission {
                kind: gvk("", "v1", "Node"),
                verbs: vec!["patch".into()],
            },
        ],
    );
    let found = plugin_rights(&reg);
    let rights = &found.rights;
    let shop = Some("shop");
    assert_eq!(
        verbs(rights, shop, "apps", "deployments"),
        ["create", "delete", "get", "list", "patch", "watch"]
    );
    assert_eq!(
        verbs(rights, shop, "demo.example.com", "webapps/status"),
        ["patch"]
    );
    assert_eq!(
        verbs(rights, shop, "demo.example.com", "webapps"),
        ["get", "list", "watch"]
    );
    assert_eq!(verbs(rights, None, "", "nodes"), ["patch"]);
    assert_eq!(
        verbs(rights, shop, "events.k8s.io", "events"),
        ["create", "patch"]
    );
    assert!(
        rights
            .keys()
            .all(|t| t.namespace.is_some() || t.resource == "nodes"),
        "{rights:?}"
    );
    assert_eq!(
        found.guessed.iter().collect::<Vec<_>>(),
        ["webapps.demo.example.com"]
    );
}

#[test]
fn watches_in_several_namespaces_get_a_role_in_each_and_one_everywhere_makes_writes_cluster_wide() {
    let pod = gvk("", "v1", "Pod");
    let patch = || Permission {
        kind: gvk("", "v1", "Pod"),
        verbs: vec!["patch".into()],
    };
    let mut both = watch(pod.clone(), None);
    both.namespaces = vec!["a".into(), "b".into()];
    for watches in [
        vec![watch(pod.clone(), Some("a")), watch(pod.clone(), Some("b"))],
        vec![both],
    ] {
        let rights = plugin_rights(&registration("two-places", watches, vec![patch()])).rights;
        for ns in ["a", "b"] {
            assert_eq!(
                verbs(&rights, Some(ns), "", "pods"),
                ["get", "list", "patch", "watch"]
            );
            assert_eq!(
                verbs(&rights, Some(ns), "events.k8s.io", "events"),
                ["create", "patch"]
            );
        }
        assert!(verbs(&rights, None, "", "pods").is_empty());
    }
    let everywhere = vec![watch(pod.clone(), Some("a")), watch(pod, None)];
    let rights = plugin_rights(&registration("all", everywhere, vec![patch()])).rights;
    assert!(
        verbs(&rights, Some("a"), "", "pods").is_empty(),
        "covered cluster-wide"
    );
    let everywhere = vec![
        watch(gvk("", "v1", "Pod"), Some("a")),
        watch(gvk("", "v1", "Pod"), None),
    ];
    let host = host_rights_for(
        &plugin_rights(&registration("all", everywhere, vec![])),
        &naming(),
    );
    assert!(
        verbs(&host, Some("a"), "", "pods").is_empty(),
        "the host's too"
    );
    assert_eq!(
        verbs(&rights, None, "", "pods"),
        ["get", "list", "patch", "watch"]
    );
}

#[test]
fn the_host_lists_what_plugins_watch_and_impersonates_only_their_accounts() {
    let plugin = plugin_rights(&pod_counter());
    let for_plugin = host_rights_for(&plugin, &naming());
    assert_eq!(verbs(&for_plugin, None, "", "pods"), ["list", "watch"]);
    let impersonate = (for_plugin.iter())
        .find(|(t, _)| t.resource == "serviceaccounts")
        .expect("impersonation rule");
    assert_eq!(impersonate.0.names, ["wcm-plugin-pod-counter"]);
    assert_eq!(impersonate.0.namespace.as_deref(), Some("wcm-system"));
    let host = host_rights(&naming());
    assert_eq!(
        verbs(&host, None, "authorization.k8s.io", "subjectaccessreviews"),
        ["create"]
    );
    assert_eq!(
        verbs(&host, Some("wcm-system"), "coordination.k8s.io", "leases"),
        ["create", "delete", "get", "list", "update", "watch"]
    );
    // Its Events: about plugins' states, and on any object an informer cannot
    // decode, wherever that is.
    assert_eq!(
        verbs(&host, None, "events.k8s.io", "events"),
        ["create", "patch"]
    );
    // In its own namespace: its WasmPlugins read, their status written, their pull
    // Secrets read; nothing of the kind elsewhere.
    let group = "wasm-controller-manager.io";
    let home = Some("wcm-system");
    assert_eq!(
        verbs(&host, home, group, "wasmplugins"),
        ["get", "list", "watch"]
    );
    assert_eq!(
        verbs(&host, home, group, "wasmplugins/status"),
        ["patch", "update"]
    );
    assert_eq!(verbs(&host, home, "", "secrets"), ["get", "list", "watch"]);
    let own = [
        "leases",
        "subjectaccessreviews",
        "wasmplugins/status",
        "wasmplugins",
        "secrets",
        "events",
    ];
    let all = host.iter().chain(&for_plugin);
    assert!(
        all.filter(|(t, _)| !own.contains(&t.resource.as_str()))
            .all(|(_, v)| v
                .iter()
                .all(|v| ["list", "watch", "impersonate"].contains(v))),
        "the host writes nothing else itself"
    );
}

#[test]
fn the_yaml_binds_each_role_to_the_plugin_account_and_is_stable() {
    let plugins = [plugin_rights(&pod_counter())];
    let yaml = render(&plugins, &naming());
    assert_eq!(yaml, render(&plugins, &naming()));
    assert!(yaml.contains(
        "kind: Namespace\nmetadata:\n  name: wcm-system\n  labels:\n    \
         pod-security.kubernetes.io/enforce: restricted\n"
    ));
    let shared = Naming {
        pod_security: PodSecurity::Privileged,
        ..naming()
    };
    assert!(render(&plugins, &shared).contains("pod-security.kubernetes.io/enforce: privileged\n"));
    let label = "  labels:\n    wasm-controller-manager.io/plugin: pod-counter\n";
    assert!(yaml.contains(&format!(
        "kind: ServiceAccount\nmetadata:\n  name: wcm-plugin-pod-counter\n  namespace: wcm-system\n{label}"
    )));
    assert!(yaml.contains(&format!(
        "kind: ClusterRole\nmetadata:\n  name: wcm-plugin-pod-counter\n{label}rules:\n"
    )));
    assert!(yaml.contains(&format!(
        "kind: ClusterRole\nmetadata:\n  name: wasm-controller-manager:wcm-plugin-pod-counter\n{label}rules:\n"
    )));
    assert!(yaml.contains(
        "kind: Role\nmetadata:\n  name: wasm-controller-manager\n  namespace: wcm-system\n"
    ));
    assert!(yaml.contains(
        "  - apiGroups: [\"\"]\n    resources: [nodes]\n    verbs: [get, list, patch, watch]\n"
    ));
    assert!(yaml.contains("resourceNames: [wcm-plugin-pod-counter]"));
    let documents: Vec<&str> = yaml.split("---\n").skip(1).collect();
    // The namespace; the host's own two roles and bindings; the plugin's account, its
    // ClusterRole and binding; the host's ClusterRole and Role for it, with bindings.
    assert_eq!(documents.len(), 1 + 4 + 1 + 2 + 4, "{yaml}");
    let labelled = documents.iter().filter(|d| d.contains(label)).count();
    assert_eq!(
        labelled,
        1 + 2 + 4,
        "every object of the plugin, and only those"
    );
    assert!(
        documents
            .iter()
            .all(|d| d.contains("apiVersion: ") && d.contains("\nkind: "))
    );
}

#[test]
fn create_update_and_subresource_patches_become_their_api_verbs() {
    let deployment = gvk("apps", "v1", "Deployment");
    let verbs_of = |declared: &[&str]| Permission {
        kind: deployment.clone(),
        verbs: declared.iter().map(|v| v.to_string()).collect(),
    };
    let reg = registration(
        "writer",
        vec![watch(deployment.clone(), Some("shop"))],
        vec![verbs_of(&[
            "create",
            "update",
            "patch",
            "patch/scale",
            "patch/status",
        ])],
    );
    let rights = plugin_rights(&reg).rights;
    assert_eq!(
        verbs(&rights, Some("shop"), "apps", "deployments"),
        ["create", "get", "list", "patch", "update", "watch"]
    );
    assert_eq!(
        verbs(&rights, Some("shop"), "apps", "deployments/scale"),
        ["patch"]
    );
    assert_eq!(
        verbs(&rights, Some("shop"), "apps", "deployments/status"),
        ["patch"]
    );
}

#[test]
fn chart_values_hold_the_same_role_sets_as_the_yaml() {
    let plugins = [plugin_rights(&pod_counter())];
    let document = crate::rights::document(&plugins, &naming());
    let values: serde_json::Value =
        serde_saphyr::from_str(&crate::rights::chart_values(&document)).expect("YAML");
    let rbac = &values["rbac"];
    assert_eq!(rbac["namespace"], "wcm-system");
    assert_eq!(rbac["serviceAccount"], "wasm-controller-manager");
    assert_eq!(
        rbac["plugins"],
        serde_json::json!([{"plugin": "pod-counter", "serviceAccount": "wcm-plugin-pod-counter"}])
    );
    let sets: Vec<_> = document
        .host_roles
        .iter()
        .chain(document.plugins.iter().flat_map(|p| &p.roles))
        .collect();
    let roles = rbac["roles"].as_array().expect("roles");
    assert_eq!(roles.len(), sets.len());
    for (role, set) in roles.iter().zip(sets) {
        assert_eq!(role["name"], set.name.as_str());
        assert_eq!(role["namespace"].as_str(), set.namespace.as_deref());
        assert_eq!(role["plugin"].as_str(), set.plugin.as_deref());
        assert_eq!(role["subject"], set.subject.as_str());
        let rules = role["rules"].as_array().expect("rules");
        assert_eq!(rules.len(), set.rules.len());
        for (rule, (target, verbs)) in rules.iter().zip(&set.rules) {
            assert_eq!(rule["apiGroups"], serde_json::json!([target.group]));
            assert_eq!(rule["resources"], serde_json::json!([target.resource]));
            assert_eq!(rule["verbs"], serde_json::json!(verbs));
            let names = rule.get("resourceNames").cloned();
            let expected = (!target.names.is_empty()).then(|| serde_json::json!(target.names));
            assert_eq!(names, expected);
        }
    }
}

#[test]
fn the_charts_default_rbac_values_are_the_hosts_own_rights() {
    let chart: serde_json::Value = serde_saphyr::from_str(include_str!(
        "../../../../charts/wasm-controller-manager/values.yaml"
    ))
    .expect("YAML");
    let written = crate::rights::chart_values(&crate::rights::document(&[], &naming()));
    let written: serde_json::Value = serde_saphyr::from_str(&written).expect("YAML");
    let mut defaults = chart["rbac"].clone();
    defaults.as_object_mut().expect("a map").remove("create");
    assert_eq!(
        defaults, written["rbac"],
        "charts/wasm-controller-manager/values.yaml's rbac is not what \
         `rbac --output chart-values` writes for no plugin"
    );
}
