//! The plugin metrics' updates, bounds and export, as a scrape sees them.

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

use super::*;

fn declared(name: &str, kind: MetricKind, labels: &[&str]) -> MetricDeclaration {
    MetricDeclaration {
        name: name.into(),
        help: format!("{name} of the test"),
        kind,
        labels: labels.iter().map(|l| l.to_string()).collect(),
        buckets: match kind {
            MetricKind::Histogram => vec![0.1, 1.0],
            _ => Vec::new(),
        },
    }
}

fn web_app(max_series: usize) -> PluginMetrics {
    let declarations = [
        declared("widgets", MetricKind::Counter, &["state"]),
        declared("queue_length", MetricKind::Gauge, &[]),
        declared("sync_seconds", MetricKind::Histogram, &[]),
    ];
    check(&declarations).expect("valid");
    PluginMetrics::new("web-app", &declarations, max_series)
}

fn exported(metrics: PluginMetrics) -> String {
    let exported = PluginMetricsRegistry::default();
    exported.insert(Arc::new(metrics));
    let mut registry = Registry::default();
    registry.register_collector(Box::new(exported));
    let mut text = String::new();
    encode(&mut text, &registry).expect("encodes");
    text
}

#[test]
fn updates_are_exported_under_the_plugins_prefix_with_its_label() {
    let metrics = web_app(10);
    let ready = ["ready".to_string()];
    metrics
        .update(Update::Add, "widgets", &ready, 2.0)
        .expect("add");
    metrics
        .update(Update::Set, "queue_length", &[], 7.0)
        .expect("set");
    metrics
        .update(Update::Add, "queue_length", &[], -2.0)
        .expect("add");
    metrics
        .update(Update::Observe, "sync_seconds", &[], 0.5)
        .expect("observe");
    let text = exported(metrics);
    for line in [
        "# TYPE wcm_plugin_web_app__widgets counter",
        r#"wcm_plugin_web_app__widgets_total{plugin="web-app",state="ready"} 2.0"#,
        r#"wcm_plugin_web_app__queue_length{plugin="web-app"} 5.0"#,
        r#"wcm_plugin_web_app__sync_seconds_bucket{le="1.0",plugin="web-app"} 1"#,
    ] {
        assert!(text.contains(line), "{line} not in\n{text}");
    }
}

#[test]
fn wrong_updates_are_refused_naming_the_metric_and_the_plugin() {
    let metrics = web_app(10);
    let ready = ["ready".to_string()];
    for (update, name, labels, value, reason) in [
        (
            Update::Add,
            "gadgets",
            &ready[..],
            1.0,
            "\"gadgets\" of plugin web-app: not declared",
        ),
        (
            Update::Add,
            "widgets",
            &[][..],
            1.0,
            "0 label values for the labels [\"state\"]",
        ),
        (
            Update::Add,
            "widgets",
            &ready[..],
            -1.0,
            "a counter only goes up",
        ),
        (
            Update::Set,
            "widgets",
            &ready[..],
            1.0,
            "a counter cannot Set",
        ),
        (
            Update::Observe,
            "queue_length",
            &[][..],
            1.0,
            "a gauge cannot Observe",
        ),
        (
            Update::Set,
            "queue_length",
            &[][..],
            f64::NAN,
            "NaN is not a finite number",
        ),
    ] {
        let err = metrics
            .update(update, name, labels, value)
            .expect_err(reason);
        assert!(err.to_string().contains(reason), "{err}");
    }
    let long = ["x".repeat(MAX_LABEL_VALUE + 1)];
    let err = metrics
        .update(Update::Add, "widgets", &long, 1.0)
        .expect_err("long");
    assert!(err.to_string().contains("at most 128 bytes"), "{err}");
}

#[test]
fn series_past_the_plugins_bound_are_refused_and_old_ones_still_update() {
    let metrics = web_app(2);
    let state = |s: &str| [s.to_string()];
    metrics
        .update(Update::Add, "widgets", &state("a"), 1.0)
        .expect("first");
    metrics
        .update(Update::Set, "queue_length", &[], 1.0)
        .expect("second");
    let err = metrics
        .update(Update::Add, "widgets", &state("b"), 1.0)
        .expect_err("third");
    assert!(matches!(err, MetricError::TooManySeries(_)), "{err}");
    assert!(
        err.to_string().contains("more than the plugin's 2"),
        "{err}"
    );
    metrics
        .update(Update::Add, "widgets", &state("a"), 1.0)
        .expect("an old series");
}

#[test]
fn the_test_kits_samples_are_in_the_same_order_whatever_order_series_were_made_in() {
    let orders = [["b", "c", "a", "d"], ["d", "a", "c", "b"]];
    let samples = orders.map(|order| {
        let metrics = Arc::new(web_app(100));
        for state in order {
            let labels = [state.to_string()];
            metrics
                .update(Update::Add, "widgets", &labels, 1.0)
                .expect("counted");
        }
        metrics
            .update(Update::Observe, "sync_seconds", &[], 0.5)
            .expect("observed");
        PluginMetrics::samples(&metrics)
    });
    assert_eq!(samples[0], samples[1]);
    let states: Vec<&str> = (samples[0].iter())
        .filter_map(|l| l.split("state=\"").nth(1))
        .map(|l| &l[..1])
        .collect();
    assert_eq!(states, ["a", "b", "c", "d"]);
    let histogram: Vec<&str> = (samples[0].iter())
        .filter(|l| l.contains("sync_seconds"))
        .map(|l| l.split(' ').next().unwrap_or_default())
        .collect();
    assert_eq!(histogram.len(), 5, "{histogram:?}");
    assert!(
        histogram[0].ends_with("_sum{plugin=\"web-app\"}"),
        "{histogram:?}"
    );
    assert!(histogram[4].contains("le=\"+Inf\""), "{histogram:?}");
}

#[test]
fn no_plugin_metric_can_be_named_as_the_hosts_or_another_plugins() {
    // Before, `missing` + `rights` exported `wcm_plugin_missing_rights`, the host's.
    assert_eq!(
        family_name("missing", "rights"),
        "wcm_plugin_missing__rights"
    );
    assert_ne!(family_name("a-b", "c"), family_name("a", "b_c"));
    let refused = |name: &str| check(&[declared(name, MetricKind::Gauge, &[])]).expect_err(name);
    for name in ["b__c", "ends_"] {
        assert!(
            refused(name).contains("must not contain `__` or end in `_`"),
            "{name}"
        );
    }
    // Samples of one metric named as another's: a gauge `a_count` beside a histogram `a`.
    let clash = [
        declared("a", MetricKind::Histogram, &[]),
        declared("a_count", MetricKind::Gauge, &[]),
    ];
    let e = check(&clash).expect_err("clash");
    assert!(e.contains(r#"would be named "a_count""#), "{e}");
    // A histogram named `label_count` alone is fine.
    assert!(check(&[declared("label_count", MetricKind::Histogram, &[])]).is_ok());
}

#[test]
fn help_that_would_read_as_an_escape_or_a_string_is_refused() {
    for help in ["a \\ b", "say \"hi\"", "two\nlines"] {
        let mut m = declared("widgets", MetricKind::Gauge, &[]);
        m.help = help.into();
        let e = check(&[m]).expect_err(help);
        assert!(e.contains("help must be"), "{e}");
    }
}
