//! A thread and a runtime of their own for an election, so nothing the plugins do on
//! the host's runtime (a guest burning CPU, a flood of writes queued on the shared
//! client) can delay a renewal: the operating system gives the thread its share of
//! a CPU whatever the other threads do.

use tokio::sync::oneshot;

/// Runs the future `run` makes on a new thread named `name`, on a current-thread
/// runtime of its own; its output, or why it could not run, comes through the
/// receiver. `run` is called on that thread, so an API client it builds runs there
/// too (a kube client's connection worker lives on the runtime that creates it).
pub fn on_own_thread<F, Fut, T>(name: &str, run: F) -> oneshot::Receiver<Result<T, String>>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T>,
    T: Send + 'static,
{
    let (done, ended) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let outcome = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => Ok(runtime.block_on(run())),
                Err(e) => Err(format!("no runtime for the election: {e}")),
            };
            let _ = done.send(outcome);
        });
    if let Err(e) = thread {
        tracing::error!(error = %e, thread = name, "cannot start an election thread");
    }
    ended
}
