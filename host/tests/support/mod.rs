//! Shared fixtures of the host's integration tests: plugin files, the host as a child
//! process with captured logs, and polling for an expected cluster state.
#![allow(dead_code)] // each test binary uses a different part

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::jiff::Timestamp;
use wcm_control_plane::ControlPlane;

pub use wcm_control_plane::poll_until as eventually;
/// The attribute of every integration test: it takes its file's turn ([`turns`]).
pub use wcm_test_macros::test;

pub mod access;
pub mod audit;
pub mod builds;
pub mod collector;
pub mod deployed;
pub mod docs;
pub mod election;
pub mod helm;
pub mod hostile_registry;
pub mod imports;
pub mod lease_audit;
pub mod objects;
pub mod per_plugin;
pub mod plugin_workload;
pub mod proxy;
pub mod rbac;
pub mod registry;
pub mod testkit_cli;
pub mod turns;
pub mod wasm_plugins;
pub mod webapp;

/// The component of an example (`target/plugins`) or test (`target/test-plugins`) plugin.
pub fn plugin_file(name: &str) -> PathBuf {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let candidates = [
        target.join("plugins").join(format!("{name}.wasm")),
        target.join("test-plugins").join(format!("{name}.wasm")),
    ];
    candidates
        .iter()
        .find(|p| p.exists())
        .cloned()
        .unwrap_or_else(|| panic!("plugin {name} is not built: run `make plugins` first"))
}

/// A fresh plugins directory.
pub fn plugins_dir(files: &[(&str, Vec<u8>)]) -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes)?;
    }
    Ok(dir)
}

/// The bytes of a built plugin.
pub fn plugin_bytes(name: &str) -> Vec<u8> {
    std::fs::read(plugin_file(name)).expect("plugin file readable")
}

/// `wasm-controller-manager run` as a child process against the test control plane,
/// with its log lines collected.
pub struct HostProcess {
    child: Child,
    logs: Arc<Mutex<Vec<String>>>,
}

impl HostProcess {
    /// Starts the host on `dir` with extra flags, against the shared control plane.
    pub fn start(dir: &Path, flags: &[&str]) -> Result<HostProcess> {
        Self::start_on(ControlPlane::shared()?, dir, flags)
    }

    /// Starts the host on `dir` with extra flags against `cp`. Its metrics endpoint
    /// listens on a free loopback port (see [`HostProcess::metrics`]).
    pub fn start_on(cp: &ControlPlane, dir: &Path, flags: &[&str]) -> Result<HostProcess> {
        Self::spawn(cp, cp.admin_kubeconfig(), dir, flags)
    }

    /// Starts the host on `dir` with extra flags against the shared control plane,
    /// configured by `kubeconfig` (another identity, a proxy).
    pub fn start_with(kubeconfig: &Path, dir: &Path, flags: &[&str]) -> Result<HostProcess> {
        Self::spawn(ControlPlane::shared()?, kubeconfig, dir, flags)
    }

    /// Starts the host on `dir` against `cp`, configured by `kubeconfig`. Unless
    /// `flags` choose the plugins' identity, plugins act as ServiceAccounts of
    /// [`TEST_PLUGINS_NAMESPACE`], which [`grant_test_plugins`] lets do anything; unless
    /// they name a namespace of `WasmPlugin`s, none is followed.
    fn spawn(
        cp: &ControlPlane,
        kubeconfig: &Path,
        dir: &Path,
        flags: &[&str],
    ) -> Result<HostProcess> {
        let chosen = flags.iter().any(|f| {
            f.starts_with("--impersonate-plugins")
                || f.starts_with("--plugin-service-account-namespace")
        });
        let mut identity = vec![];
        if !chosen {
            grant_test_plugins(cp.admin_kubeconfig())?;
            identity = vec!["--plugin-service-account-namespace", TEST_PLUGINS_NAMESPACE];
        }
        // A test's host follows the `WasmPlugin`s of its own namespace when it says
        // so, never those another test (or a deployed host) keeps in wcm-system.
        if !flags
            .iter()
            .any(|f| f.starts_with("--wasm-plugin-namespace"))
        {
            identity.push("--no-wasm-plugins");
        }
        let mut command = Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"));
        command
            .arg("run")
            .arg("--plugins-dir")
            .arg(dir)
            .args(["--metrics-bind-address", "127.0.0.1:0"])
            .args(identity)
            .args(flags)
            .env("KUBECONFIG", kubeconfig);
        Self::launch(command)
    }

    /// Runs `command`, which starts the host in the end (a script that `exec`s it, as
    /// `make run` does), with its standard error collected as the host's log.
    pub fn launch(mut command: Command) -> Result<HostProcess> {
        let mut child = command
            .env("RUST_LOG", "info,wcm_daemon::controller=debug")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting wasm-controller-manager")?;
        let logs = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().context("stderr")?;
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().expect("log lock").push(line);
            }
        });
        Ok(HostProcess { child, logs })
    }

    /// The plugin table's row of `file`, if it has one.
    pub async fn row(&self, file: &str) -> Result<Option<wcm_daemon::status::PluginStatus>> {
        let rows = wcm_daemon::status::fetch(&self.metrics_address().await?).await?;
        Ok(rows.into_iter().find(|r| r.file == file))
    }

    /// Waits up to `timeout` until `file`'s row is in `state`, and returns it.
    pub async fn row_in(
        &self,
        file: &str,
        state: wcm_daemon::status::State,
        timeout: Duration,
    ) -> Result<wcm_daemon::status::PluginStatus> {
        let found = eventually(timeout, || async {
            self.row(file).await.ok()?.filter(|r| r.state == state)
        })
        .await;
        let last = self.row(file).await.ok().flatten();
        found.with_context(|| format!("{file} never became {}; last: {last:?}", state.name()))
    }

    /// Every log line so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().expect("log lock").clone()
    }

    /// Log lines containing every one of `needles`.
    pub fn lines_with(&self, needles: &[&str]) -> Vec<String> {
        self.logs()
            .into_iter()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .collect()
    }

    /// Waits until a log line contains all of `needles`.
    pub async fn wait_for_log(&self, needles: &[&str], timeout: Duration) -> Result<String> {
        let found = eventually(timeout, || async {
            self.lines_with(needles).into_iter().next()
        })
        .await;
        found.with_context(|| {
            format!(
                "no log line with {needles:?}; log:\n{}",
                self.logs().join("\n")
            )
        })
    }

    /// The process id, for reading its resources under `/proc`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running (it has not exited or crashed).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The `host:port` the host's HTTP endpoint listens on.
    pub async fn metrics_address(&self) -> Result<String> {
        let line = self
            .wait_for_log(&["serving /metrics"], Duration::from_secs(30))
            .await?;
        // A text line (`address=...`) or, with `--log-format json`, a JSON object.
        if let Ok(json) = serde_json::from_str::<serde_json::Value>(&line) {
            let addr = json["address"]
                .as_str()
                .context("no address in the JSON line")?;
            return Ok(addr.to_string());
        }
        let addr = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("address="))
            .context("no address in the metrics log line")?;
        Ok(addr.to_string())
    }

    /// The text of the host's `/metrics` endpoint.
    pub async fn metrics(&self) -> Result<String> {
        http_get(&self.metrics_address().await?, "/metrics").await
    }

    /// The sum of every sample of `name` whose labels include all of `labels`
    /// (`[("plugin", "pod-counter")]`); 0 when there is none.
    pub async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> Result<f64> {
        let text = self.metrics().await?;
        let wanted: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        let mut sum = 0.0;
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let series_name = series.split('{').next().unwrap_or(series);
            if series_name == name && wanted.iter().all(|w| series.contains(w.as_str())) {
                sum += value.parse::<f64>().context("metric value")?;
            }
        }
        Ok(sum)
    }

    /// The value of `field=` in the first log line with all of `needles` (quotes
    /// removed), waiting up to `timeout` for such a line.
    pub async fn log_field(
        &self,
        needles: &[&str],
        field: &str,
        timeout: Duration,
    ) -> Result<String> {
        let line = self.wait_for_log(needles, timeout).await?;
        field_of(&line, field).with_context(|| format!("no {field}= in {line:?}"))
    }

    /// When the first log line with all of `needles` was written (its timestamp).
    pub async fn logged_at(&self, needles: &[&str], timeout: Duration) -> Result<Timestamp> {
        log_time(&self.wait_for_log(needles, timeout).await?)
    }

    /// When the last log line so far with all of `needles` was written.
    pub fn last_logged_at(&self, needles: &[&str]) -> Result<Timestamp> {
        let lines = self.lines_with(needles);
        let line = lines
            .last()
            .with_context(|| format!("no line with {needles:?}"));
        log_time(line?)
    }

    /// Kills the process with SIGKILL, as a crashed node would.
    pub fn kill(&mut self) -> Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    /// Waits up to `timeout` for the process to exit on its own.
    pub async fn exited_within(&mut self, timeout: Duration) -> Option<ExitStatus> {
        eventually(timeout, || {
            let status = self.child.try_wait().ok().flatten();
            async move { status }
        })
        .await
    }

    /// Sends SIGTERM and waits for the exit status; the logs stay readable.
    pub fn stop(&mut self) -> Result<ExitStatus> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        if !status.success() {
            bail!("kill -TERM failed");
        }
        Ok(self.child.wait()?)
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> Result<ExitStatus> {
        self.stop()
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The timestamp a host log line starts with.
pub fn log_time(line: &str) -> Result<Timestamp> {
    let stamp = line.split_whitespace().next().unwrap_or_default();
    (stamp.parse()).with_context(|| format!("no timestamp at the start of {line:?}"))
}

/// The value of `field=` in a tracing log line, quotes removed.
pub fn field_of(line: &str, field: &str) -> Option<String> {
    let start = line.find(&format!(" {field}="))? + field.len() + 2;
    let rest = &line[start..];
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next()?,
        None => rest.split_whitespace().next()?,
    };
    Some(value.to_string())
}

/// Open file descriptors, threads and resident memory (KiB) of a process.
#[derive(Debug, Clone, Copy)]
pub struct Resources {
    /// Entries in `/proc/<pid>/fd`.
    pub fds: usize,
    /// `Threads:` of `/proc/<pid>/status`.
    pub threads: usize,
    /// `VmRSS:` of `/proc/<pid>/status`, in KiB.
    pub rss_kib: usize,
    /// `VmHWM:` of `/proc/<pid>/status`: the highest resident memory so far, in KiB.
    pub peak_rss_kib: usize,
}

/// Reads [`Resources`] of `pid`.
pub fn resources(pid: u32) -> Result<Resources> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<usize> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .with_context(|| format!("no {name} in /proc/{pid}/status"))?;
        let value = line.split_whitespace().nth(1).context("empty field")?;
        Ok(value.parse()?)
    };
    Ok(Resources {
        fds,
        threads: field("Threads:")?,
        rss_kib: field("VmRSS:")?,
        peak_rss_kib: field("VmHWM:")?,
    })
}

/// A plain HTTP/1.0 GET (the host's endpoint serves it); returns the body.
pub async fn http_get(addr: &str, path: &str) -> Result<String> {
    let (code, body) = http_status(addr, path).await?;
    if code != 200 {
        bail!("GET {path}: HTTP {code}: {body}");
    }
    Ok(body)
}

/// A plain HTTP/1.0 GET; returns the status code and the body, whatever the code.
pub async fn http_status(addr: &str, path: &str) -> Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    let code = head.split_whitespace().nth(1).context("no status code")?;
    Ok((code.parse()?, body.to_string()))
}

/// Waits until the object `name` of `api` no longer exists; `None` if it still does
/// after `timeout`.
pub async fn gone<K>(api: &kube::Api<K>, name: &str, timeout: Duration) -> Option<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(timeout, || async {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await
}

/// Where the ServiceAccounts of plugins in tests that are not about RBAC live.
pub const TEST_PLUGINS_NAMESPACE: &str = "wcm-test-plugins";

/// The policy of tests that are not about RBAC: every plugin acts as its own
/// ServiceAccount (impersonation, access reviews, the audit log's user: the same
/// mechanism as in a cluster), and the ServiceAccounts of
/// [`TEST_PLUGINS_NAMESPACE`] may do anything, so a test plugin's dropped-in
/// variants need no RBAC of their own. The tests about RBAC use what
/// `wasm-controller-manager rbac` generates, in a namespace of their own. Applied
/// with the cluster's admin `kubeconfig`, once per cluster and test binary.
pub fn grant_test_plugins(kubeconfig: &Path) -> Result<()> {
    static GRANTED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let mut granted = GRANTED.lock().expect("grant lock");
    if granted.iter().any(|k| k == kubeconfig) {
        return Ok(());
    }
    let binding = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\n\
         kind: ClusterRoleBinding\n\
         metadata: {{name: {TEST_PLUGINS_NAMESPACE}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}\n\
         subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: Group, \
         name: \"system:serviceaccounts:{TEST_PLUGINS_NAMESPACE}\"}}]\n"
    );
    let mut apply = Command::new(ControlPlane::kubectl())
        .args(["apply", "--validate=false", "-f", "-"])
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    use std::io::Write;
    apply
        .stdin
        .take()
        .context("kubectl's stdin")?
        .write_all(binding.as_bytes())?;
    let out = apply.wait_with_output()?;
    anyhow::ensure!(
        out.status.success(),
        "granting the test plugins: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    granted.push(kubeconfig.to_path_buf());
    Ok(())
}

/// `kubectl ARGS...` against `plane` as its admin; fails with its stderr.
pub fn kubectl<S: AsRef<std::ffi::OsStr>>(plane: &ControlPlane, args: &[S]) -> Result<String> {
    let out = Command::new(ControlPlane::kubectl())
        .args(args)
        .env("KUBECONFIG", plane.admin_kubeconfig())
        .output()?;
    let said: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
    anyhow::ensure!(
        out.status.success(),
        "kubectl {said:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// `text` (a `/metrics` exposition) parsed by the Prometheus project's own text
/// parser (`control-plane/images/cmd/check-metrics`, built once into the cache): its
/// samples as `name{label="value",...}`, sorted; an error if it does not parse or
/// describes one family twice.
pub fn check_metrics(text: &str) -> Result<Vec<String>> {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../control-plane/scripts/images.sh"
    );
    let path = Command::new(script)
        .args(["path", "check-metrics"])
        .output()?;
    anyhow::ensure!(
        path.status.success(),
        "{}",
        String::from_utf8_lossy(&path.stderr)
    );
    let tool = String::from_utf8(path.stdout)?.trim().to_string();
    let mut check = Command::new(tool)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    use std::io::Write;
    let mut stdin = check.stdin.take().context("check-metrics' stdin")?;
    stdin.write_all(text.as_bytes())?;
    drop(stdin);
    let out = check.wait_with_output()?;
    anyhow::ensure!(
        out.status.success(),
        "/metrics does not parse: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?
        .lines()
        .map(String::from)
        .collect())
}
