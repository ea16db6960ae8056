//! A thread and a runtime of their own for an election, so nothing the plugins do on
//! the host's runtime (a guest burning CPU, a flood of writes queued on the shared
//! client) can delay a renewal: the operating system gives the thread its share of
//! a CPU whatever the other threads do.

use tokio::sync::oneshot;

/// Work running on a thread of its own, to be stopped or to end by itself.
pub struct OwnThread<T> {
    stop: Option<oneshot::Sender<()>>,
    /// Its output, or why it could not run; `None` once taken.
    ended: Option<oneshot::Receiver<Result<T, String>>>,
}

impl<T: Send + 'static> OwnThread<T> {
    /// Runs the future `run` makes on a new thread named `name`, on a
    /// current-thread runtime of its own; `run` gets the signal to stop. It is
    /// called on that thread, so an API client it builds runs there too (a kube
    /// client's connection worker lives on the runtime that creates it).
    pub fn start<F, Fut>(name: &str, run: F) -> OwnThread<T>
    where
        F: FnOnce(oneshot::Receiver<()>) -> Fut + Send + 'static,
        Fut: Future<Output = T>,
    {
        let (stop, stopped) = oneshot::channel();
        let (done, ended) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let outcome = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => Ok(runtime.block_on(run(stopped))),
                    Err(e) => Err(format!("no runtime for the election: {e}")),
                };
                let _ = done.send(outcome);
            });
        if let Err(e) = thread {
            tracing::error!(error = %e, thread = name, "cannot start an election thread");
        }
        OwnThread {
            stop: Some(stop),
            ended: Some(ended),
        }
    }

    /// Waits until the work ends by itself: its output, or why there is none. Once
    /// taken (or after [`OwnThread::stop`]), never resolves again.
    pub async fn ended(&mut self) -> Result<T, String> {
        let Some(ended) = self.ended.as_mut() else {
            return std::future::pending().await;
        };
        let outcome = ended.await;
        self.ended = None;
        outcome.unwrap_or_else(|_| Err("the election thread ended without a word".into()))
    }

    /// Tells the work to stop and waits until it has.
    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(ended) = self.ended.take() {
            let _ = ended.await;
        }
    }
}
