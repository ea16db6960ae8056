//! `test PLUGIN.wasm --replay DIR`: the reconciles `run --record-plugin` recorded,
//! replayed offline one after another, each in a fresh instance whose every host
//! call is answered from its transcript, strictly in order, its wall clock where it
//! stood. A call the transcript does not hold next, or another outcome, is a
//! difference; recorded calls the plugin no longer makes are warned about.

use std::path::{Path, PathBuf};

use super::cluster;
use super::run::{Session, TestError, TestOptions};
use wcm_core::runtime::{ReusePolicy, ReusedInstance, outcome_text};
use wcm_core::tape::{read_transcript, transcript_files};

/// What a replay found.
#[derive(Debug, Clone)]
pub struct Replay {
    /// The plugin's registered name.
    pub plugin: String,
    /// Each transcript's reconcile, in order.
    pub reconciles: Vec<ReplayedReconcile>,
}

/// One replayed reconcile.
#[derive(Debug, Clone)]
pub struct ReplayedReconcile {
    /// Its transcript.
    pub file: PathBuf,
    /// The key, as the host's log names it.
    pub key: String,
    /// What the recorded reconcile returned.
    pub recorded: String,
    /// What the replay returned.
    pub replayed: String,
    /// The first difference, if any.
    pub difference: Option<String>,
    /// Recorded calls the plugin did not make (a warning, not a difference).
    pub leftover: usize,
}

/// Replays the transcripts of `dir` with the plugin of `options` (its settings
/// too; fixtures are not used).
pub async fn replay(options: &TestOptions, dir: &Path) -> Result<Replay, TestError> {
    let session = Session::load(options).await?;
    let files = transcript_files(dir).map_err(|e| TestError::Replay(e.to_string()))?;
    let mut replayed = Vec::new();
    for file in files {
        let transcript = read_transcript(&file).map_err(|e| TestError::Replay(e.to_string()))?;
        let (memory, access) = cluster::of_registration(&session.registration, (&[], &[]))?;
        memory.set_clock(transcript.clock_since_epoch());
        let key = transcript.key.key();
        let instance = ReusedInstance::new(&session.code, access.into(), ReusePolicy::ONE_CALL);
        let (result, found) = instance.replay(&key, transcript.calls.clone()).await;
        let outcome = outcome_text(&result);
        let cut = transcript.truncated
            && found
                .difference
                .as_deref()
                .is_some_and(|d| d.contains("no more calls"));
        let difference = match (found.difference, cut) {
            (Some(_), true) => None, // past the cut the transcript says nothing
            (Some(first), false) => Some(first),
            (None, _) if outcome != transcript.result => Some(format!(
                "the reconcile returned {outcome:?}, the recorded one {:?}",
                transcript.result
            )),
            (None, _) => None,
        };
        replayed.push(ReplayedReconcile {
            file,
            key: key.to_string(),
            recorded: transcript.result,
            replayed: outcome,
            difference,
            leftover: found.leftover,
        });
    }
    let plugin = session.registration.name.clone();
    Ok(Replay {
        plugin,
        reconciles: replayed,
    })
}
