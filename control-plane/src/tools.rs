//! The pinned tools `build.sh` builds beside the control plane into the cache, for the
//! tests that need them: cosign (signature policies), promtool (the alerting rules),
//! helm 4 and 3 (the chart) and an OpenTelemetry Collector (the host's traces).

use std::path::PathBuf;

use crate::ControlPlane;

/// The pinned cosign version (`scripts/versions.env`).
pub const COSIGN_VERSION: &str = "v2.6.5";
/// The pinned Prometheus module version, whose promtool tests the alerting rules.
pub const PROMETHEUS_VERSION: &str = "v0.316.0";
/// The pinned helm version.
pub const HELM_VERSION: &str = "v4.3.2";
/// The pinned Helm 3 version: most installs run Helm 3, so the chart is tested with it.
pub const HELM3_VERSION: &str = "v3.21.4";
/// The pinned OpenTelemetry Collector release (core and contrib).
pub const OTELCOL_VERSION: &str = "v0.161.0";

/// The binary `name` in `dir` of the control plane's cache (`build.sh`'s
/// `$CACHE_ROOT`, where kubectl's directory is too).
fn cached(dir: String, name: &str) -> PathBuf {
    let kubectl = ControlPlane::kubectl();
    let cache = kubectl.parent().and_then(|d| d.parent());
    cache
        .unwrap_or(std::path::Path::new("."))
        .join(dir)
        .join(name)
}

impl ControlPlane {
    /// The pinned cosign.
    pub fn cosign() -> PathBuf {
        cached(format!("cosign-{COSIGN_VERSION}"), "cosign")
    }

    /// The pinned promtool.
    pub fn promtool() -> PathBuf {
        cached(format!("promtool-{PROMETHEUS_VERSION}"), "promtool")
    }

    /// The pinned helm.
    pub fn helm() -> PathBuf {
        cached(format!("helm-{HELM_VERSION}"), "helm")
    }

    /// The pinned Helm 3.
    pub fn helm3() -> PathBuf {
        cached(format!("helm-{HELM3_VERSION}"), "helm")
    }

    /// The pinned OpenTelemetry Collector (OTLP receiver, file exporter).
    pub fn otelcol() -> PathBuf {
        cached(format!("otelcol-{OTELCOL_VERSION}"), "otelcol")
    }
}
