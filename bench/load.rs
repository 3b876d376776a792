//! The I/O figures, the way Lambda runs the function: the real release binary against the
//! project's Lambda Runtime API stand-in and a DynamoDB stand-in that answers every request after
//! an injected round trip (RTT), over plain HTTP and over TLS (a certificate made at run time,
//! trusted through `SSL_CERT_FILE`), inside a cgroup with the CPU share of a Lambda memory size.
//! Next to it, in the same run and against the same endpoints: Powertools for TypeScript,
//! Powertools for Python, and the naive Rust loop (`bench/naive_peer.rs`). Prints the tables,
//! writes BENCHMARKS.md and its charts. Run with `make bench` (`make bench-quick`: fewer sizes).

#[path = "../crates/receiver/tests/support/http.rs"]
mod http;
#[path = "../crates/receiver/tests/support/runtime_api.rs"]
mod runtime_api;
#[path = "../crates/receiver/tests/support/tls.rs"]
mod tls;

#[path = "load/contenders.rs"]
mod contenders;
#[path = "load/measurements.rs"]
mod measurements;
#[path = "load/report.rs"]
mod report;
#[path = "load/stand_in.rs"]
mod stand_in;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bench_support::chart::{self, Series, Series2};
use http::{read_request, write_response};
use runtime_api::{ApiEvent, AsyncHandler, RuntimeApi, bind, serve_on_thread};
use tokio::io::{AsyncRead, AsyncWrite};

use contenders::*;
use measurements::*;
use stand_in::*;

/// Lambda gives a function one vCPU at 1,769 MB, and CPU in proportion below that.
const ONE_VCPU_MB: u32 = 1_769;
const MEMORY_SIZES: [u32; 4] = [128, 256, 512, 1_769];
/// Round trips: the latency table's (as before), and the per-memory-size table's.
const RTT_LATENCY_MS: u64 = 50;
const RTT_SHARE_MS: u64 = 10;
/// Sustained runs per contender and memory size; the median is reported.
const SHARE_ROUNDS: usize = 3;
/// The memory size the template deploys by default (its `MemorySize` parameter): the batch of 100
/// is also measured at its CPU share, where the goal is set.
const DEFAULT_MEMORY_MB: u32 = 256;
/// us-east-1 list prices, arm64, as read on 2026-11-23 (docs/operations.md, "Cost per million
/// messages", gives the sources): per GB-second of duration (first tier), per request.
const PRICE_GB_SECOND: f64 = 0.000_013_333_4;
const PRICE_REQUEST: f64 = 0.20 / 1_000_000.0;
/// Today's figure before this work (BENCHMARKS.md at 0fe1266, plain HTTP, 10,000 records).
const BEFORE_CPU_US: f64 = 112.7;
const BEFORE_RSS_10_000_MB: f64 = 60.8;

/// The function's bound on writes in flight as deployed: template.yaml's `WriteConcurrency`
/// default (the template passes it as `MAX_CONCURRENCY`), read from the template so that the
/// bench measures what a deployment runs.
fn max_concurrency() -> usize {
    static BOUND: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BOUND.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
        let template = std::fs::read_to_string(path).expect("template.yaml");
        template
            .lines()
            .skip_while(|line| line.trim_end() != "  WriteConcurrency:")
            .skip(1)
            .take_while(|line| line.starts_with("    "))
            .find_map(|line| line.trim().strip_prefix("Default:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("template.yaml's WriteConcurrency parameter has a numeric Default")
    })
}

fn which(program: &str) -> Result<String, String> {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
        .ok_or_else(|| format!("{program} is not on PATH"))
}

fn event_json(size: usize, seed: usize) -> String {
    serde_json::to_string(&bench_support::event(size, seed)).unwrap()
}

fn event_file(work: &Path, size: usize, seed: usize) -> PathBuf {
    let file = work.join(format!("event-{size}-{seed}.json"));
    std::fs::write(&file, event_json(size, seed)).unwrap();
    file
}

fn failures(response: &str) -> usize {
    let value: serde_json::Value = serde_json::from_str(response).expect("a JSON response");
    value["batchItemFailures"]
        .as_array()
        .map_or(usize::MAX, Vec::len)
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs.get(xs.len() / 2).copied().unwrap_or_default()
}

fn status_kb_line(file: &str, field: &str) -> u64 {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn pass(ok: bool) -> &'static str {
    if ok { "**met**" } else { "**NOT met**" }
}

/// A cell for a figure that may be missing, with why.
fn cell<T>(value: &Result<T, String>, show: impl Fn(&T) -> String) -> String {
    match value {
        Ok(v) => show(v),
        Err(e) => format!("n/a ({})", e.replace('|', "/")),
    }
}

/// Lambda's bill for a million messages in batches of 10 (100,000 invocations) at `memory_mb`,
/// each invocation billed its duration rounded up to the millisecond.
fn cost_per_million(memory_mb: u32, batch: Duration) -> f64 {
    let invocations = 100_000.0;
    let billed_seconds = (batch.as_secs_f64() * 1e3).ceil() / 1e3;
    invocations * (billed_seconds * f64::from(memory_mb) / 1024.0 * PRICE_GB_SECOND + PRICE_REQUEST)
}

fn main() {
    // `cargo bench` passes --bench; a test runner listing or running targets does not.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    // The workspace's root: this package is bench/.
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let work = root.join("target/bench");
    std::fs::create_dir_all(&work).unwrap();
    let bench = Bench {
        programs: Programs::find(&root),
        endpoints: Endpoints::start(&work),
        work: work.clone(),
        quick,
    };
    if std::env::args().any(|a| a == "--cpu-only") {
        let tls = std::env::args().any(|a| a == "--tls");
        let (us, rss) = bench
            .cpu_per_record(Contender::Ours, tls, 10_000)
            .expect("a run");
        println!("10000 records (tls {tls}): {us:.1} µs CPU per record, peak RSS {rss:.1} MB");
        let mut function = Function::start(&bench.launch(Contender::Ours, tls, None).unwrap());
        function.startup();
        function.invoke(event_json(10, 6));
        println!("batch of 10: peak RSS {:.1} MB", function.peak_rss_mb());
        return;
    }
    if std::env::args().any(|a| a == "--attestation-cost") {
        // What the attestation adds to a batch of 10,000 at 0 ms RTT (BENCHMARKS.md "CPU per
        // record, 0 ms RTT"), without the rest of the run.
        for tls in [false, true] {
            let cost = bench.attestation_cost(tls, 10_000, 5).expect("a run");
            println!(
                "attestation (tls {tls}): {:.1} µs CPU per record without, {:.1} with: {:+.1} µs ({:+.1} %)",
                cost.plain,
                cost.attested,
                cost.attested - cost.plain,
                100.0 * cost.share()
            );
        }
        return;
    }
    if std::env::args().any(|a| a == "--sustained-only") {
        // For a profiler: one environment, batches of 10 (or `--records N`) at the share RTT
        // over TLS, whole core. Two sizes split a batch's fixed cost from a record's.
        let records = std::env::args()
            .skip_while(|a| a != "--records")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(10);
        bench.endpoints.set_rtt(RTT_SHARE_MS);
        let mut function = Function::start(&bench.launch(Contender::Ours, true, None).unwrap());
        function.startup();
        function.invoke(event_json(records, 7));
        let run = function.sustained(&event_json(records, 8), records, 1, Duration::from_secs(10));
        println!("{run:?}");
        return;
    }
    if std::env::args().any(|a| a == "--latency-only") {
        // The batch of 100 and its peers at 50 ms RTT, whole machine and at the template's
        // default memory size's CPU share (the goal's), without the rest of the run.
        bench.endpoints.set_rtt(RTT_LATENCY_MS);
        for who in [Contender::Ours, Contender::Naive, Contender::Node] {
            for size in [10, 100] {
                let figure = bench.latency(who, size, 5, None);
                println!("{} batch of {size}, whole machine: {figure:?}", who.name());
            }
        }
        match latency_at_default_memory(&bench) {
            Ok(figures) => {
                for ((who, size), figure) in figures {
                    println!(
                        "{} batch of {size}, {DEFAULT_MEMORY_MB} MB: {figure:?}",
                        who.name()
                    );
                }
            }
            Err(e) => println!("{DEFAULT_MEMORY_MB} MB share: skipped: {e}"),
        }
        return;
    }
    if std::env::args().any(|a| a == "--startup-only") {
        // Where start-up goes: wall and the process's own CPU up to the first `next`.
        for tls in [false, true] {
            for _ in 0..5 {
                let mut function =
                    Function::start(&bench.launch(Contender::Ours, tls, None).unwrap());
                let wall = function.startup();
                println!("tls {tls}: {wall:?} wall, {:?} CPU", function.cpu());
            }
        }
        return;
    }
    let report = measure(&bench);
    let text = report.render(&bench);
    println!("{text}");
    std::fs::write(root.join("BENCHMARKS.md"), text).unwrap();
    report.charts(&root);
    println!("wrote BENCHMARKS.md, benchmarks-latency.svg, benchmarks-throughput.svg");
}
