//! The I/O figures: the real release binary run against a local Lambda Runtime API and a local
//! DynamoDB endpoint that answers PutItem after a fixed injected round trip, next to the Python
//! peer (Powertools `BatchProcessor` + boto3) driven with the same events against the same
//! endpoint. Prints a table and writes BENCHMARKS.md. Run with `make bench`.

#[path = "../tests/support/http.rs"]
mod http;
mod support;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::{read_request, write_response};
use tokio::net::TcpListener;

const RTT_MS: u64 = 50;
const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:audit-receiver";

/// Runs async servers on a thread of their own, so the harness's waiting never slows them.
fn serve_on_thread(listener: std::net::TcpListener, handler: impl AsyncHandler) {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            listener.set_nonblocking(true).unwrap();
            let listener = TcpListener::from_std(listener).unwrap();
            let handler = Arc::new(handler);
            while let Ok((socket, _)) = listener.accept().await {
                let _ = socket.set_nodelay(true);
                tokio::spawn(handler.clone().connection(socket));
            }
        });
    });
}

trait AsyncHandler: Send + Sync + 'static {
    fn connection(
        self: Arc<Self>,
        socket: tokio::net::TcpStream,
    ) -> impl Future<Output = ()> + Send;
}

fn bind() -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// A DynamoDB endpoint that answers every request with `{}` (PutItem: written) after `rtt`.
struct FakeDynamo {
    rtt_ms: AtomicU64,
    requests: AtomicUsize,
}

impl AsyncHandler for FakeDynamo {
    async fn connection(self: Arc<Self>, mut socket: tokio::net::TcpStream) {
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

enum ApiEvent {
    NextRequested(Instant),
    Delivered(Instant),
    Response(Instant, String),
    Error(String),
}

/// The Lambda Runtime API: hands out one queued event per `next`, reports what comes back.
struct RuntimeApi {
    queue: tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<String>>,
    events: std::sync::Mutex<mpsc::Sender<ApiEvent>>,
}

impl RuntimeApi {
    fn report(&self, event: ApiEvent) {
        let _ = self.events.lock().unwrap().send(event);
    }
}

impl AsyncHandler for RuntimeApi {
    async fn connection(self: Arc<Self>, mut socket: tokio::net::TcpStream) {
        let mut buffer = Vec::new();
        while let Some(request) = read_request(&mut socket, &mut buffer).await {
            if request.method == "GET" && request.path.ends_with("/invocation/next") {
                self.report(ApiEvent::NextRequested(Instant::now()));
                let Some(body) = self.queue.lock().await.recv().await else {
                    return;
                };
                let deadline = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_millis()
                    + 900_000;
                let deadline = deadline.to_string();
                let headers = [
                    ("Content-Type", "application/json"),
                    ("Lambda-Runtime-Aws-Request-Id", "bench-request"),
                    ("Lambda-Runtime-Deadline-Ms", deadline.as_str()),
                    ("Lambda-Runtime-Invoked-Function-Arn", FUNCTION_ARN),
                    (
                        "Lambda-Runtime-Trace-Id",
                        "Root=1-00000000-000000000000000000000000",
                    ),
                ];
                self.report(ApiEvent::Delivered(Instant::now()));
                if write_response(&mut socket, 200, &headers, body.as_bytes())
                    .await
                    .is_err()
                {
                    return;
                }
            } else {
                let at = Instant::now();
                let body = String::from_utf8_lossy(&request.body).into_owned();
                if request.path.ends_with("/response") {
                    self.report(ApiEvent::Response(at, body));
                } else {
                    self.report(ApiEvent::Error(format!(
                        "{} {}: {body}",
                        request.method, request.path
                    )));
                }
                if write_response(&mut socket, 202, &[], b"{}").await.is_err() {
                    return;
                }
            }
        }
    }
}

/// One function process with its own Runtime API.
struct Function {
    child: Child,
    queue: tokio::sync::mpsc::UnboundedSender<String>,
    events: mpsc::Receiver<ApiEvent>,
    spawned: Instant,
}

impl Function {
    fn start(dynamo_endpoint: &str, max_concurrency: usize) -> Self {
        let (listener, port) = bind();
        let (queue, queue_rx) = tokio::sync::mpsc::unbounded_channel();
        let (events_tx, events) = mpsc::channel();
        serve_on_thread(
            listener,
            RuntimeApi {
                queue: tokio::sync::Mutex::new(queue_rx),
                events: std::sync::Mutex::new(events_tx),
            },
        );
        let spawned = Instant::now();
        // BENCH_BINARY: another build of the function, e.g. one with symbols for a profiler.
        let binary = std::env::var("BENCH_BINARY")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_audit-receiver").into());
        let mut child = Command::new(binary)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("AWS_LAMBDA_RUNTIME_API", format!("127.0.0.1:{port}"))
            .env("AWS_LAMBDA_FUNCTION_NAME", "audit-receiver")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
            .env("AWS_ENDPOINT_URL", dynamo_endpoint)
            .env("AWS_ACCESS_KEY_ID", "bench")
            .env("AWS_SECRET_ACCESS_KEY", "bench")
            .env("AWS_SESSION_TOKEN", "bench")
            .env("AWS_REGION", "us-east-1")
            .env("TABLE_NAME", "AuditMessages")
            .env("MAX_CONCURRENCY", max_concurrency.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the release binary");
        // Drain the logs as Lambda's log agent does (a pipe, not /dev/null).
        let mut stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut sink = [0u8; 65536];
            while matches!(stdout.read(&mut sink), Ok(n) if n > 0) {}
        });
        Self {
            child,
            queue,
            events,
            spawned,
        }
    }

    /// Process start to the first `next` request.
    fn startup(&self) -> Duration {
        loop {
            match self
                .events
                .recv_timeout(Duration::from_secs(30))
                .expect("the function polled")
            {
                ApiEvent::NextRequested(at) => return at - self.spawned,
                ApiEvent::Error(e) => panic!("init error: {e}"),
                _ => {}
            }
        }
    }

    /// Delivers one event; returns the time from delivery to the response, and the response.
    fn invoke(&self, event: String) -> (Duration, String) {
        self.queue.send(event).unwrap();
        let mut delivered = None;
        loop {
            match self
                .events
                .recv_timeout(Duration::from_secs(600))
                .expect("a response")
            {
                ApiEvent::Delivered(at) => delivered = Some(at),
                ApiEvent::Response(at, body) => {
                    return (at - delivered.expect("delivered first"), body);
                }
                ApiEvent::Error(e) => panic!("invocation error: {e}"),
                ApiEvent::NextRequested(_) => {}
            }
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
        status_kb(self.child.id(), "VmHWM") as f64 / 1024.0
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn status_kb(pid: u32, field: &str) -> u64 {
    status_kb_line(&format!("/proc/{pid}/status"), field)
}

fn event_json(size: usize, seed: usize) -> String {
    serde_json::to_string(&support::event(size, seed)).unwrap()
}

fn failures(response: &str) -> usize {
    let value: serde_json::Value = serde_json::from_str(response).expect("a JSON response");
    value["batchItemFailures"]
        .as_array()
        .map_or(usize::MAX, Vec::len)
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// The Python peer's figures, from benches/peer/bench.py, or why there are none.
fn run_peer(
    scenario: &str,
    endpoint: &str,
    event_file: &Path,
    repeat: usize,
) -> Result<serde_json::Value, String> {
    let python = std::env::var("PEER_PYTHON").unwrap_or_else(|_| ".venv/bin/python".into());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(root.join(&python))
        .arg(root.join("benches/peer/bench.py"))
        .args([scenario, endpoint])
        .arg(event_file)
        .arg(repeat.to_string())
        .env("AWS_ACCESS_KEY_ID", "bench")
        .env("AWS_SECRET_ACCESS_KEY", "bench")
        .env("AWS_SESSION_TOKEN", "bench")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("TABLE_NAME", "AuditMessages")
        .env("POWERTOOLS_SERVICE_NAME", "audit-receiver-peer")
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr)
            .lines()
            .last()
            .unwrap_or("failed")
            .to_owned());
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("peer output: {e}"))
}

struct Row {
    figure: String,
    ours: String,
    peer: String,
    limit: String,
    ratio: String,
    target: String,
}

/// `--cpu-only`: one 10,000-record batch at 0 ms RTT, for a profiler (`perf record -g -- ...`).
fn cpu_only(endpoint: &str) {
    let function = Function::start(endpoint, 32);
    function.startup();
    function.invoke(event_json(100, 3));
    let before = function.cpu();
    let (wall, _) = function.invoke(event_json(10_000, 4));
    let cpu = function.cpu() - before;
    println!(
        "10000 records: {:.1} µs CPU per record, wall {wall:?}",
        cpu.as_secs_f64() * 1e6 / 10_000.0
    );
}

fn main() {
    // `cargo bench` passes --bench; a test runner listing or running targets does not.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let work = root.join("target/bench");
    std::fs::create_dir_all(&work).unwrap();

    let dynamo = Arc::new(FakeDynamo {
        rtt_ms: AtomicU64::new(0),
        requests: AtomicUsize::new(0),
    });
    let (listener, port) = bind();
    {
        let handler = FakeDynamoHandle(dynamo.clone());
        serve_on_thread(listener, handler);
    }
    let endpoint = format!("http://127.0.0.1:{port}");
    let set_rtt = |ms: u64| dynamo.rtt_ms.store(ms, Ordering::Relaxed);
    if std::env::args().any(|a| a == "--cpu-only") {
        return cpu_only(&endpoint);
    }
    let rtt = Duration::from_millis(RTT_MS);
    let mut rows: Vec<Row> = Vec::new();
    let mut notes: Vec<String> = Vec::new();

    // --- Start-up: process start to the first request for an event.
    set_rtt(0);
    let startups: Vec<Duration> = (0..if quick { 5 } else { 20 })
        .map(|_| Function::start(&endpoint, 32).startup())
        .collect();
    let startup = median(startups);
    let peer_startup = {
        let started = Instant::now();
        let status = Command::new(root.join(".venv/bin/python"))
            .args([
                "-c",
                "import sys; sys.path.insert(0, 'benches/peer'); import handler",
            ])
            .current_dir(&root)
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .env("TABLE_NAME", "AuditMessages")
            .status();
        status
            .ok()
            .filter(|s| s.success())
            .map(|_| started.elapsed())
    };
    rows.push(Row {
        figure: "start-up: process start → first `next` (median of runs)".into(),
        ours: format!("{:.1} ms", startup.as_secs_f64() * 1e3),
        peer: peer_startup.map_or("n/a".into(), |d| {
            format!("{:.0} ms (imports only)", d.as_secs_f64() * 1e3)
        }),
        limit: "—".into(),
        ratio: peer_startup.map_or("".into(), |p| {
            format!("{:.0}× faster", p.as_secs_f64() / startup.as_secs_f64())
        }),
        target: format!("≤ 30 ms: {}", pass(startup <= Duration::from_millis(30))),
    });

    // --- Cold start: the first batch after init, against the injected round trip.
    set_rtt(RTT_MS);
    let function = Function::start(&endpoint, 32);
    function.startup();
    let requests_before = dynamo.requests.load(Ordering::Relaxed);
    let (cold, response) = function.invoke(event_json(10, 0));
    assert_eq!(failures(&response), 0, "{response}");
    let (warm, _) = function.invoke(event_json(10, 1));
    drop(function);
    notes.push(format!(
        "First batch of 10 after a cold start: {:.0} ms ({:.2} RTT); the next batch: {:.0} ms ({:.2} RTT). Requests during the first batch: {}.",
        cold.as_secs_f64() * 1e3,
        cold.as_secs_f64() / rtt.as_secs_f64(),
        warm.as_secs_f64() * 1e3,
        warm.as_secs_f64() / rtt.as_secs_f64(),
        dynamo.requests.load(Ordering::Relaxed) - requests_before - 10
    ));

    // --- Batch latency in round trips, MAX_CONCURRENCY 32.
    let sizes: &[usize] = if quick {
        &[10, 100, 1_000]
    } else {
        &[10, 100, 1_000, 10_000]
    };
    let function = Function::start(&endpoint, 32);
    function.startup();
    function.invoke(event_json(10, 2)); // connections warm, as in a warm Lambda
    for (n, &size) in sizes.iter().enumerate() {
        let runs = if size <= 100 { 5 } else { 1 };
        let latencies: Vec<Duration> = (0..runs)
            .map(|run| {
                let (latency, response) = function.invoke(event_json(size, 100 + n * 10 + run));
                assert_eq!(failures(&response), 0);
                latency
            })
            .collect();
        let latency = median(latencies);
        let in_rtt = latency.as_secs_f64() / rtt.as_secs_f64();
        let ideal = size.div_ceil(32) as f64;
        let event_file = work.join(format!("event-{size}.json"));
        std::fs::write(&event_file, event_json(size, 900 + n)).unwrap();
        let peer = if size <= 100 {
            run_peer("latency", &endpoint, &event_file, 3).ok()
        } else {
            None
        };
        let peer_rtt = peer
            .as_ref()
            .and_then(|p| p["seconds"].as_f64())
            .map(|s| s / rtt.as_secs_f64());
        let target = match size {
            10 => format!("≤ 1.6 RTT: {}", pass(in_rtt <= 1.6)),
            100 => format!("≤ {:.1} RTT: {}", 1.3 * ideal, pass(in_rtt <= 1.3 * ideal)),
            _ => "reported".into(),
        };
        rows.push(Row {
            figure: format!("batch of {size}, {RTT_MS} ms RTT: latency"),
            ours: format!("{:.0} ms = {in_rtt:.2} RTT", latency.as_secs_f64() * 1e3),
            peer: peer_rtt.map_or(format!("{size} RTT (sequential)"), |p| {
                format!("{p:.2} RTT")
            }),
            limit: format!("{ideal:.0} RTT (⌈{size}/32⌉)"),
            ratio: format!(
                "{:.2}× the limit; {:.0}× faster than sequential",
                in_rtt / ideal,
                size as f64 / in_rtt
            ),
            target,
        });
    }
    drop(function);

    // --- CPU per record, 10,000 records, an endpoint that answers at once.
    set_rtt(0);
    let size = if quick { 2_000 } else { 10_000 };
    let function = Function::start(&endpoint, 32);
    function.startup();
    function.invoke(event_json(100, 3));
    let before = function.cpu();
    let (wall, response) = function.invoke(event_json(size, 4));
    let cpu = function.cpu() - before;
    assert_eq!(failures(&response), 0);
    let rss_big = function.peak_rss_mb();
    drop(function);
    let ours_us = cpu.as_secs_f64() * 1e6 / size as f64;
    let event_file = work.join(format!("event-cpu-{size}.json"));
    std::fs::write(&event_file, event_json(size, 5)).unwrap();
    let peer = run_peer("cpu", &endpoint, &event_file, 1);
    let peer_us = peer
        .as_ref()
        .ok()
        .and_then(|p| p["cpu_seconds"].as_f64())
        .map(|s| s * 1e6 / size as f64);
    if let Err(e) = &peer {
        notes.push(format!("Peer CPU run failed: {e}"));
    }
    rows.push(Row {
        figure: format!("CPU per record incl. the SDK call ({size} records, 0 ms RTT)"),
        ours: format!(
            "{ours_us:.1} µs (batch wall {:.0} ms)",
            wall.as_secs_f64() * 1e3
        ),
        peer: peer_us.map_or("n/a".into(), |p| format!("{p:.0} µs")),
        limit: "—".into(),
        ratio: peer_us.map_or("".into(), |p| format!("{:.3} of the peer", ours_us / p)),
        target: peer_us.map_or("peer missing".into(), |p| {
            format!("≤ 0.1 of the peer: {}", pass(ours_us <= p / 10.0))
        }),
    });

    // --- Peak RSS.
    let function = Function::start(&endpoint, 32);
    function.startup();
    function.invoke(event_json(10, 6));
    let rss_small = function.peak_rss_mb();
    drop(function);
    let small_file = work.join("event-10.json");
    let peer_small = run_peer("rss", &endpoint, &small_file, 1)
        .ok()
        .and_then(|p| p["max_rss_mb"].as_f64());
    let peer_big = peer.as_ref().ok().and_then(|p| p["max_rss_mb"].as_f64());
    rows.push(Row {
        figure: "peak RSS, batch of 10".into(),
        ours: format!("{rss_small:.1} MB"),
        peer: peer_small.map_or("n/a".into(), |p| format!("{p:.0} MB")),
        limit: "—".into(),
        ratio: peer_small.map_or("".into(), |p| format!("{:.2} of the peer", rss_small / p)),
        target: format!("≤ 20 MB: {}", pass(rss_small <= 20.0)),
    });
    rows.push(Row {
        figure: format!("peak RSS, batch of {size}"),
        ours: format!("{rss_big:.1} MB"),
        peer: peer_big.map_or("n/a".into(), |p| format!("{p:.0} MB")),
        limit: "—".into(),
        ratio: peer_big.map_or("".into(), |p| format!("{:.2} of the peer", rss_big / p)),
        target: format!("≤ 64 MB: {}", pass(rss_big <= 64.0)),
    });

    // --- Package: the arm64 zip from `cargo lambda build --release --arm64 --output-format zip`.
    let zip = root.join("target/lambda/audit-receiver/bootstrap.zip");
    let zip_mb = std::fs::metadata(&zip)
        .ok()
        .map(|m| m.len() as f64 / 1_048_576.0);
    rows.push(Row {
        figure: "arm64 package, zipped".into(),
        ours: zip_mb.map_or("not built (make build-zip)".into(), |mb| {
            format!("{mb:.2} MB")
        }),
        peer: "—".into(),
        limit: "—".into(),
        ratio: "".into(),
        target: zip_mb.map_or("not measured".into(), |mb| {
            format!("≤ 5 MB: {}", pass(mb <= 5.0))
        }),
    });

    let table = render(&rows);
    println!("{table}");
    for note in &notes {
        println!("- {note}");
    }
    let cpu_table = std::fs::read_to_string(work.join("cpu.md")).unwrap_or_default();
    let findings = std::fs::read_to_string(root.join("benches/notes.md")).unwrap_or_default();
    write_report(
        &root.join("BENCHMARKS.md"),
        &table,
        &notes,
        &cpu_table,
        &findings,
        quick,
    );
}

/// Wraps the shared handler so that the server thread owns an `Arc`.
struct FakeDynamoHandle(Arc<FakeDynamo>);

impl AsyncHandler for FakeDynamoHandle {
    async fn connection(self: Arc<Self>, socket: tokio::net::TcpStream) {
        self.0.clone().connection(socket).await
    }
}

fn pass(ok: bool) -> &'static str {
    if ok { "**met**" } else { "**NOT met**" }
}

fn render(rows: &[Row]) -> String {
    let mut out = String::from(
        "| figure | audit-receiver | peer (Powertools + boto3) | limit | ratio | target |\n",
    );
    out.push_str("| --- | ---: | ---: | ---: | --- | --- |\n");
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.figure, r.ours, r.peer, r.limit, r.ratio, r.target
        ));
    }
    out
}

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
    let rustc = Command::new("rustc")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    BTreeMap::from([
        ("cpu", cpu),
        ("cores", cores.to_string()),
        ("memory", format!("{memory} GiB")),
        ("rustc", rustc),
    ])
}

fn status_kb_line(file: &str, field: &str) -> u64 {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn write_report(
    path: &Path,
    table: &str,
    notes: &[String],
    cpu_table: &str,
    findings: &str,
    quick: bool,
) {
    let machine = machine()
        .iter()
        .map(|(k, v)| format!("- {k}: {v}"))
        .collect::<Vec<_>>()
        .join("\n");
    let notes = notes
        .iter()
        .map(|n| format!("- {n}"))
        .collect::<Vec<_>>()
        .join("\n");
    let mode = if quick {
        " (quick mode: smaller sizes)"
    } else {
        ""
    };
    let text = format!(
        "# Benchmarks\n\nWritten by `make bench`{mode}; every number below comes from one run of it on this machine.\n\n\
         ## Machine\n\n{machine}\n\n\
         ## I/O figures (`cargo bench --bench load`)\n\n\
         The real release binary (`target/release/audit-receiver`) runs against a local Lambda Runtime API and a \
         local DynamoDB endpoint that answers every PutItem after a fixed injected round trip (RTT). The peer is \
         `benches/peer/handler.py`: Powertools for AWS Lambda's `BatchProcessor` with a boto3 conditional `put_item` \
         (ALL_OLD), the same events, the same endpoint, called in-process (no Runtime API, which favours the peer). \
         CPU is the function process's scheduler time (all threads) during the batch; RSS is the process's peak \
         (VmHWM). The limit for a batch is ⌈n / MAX_CONCURRENCY⌉ round trips.\n\n{table}\n{notes}\n\n\
         ## CPU path without I/O (`cargo bench --bench cpu`)\n\n\
         Median of repeated runs: parse and validate the bodies; the same plus building the item and its \
         DynamoDB attributes; the whole batch (dedupe, units, bounded concurrency, outcomes, response) with a \
         store that maps the item and answers at once.\n\n{cpu_table}\n\n{findings}"
    );
    std::fs::write(path, text).unwrap();
    println!("wrote {}", path.display());
}
