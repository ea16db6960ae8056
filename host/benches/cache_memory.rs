//! Memory per cached Pod: 10,000 Pods of ~8 KB of JSON each go through the informer
//! cache's conversion and are held in an [`ObjectCache`]; the heap growth is compared
//! with the raw JSON size of the same Pods and with holding the decoded objects the
//! way a kube-runtime reflector store does. Run with `make bench`; no cluster needed.
//!
//! Heap growth is read from a counting global allocator, so the figure is exact for
//! this process and independent of how the allocator returns pages to the system.

use std::alloc::System;
use std::sync::Arc;

use cap::Cap;
use kube::api::DynamicObject;
use serde_json::{Value, json};
use wcm_host::kube::cache::{CachedObject, ObjectCache};

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

const PODS: usize = 10_000;

fn main() -> anyhow::Result<()> {
    let raw: Vec<String> = (0..PODS).map(|i| pod(i).to_string()).collect();
    let raw_bytes: usize = raw.iter().map(String::len).sum();
    let per_raw = raw_bytes as f64 / PODS as f64;

    let before = ALLOCATOR.allocated();
    let cache = ObjectCache::default();
    for text in &raw {
        let obj: DynamicObject = serde_json::from_str(text)?;
        cache.apply(Arc::new(CachedObject::from_dynamic(obj)?));
    }
    let cached = ALLOCATOR.allocated() - before;
    drop(cache);

    let before = ALLOCATOR.allocated();
    let store: Vec<Arc<DynamicObject>> = raw
        .iter()
        .map(|t| serde_json::from_str(t).map(Arc::new))
        .collect::<Result<_, _>>()?;
    let decoded = ALLOCATOR.allocated() - before;
    drop(store);

    println!(
        "{PODS} Pods, raw JSON {per_raw:.0} B per Pod ({:.1} MiB)",
        mib(raw_bytes)
    );
    let line = |name: &str, bytes: usize| {
        let per = bytes as f64 / PODS as f64;
        println!(
            "{name:38} {per:>8.0} B per Pod   {:>6.1} MiB   {:.2}× raw JSON",
            mib(bytes),
            per / per_raw
        );
    };
    line("informer cache (no managedFields)", cached);
    line("decoded objects (reflector store)", decoded);
    Ok(())
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// A Pod as a Deployment creates it, with managedFields, two containers, a status and
/// ~8 KB of JSON in total.
fn pod(i: usize) -> Value {
    let env: Vec<Value> = (0..32)
        .map(|e| json!({"name": format!("SETTING_{e}"), "value": format!("value-{i}-{e}-abcdefghij")}))
        .collect();
    let container = |name: &str| {
        json!({
            "name": name, "image": format!("registry.example.com/team/{name}:1.{i}"),
            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            "env": env,
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                          "limits": {"cpu": "500m", "memory": "256Mi"}},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/app"},
                             {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
            "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent",
        })
    };
    let managed = |manager: &str| {
        json!({"manager": manager, "operation": "Update", "apiVersion": "v1",
               "time": "2026-12-01T10:00:00Z", "fieldsType": "FieldsV1",
               "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                            "f:ownerReferences": {".": {}, "k:{\"uid\":\"5f0c\"}": {}}},
                            "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:env": {}, "f:image": {}, "f:name": {}, "f:ports": {}, "f:resources": {}}},
                                       "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}},
                            "f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:startTime": {}}}})
    };
    let conditions: Vec<Value> = ["Initialized", "Ready", "ContainersReady", "PodScheduled"]
        .iter()
        .map(|t| json!({"type": t, "status": "True", "lastTransitionTime": "2026-12-01T10:00:05Z"}))
        .collect();
    let statuses: Vec<Value> = ["app", "sidecar"]
        .iter()
        .map(|n| {
            json!({
                "name": n, "ready": true, "restartCount": 0, "started": true,
                "image": format!("registry.example.com/team/{n}:1.{i}"),
                "imageID": format!("registry.example.com/team/{n}@sha256:{i:064x}"),
                "containerID": format!("containerd://{:064x}", i * 31 + 7),
                "state": {"running": {"startedAt": "2026-12-01T10:00:03Z"}},
            })
        })
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("web-7d9f4c8b6f-{i:05}"), "namespace": "shop",
            "uid": format!("0e6a1c52-{i:04x}-4c1e-9d7e-3b2f1a0c9e8d"), "resourceVersion": format!("{}", 100_000 + i),
            "creationTimestamp": "2026-12-01T10:00:00Z", "generateName": "web-7d9f4c8b6f-",
            "labels": {"app": "web", "pod-template-hash": "7d9f4c8b6f", "tier": "frontend"},
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f4c8b6f",
                                 "uid": "5f0c", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [managed("kube-controller-manager"), managed("kubelet")],
        },
        "spec": {
            "containers": [container("app"), container("sidecar")],
            "volumes": [{"name": "config", "configMap": {"name": "web-config"}},
                        {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
            "nodeName": format!("node-{}", i % 50), "serviceAccountName": "default",
        },
        "status": {
            "phase": "Running", "hostIP": "10.0.0.12", "podIP": format!("10.244.{}.{}", i / 250, i % 250),
            "startTime": "2026-12-01T10:00:01Z",
            "conditions": conditions,
            "containerStatuses": statuses,
        },
    })
}
