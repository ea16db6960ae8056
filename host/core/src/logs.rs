//! What a plugin may put into the host's log: escaped, capped in size and rate.
//!
//! A plugin's message is untrusted text. Newlines and other control characters are
//! escaped, so a plugin cannot end its line and forge one that looks like the host's
//! (`... INFO became leader`); a line is cut at [`MAX_LINE_BYTES`]; and lines beyond
//! the plugin's rate are dropped, counted, and reported once the plugin is below its
//! rate again.

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use tokio::time::Instant;

use crate::rate::TokenBucket;

/// Shortens hostile input for an error message: at most 80 characters, then how long
/// it was. A plugin's name, selector or version is quoted in errors through this, so a
/// megabyte of it costs an error line, not a megabyte.
pub fn shorten(s: &str) -> String {
    const SHOWN: usize = 80;
    match s.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}… ({} bytes)", &s[..cut], s.len()),
        None => s.to_string(),
    }
}

/// Longest log message kept from a plugin, in bytes; the rest is cut.
pub const MAX_LINE_BYTES: usize = 4096;
/// Log lines per second a plugin may write in the long run.
pub const LINES_PER_SECOND: f64 = 100.0;
/// Log lines a plugin may write in a burst.
pub const LINES_BURST: u32 = 1000;
/// Dropped lines are reported at most this often per plugin (the report itself must
/// not become the flood).
pub const REPORT_EVERY: Duration = Duration::from_secs(10);

/// `text` with control characters escaped (`\n`, `\r`, `\t`, `\u{1b}`, ...), so
/// it stays on one line and cannot move a terminal's cursor. Printable text,
/// non-ASCII included, is kept as it is.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` escaped as [`escape`] does and cut to at most `max` bytes of the escaped
/// text, saying how many bytes of `text` went; only what is kept is looked at, so a
/// message of any size costs `max`, not its size (escaping first could take six
/// bytes for each of a huge message's). Returns whether anything was cut.
pub fn escape_cut(text: &str, max: usize) -> (String, bool) {
    let mut out = String::with_capacity(text.len().min(max));
    let mut kept = 0;
    for c in text.chars() {
        let before = out.len();
        match c.is_control() {
            true => out.extend(c.escape_default()),
            false => out.push(c),
        }
        if out.len() > max {
            out.truncate(before);
            let rest = text.len() - kept;
            out.push_str(&format!(" … ({rest} more bytes cut)"));
            return (out, true);
        }
        kept += c.len_utf8();
    }
    (out, false)
}

/// A line admitted into the log, and how many lines were dropped before it.
#[derive(Debug, PartialEq, Eq)]
pub struct Admitted {
    /// The message, escaped and cut.
    pub message: String,
    /// Lines dropped since the last report, when a report is due (at most every
    /// [`REPORT_EVERY`]); 0 otherwise.
    pub dropped_before: u64,
    /// Whether the message was cut at [`MAX_LINE_BYTES`].
    pub was_cut: bool,
}

/// The log budget of one plugin.
#[derive(Debug)]
pub struct LogLimiter {
    state: Mutex<Budget>,
    /// Counts every dropped line.
    dropped: Counter,
}

#[derive(Debug)]
struct Budget {
    bucket: TokenBucket,
    /// Lines dropped since the last report.
    unreported: u64,
    /// When drops were last reported.
    reported: Option<Instant>,
}

impl LogLimiter {
    /// A full budget of `burst` lines refilled at `rate` per second; drops are
    /// counted in `dropped`.
    pub fn new(rate: f64, burst: u32, dropped: Counter) -> LogLimiter {
        LogLimiter {
            state: Mutex::new(Budget {
                bucket: TokenBucket::new(rate, burst),
                unreported: 0,
                reported: None,
            }),
            dropped,
        }
    }

    /// The line to log for `message`, or `None` when the plugin is over its rate.
    pub fn admit(&self, message: &str) -> Option<Admitted> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if !state.bucket.try_take(now) {
            state.unreported += 1;
            self.dropped.inc();
            return None;
        }
        let due = state
            .reported
            .is_none_or(|at| now.duration_since(at) >= REPORT_EVERY);
        let dropped_before = match (state.unreported, due) {
            (0, _) | (_, false) => 0,
            (n, true) => {
                state.reported = Some(now);
                state.unreported = 0;
                n
            }
        };
        let (message, was_cut) = escape_cut(message, MAX_LINE_BYTES);
        Some(Admitted {
            was_cut,
            message,
            dropped_before,
        })
    }
}

/// Most key-value fields kept from one plugin log line.
pub const MAX_FIELDS: usize = 16;
/// Longest field key.
const MAX_FIELD_KEY: usize = 64;

/// A plugin's key-value fields as one logfmt value (`count=3 node="a b"`): keys must be
/// short identifiers (`[A-Za-z0-9_.-]`), values are escaped, quoted when needed and
/// cut like messages; at most [`MAX_FIELDS`] are kept. Bad keys and the fields past
/// the bound are counted in `dropped=N`, so a plugin cannot forge other fields of the
/// host's line.
pub fn fields_text(fields: &[(String, String)]) -> String {
    let good_key = |k: &str| {
        !k.is_empty()
            && k.len() <= MAX_FIELD_KEY
            && (k.bytes()).all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    };
    let mut parts = Vec::new();
    let mut dropped = 0;
    for (key, value) in fields {
        if !good_key(key) || parts.len() == MAX_FIELDS {
            dropped += 1;
            continue;
        }
        let (value, _) = escape_cut(value, MAX_LINE_BYTES);
        let plain = !value.is_empty() && !value.contains([' ', '"', '=', '\\']);
        match plain {
            true => parts.push(format!("{key}={value}")),
            false => parts.push(format!("{key}={value:?}")),
        }
    }
    if dropped > 0 {
        parts.push(format!("dropped={dropped}"));
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_cannot_start_a_line_of_its_own() {
        let forged = "done\n2026-12-03T09:00:00Z  INFO wcm_daemon: became leader\r\u{1b}[2K";
        let escaped = escape(forged);
        assert!(!escaped.chars().any(char::is_control), "{escaped}");
        assert!(escaped.contains("done\\n2026"), "{escaped}");
        assert!(escaped.contains("\\r\\u{1b}[2K"), "{escaped}");
        assert_eq!(escape("naïve ✓"), "naïve ✓");
    }

    #[test]
    fn a_huge_message_is_cut_before_it_is_escaped() {
        let control = "\u{1}".repeat(10 << 20);
        let (kept, cut) = escape_cut(&control, MAX_LINE_BYTES);
        assert!(cut && kept.len() < MAX_LINE_BYTES + 64, "{}", kept.len());
        assert!(kept.starts_with("\\u{1}\\u{1}"), "{}", &kept[..20]);
        let kept_chars = kept.matches("\\u{1}").count();
        assert!(kept.ends_with(&format!("({} more bytes cut)", (10 << 20) - kept_chars)));
        assert!(!kept.chars().any(char::is_control));
        assert_eq!(escape_cut("short\n", 100), ("short\\n".to_string(), false));
    }

    #[tokio::test(start_paused = true)]
    async fn lines_over_the_rate_are_dropped_counted_and_reported() {
        let dropped = Counter::default();
        let limiter = LogLimiter::new(LINES_PER_SECOND, LINES_BURST, dropped.clone());
        let admitted = (0..100_000)
            .filter_map(|i| limiter.admit(&format!("{i}")))
            .count();
        assert_eq!(admitted, LINES_BURST as usize);
        assert_eq!(dropped.get(), 99_000);
        tokio::time::advance(Duration::from_millis(10)).await;
        let next = limiter.admit("after").expect("refilled");
        assert_eq!(next.dropped_before, 99_000);
        assert_eq!(next.message, "after");
        assert!(!next.was_cut);
        // The next drops are reported once the report interval has passed.
        let _ = (0..100).filter_map(|_| limiter.admit("more")).count();
        tokio::time::advance(Duration::from_millis(10)).await;
        assert_eq!(limiter.admit("soon").map(|a| a.dropped_before), Some(0));
        tokio::time::advance(REPORT_EVERY).await;
        let later = limiter.admit("later").expect("refilled");
        assert_eq!(later.dropped_before, 100);
    }

    #[test]
    fn fields_are_one_logfmt_value_a_plugin_cannot_break_out_of() {
        let fields = |pairs: &[(&str, &str)]| {
            let owned: Vec<(String, String)> = (pairs.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            fields_text(&owned)
        };
        assert_eq!(
            fields(&[("count", "3"), ("node", "a b")]),
            r#"count=3 node="a b""#
        );
        assert_eq!(
            fields(&[("bad key", "x"), ("ok", "line\nINFO forged")]),
            r#"ok="line\\nINFO forged" dropped=1"#
        );
        let many: Vec<(String, String)> = (0..20).map(|i| (format!("k{i}"), "v".into())).collect();
        assert!(
            fields_text(&many).ends_with("k15=v dropped=4"),
            "{}",
            fields_text(&many)
        );
    }
}
