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

// ---------------------------------------------------------------------------------------------
// The DynamoDB stand-in: `{}` to every request (PutItem: written; DescribeTable: the start-up
// check) after the injected round trip; plain HTTP and TLS on two ports.

struct Dynamo {
    rtt_ms: AtomicU64,
    requests: AtomicUsize,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl Dynamo {
    async fn serve<S: AsyncRead + AsyncWrite + Unpin>(&self, mut socket: S) {
        let mut buffer = Vec::new();
        while read_request(&mut socket, &mut buffer).await.is_some() {
            self.requests.fetch_add(1, Ordering::Relaxed);
            let rtt = self.rtt_ms.load(Ordering::Relaxed);
            if rtt > 0 {
                tokio::time::sleep(Duration::from_millis(rtt)).await;
            }
            let headers = [
                ("Content-Type", "application/x-amz-json-1.0"),
                ("x-amzn-RequestId", "bench"),
            ];
            if write_response(&mut socket, 200, &headers, b"{}")
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

impl AsyncHandler for Dynamo {
    async fn connection(self: Arc<Self>, socket: tokio::net::TcpStream) {
        match &self.tls {
            Some(acceptor) => {
                if let Ok(socket) = acceptor.accept(socket).await {
                    self.serve(socket).await;
                }
            }
            None => self.serve(socket).await,
        }
    }
}

/// Both endpoints, the CA file that makes the TLS one trusted, and the round trip they inject.
struct Endpoints {
    plain: Arc<Dynamo>,
    tls: Arc<Dynamo>,
    plain_url: String,
    tls_url: String,
    ca_file: PathBuf,
}

impl Endpoints {
    fn start(work: &Path) -> Self {
        let (ca_pem, acceptor) = tls::acceptor();
        let ca_file = work.join("stand-in-ca.pem");
        std::fs::write(&ca_file, ca_pem).unwrap();
        let start = |tls| {
            let (listener, port) = bind();
            let dynamo = Arc::new(Dynamo {
                rtt_ms: AtomicU64::new(0),
                requests: AtomicUsize::new(0),
                tls,
            });
            serve_on_thread(listener, dynamo.clone());
            (dynamo, port)
        };
        let (plain, plain_port) = start(None);
        let (tls, tls_port) = start(Some(acceptor));
        Self {
            plain,
            tls,
            plain_url: format!("http://127.0.0.1:{plain_port}"),
            tls_url: format!("https://127.0.0.1:{tls_port}"),
            ca_file,
        }
    }

    fn set_rtt(&self, ms: u64) {
        self.plain.rtt_ms.store(ms, Ordering::Relaxed);
        self.tls.rtt_ms.store(ms, Ordering::Relaxed);
    }

    fn url(&self, tls: bool) -> &str {
        if tls { &self.tls_url } else { &self.plain_url }
    }

    fn requests(&self) -> usize {
        self.plain.requests.load(Ordering::Relaxed) + self.tls.requests.load(Ordering::Relaxed)
    }
}

// ---------------------------------------------------------------------------------------------
// The CPU share of a Lambda memory size: a cgroup (v1 cpu controller) with a CFS quota of
// memory/1,769 of one core per period.

struct CpuShare {
    memory_mb: u32,
    dir: PathBuf,
}

impl CpuShare {
    fn create(memory_mb: u32) -> Result<Self, String> {
        let root = Path::new("/sys/fs/cgroup/cpu");
        if !root.join("cpu.cfs_quota_us").exists() {
            return Err("no cgroup v1 cpu controller at /sys/fs/cgroup/cpu".into());
        }
        let dir = root.join(format!("audit-receiver-bench-{memory_mb}"));
        let period = 100_000u64;
        let quota = (period * u64::from(memory_mb) / u64::from(ONE_VCPU_MB)).max(1_000);
        std::fs::create_dir_all(&dir)
            .and_then(|_| std::fs::write(dir.join("cpu.cfs_period_us"), period.to_string()))
            .and_then(|_| std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string()))
            .map_err(|e| format!("cannot write the cgroup {}: {e}", dir.display()))?;
        Ok(Self { memory_mb, dir })
    }

    /// `program args…`, started inside this cgroup from its first instruction: a shell joins the
    /// cgroup and then becomes the program (exec), so the pid stays the same.
    fn command(&self, program: &Path) -> Command {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(r#"echo $$ > "$0" && exec "$@""#)
            .arg(self.dir.join("cgroup.procs"))
            .arg(program);
        command
    }
}

impl Drop for CpuShare {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn command_in(share: Option<&CpuShare>, program: &Path) -> Command {
    match share {
        Some(share) => share.command(program),
        None => Command::new(program),
    }
}

// ---------------------------------------------------------------------------------------------
// The contenders.

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Contender {
    Ours,
    Naive,
    Node,
    Python,
}

const CONTENDERS: [Contender; 4] = [
    Contender::Ours,
    Contender::Naive,
    Contender::Node,
    Contender::Python,
];

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Contender::Ours => "audit-receiver",
            Contender::Naive => "naive Rust (join_all)",
            Contender::Node => "Powertools TypeScript",
            Contender::Python => "Powertools Python",
        }
    }
}

/// Where the programs are.
struct Programs {
    root: PathBuf,
    ours: PathBuf,
    naive: Result<PathBuf, String>,
    python: PathBuf,
    node_peer: PathBuf,
}

impl Programs {
    fn find(root: &Path) -> Self {
        // BENCH_BINARY: another build of the function, e.g. one with symbols for a profiler.
        let ours = std::env::var("BENCH_BINARY")
            .map(PathBuf::from)
            // `make bench` builds it first: cargo build --release --bin audit-receiver.
            .unwrap_or_else(|_| root.join("target/release/audit-receiver"));
        let python = std::env::var("PEER_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|_| root.join(".venv/bin/python"));
        Self {
            root: root.to_owned(),
            ours,
            naive: naive_peer_binary(),
            python,
            node_peer: root.join("bench/peer-ts/bench.mjs"),
        }
    }
}

/// The naive peer's executable: a bench target of this package, built by the same `cargo bench`.
fn naive_peer_binary() -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    // `cargo bench` runs this bench with the package's own CARGO_PKG_*, CARGO_MANIFEST_* (and
    // such) set. A nested cargo that inherits them sees ring's build script inputs
    // (`rerun-if-env-changed=CARGO_PKG_NAME`, …) as changed and rebuilds ring and all that
    // follows, in this build and again in the next. The user's cargo settings are kept.
    const SET_BY_CARGO_FOR_A_TARGET: [&str; 6] = [
        "CARGO_PKG_",
        "CARGO_MANIFEST_",
        "CARGO_CRATE_",
        "CARGO_BIN_",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
    ];
    for (name, _) in std::env::vars().filter(|(n, _)| {
        n == "OUT_DIR" || SET_BY_CARGO_FOR_A_TARGET.iter().any(|p| n.starts_with(p))
    }) {
        command.env_remove(name);
    }
    let output = command
        .args([
            "bench",
            "-p",
            "audit-bench",
            "--bench",
            "naive_peer",
            "--no-run",
            "--message-format=json",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cargo: {e}"))?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["target"]["name"] == "naive_peer")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| {
            "cargo bench -p audit-bench --bench naive_peer --no-run built no executable".into()
        })
}

/// One Rust function process (ours or the naive peer) with its own Runtime API.
struct Function {
    child: Child,
    api: RuntimeApi,
    spawned: Instant,
}

struct Launch<'a> {
    binary: &'a Path,
    endpoint: &'a str,
    ca_file: &'a Path,
    share: Option<&'a CpuShare>,
    /// Lambda Managed Instances' setting; None leaves it unset (a classic environment).
    at_once: Option<usize>,
}

impl Function {
    fn start(launch: &Launch) -> Self {
        let api = RuntimeApi::start(Duration::from_secs(900));
        let memory = launch.share.map_or(ONE_VCPU_MB, |s| s.memory_mb);
        let mut command = command_in(launch.share, launch.binary);
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("AWS_LAMBDA_RUNTIME_API", api.address())
            .env("AWS_LAMBDA_FUNCTION_NAME", "audit-receiver")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory.to_string())
            .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
            .env("AWS_ENDPOINT_URL", launch.endpoint)
            .env("SSL_CERT_FILE", launch.ca_file)
            .env("AWS_ACCESS_KEY_ID", "bench")
            .env("AWS_SECRET_ACCESS_KEY", "bench")
            .env("AWS_SESSION_TOKEN", "bench")
            .env("AWS_REGION", "us-east-1")
            .env("TABLE_NAME", "AuditMessages")
            .env("MAX_CONCURRENCY", max_concurrency().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(n) = launch.at_once {
            command.env("AWS_LAMBDA_MAX_CONCURRENCY", n.to_string());
        }
        // Allocator experiments without a rebuild (MIMALLOC_*), passed through.
        for (name, value) in std::env::vars().filter(|(n, _)| n.starts_with("MIMALLOC_")) {
            command.env(name, value);
        }
        let spawned = Instant::now();
        let mut child = command.spawn().expect("the function binary");
        // Drain the logs as Lambda's log agent does (a pipe, not /dev/null).
        let mut stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut sink = [0u8; 65536];
            while matches!(stdout.read(&mut sink), Ok(n) if n > 0) {}
        });
        Self {
            child,
            api,
            spawned,
        }
    }

    /// Process start to the first `next` request.
    fn startup(&mut self) -> Duration {
        let at = self
            .api
            .first_next(Duration::from_secs(60))
            .expect("the function polled");
        at - self.spawned
    }

    /// Delivers one event; delivery to response, and the response.
    fn invoke(&mut self, event: String) -> (Duration, String) {
        self.api
            .invoke(event, Duration::from_secs(600))
            .expect("a response")
    }

    /// Batches fed back to back for `budget`, `ahead` queued at any time (1 invocation at a
    /// time in a classic environment: the next event is there as soon as the last is
    /// answered). Records per second from the first delivery to the last response; the median
    /// latency of a batch; CPU per record.
    fn sustained(&mut self, event: &str, records: usize, ahead: usize, budget: Duration) -> Run {
        let cpu_before = self.cpu();
        let mut pending = std::collections::VecDeque::new();
        for _ in 0..ahead {
            pending.push_back(self.api.enqueue(event.to_owned()));
        }
        let started = Instant::now();
        let mut first_delivery = None;
        let mut last_response = started;
        let mut latencies = Vec::new();
        let mut answered = 0usize;
        let mut open: BTreeMap<String, Instant> = BTreeMap::new();
        while answered < pending.len() + answered || !pending.is_empty() {
            match self
                .api
                .next_event(Duration::from_secs(120))
                .expect("progress")
            {
                ApiEvent::Delivered(id, at) => {
                    first_delivery.get_or_insert(at);
                    open.insert(id, at);
                }
                ApiEvent::Response(id, at, body) => {
                    assert_eq!(failures(&body), 0, "{body}");
                    if let Some(delivered) = open.remove(&id) {
                        latencies.push(at - delivered);
                    }
                    pending.retain(|p| *p != id);
                    answered += 1;
                    last_response = at;
                    if started.elapsed() < budget {
                        pending.push_back(self.api.enqueue(event.to_owned()));
                    }
                }
                ApiEvent::Error(_, _, body) | ApiEvent::InitError(body) => {
                    panic!("invocation error: {body}")
                }
                ApiEvent::NextRequested(_) => {}
            }
            if pending.is_empty() {
                break;
            }
        }
        let cpu = self.cpu() - cpu_before;
        let wall = last_response - first_delivery.unwrap_or(started);
        let total = answered * records;
        Run {
            records_per_second: total as f64 / wall.as_secs_f64(),
            batch_latency: median(latencies),
            cpu_per_record_us: cpu.as_secs_f64() * 1e6 / total as f64,
            peak_rss_mb: self.peak_rss_mb(),
        }
    }

    /// CPU time of every thread of the process, from the scheduler's nanosecond counters.
    fn cpu(&self) -> Duration {
        let tasks = PathBuf::from(format!("/proc/{}/task", self.child.id()));
        let nanos: u64 = std::fs::read_dir(tasks)
            .map(|dir| {
                dir.filter_map(|t| t.ok())
                    .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
                    .filter_map(|s| {
                        s.split_whitespace()
                            .next()
                            .and_then(|n| n.parse::<u64>().ok())
                    })
                    .sum()
            })
            .unwrap_or(0);
        Duration::from_nanos(nanos)
    }

    /// Peak resident set size, in MB.
    fn peak_rss_mb(&self) -> f64 {
        status_kb_line(&format!("/proc/{}/status", self.child.id()), "VmHWM") as f64 / 1024.0
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a sustained run measured.
#[derive(Clone, Copy, Debug)]
struct Run {
    records_per_second: f64,
    batch_latency: Duration,
    cpu_per_record_us: f64,
    peak_rss_mb: f64,
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

// ---------------------------------------------------------------------------------------------
// The measurements.

struct Bench {
    programs: Programs,
    endpoints: Endpoints,
    work: PathBuf,
    quick: bool,
}

impl Bench {
    fn launch<'a>(
        &'a self,
        who: Contender,
        tls: bool,
        share: Option<&'a CpuShare>,
    ) -> Result<Launch<'a>, String> {
        let binary = match who {
            Contender::Ours => self.programs.ours.as_path(),
            Contender::Naive => self
                .programs
                .naive
                .as_ref()
                .map_err(Clone::clone)?
                .as_path(),
            _ => unreachable!("the peers run through their drivers"),
        };
        Ok(Launch {
            binary,
            endpoint: self.endpoints.url(tls),
            ca_file: &self.endpoints.ca_file,
            share,
            at_once: None,
        })
    }

    /// A peer's driver (`bench/peer/bench.py`, `bench/peer-ts/bench.mjs`): it calls the
    /// handler in-process (no Runtime API, which favours the peer) and prints its figures as JSON.
    fn peer(
        &self,
        peer: Contender,
        scenario: &str,
        tls: bool,
        event_file: &Path,
        repeat: usize,
        share: Option<&CpuShare>,
    ) -> Result<serde_json::Value, String> {
        let programs = &self.programs;
        let ca_file = &self.endpoints.ca_file;
        let (program, script) = match peer {
            Contender::Python => (
                programs.python.clone(),
                programs.root.join("bench/peer/bench.py"),
            ),
            Contender::Node => (PathBuf::from(which("node")?), programs.node_peer.clone()),
            _ => unreachable!("the Rust contenders run as functions"),
        };
        let memory = share.map_or(ONE_VCPU_MB, |s| s.memory_mb);
        let output = command_in(share, &program)
            .arg(script)
            .args([scenario, self.endpoints.url(tls)])
            .arg(event_file)
            .arg(repeat.to_string())
            .current_dir(&programs.root)
            .env("AWS_ACCESS_KEY_ID", "bench")
            .env("AWS_SECRET_ACCESS_KEY", "bench")
            .env("AWS_SESSION_TOKEN", "bench")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory.to_string())
            .env("AWS_CA_BUNDLE", ca_file)
            .env("NODE_EXTRA_CA_CERTS", ca_file)
            .env("TABLE_NAME", "AuditMessages")
            .env("POWERTOOLS_SERVICE_NAME", "audit-receiver-peer")
            .env("POWERTOOLS_LOG_LEVEL", "WARN")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr)
                .lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or("failed")
                .to_owned());
        }
        serde_json::from_slice(&output.stdout).map_err(|e| format!("peer output: {e}"))
    }

    /// CPU per record and peak RSS for one batch of `size` at 0 ms RTT.
    fn cpu_per_record(&self, who: Contender, tls: bool, size: usize) -> Result<(f64, f64), String> {
        self.endpoints.set_rtt(0);
        match who {
            Contender::Ours | Contender::Naive => {
                let mut function = Function::start(&self.launch(who, tls, None)?);
                function.startup();
                function.invoke(event_json(100, 3)); // warm, as in a warm Lambda
                let before = function.cpu();
                let (_, response) = function.invoke(event_json(size, 4));
                let cpu = function.cpu() - before;
                if failures(&response) != 0 {
                    return Err(format!("{} records failed", failures(&response)));
                }
                Ok((
                    cpu.as_secs_f64() * 1e6 / size as f64,
                    function.peak_rss_mb(),
                ))
            }
            peer => {
                let file = event_file(&self.work, size, 5);
                let out = self.peer(peer, "cpu", tls, &file, 1, None)?;
                let cpu = out["cpu_seconds"].as_f64().ok_or("no cpu_seconds")?;
                let rss = out["max_rss_mb"].as_f64().unwrap_or(f64::NAN);
                Ok((cpu * 1e6 / size as f64, rss))
            }
        }
    }

    /// Median latency of a batch of `size` at the current RTT, warm, with `share`'s CPU (None:
    /// the whole machine).
    fn latency(
        &self,
        who: Contender,
        size: usize,
        runs: usize,
        share: Option<&CpuShare>,
    ) -> Result<Duration, String> {
        match who {
            Contender::Ours | Contender::Naive => {
                let mut function = Function::start(&self.launch(who, true, share)?);
                function.startup();
                function.invoke(event_json(10, 2));
                let latencies = (0..runs)
                    .map(|run| {
                        let (latency, response) = function.invoke(event_json(size, 100 + run));
                        match failures(&response) {
                            0 => Ok(latency),
                            n => Err(format!("{n} of {size} records failed")),
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(median(latencies))
            }
            peer => {
                let file = event_file(&self.work, size, 900);
                let out = self.peer(peer, "latency", true, &file, runs, share)?;
                out["seconds"]
                    .as_f64()
                    .map(Duration::from_secs_f64)
                    .ok_or_else(|| "no seconds".into())
            }
        }
    }

    /// One execution environment with a memory size's CPU share, fed batches of 10 back to
    /// back at the share's RTT, over TLS.
    fn sustained(&self, who: Contender, share: &CpuShare, budget: Duration) -> Result<Run, String> {
        self.endpoints.set_rtt(RTT_SHARE_MS);
        match who {
            Contender::Ours | Contender::Naive => {
                let mut function = Function::start(&self.launch(who, true, Some(share))?);
                function.startup();
                function.invoke(event_json(10, 7));
                Ok(function.sustained(&event_json(10, 8), 10, 1, budget))
            }
            peer => {
                let file = event_file(&self.work, 10, 8);
                let out = self.peer(
                    peer,
                    "sustained",
                    true,
                    &file,
                    budget.as_secs().max(1) as usize,
                    Some(share),
                )?;
                let f = |k: &str| out[k].as_f64().ok_or(format!("no {k} in {out}"));
                let records = f("records")? * f("batches")?;
                Ok(Run {
                    records_per_second: f("records_per_second")?,
                    batch_latency: Duration::from_secs_f64(f("batch_seconds_median")?),
                    cpu_per_record_us: f("cpu_seconds")? * 1e6 / records,
                    peak_rss_mb: f("max_rss_mb")?,
                })
            }
        }
    }
}

/// The run with the median records per second, or the first error when no run succeeded.
fn median_run(runs: Vec<Result<Run, String>>) -> Result<Run, String> {
    let mut done: Vec<Run> = runs
        .iter()
        .filter_map(|r| r.as_ref().ok().copied())
        .collect();
    done.sort_by(|a, b| a.records_per_second.total_cmp(&b.records_per_second));
    match done.get(done.len() / 2) {
        Some(run) => Ok(*run),
        None => Err(runs
            .into_iter()
            .find_map(Result::err)
            .unwrap_or_else(|| "no run".into())),
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

/// Median batch latencies by contender and batch size.
type Latencies = BTreeMap<(Contender, usize), Result<Duration, String>>;

/// One memory size's runs, or why the size was skipped (no cgroup).
type ShareFigures = Result<BTreeMap<Contender, Result<Run, String>>, String>;

/// Everything one run measured.
struct Report {
    startup: Duration,
    startup_plain: Duration,
    peer_startup: BTreeMap<Contender, Result<Duration, String>>,
    cold_first_batch: Duration,
    warm_batch: Duration,
    cold_requests: usize,
    cpu: BTreeMap<(Contender, bool), Result<(f64, f64), String>>,
    cpu_sizes: BTreeMap<Contender, usize>,
    latency: BTreeMap<(Contender, usize), Result<Duration, String>>,
    /// Batches of 10 and 100 at 50 ms RTT with the template's default memory size's CPU share.
    latency_default_memory: Result<Latencies, String>,
    sizes: Vec<usize>,
    shares: BTreeMap<u32, ShareFigures>,
    rss_10: f64,
    at_once: Vec<(usize, Run)>,
    zip_mb: Option<f64>,
    cpu_table: String,
}

/// Batches of 10 and 100 at the latency RTT, over TLS, with the CPU share of the template's
/// default memory size: ours, the naive Rust loop and Powertools TypeScript (Python writes one
/// record after another, 100 RTT). Err when no cgroup can be made.
fn latency_at_default_memory(bench: &Bench) -> Result<Latencies, String> {
    let share = CpuShare::create(DEFAULT_MEMORY_MB)?;
    bench.endpoints.set_rtt(RTT_LATENCY_MS);
    let mut figures = BTreeMap::new();
    for who in [Contender::Ours, Contender::Naive, Contender::Node] {
        for size in [10, 100] {
            let figure = bench.latency(who, size, 5, Some(&share));
            eprintln!(
                "latency {} {size} at {DEFAULT_MEMORY_MB} MB: {figure:?}",
                who.name()
            );
            figures.insert((who, size), figure);
        }
    }
    Ok(figures)
}

fn measure(bench: &Bench) -> Report {
    let quick = bench.quick;
    let endpoints = &bench.endpoints;
    let programs = &bench.programs;

    // --- Start-up: process start to the first `next`, the endpoint answering at once.
    endpoints.set_rtt(0);
    let runs = if quick { 5 } else { 20 };
    let startup_of = |tls| {
        median(
            (0..runs)
                .map(|_| {
                    Function::start(&bench.launch(Contender::Ours, tls, None).unwrap()).startup()
                })
                .collect(),
        )
    };
    let startup = startup_of(true);
    let startup_plain = startup_of(false);
    eprintln!("start-up: {startup:?} (TLS), {startup_plain:?} (plain)");
    let mut peer_startup = BTreeMap::new();
    let time_command = |mut command: Command| -> Result<Duration, String> {
        let started = Instant::now();
        let status = command
            .current_dir(&programs.root)
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .env("AWS_REGION", "us-east-1")
            .env("TABLE_NAME", "AuditMessages")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| e.to_string())?;
        let took = started.elapsed();
        status.success().then_some(took).ok_or("failed".into())
    };
    let mut python = Command::new(&programs.python);
    python.args([
        "-c",
        "import sys; sys.path.insert(0, 'bench/peer'); import handler",
    ]);
    peer_startup.insert(Contender::Python, time_command(python));
    let node = which("node").map(|node| {
        let mut command = Command::new(node);
        command.args([
            "--input-type=module",
            "-e",
            "await import('./bench/peer-ts/handler.mjs')",
        ]);
        command
    });
    peer_startup.insert(Contender::Node, node.and_then(time_command));
    let naive = bench.launch(Contender::Naive, true, None).map(|launch| {
        median(
            (0..runs)
                .map(|_| Function::start(&launch).startup())
                .collect(),
        )
    });
    peer_startup.insert(Contender::Naive, naive);

    // --- Cold start: process start to the first batch of 10 answered, at the latency RTT.
    endpoints.set_rtt(RTT_LATENCY_MS);
    let mut function = Function::start(&bench.launch(Contender::Ours, true, None).unwrap());
    let requests_before = endpoints.requests();
    let first = function.api.enqueue(event_json(10, 0));
    let (_, response) = function
        .api
        .response(&first, Duration::from_secs(60))
        .unwrap();
    let cold_first_batch = function.spawned.elapsed();
    assert_eq!(failures(&response), 0, "{response}");
    let cold_requests = endpoints.requests() - requests_before - 10;
    let (warm_batch, _) = function.invoke(event_json(10, 1));
    drop(function);
    eprintln!("cold: first batch {cold_first_batch:?}, warm {warm_batch:?}");

    // --- CPU per record at 0 ms RTT, plain and TLS.
    let mut cpu = BTreeMap::new();
    let mut cpu_sizes = BTreeMap::new();
    for who in CONTENDERS {
        let size = match (who, quick) {
            (Contender::Python, _) => 1_000,
            (Contender::Node, _) => 2_000,
            (_, true) => 2_000,
            (_, false) => 10_000,
        };
        cpu_sizes.insert(who, size);
        for tls in [false, true] {
            let figure = bench.cpu_per_record(who, tls, size);
            eprintln!("cpu {} tls {tls}: {figure:?}", who.name());
            cpu.insert((who, tls), figure);
        }
    }

    // --- Latency by batch size at 50 ms RTT, TLS.
    endpoints.set_rtt(RTT_LATENCY_MS);
    let sizes: Vec<usize> = if quick {
        vec![10, 100, 1_000]
    } else {
        vec![10, 100, 1_000, 10_000]
    };
    let mut latency = BTreeMap::new();
    for who in CONTENDERS {
        for &size in &sizes {
            let largest = match who {
                Contender::Python => 100,
                Contender::Node => 1_000,
                _ => usize::MAX,
            };
            if size > largest {
                continue;
            }
            let runs = if size <= 100 { 5 } else { 1 };
            let figure = bench.latency(who, size, runs, None);
            eprintln!("latency {} {size}: {figure:?}", who.name());
            latency.insert((who, size), figure);
        }
    }

    // --- The batch of 100 at the template's default memory size's CPU share.
    let latency_default_memory = latency_at_default_memory(bench);

    // --- Each memory size's CPU share: batch of 10 at 10 ms RTT, fed back to back.
    let budget = Duration::from_secs(if quick { 2 } else { 4 });
    let mut shares = BTreeMap::new();
    for memory_mb in MEMORY_SIZES {
        // Rounds interleave the contenders, so that the machine's drift (it is shared) falls on
        // all of them alike; each contender's median round (by records per second) is kept.
        let figures = CpuShare::create(memory_mb).map(|share| {
            let mut rounds: BTreeMap<Contender, Vec<Result<Run, String>>> = BTreeMap::new();
            for _ in 0..SHARE_ROUNDS {
                for &who in &CONTENDERS {
                    let run = bench.sustained(who, &share, budget);
                    eprintln!("{memory_mb} MB {}: {run:?}", who.name());
                    rounds.entry(who).or_default().push(run);
                }
            }
            rounds
                .into_iter()
                .map(|(who, runs)| (who, median_run(runs)))
                .collect::<BTreeMap<_, _>>()
        });
        if let Err(e) = &figures {
            eprintln!("{memory_mb} MB: skipped: {e}");
        }
        shares.insert(memory_mb, figures);
    }

    // --- Peak RSS, a batch of 10 (the 10,000 batch's is the CPU run's).
    endpoints.set_rtt(0);
    let mut function = Function::start(&bench.launch(Contender::Ours, true, None).unwrap());
    function.startup();
    function.invoke(event_json(10, 6));
    let rss_10 = function.peak_rss_mb();
    drop(function);

    // --- Lambda Managed Instances: invocations at once in one process, the whole machine.
    endpoints.set_rtt(RTT_SHARE_MS);
    let mut at_once = Vec::new();
    for n in [1usize, 4, 16] {
        let mut launch = bench.launch(Contender::Ours, true, None).unwrap();
        launch.at_once = Some(n);
        let mut function = Function::start(&launch);
        function.startup();
        function.invoke(event_json(10, 9));
        let run = function.sustained(&event_json(10, 10), 10, n + 2, budget);
        eprintln!("{n} at once: {run:?}");
        at_once.push((n, run));
    }

    // --- Package: the arm64 zip from `cargo lambda build --release --arm64 --output-format zip`.
    let zip = programs
        .root
        .join("target/lambda/audit-receiver/bootstrap.zip");
    let zip_mb = std::fs::metadata(&zip)
        .ok()
        .map(|m| m.len() as f64 / 1_048_576.0);
    let cpu_table = std::fs::read_to_string(bench.work.join("cpu.md")).unwrap_or_default();

    Report {
        startup,
        startup_plain,
        peer_startup,
        cold_first_batch,
        warm_batch,
        cold_requests,
        cpu,
        cpu_sizes,
        latency,
        latency_default_memory,
        sizes,
        shares,
        rss_10,
        at_once,
        zip_mb,
        cpu_table,
    }
}

impl Report {
    fn cpu_us(&self, who: Contender, tls: bool) -> Option<f64> {
        self.cpu.get(&(who, tls))?.as_ref().ok().map(|(us, _)| *us)
    }

    fn share_run(&self, memory_mb: u32, who: Contender) -> Option<Run> {
        self.shares
            .get(&memory_mb)?
            .as_ref()
            .ok()?
            .get(&who)?
            .as_ref()
            .ok()
            .copied()
    }

    fn render(&self, bench: &Bench) -> String {
        let mut out = String::new();
        let mode = if bench.quick {
            " (quick mode: smaller sizes, shorter runs)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "# Benchmarks\n\nWritten by `make bench`{mode}; every number below comes from one run of it on this machine.\n"
        );
        let _ = writeln!(out, "## Machine\n");
        for (k, v) in machine() {
            let _ = writeln!(out, "- {k}: {v}");
        }
        let _ = writeln!(out, "\n{}", HOW);
        out.push_str(&self.targets());
        out.push_str(&self.cpu_section());
        out.push_str(&self.share_section());
        out.push_str(&self.latency_section());
        out.push_str(&self.at_once_section());
        out.push_str(&self.startup_section());
        let _ = writeln!(
            out,
            "## CPU path without I/O (`cargo bench -p audit-bench --bench cpu`)\n\n\
             Median of repeated runs: parse and validate the bodies; the same plus building the item and its \
             `PutItem` request body; the whole batch (dedupe, units, bounded concurrency, outcomes, response) with a \
             store that builds the request body and answers at once.\n\n{}",
            self.cpu_table
        );
        let findings =
            std::fs::read_to_string(bench.programs.root.join("bench/notes.md")).unwrap_or_default();
        out.push_str(&findings);
        out
    }

    fn targets(&self) -> String {
        let mut rows: Vec<[String; 4]> = Vec::new();
        // One row per peer, best (lowest CPU) first: the issue names Powertools TypeScript as
        // the strongest peer a user would pick; the naive Rust loop is the cheapest of them.
        for tls in [false, true] {
            let transport = if tls { "TLS" } else { "plain HTTP" };
            let ours = self.cpu_us(Contender::Ours, tls);
            let mut peers: Vec<(Contender, f64)> = CONTENDERS[1..]
                .iter()
                .filter_map(|&p| self.cpu_us(p, tls).map(|us| (p, us)))
                .collect();
            peers.sort_by(|a, b| a.1.total_cmp(&b.1));
            let Some(ours) = ours.filter(|_| !peers.is_empty()) else {
                rows.push([
                    format!("CPU per record, {transport}"),
                    "a figure is missing".into(),
                    "—".into(),
                    "**NOT measured**".into(),
                ]);
                continue;
            };
            for (peer, theirs) in peers {
                let met = ours * 10.0 <= theirs;
                let verdict = match (met, peer) {
                    (true, _) => pass(true).into(),
                    (false, _) => "**NOT met**; see \"Where the CPU goes\"".into(),
                };
                rows.push([
                    format!("CPU per record, {transport}: ≤ 1/10 of {}'s", peer.name()),
                    format!("{ours:.1} µs vs {theirs:.0} µs"),
                    format!("1/{:.1}", theirs / ours),
                    verdict,
                ]);
            }
        }
        if let Some(ours) = self.cpu_us(Contender::Ours, false) {
            rows.push([
                "CPU per record, plain HTTP: half of before this work, or a profile".into(),
                format!("{ours:.1} µs vs {BEFORE_CPU_US} µs before"),
                format!("{:.2} of before", ours / BEFORE_CPU_US),
                if ours <= BEFORE_CPU_US / 2.0 {
                    pass(true).into()
                } else {
                    "not halved; **met** only if the profile below shows where the rest goes".into()
                },
            ]);
        }
        let smallest = MEMORY_SIZES[0];
        match (
            self.share_run(smallest, Contender::Ours),
            self.share_run(smallest, Contender::Node),
        ) {
            (Some(ours), Some(node)) => {
                let bound = 10.0 * 1e3 / RTT_SHARE_MS as f64;
                rows.push([
                    format!(
                        "{smallest} MB share, batches of 10 at {RTT_SHARE_MS} ms RTT: ≥ 10× Powertools TypeScript"
                    ),
                    format!(
                        "{:.0} vs {:.0} records/s",
                        ours.records_per_second, node.records_per_second
                    ),
                    format!("{:.1}×", ours.records_per_second / node.records_per_second),
                    pass(ours.records_per_second >= 10.0 * node.records_per_second).into(),
                ]);
                // One environment at a CPU share can do at most share ÷ CPU per record.
                let share = f64::from(smallest) / f64::from(ONE_VCPU_MB);
                let cpu_bound = share * 1e6 / ours.cpu_per_record_us;
                let close = ours.records_per_second >= 0.8 * bound;
                rows.push([
                    format!(
                        "… and close to the round-trip bound ({bound:.0} records/s: 10 per RTT)"
                    ),
                    format!(
                        "{:.0} records/s; the share's CPU allows {cpu_bound:.0} ({:.1} % ÷ {:.0} µs per record)",
                        ours.records_per_second,
                        share * 100.0,
                        ours.cpu_per_record_us
                    ),
                    format!("{:.2} of the bound", ours.records_per_second / bound),
                    if close {
                        pass(true).into()
                    } else if cpu_bound < bound {
                        "**NOT met**: CPU-bound at this share; see \"Where the CPU goes\"".into()
                    } else {
                        "**NOT met**: each batch takes longer than one RTT (the memory-size table)"
                            .into()
                    },
                ]);
            }
            _ => rows.push([
                format!("{smallest} MB share"),
                "not measured (see the memory-size table)".into(),
                "—".into(),
                "**NOT measured**".into(),
            ]),
        }
        let rtt = Duration::from_millis(RTT_LATENCY_MS);
        let bound = max_concurrency();
        for (size, limit) in [
            (10usize, 1.15),
            (100, 1.3 * 100usize.div_ceil(bound) as f64),
        ] {
            if let Some(Ok(latency)) = self.latency.get(&(Contender::Ours, size)) {
                let in_rtt = latency.as_secs_f64() / rtt.as_secs_f64();
                rows.push([
                    format!("batch of {size} at {RTT_LATENCY_MS} ms RTT: ≤ {limit:.2} RTT"),
                    format!("{:.0} ms", ms(*latency)),
                    format!("{in_rtt:.2} RTT"),
                    pass(in_rtt <= limit).into(),
                ]);
            }
        }
        // The issue's goal: at the template's default memory, a batch of 100 in at most 2.5 RTT,
        // and before Powertools TypeScript at the same share.
        if let Ok(figures) = &self.latency_default_memory {
            let ours = figures.get(&(Contender::Ours, 100));
            let node = figures.get(&(Contender::Node, 100));
            if let Some(Ok(latency)) = ours {
                let in_rtt = latency.as_secs_f64() / rtt.as_secs_f64();
                rows.push([
                    format!(
                        "batch of 100 at {RTT_LATENCY_MS} ms RTT, {DEFAULT_MEMORY_MB} MB share: ≤ 2.50 RTT"
                    ),
                    format!("{:.0} ms", ms(*latency)),
                    format!("{in_rtt:.2} RTT"),
                    pass(in_rtt <= 2.5).into(),
                ]);
                if let Some(Ok(theirs)) = node {
                    rows.push([
                        format!(
                            "batch of 100 at {RTT_LATENCY_MS} ms RTT, {DEFAULT_MEMORY_MB} MB share: before Powertools TypeScript"
                        ),
                        format!("{:.0} ms vs {:.0} ms", ms(*latency), ms(*theirs)),
                        format!("{:.2}×", theirs.as_secs_f64() / latency.as_secs_f64()),
                        pass(latency < theirs).into(),
                    ]);
                }
            }
        }
        rows.push([
            "peak RSS, batch of 10: ≤ 16 MB".into(),
            format!("{:.1} MB", self.rss_10),
            "—".into(),
            pass(self.rss_10 <= 16.0).into(),
        ]);
        let big = self.cpu_sizes[&Contender::Ours];
        if let Some(Ok((_, rss))) = self.cpu.get(&(Contender::Ours, true)) {
            rows.push([
                format!("peak RSS, batch of {big}: ≤ 48 MB"),
                format!("{rss:.1} MB (before: {BEFORE_RSS_10_000_MB} MB)"),
                "—".into(),
                if big == 10_000 {
                    pass(*rss <= 48.0).into()
                } else {
                    "quick mode: not the 10,000 batch".into()
                },
            ]);
        }
        rows.push([
            "start-up to the first `next`, TLS endpoint answering at once: ≤ 30 ms".into(),
            format!("{:.1} ms", ms(self.startup)),
            "—".into(),
            pass(self.startup <= Duration::from_millis(30)).into(),
        ]);
        let allowed = self.warm_batch + rtt + Duration::from_millis(30);
        rows.push([
            format!(
                "process start to the first batch of 10 answered, {RTT_LATENCY_MS} ms RTT: ≤ warm batch + 1 RTT + 30 ms"
            ),
            format!(
                "{:.0} ms (warm batch {:.0} ms; allowed {:.0} ms)",
                ms(self.cold_first_batch),
                ms(self.warm_batch),
                ms(allowed)
            ),
            format!(
                "{:.2} RTT over the warm batch",
                (self.cold_first_batch.as_secs_f64() - self.warm_batch.as_secs_f64())
                    / rtt.as_secs_f64()
            ),
            pass(self.cold_first_batch <= allowed).into(),
        ]);
        if let Some(mb) = self.zip_mb {
            rows.push([
                "arm64 package, zipped: ≤ 5 MB".into(),
                format!("{mb:.2} MB"),
                "—".into(),
                pass(mb <= 5.0).into(),
            ]);
        }
        let mut out = String::from(
            "## Targets\n\nEach a ratio from this run.\n\n| target | measured | ratio | verdict |\n| --- | ---: | ---: | --- |\n",
        );
        for [a, b, c, d] in rows {
            let _ = writeln!(out, "| {a} | {b} | {c} | {d} |");
        }
        out.push('\n');
        out
    }

    fn cpu_section(&self) -> String {
        let mut out = String::from(
            "## CPU per record, 0 ms RTT\n\n\
             One warm batch against an endpoint that answers at once; the process's CPU time (all \
             threads; for the peers, their process CPU time around the handler call) divided by \
             the records. Peak RSS is the process's high-water mark after that batch.\n\n\
             | contender | records | plain HTTP | TLS | TLS costs | peak RSS (TLS run) |\n\
             | --- | ---: | ---: | ---: | ---: | ---: |\n",
        );
        for who in CONTENDERS {
            let plain = &self.cpu[&(who, false)];
            let tls = &self.cpu[&(who, true)];
            let extra = match (plain, tls) {
                (Ok((p, _)), Ok((t, _))) => format!("{:+.1} µs", t - p),
                _ => "—".into(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {extra} | {} |",
                who.name(),
                self.cpu_sizes[&who],
                cell(plain, |(us, _)| format!("{us:.1} µs")),
                cell(tls, |(us, _)| format!("{us:.1} µs")),
                cell(tls, |(_, rss)| format!("{rss:.1} MB")),
            );
        }
        out.push('\n');
        out
    }

    fn share_section(&self) -> String {
        let mut out = format!(
            "## Each memory size's CPU share\n\n\
             Each contender runs inside a cgroup whose CPU quota is memory/1,769 of one core per \
             100 ms period (1,769 MB = one vCPU), over TLS, at {RTT_SHARE_MS} ms RTT. One execution \
             environment is fed batches of 10 back to back: records per second from the first \
             delivery to the last answer, and the median latency of a batch. Each contender runs \
             {SHARE_ROUNDS} times at each size, interleaved with the others; the row is its \
             median run by records per second. Cost per million \
             messages: 100,000 invocations of 10 records, each billed its median batch latency \
             rounded up to the millisecond, at the arm64 list prices for us-east-1 as read on \
             2026-11-23 (${PRICE_GB_SECOND} per GB-second, $0.20 per million requests; \
             docs/operations.md gives the sources). Lambda only: DynamoDB's and SQS's charges are \
             the same whichever function writes (docs/operations.md).\n\n\
             ![records per second by memory size](benchmarks-throughput.svg)\n\n\
             | memory | CPU share | contender | records/s | batch of 10 | CPU per record | cost per million |\n\
             | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n"
        );
        for (&memory_mb, figures) in &self.shares {
            let share = f64::from(memory_mb) / f64::from(ONE_VCPU_MB);
            match figures {
                Err(e) => {
                    let _ = writeln!(
                        out,
                        "| {memory_mb} MB | {:.1} % | all | skipped: {e} | | | |",
                        share * 100.0
                    );
                }
                Ok(figures) => {
                    for (who, run) in figures {
                        let _ = writeln!(
                            out,
                            "| {memory_mb} MB | {:.1} % | {} | {} | {} | {} | {} |",
                            share * 100.0,
                            who.name(),
                            cell(run, |r| format!("{:.0}", r.records_per_second)),
                            cell(run, |r| format!("{:.1} ms", ms(r.batch_latency))),
                            cell(run, |r| format!("{:.0} µs", r.cpu_per_record_us)),
                            cell(run, |r| format!(
                                "${:.3}",
                                cost_per_million(memory_mb, r.batch_latency)
                            )),
                        );
                    }
                }
            }
        }
        out.push('\n');
        out
    }

    fn latency_section(&self) -> String {
        let bound = max_concurrency();
        let mut out = format!(
            "## Latency by batch size, {RTT_LATENCY_MS} ms RTT\n\n\
             Warm, over TLS, the whole machine (no CPU quota); median of 5 runs up to 100 records, \
             one run above. audit-receiver writes at most {bound} records at once (template.yaml's \
             `WriteConcurrency` default), so its limit is ⌈n/{bound}⌉ RTT. Powertools Python writes one record after another \
             (n RTT); it and Powertools TypeScript are measured up to the sizes that finish in \
             seconds.\n\n\
             ![batch latency by batch size](benchmarks-latency.svg)\n\n\
             | batch | limit (⌈n/{bound}⌉ RTT) |"
        );
        for who in CONTENDERS {
            let _ = write!(out, " {} |", who.name());
        }
        out.push_str("\n| ---: | ---: |");
        for _ in CONTENDERS {
            out.push_str(" ---: |");
        }
        out.push('\n');
        let rtt = RTT_LATENCY_MS as f64;
        for &size in &self.sizes {
            let _ = write!(out, "| {size} | {} |", size.div_ceil(bound));
            for who in CONTENDERS {
                let text = match self.latency.get(&(who, size)) {
                    None => "not run".into(),
                    Some(figure) => cell(figure, |d| {
                        format!("{:.0} ms = {:.2} RTT", ms(*d), ms(*d) / rtt)
                    }),
                };
                let _ = write!(out, " {text} |");
            }
            out.push('\n');
        }
        out.push('\n');
        if let Ok(figures) = &self.latency_default_memory {
            let _ = write!(
                out,
                "At the template's default memory size, {DEFAULT_MEMORY_MB} MB ({:.1} % of a vCPU, \
                 a cgroup CPU quota), warm, over TLS, median of 5 runs:\n\n\
                 | batch | audit-receiver | naive Rust (join_all) | Powertools TypeScript |\n\
                 | ---: | ---: | ---: | ---: |\n",
                100.0 * f64::from(DEFAULT_MEMORY_MB) / f64::from(ONE_VCPU_MB)
            );
            for size in [10, 100] {
                let _ = write!(out, "| {size} |");
                for who in [Contender::Ours, Contender::Naive, Contender::Node] {
                    let text = match figures.get(&(who, size)) {
                        None => "not run".into(),
                        Some(figure) => cell(figure, |d| {
                            format!("{:.0} ms = {:.2} RTT", ms(*d), ms(*d) / rtt)
                        }),
                    };
                    let _ = write!(out, " {text} |");
                }
                out.push('\n');
            }
            out.push('\n');
        }
        out
    }

    fn at_once_section(&self) -> String {
        let mut out = format!(
            "## Lambda Managed Instances: invocations at once in one process\n\n\
             `AWS_LAMBDA_MAX_CONCURRENCY` = n: the function serves n invocations at once on a \
             multi-thread runtime (unset or 1: one at a time on a current-thread runtime, as in a \
             classic environment). Batches of 10 at {RTT_SHARE_MS} ms RTT over TLS, n + 2 queued at \
             any time, the whole machine ({} cores, no CPU quota: a Managed Instances environment \
             has whole vCPUs).\n\n\
             | at once | records/s | batch of 10 | CPU per record | peak RSS |\n\
             | ---: | ---: | ---: | ---: | ---: |\n",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        for (n, run) in &self.at_once {
            let _ = writeln!(
                out,
                "| {n} | {:.0} | {:.1} ms | {:.0} µs | {:.1} MB |",
                run.records_per_second,
                ms(run.batch_latency),
                run.cpu_per_record_us,
                run.peak_rss_mb
            );
        }
        out.push('\n');
        out
    }

    fn startup_section(&self) -> String {
        let mut out = format!(
            "## Start-up\n\n\
             - audit-receiver, process start to the first `next` (median, endpoint answering at \
             once): {:.1} ms over TLS, {:.1} ms over plain HTTP. It includes the start-up check \
             (`DescribeTable`, which opens the connections a batch of 10 uses).\n\
             - Process start to the first batch of 10 answered at {RTT_LATENCY_MS} ms RTT: {:.0} ms; \
             the next batch took {:.0} ms. Requests during init and the first batch besides its 10 \
             PutItems: {}.\n",
            ms(self.startup),
            ms(self.startup_plain),
            ms(self.cold_first_batch),
            ms(self.warm_batch),
            self.cold_requests,
        );
        for (who, figure) in &self.peer_startup {
            let what = match who {
                Contender::Naive => "process start to the first `next` (median), over TLS",
                _ => "the handler module's import, whole process",
            };
            let _ = writeln!(
                out,
                "- {}, {what}: {}",
                who.name(),
                cell(figure, |d| format!("{:.0} ms", ms(*d)))
            );
        }
        out.push('\n');
        out
    }

    fn charts(&self, root: &Path) {
        let latency: Vec<Series> = CONTENDERS
            .iter()
            .map(|&who| Series {
                name: who.name().into(),
                points: self
                    .sizes
                    .iter()
                    .filter_map(|&size| match self.latency.get(&(who, size)) {
                        Some(Ok(d)) => Some((size as f64, ms(*d))),
                        _ => None,
                    })
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect();
        if let Err(e) = chart::line_chart(
            &root.join("benchmarks-latency.svg"),
            &format!("Batch latency at {RTT_LATENCY_MS} ms RTT (TLS)"),
            "records in the batch",
            "latency (ms)",
            true,
            true,
            &latency,
        ) {
            eprintln!("latency chart: {e}");
        }
        let groups: Vec<String> = MEMORY_SIZES.iter().map(|m| format!("{m} MB")).collect();
        let throughput: Vec<Series2> = CONTENDERS
            .iter()
            .map(|&who| Series2 {
                name: who.name().into(),
                values: MEMORY_SIZES
                    .iter()
                    .map(|&m| self.share_run(m, who).map(|r| r.records_per_second))
                    .collect(),
            })
            .collect();
        if let Err(e) = chart::grouped_bars(
            &root.join("benchmarks-throughput.svg"),
            &format!(
                "Records per second, one environment, batches of 10 at {RTT_SHARE_MS} ms RTT (TLS)"
            ),
            "records per second",
            true,
            &groups,
            &throughput,
        ) {
            eprintln!("throughput chart: {e}");
        }
    }
}

const HOW: &str = "## How it is measured\n\n\
The function is the real release binary (`target/release/audit-receiver`) run as Lambda runs it: a \
process that polls the project's Runtime API stand-in (`crates/receiver/tests/support/runtime_api.rs`) and writes to a \
DynamoDB stand-in that answers every request (`{}`: written) after a fixed injected round trip (RTT). \
Ours signs and sends its `PutItem`s with its own client (`crates/aws/src/dynamodb/wire.rs`); every peer \
uses its language's AWS SDK. \
The stand-in serves plain HTTP and TLS; its certificate is made at run time (rcgen) and trusted through \
the standard variables: `SSL_CERT_FILE` for the Rust programs, `AWS_CA_BUNDLE` for boto3, \
`NODE_EXTRA_CA_CERTS` for Node. Connecting costs no injected round trip (locally it costs microseconds; \
in AWS a TCP and a TLS handshake, paid once per connection, which the function opens during init).\n\n\
The peers, in the same run against the same endpoints with the same events:\n\n\
- **Powertools TypeScript** (`bench/peer-ts`): `@aws-lambda-powertools/batch` `BatchProcessor` with \
`processPartialResponse` (records in parallel) and AWS SDK v3 `PutItemCommand` (conditional, ALL_OLD), \
pinned by its lock file and installed by `make bench` with `npm ci`.\n\
- **Powertools Python** (`bench/peer`): `BatchProcessor` with boto3 `put_item`, one record after another.\n\
- **naive Rust** (`bench/naive_peer.rs`): the runtime's SQS example pattern, `join_all` of `put_item` \
with no bound, the SDK's defaults, the multi-thread runtime and the system allocator; built as a bench \
target of this package, so it shares this build, and run as a function like ours.\n\n\
The Powertools peers' handlers are called in-process by a driver (no Runtime API round trip per batch, \
which favours them). CPU is the process's scheduler time; RSS its high-water mark (VmHWM, or the \
runtime's maxRSS).\n";

fn machine() -> BTreeMap<&'static str, String> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let memory = status_kb_line("/proc/meminfo", "MemTotal") / 1024 / 1024;
    let version = |program: &str, arg: &str| {
        Command::new(program)
            .arg(arg)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|_| "not found".into())
    };
    BTreeMap::from([
        ("cpu", cpu),
        ("cores", cores.to_string()),
        ("memory", format!("{memory} GiB")),
        ("rustc", version("rustc", "--version")),
        ("node", version("node", "--version")),
    ])
}
