//! Compiling plugins in a child process, the host's own binary run as
//! `wasm-controller-manager compile-worker`, so the daemon never runs the compiler.
//!
//! Compiling costs far more memory than running: the Python example makes Cranelift
//! peak at ~400 MiB, a component crafted for it as much as it likes, and glibc keeps
//! much of what the compiler freed. In the daemon all of that was the daemon's memory,
//! shared with every other plugin and with leader election. In a worker it is the
//! worker's, bounded, and returned to the system when it exits.
//!
//! The worker reads the component on standard input, compiles it with the settings
//! compiled code depends on ([`super::compile_config`]), and writes a compile-cache
//! entry ([`super::entry::write_entry`]) into a file the daemon created in the
//! cache's directory; the daemon loads it as it loads the cache and renames it into
//! place. Bounds: memory by `RLIMIT_DATA` (the heap and every private writable
//! mapping; address space merely reserved is not counted), CPU time by `RLIMIT_CPU` (a
//! backstop should the daemon die), and wall-clock time by the daemon, which kills the
//! worker past it. A worker that fails costs the plugin it compiles a load error that
//! names the bound, never the daemon.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::Semaphore;

pub use crate::config::{CompileBounds, WorkerProgram};

/// The subcommand the host's binary runs a worker as.
pub const SUBCOMMAND: &str = "compile-worker";

/// Exit status of a worker whose input was no valid component (standard error says why).
const INVALID: i32 = 2;
/// Exit status of a worker that could not read its input or write its output.
const IO_FAILED: i32 = 3;
/// Most bytes of a worker's standard error kept for the error text.
const STDERR_KEPT: usize = 4096;
/// Compilations a worker ended from outside gets in all, and the pause before the
/// second (doubled before each next).
const ATTEMPTS: u32 = 3;
const FIRST_RETRY: Duration = Duration::from_secs(1);

/// Why a worker produced no compiled code.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The host's binary could not be started as a worker.
    #[error("cannot start the compile worker {program}: {error}")]
    Start {
        /// The program run.
        program: String,
        /// What the system said.
        error: std::io::Error,
    },
    /// The compiler needed more memory than the bound.
    #[error(
        "compiling needed more memory than the compile worker's bound of {mib} MiB \
         (--compile-max-memory-mib)"
    )]
    Memory {
        /// The bound, in MiB.
        mib: u64,
    },
    /// The compilation ran past the bound.
    #[error(
        "compiling took longer than the compile worker's bound of {} (--compile-timeout)",
        humantime::format_duration(*.0)
    )]
    Time(Duration),
    /// wasmtime refused the component.
    #[error("{0}")]
    Invalid(String),
    /// The worker ended otherwise (killed from outside, cannot write its output).
    #[error("the compile worker failed ({status}): {stderr}")]
    Failed {
        /// How it ended.
        status: String,
        /// The end of what it printed.
        stderr: String,
    },
}

/// Runs compilations in workers: at most one per CPU at a time, each bounded.
#[derive(Debug)]
pub struct CompileWorker {
    program: PathBuf,
    bounds: CompileBounds,
    /// The CPUs of this machine: as many workers run at once.
    cpus: usize,
    running: Semaphore,
}

impl CompileWorker {
    /// Workers run as `program compile-worker ...`.
    pub fn new(program: WorkerProgram) -> CompileWorker {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        CompileWorker {
            program: program.program,
            bounds: program.bounds,
            cpus,
            running: Semaphore::new(cpus),
        }
    }

    /// The bounds each compilation runs under.
    pub fn bounds(&self) -> CompileBounds {
        self.bounds
    }

    /// Compiles `component` (content hash `hash`) into a compile-cache entry written
    /// to `output`, reusing and adding to the compiled functions in `functions` if
    /// given ([`super::functions`]), again after a pause when the worker was ended from outside (the
    /// kernel at the container's memory limit while other work ran, a stray signal):
    /// such a failure says nothing of the component. A bound it ran past, or a
    /// component the compiler refuses, is final.
    pub async fn compile_retried(
        &self,
        component: &[u8],
        output: &Path,
        functions: Option<&Path>,
        hash: &str,
    ) -> Result<(), WorkerError> {
        let mut pause = FIRST_RETRY;
        let mut attempt = 1;
        loop {
            match self.compile(component, output, functions).await {
                Err(e @ WorkerError::Failed { .. }) if attempt < ATTEMPTS => {
                    tracing::warn!(hash, attempt, error = %e, retry_in = ?pause,
                        "compile worker ended from outside; compiling again");
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    /// Compiles `component` into a compile-cache entry written to `output`, once.
    async fn compile(
        &self,
        component: &[u8],
        output: &Path,
        functions: Option<&Path>,
    ) -> Result<(), WorkerError> {
        // The semaphore is never closed, so acquiring cannot fail.
        let _running = self.running.acquire().await;
        let mut command = self.command(output);
        if let Some(dir) = functions {
            command.arg("--functions").arg(dir);
        }
        let mut child = command.spawn().map_err(|e| self.not_run(e))?;
        let (stdin, stderr) = (child.stdin.take(), child.stderr.take());
        let feed = async {
            if let Some(mut stdin) = stdin {
                // A worker that dies early closes the pipe: its status says why.
                let _ = stdin.write_all(component).await;
            }
        };
        let run = async {
            let (_, said, status) = tokio::join!(feed, kept_end(stderr), child.wait());
            (said, status)
        };
        let ended = tokio::time::timeout(self.bounds.timeout, run).await;
        let Ok((said, status)) = ended else {
            let _ = child.kill().await;
            return Err(WorkerError::Time(self.bounds.timeout));
        };
        judge(status.map_err(|e| self.not_run(e))?, &said, self.bounds)
    }

    /// The worker could not be started, or waited for.
    fn not_run(&self, error: std::io::Error) -> WorkerError {
        let program = self.program.display().to_string();
        WorkerError::Start { program, error }
    }

    fn command(&self, output: &Path) -> Command {
        // CPU seconds over all the worker's threads: a backstop, the daemon's clock
        // is the bound.
        let cpu_seconds = (self.bounds.timeout.as_secs() + 1).saturating_mul(self.cpus as u64);
        let mut command = Command::new(&self.program);
        command
            .arg(SUBCOMMAND)
            .arg("--output")
            .arg(output)
            .arg("--max-memory-bytes")
            .arg(self.bounds.max_memory_bytes.to_string())
            .arg("--cpu-seconds")
            .arg(cpu_seconds.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }
}

/// The last [`STDERR_KEPT`] bytes of what the worker prints, read to its end so the
/// worker never blocks on a full pipe.
async fn kept_end(stream: Option<impl AsyncRead + Unpin>) -> String {
    let Some(mut stream) = stream else {
        return String::new();
    };
    let (mut kept, mut chunk) = (Vec::new(), [0u8; 1024]);
    while let Ok(n @ 1..) = stream.read(&mut chunk).await {
        kept.extend_from_slice(&chunk[..n]);
        let over = kept.len().saturating_sub(STDERR_KEPT);
        kept.drain(..over);
    }
    String::from_utf8_lossy(&kept).trim().to_string()
}

/// What a worker's end means.
fn judge(status: ExitStatus, said: &str, bounds: CompileBounds) -> Result<(), WorkerError> {
    if status.success() {
        return Ok(());
    }
    // Rust aborts on a failed allocation ("memory allocation of N bytes failed");
    // wasmtime reports a failed mapping of code memory as an error.
    let out_of_memory = ["memory allocation of", "Cannot allocate memory"];
    if out_of_memory.iter().any(|m| said.contains(m)) {
        let mib = bounds.max_memory_bytes >> 20;
        return Err(WorkerError::Memory { mib });
    }
    if status.signal() == Some(libc::SIGXCPU) {
        return Err(WorkerError::Time(bounds.timeout));
    }
    if status.code() == Some(INVALID) {
        return Err(WorkerError::Invalid(said.to_string()));
    }
    let status = match (status.code(), status.signal()) {
        (_, Some(libc::SIGKILL)) => "killed (SIGKILL; the container's memory limit?)".into(),
        (_, Some(signal)) => format!("signal {signal}"),
        (code, None) => format!("exit status {}", code.unwrap_or(-1)),
    };
    let stderr = said.to_string();
    Err(WorkerError::Failed { status, stderr })
}

/// What the daemon asks of one worker (the flags of `compile-worker`).
#[derive(Debug, Clone)]
pub struct WorkerTask {
    /// The file to write the compile-cache entry into.
    pub output: PathBuf,
    /// The memory bound, set on the worker itself before it reads anything.
    pub max_memory_bytes: u64,
    /// The CPU-time backstop.
    pub cpu_seconds: u64,
    /// The directory of compiled functions to reuse and add to, if any.
    pub functions: Option<PathBuf>,
}

/// The worker's side: bounds itself, reads a component on standard input, compiles
/// it and writes the entry; returns the process's exit status.
pub fn serve(task: &WorkerTask) -> i32 {
    use rlimit::Resource;
    let bound = |resource: Resource, value: u64| rlimit::setrlimit(resource, value, value);
    if let Err(e) = bound(Resource::DATA, task.max_memory_bytes)
        .and_then(|()| bound(Resource::CPU, task.cpu_seconds))
    {
        eprintln!("cannot bound the compile worker: {e}");
        return IO_FAILED;
    }
    let mut component = Vec::new();
    if let Err(e) = std::io::Read::read_to_end(&mut std::io::stdin(), &mut component) {
        eprintln!("cannot read the component: {e}");
        return IO_FAILED;
    }
    let compiled = wasmtime::Engine::new(&worker_config(task.functions.as_deref()))
        .and_then(|engine| engine.precompile_component(&component));
    drop(component);
    let artifact = match compiled {
        Ok(artifact) => artifact,
        Err(e) => {
            eprintln!("{}", super::chain(&e));
            return INVALID;
        }
    };
    let written = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&task.output)
        .and_then(|mut file| super::entry::write_entry(&mut file, &artifact));
    match written {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("cannot write {}: {e}", task.output.display());
            IO_FAILED
        }
    }
}

/// The compile settings, with Cranelift's incremental cache on `functions` when given
/// and usable (without it the worker compiles everything, as before).
fn worker_config(functions: Option<&Path>) -> wasmtime::Config {
    let mut config = super::compile_config();
    let Some(dir) = functions else {
        return config;
    };
    if let Err(e) = super::functions::enable(&mut config, dir) {
        eprintln!(
            "compiling without the compiled functions in {}: {e}",
            dir.display()
        );
    }
    config
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;
    use crate::config::Limits;
    use crate::runtime::entry::{load_entry, write_entry};

    const BOUNDS: CompileBounds = CompileBounds {
        max_memory_bytes: 64 << 20,
        timeout: Duration::from_secs(2),
    };

    fn judged(wait_status: i32, said: &str) -> String {
        match judge(ExitStatus::from_raw(wait_status), said, BOUNDS) {
            Ok(()) => "ok".into(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_workers_end_is_told_by_the_bound_it_hit() {
        let cases = [
            (0, "", "ok"),
            (
                libc::SIGABRT,
                "memory allocation of 1048576 bytes failed",
                "compiling needed more memory than the compile worker's bound of 64 MiB \
                 (--compile-max-memory-mib)",
            ),
            (
                libc::SIGXCPU,
                "",
                "compiling took longer than the compile worker's bound of 2s (--compile-timeout)",
            ),
            (
                INVALID << 8,
                "failed to parse WebAssembly module",
                "failed to parse WebAssembly module",
            ),
            (
                libc::SIGKILL,
                "",
                "the compile worker failed (killed (SIGKILL; the container's memory limit?)): ",
            ),
            (
                IO_FAILED << 8,
                "cannot write /x: denied",
                "the compile worker failed (exit status 3): cannot write /x: denied",
            ),
        ];
        for (status, said, expected) in cases {
            assert_eq!(judged(status, said), expected, "status {status:#x}");
        }
    }

    #[tokio::test]
    async fn only_the_end_of_what_a_worker_prints_is_kept_and_all_of_it_is_read() {
        let said: Vec<u8> = (0..10 * STDERR_KEPT)
            .map(|i| b'a' + (i % 26) as u8)
            .collect();
        let kept = kept_end(Some(&said[..])).await;
        assert_eq!(kept.len(), STDERR_KEPT);
        assert!(said.ends_with(kept.as_bytes()));
    }

    #[test]
    fn what_a_worker_compiles_loads_in_the_daemons_pooling_engine() {
        let worker = wasmtime::Engine::new(&super::super::compile_config()).expect("engine");
        let artifact =
            (worker.precompile_component(b"(component (core module))")).expect("compiles");
        let mut entry = tempfile::NamedTempFile::new().expect("file");
        write_entry(&mut entry, &artifact).expect("written");
        let daemon = super::super::build_engine(&Limits::default(), None).expect("engine");
        assert!(
            daemon.pooling_allocator_metrics().is_some(),
            "a pooling engine"
        );
        load_entry(&daemon, entry.path(), u64::MAX).expect("loads");
    }
}
