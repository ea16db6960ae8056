//! One file's tests at a time in the integration-test binary.
//!
//! The scenarios were written one file per binary, and cargo ran the binaries one
//! after another: the tests of a file ran beside each other only. Several rely on it
//! — pod-counter's label on the one node, the WebApp CRD, timing tests that expect
//! only their siblings' load — so in one binary a test waits for its file's turn:
//! while a test of one file runs, a test of another waits until none is left. The
//! harness hands tests out in name order, so a file's tests are taken together and
//! no file waits for long; the binary links once instead of once per file.

use std::sync::{Condvar, Mutex, MutexGuard};

/// The file whose tests run now, and how many of them.
static TURN: Mutex<(Option<&'static str>, usize)> = Mutex::new((None, 0));
/// Signalled when a file's last running test ends.
static ENDED: Condvar = Condvar::new();

/// A running test's hold on its file's turn; the turn passes on when the file's last
/// running test drops its hold.
#[must_use = "the turn ends when this is dropped"]
pub struct Turn;

fn turn() -> MutexGuard<'static, (Option<&'static str>, usize)> {
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits until no test of another file than `file` (a `module_path!()`) runs.
pub fn one_file_at_a_time(file: &'static str) -> Turn {
    let mut now = turn();
    while now.0.is_some_and(|running| running != file) {
        now = ENDED.wait(now).unwrap_or_else(|p| p.into_inner());
    }
    *now = (Some(file), now.1 + 1);
    Turn
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut now = turn();
        now.1 -= 1;
        if now.1 == 0 {
            now.0 = None;
            ENDED.notify_all();
        }
    }
}
