//! One reconcile's tape in its host state: the calls being recorded (within a
//! bound), or the transcript's calls being replayed strictly in order, with the
//! first difference kept.

use std::collections::VecDeque;

use serde_json::Value;

use super::{TapedCall, redact_call};

/// A reconcile's tape, in its host state: being recorded, or being replayed.
#[derive(Debug)]
pub enum CallTape {
    /// The calls so far, and their size; past the bound, no more are kept.
    Recording {
        calls: Vec<TapedCall>,
        bytes: usize,
        truncated: bool,
        redact: bool,
    },
    /// The calls still to come, how many were played, and the first difference.
    Replaying {
        expected: VecDeque<TapedCall>,
        played: usize,
        difference: Option<String>,
    },
}

/// Bytes of one reconcile's calls a transcript keeps; past them it is cut (and says
/// so): a plugin listing thousands of objects in a loop must not fill the disk.
pub const MAX_TRANSCRIPT_BYTES: usize = 1 << 20;

impl CallTape {
    /// A recording, Secrets redacted unless `secrets`.
    pub fn recording(secrets: bool) -> CallTape {
        CallTape::Recording {
            calls: Vec::new(),
            bytes: 0,
            truncated: false,
            redact: !secrets,
        }
    }

    /// A replay of `calls`.
    pub fn replaying(calls: Vec<TapedCall>) -> CallTape {
        CallTape::Replaying {
            expected: calls.into(),
            played: 0,
            difference: None,
        }
    }

    /// Records `call` with `args` and `answer`, if recording and within the bound.
    pub fn record(&mut self, call: &str, mut args: Value, mut answer: Value) {
        let CallTape::Recording {
            calls,
            bytes,
            truncated,
            redact: hide,
        } = self
        else {
            return;
        };
        if *hide {
            redact_call(&mut args, &mut answer);
        }
        let size = args.to_string().len() + answer.to_string().len() + call.len();
        if *truncated || *bytes + size > MAX_TRANSCRIPT_BYTES {
            *truncated = true;
            return;
        }
        *bytes += size;
        calls.push(TapedCall {
            call: call.to_string(),
            args,
            answer,
        });
    }

    /// The next recorded call's answer, if it is `call` with `args`; else the first
    /// difference, which is kept (every later call differs too).
    pub fn replay(&mut self, call: &str, args: &Value) -> Result<Value, String> {
        let CallTape::Replaying {
            expected,
            played,
            difference,
        } = self
        else {
            return Err("not replaying".into());
        };
        if let Some(first) = difference {
            return Err(first.clone());
        }
        *played += 1;
        let found = match expected.pop_front() {
            None => Err(format!(
                "call {played} is {call} {args}, but the transcript has no more calls"
            )),
            Some(next) if next.call != call || !same_args(&next.args, args) => Err(format!(
                "call {played} is {call} {args}, but the transcript has {} {}",
                next.call, next.args
            )),
            Some(next) => Ok(next.answer),
        };
        if let Err(e) = &found {
            *difference = Some(e.clone());
        }
        found
    }
}

/// What replaying one transcript found.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    /// The first call that differed from the transcript, if one did.
    pub difference: Option<String>,
    /// Recorded calls the plugin did not make.
    pub leftover: usize,
}

impl CallTape {
    /// What the replay on this tape found.
    pub fn replayed(self) -> Replayed {
        match self {
            CallTape::Replaying {
                expected,
                difference,
                ..
            } => Replayed {
                leftover: if difference.is_some() {
                    0
                } else {
                    expected.len()
                },
                difference,
            },
            CallTape::Recording { .. } => Replayed {
                difference: None,
                leftover: 0,
            },
        }
    }
}

/// Whether arguments match their recording (a redacted recording matches arguments
/// redacted the same way).
fn same_args(recorded: &Value, args: &Value) -> bool {
    if recorded == args {
        return true;
    }
    let mut hidden = args.clone();
    redact_call(&mut hidden, &mut Value::Null);
    *recorded == hidden
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_replay_answers_in_order_and_keeps_the_first_difference() {
        let call = |name: &str, n: u64| TapedCall {
            call: name.into(),
            args: json!({"n": n}),
            answer: json!({"ok": n}),
        };
        let mut tape = CallTape::replaying(vec![call("get", 1), call("count", 2)]);
        assert_eq!(tape.replay("get", &json!({"n": 1})), Ok(json!({"ok": 1})));
        let wrong = tape.replay("get", &json!({"n": 2})).expect_err("differs");
        assert!(
            wrong.contains("call 2 is get {\"n\":2}, but the transcript has count"),
            "{wrong}"
        );
        assert_eq!(tape.replay("count", &json!({"n": 2})), Err(wrong));
    }

    #[test]
    fn a_recording_stops_at_its_bound_and_says_so() {
        let mut tape = CallTape::recording(false);
        let big = json!("x".repeat(MAX_TRANSCRIPT_BYTES / 2));
        for _ in 0..3 {
            tape.record("get", big.clone(), Value::Null);
        }
        let CallTape::Recording {
            calls, truncated, ..
        } = tape
        else {
            panic!("recording")
        };
        assert_eq!((calls.len(), truncated), (1, true));
    }
}
