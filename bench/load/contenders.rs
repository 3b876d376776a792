//! Owns the contenders and how each runs: the CPU share of a memory size (a cgroup), the
//! programs, a function process and what it measured. Must not know the report's tables.

use super::*;

// ---------------------------------------------------------------------------------------------
// The CPU share of a Lambda memory size: a cgroup (v1 cpu controller) with a CFS quota of
// memory/1,769 of one core per period.

pub(crate) struct CpuShare {
    pub(crate) memory_mb: u32,
    dir: PathBuf,
}

impl CpuShare {
    pub(crate) fn create(memory_mb: u32) -> Result<Self, String> {
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

pub(crate) fn command_in(share: Option<&CpuShare>, program: &Path) -> Command {
    match share {
        Some(share) => share.command(program),
        None => Command::new(program),
    }
}

// ---------------------------------------------------------------------------------------------
// The contenders.

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum Contender {
    Ours,
    Naive,
    Node,
    Python,
}

pub(crate) const CONTENDERS: [Contender; 4] = [
    Contender::Ours,
    Contender::Naive,
    Contender::Node,
    Contender::Python,
];

impl Contender {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Contender::Ours => "audit-receiver",
            Contender::Naive => "naive Rust (join_all)",
            Contender::Node => "Powertools TypeScript",
            Contender::Python => "Powertools Python",
        }
    }
}

/// Where the programs are.
pub(crate) struct Programs {
    pub(crate) root: PathBuf,
    pub(crate) ours: PathBuf,
    pub(crate) naive: Result<PathBuf, String>,
    pub(crate) python: PathBuf,
    pub(crate) node_peer: PathBuf,
}

impl Programs {
    pub(crate) fn find(root: &Path) -> Self {
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
pub(crate) struct Function {
    child: Child,
    pub(crate) api: RuntimeApi,
    pub(crate) spawned: Instant,
}

pub(crate) struct Launch<'a> {
    pub(crate) binary: &'a Path,
    pub(crate) endpoint: &'a str,
    pub(crate) ca_file: &'a Path,
    pub(crate) share: Option<&'a CpuShare>,
    /// Lambda Managed Instances' setting; None leaves it unset (a classic environment).
    pub(crate) at_once: Option<usize>,
    /// Every item attested, as deployed (template.yaml sets `ATTESTATION_KEY_ID`); false
    /// measures the function without it (what the attestation costs). Ignored by the peers.
    pub(crate) attested: bool,
}

impl Function {
    pub(crate) fn start(launch: &Launch) -> Self {
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
        if launch.attested {
            command.env("ATTESTATION_KEY_ID", BENCH_ATTESTATION_KEY);
        }
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
    pub(crate) fn startup(&mut self) -> Duration {
        let at = self
            .api
            .first_next(Duration::from_secs(60))
            .expect("the function polled");
        at - self.spawned
    }

    /// Delivers one event; delivery to response, and the response.
    pub(crate) fn invoke(&mut self, event: String) -> (Duration, String) {
        self.api
            .invoke(event, Duration::from_secs(600))
            .expect("a response")
    }

    /// Batches fed back to back for `budget`, `ahead` queued at any time (1 invocation at a
    /// time in a classic environment: the next event is there as soon as the last is
    /// answered). Records per second from the first delivery to the last response; the median
    /// latency of a batch; CPU per record.
    pub(crate) fn sustained(
        &mut self,
        event: &str,
        records: usize,
        ahead: usize,
        budget: Duration,
    ) -> Run {
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
    pub(crate) fn cpu(&self) -> Duration {
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
    pub(crate) fn peak_rss_mb(&self) -> f64 {
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
pub(crate) struct Run {
    pub(crate) records_per_second: f64,
    pub(crate) batch_latency: Duration,
    pub(crate) cpu_per_record_us: f64,
    pub(crate) peak_rss_mb: f64,
}
