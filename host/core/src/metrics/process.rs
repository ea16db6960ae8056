//! The host process's own resources, read from `/proc/self` at each scrape and named
//! as client_golang's process collector names them, so the dashboards and alerts
//! written for any Go controller read them too: resident memory, CPU seconds, open
//! file descriptors and threads. Written here because `prometheus-client` has no
//! process collector; on a system without `/proc` the series are left out.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Linux reports CPU time in `/proc/<pid>/stat` in ticks of USER_HZ, 100 a second on
/// every architecture (the kernel's ABI, whatever its internal HZ).
const TICKS_PER_SECOND: f64 = 100.0;

/// Encodes the process's series at each scrape.
#[derive(Debug, Default)]
pub struct ProcessCollector;

/// What `/proc/self` says of the process.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Usage {
    resident_bytes: u64,
    cpu_seconds: f64,
    threads: u64,
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        if let Some(usage) = usage() {
            let help = "Resident memory of the host process";
            gauge(
                &mut encoder,
                "process_resident_memory_bytes",
                help,
                usage.resident_bytes,
            )?;
            let help = "CPU time of the host process, user and system";
            let cpu = ConstCounter::new(usage.cpu_seconds);
            cpu.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                help,
                None,
                cpu.metric_type(),
            )?)?;
            gauge(
                &mut encoder,
                "process_threads",
                "Threads of the host process",
                usage.threads,
            )?;
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            let help = "Open file descriptors of the host process";
            gauge(&mut encoder, "process_open_fds", help, fds.count() as u64)?;
        }
        Ok(())
    }
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> fmt::Result {
    let gauge = ConstGauge::new(value);
    gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)
}

/// The process's usage, from `/proc/self/status` and `/proc/self/stat`.
fn usage() -> Option<Usage> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse(&status, &stat)
}

fn parse(status: &str, stat: &str) -> Option<Usage> {
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line[name.len()..]
            .split_whitespace()
            .next()?
            .parse::<u64>()
            .ok()
    };
    // The command name is in parentheses and may hold spaces: the fields after it
    // are counted from its closing one (utime and stime are the 14th and 15th).
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |at: usize| fields.get(at)?.parse::<u64>().ok();
    let cpu = ticks(11)? + ticks(12)?;
    Some(Usage {
        resident_bytes: field("VmRSS:")? * 1024,
        cpu_seconds: cpu as f64 / TICKS_PER_SECOND,
        threads: field("Threads:")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_read_as_the_kernel_writes_them() {
        let status = "Name:\tx\nVmRSS:\t  2048 kB\nThreads:\t7\n";
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0";
        let usage = parse(status, stat).expect("parsed");
        assert_eq!(usage.resident_bytes, 2 << 20);
        assert_eq!(usage.cpu_seconds, 3.0);
        assert_eq!(usage.threads, 7);
    }

    #[test]
    fn this_process_has_memory_and_threads() {
        let usage = usage().expect("/proc/self");
        assert!(usage.resident_bytes > 0 && usage.threads > 0, "{usage:?}");
    }
}
