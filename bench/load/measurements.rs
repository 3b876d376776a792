//! Owns the measurements: start-up, latency, CPU per record, sustained runs per memory size,
//! gathered in one `Report`. Must not know how the report is written.

use super::*;

pub(crate) struct Bench {
    pub(crate) programs: Programs,
    pub(crate) endpoints: Endpoints,
    pub(crate) work: PathBuf,
    pub(crate) quick: bool,
}

impl Bench {
    pub(crate) fn launch<'a>(
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
            attested: true,
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
    pub(crate) fn cpu_per_record(
        &self,
        who: Contender,
        tls: bool,
        size: usize,
    ) -> Result<(f64, f64), String> {
        self.endpoints.set_rtt(0);
        match who {
            Contender::Ours | Contender::Naive => {
                let launch = self.launch(who, tls, None)?;
                function_cpu_per_record(&launch, size)
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
    pub(crate) fn latency(
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

/// Median batch latencies by contender and batch size.
type Latencies = BTreeMap<(Contender, usize), Result<Duration, String>>;

/// One memory size's runs, or why the size was skipped (no cgroup).
type ShareFigures = Result<BTreeMap<Contender, Result<Run, String>>, String>;

/// Everything one run measured.
pub(crate) struct Report {
    pub(crate) startup: Duration,
    pub(crate) startup_plain: Duration,
    pub(crate) peer_startup: BTreeMap<Contender, Result<Duration, String>>,
    pub(crate) cold_first_batch: Duration,
    pub(crate) warm_batch: Duration,
    pub(crate) cold_requests: usize,
    pub(crate) cpu: BTreeMap<(Contender, bool), Result<(f64, f64), String>>,
    pub(crate) cpu_sizes: BTreeMap<Contender, usize>,
    /// Ours with and without the attestation, by TLS.
    pub(crate) attestation: BTreeMap<bool, Result<AttestationCost, String>>,
    pub(crate) latency: BTreeMap<(Contender, usize), Result<Duration, String>>,
    /// Batches of 10 and 100 at 50 ms RTT with the template's default memory size's CPU share.
    pub(crate) latency_default_memory: Result<Latencies, String>,
    pub(crate) sizes: Vec<usize>,
    pub(crate) shares: BTreeMap<u32, ShareFigures>,
    pub(crate) rss_10: f64,
    pub(crate) at_once: Vec<(usize, Run)>,
    pub(crate) zip_mb: Option<f64>,
    pub(crate) cpu_table: String,
}

/// Batches of 10 and 100 at the latency RTT, over TLS, with the CPU share of the template's
/// default memory size: ours, the naive Rust loop and Powertools TypeScript (Python writes one
/// record after another, 100 RTT). Err when no cgroup can be made.
pub(crate) fn latency_at_default_memory(bench: &Bench) -> Result<Latencies, String> {
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

pub(crate) fn measure(bench: &Bench) -> Report {
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
            let attested = endpoints.attested();
            let figure = bench.cpu_per_record(who, tls, size);
            eprintln!(
                "cpu {} tls {tls}: {figure:?}; requests with an attested item: {}",
                who.name(),
                endpoints.attested() - attested
            );
            cpu.insert((who, tls), figure);
        }
    }
    // --- What the attestation adds to ours: with and without it, in turns.
    let mut attestation = BTreeMap::new();
    for tls in [false, true] {
        let runs = if quick { 2 } else { 5 };
        let figure = bench.attestation_cost(tls, cpu_sizes[&Contender::Ours], runs);
        eprintln!("attestation tls {tls}: {figure:?}");
        attestation.insert(tls, figure);
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
        attestation,
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

/// CPU per record (the median of three batches of `size`, each of its own records: one alone
/// varies by ±15 % from run to run on a shared machine) and peak RSS of a warm function.
fn function_cpu_per_record(launch: &Launch, size: usize) -> Result<(f64, f64), String> {
    let mut function = Function::start(launch);
    function.startup();
    function.invoke(event_json(100, 3)); // warm, as in a warm Lambda
    let mut per_record = Vec::with_capacity(3);
    let mut peak_rss = f64::NAN;
    for seed in [4, 40, 41] {
        let before = function.cpu();
        let (_, response) = function.invoke(event_json(size, seed));
        let cpu = function.cpu() - before;
        if failures(&response) != 0 {
            return Err(format!("{} records failed", failures(&response)));
        }
        per_record.push(cpu.as_secs_f64() * 1e6 / size as f64);
        // The high-water mark of one such batch (the allocator keeps what later ones freed).
        if peak_rss.is_nan() {
            peak_rss = function.peak_rss_mb();
        }
    }
    per_record.sort_by(f64::total_cmp);
    Ok((per_record[1], peak_rss))
}

impl Bench {
    /// What the attestation adds to the function's CPU per record in a batch of `size` at 0 ms
    /// RTT: `runs` functions with it and as many without, one after the other in turns (so
    /// that the machine's drift falls on both), and the least of each.
    pub(crate) fn attestation_cost(
        &self,
        tls: bool,
        size: usize,
        runs: usize,
    ) -> Result<AttestationCost, String> {
        self.endpoints.set_rtt(0);
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            for attested in [true, false] {
                let launch = Launch {
                    attested,
                    ..self.launch(Contender::Ours, tls, None)?
                };
                let (cpu, _) = function_cpu_per_record(&launch, size)?;
                if attested { &mut with } else { &mut without }.push(cpu);
            }
        }
        eprintln!("CPU per record with the attestation {with:.1?}, without {without:.1?}");
        Ok(AttestationCost {
            attested: least(&with),
            plain: least(&without),
        })
    }
}

/// The function's CPU per record with and without the attestation (µs): the least of each, the
/// run least disturbed by the machine's other work (a shared machine only ever adds to it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttestationCost {
    pub(crate) attested: f64,
    pub(crate) plain: f64,
}

impl AttestationCost {
    /// What the attestation adds, as a share of the function's CPU per record without it.
    pub(crate) fn share(&self) -> f64 {
        (self.attested - self.plain) / self.plain
    }
}

fn least(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}
