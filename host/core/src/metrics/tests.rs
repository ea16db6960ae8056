//! The host's series as `/metrics` shows them: names, labels, and dropping a plugin's.

use super::*;

#[test]
fn reconciles_are_counted_under_controller_runtimes_names() {
    let m = Metrics::new();
    let ms = Duration::from_millis(3);
    m.reconciled("pod-counter", ReconcileResult::success, ms);
    m.reconciled("pod-counter", ReconcileResult::requeue_after, ms);
    m.reconciled("pod-counter", ReconcileResult::error, ms);
    m.set_leading("wasm-controller-manager", true);
    let text = m.encode();
    for series in [
        r#"controller_runtime_reconcile_total{controller="pod-counter",result="success"} 1"#,
        r#"controller_runtime_reconcile_total{controller="pod-counter",result="requeue_after"} 1"#,
        r#"controller_runtime_reconcile_errors_total{controller="pod-counter"} 1"#,
        r#"controller_runtime_reconcile_time_seconds_count{controller="pod-counter"} 3"#,
        r#"leader_election_master_status{name="wasm-controller-manager"} 1"#,
    ] {
        assert!(text.contains(series), "{series} missing from\n{text}");
    }
}

#[test]
fn a_started_controllers_counters_are_there_at_zero_and_keep_their_counts() {
    let m = Metrics::new();
    m.standard.started("quiet");
    let text = m.encode();
    for series in [
        r#"controller_runtime_reconcile_total{controller="quiet",result="error"} 0"#,
        r#"controller_runtime_reconcile_total{controller="quiet",result="success"} 0"#,
        r#"controller_runtime_reconcile_errors_total{controller="quiet"} 0"#,
        r#"controller_runtime_terminal_reconcile_errors_total{controller="quiet"} 0"#,
    ] {
        assert!(text.contains(series), "{series} missing from\n{text}");
    }
    m.reconciled("quiet", ReconcileResult::error, Duration::ZERO);
    m.standard.started("quiet");
    let errors = r#"controller_runtime_reconcile_errors_total{controller="quiet"} 1"#;
    assert!(m.encode().contains(errors), "{}", m.encode());
}

#[test]
fn an_unloaded_plugin_leaves_no_series() {
    let m = Metrics::new();
    m.reconciled("gone", ReconcileResult::success, Duration::ZERO);
    let _queue = m.standard.queue("gone");
    m.plugin_events
        .get_or_create(&PluginLabels {
            plugin: "gone".into(),
        })
        .inc();
    for &function in Capability::ALL {
        let labels = HostCallLabels {
            plugin: "gone".into(),
            function,
            result: HostCallResult::ok,
        };
        m.host_calls.get_or_create(&labels).inc();
    }
    let text = m.encode();
    assert!(text.contains(r#"function="list-first""#), "{text}");
    assert!(text.contains(r#"function="count""#), "{text}");
    m.forget_plugin("gone");
    assert!(!m.encode().contains("gone"), "{}", m.encode());
}
