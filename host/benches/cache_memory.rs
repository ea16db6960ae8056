//! Memory per cached Pod at 10,000 and 50,000 Pods of ~8 KB of JSON each: the
//! informer cache's conversion held in an [`ObjectCache`], for a full watch and for a
//! metadata-only one, against the raw JSON size of the same Pods and against holding
//! the decoded objects (or decoded metadata) the way a kube-runtime reflector store
//! does. Run with `make bench`; no cluster needed.
//!
//! Heap growth is read from a counting global allocator, so the figure is exact for
//! this process and independent of how the allocator returns pages to the system.

use std::alloc::System;
use std::sync::Arc;

use cap::Cap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use wcm_core::kube::cache::{CachedObject, ObjectCache};
use wcm_core::kube::informer::metadata_of;

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

const SIZES: [usize; 2] = [10_000, 50_000];

fn main() -> anyhow::Result<()> {
    for pods in SIZES {
        measure(pods)?;
    }
    Ok(())
}

/// Heap growth while `hold` builds what it returns; the value is dropped after.
fn growth<T>(hold: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<usize> {
    let before = ALLOCATOR.allocated();
    let held = hold()?;
    let grown = ALLOCATOR.allocated().saturating_sub(before);
    drop(held);
    Ok(grown)
}

fn measure(pods: usize) -> anyhow::Result<()> {
    let raw: Vec<String> = (0..pods).map(|i| pod(i).to_string()).collect();
    let raw_bytes: usize = raw.iter().map(String::len).sum();
    let per_raw = raw_bytes as f64 / pods as f64;
    let gvk = GroupVersionKind::gvk("", "v1", "Pod");
    let cache_of = |metadata_only: bool| {
        growth(|| {
            let cache = ObjectCache::default();
            for text in &raw {
                let mut obj: DynamicObject = serde_json::from_str(text)?;
                if metadata_only {
                    obj = metadata_of(obj.metadata, &gvk);
                }
                cache.apply(Arc::new(CachedObject::from_dynamic(obj)?));
            }
            Ok(cache)
        })
    };
    let full = cache_of(false)?;
    let metadata = cache_of(true)?;
    let decoded = growth(|| {
        raw.iter()
            .map(|t| serde_json::from_str::<DynamicObject>(t).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()
            .map_err(Into::into)
    })?;
    let decoded_meta = growth(|| {
        raw.iter()
            .map(|t| {
                let v: Value = serde_json::from_str(t)?;
                Ok(Arc::new(serde_json::from_value::<ObjectMeta>(
                    v["metadata"].clone(),
                )?))
            })
            .collect::<anyhow::Result<Vec<_>>>()
    })?;

    println!(
        "{pods} Pods, raw JSON {per_raw:.0} B per Pod ({:.1} MiB)",
        mib(raw_bytes)
    );
    let line = |name: &str, bytes: usize| {
        let per = bytes as f64 / pods as f64;
        println!(
            "  {name:46} {per:>8.0} B per Pod   {:>7.1} MiB   {:.2}× raw JSON",
            mib(bytes),
            per / per_raw
        );
    };
    line("host cache, full watch (no managedFields)", full);
    line("decoded objects (reflector store)", decoded);
    line("host cache, metadata-only watch", metadata);
    line("decoded metadata (metadata reflector store)", decoded_meta);
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
