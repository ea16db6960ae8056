//! The guest's stderr: bounded, and never a reason to fail the guest.
//!
//! wasmtime's `MemoryOutputPipe` traps the guest once its capacity is reached (and
//! says "closed" just before), so a plugin that printed more than the capacity
//! failed for that alone. This pipe accepts every write, keeps the first and the
//! last bytes (the start of the output and the panic message at its end) and counts
//! what it dropped in between.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Bytes kept from the start of the output.
pub const HEAD_BYTES: usize = 8 * 1024;
/// Bytes kept from the end of the output.
pub const TAIL_BYTES: usize = 8 * 1024;
/// The most one write may hand over at a time (what `check-write` permits).
const WRITE_PERMIT: usize = 64 * 1024;

#[derive(Debug, Default)]
struct Kept {
    head: Vec<u8>,
    /// The last bytes, in order; at most `TAIL_BYTES`.
    tail: Vec<u8>,
    /// Bytes neither in `head` nor in `tail`.
    dropped: u64,
}

/// A bounded capture of what a guest writes to stderr. Clones share the capture.
#[derive(Debug, Clone, Default)]
pub struct GuestStderr {
    kept: Arc<Mutex<Kept>>,
}

impl GuestStderr {
    fn keep(&self, mut bytes: &[u8]) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let room = HEAD_BYTES.saturating_sub(kept.head.len());
        let to_head = bytes.len().min(room);
        kept.head.extend_from_slice(&bytes[..to_head]);
        bytes = &bytes[to_head..];
        if bytes.len() >= TAIL_BYTES {
            let skipped = bytes.len() - TAIL_BYTES;
            kept.dropped += (kept.tail.len() + skipped) as u64;
            kept.tail.clear();
            bytes = &bytes[skipped..];
        }
        let overflow = (kept.tail.len() + bytes.len()).saturating_sub(TAIL_BYTES);
        kept.tail.drain(..overflow);
        kept.dropped += overflow as u64;
        kept.tail.extend_from_slice(bytes);
    }

    /// Everything written if nothing was dropped, else the last [`TAIL_BYTES`].
    pub fn last_bytes(&self) -> Vec<u8> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = match kept.dropped {
            0 => kept.head.clone(),
            _ => Vec::with_capacity(kept.tail.len()),
        };
        out.extend_from_slice(&kept.tail);
        out
    }

    /// Forgets everything written so far.
    pub fn clear(&self) {
        *self.kept.lock().unwrap_or_else(|p| p.into_inner()) = Kept::default();
    }

    /// Bytes written but kept neither at the start nor at the end.
    pub fn dropped(&self) -> u64 {
        self.kept.lock().unwrap_or_else(|p| p.into_inner()).dropped
    }
}

impl IsTerminal for GuestStderr {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestStderr {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestStderr {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestStderr {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.keep(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

impl AsyncWrite for GuestStderr {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.keep(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_megabytes_are_accepted_and_the_end_is_kept() {
        let mut stderr = GuestStderr::default();
        for _ in 0..160 {
            stderr
                .write(Bytes::from(vec![b'x'; 64 * 1024]))
                .expect("never refused");
        }
        stderr
            .write(Bytes::from_static(b"panicked at the end"))
            .expect("never refused");
        let last = stderr.last_bytes();
        assert_eq!(last.len(), TAIL_BYTES);
        assert!(last.ends_with(b"panicked at the end"));
        let written = 160 * 64 * 1024 + 19;
        assert_eq!(stderr.dropped(), (written - HEAD_BYTES - TAIL_BYTES) as u64);
        assert_eq!(stderr.check_write().expect("permit"), WRITE_PERMIT);
    }

    #[test]
    fn short_output_is_kept_whole() {
        let mut stderr = GuestStderr::default();
        stderr.write(Bytes::from_static(b"a")).expect("write");
        assert_eq!(stderr.last_bytes(), b"a");
        stderr
            .write(Bytes::from(vec![b'b'; HEAD_BYTES + 10]))
            .expect("write");
        let last = stderr.last_bytes();
        assert_eq!(last.len(), HEAD_BYTES + 11, "nothing dropped yet");
        assert_eq!(stderr.dropped(), 0);
    }
}
