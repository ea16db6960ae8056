//! One component run twice: an operator drops pod-counter in under two file names,
//! and both run as plugins of their own, each named by its file whatever the code
//! registers as, while sharing one compiled copy of the code (`origin=shared` in the
//! second's "plugin loaded" line), so a copy costs its instances and caches, not its
//! code.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_daemon::status::State;

const WAIT: Duration = Duration::from_secs(90);

#[support::test]
async fn copies_of_one_component_run_under_their_own_names_and_share_its_code() -> Result<()> {
    let bytes = plugin_bytes("pod-counter");
    let dir = plugins_dir(&[("counter-a.wasm", bytes.clone()), ("counter-b.wasm", bytes)])?;
    let host = HostProcess::start(dir.path(), &[])?;
    let mut origins = Vec::new();
    for plugin in ["counter-a", "counter-b"] {
        let needle = format!("plugin={plugin}");
        let line = host.wait_for_log(&["plugin loaded", &needle], WAIT).await?;
        origins.push(support::field_of(&line, "origin").context("origin")?);
    }
    ensure!(
        origins.iter().filter(|o| *o == "shared").count() == 1,
        "one copy loads the code, the other shares it: {origins:?}"
    );
    for file in ["counter-a.wasm", "counter-b.wasm"] {
        let running = eventually(WAIT, || async {
            let row = host.row(file).await.ok()??;
            (row.state == State::Running).then_some(row)
        })
        .await;
        let row = running.with_context(|| format!("{file} is not running"))?;
        ensure!(
            row.registered_as.as_deref() == Some("pod-counter"),
            "{row:?}"
        );
    }
    Ok(())
}
