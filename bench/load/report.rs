//! Owns what a run writes: BENCHMARKS.md's text, its charts, how it was measured and on what
//! machine. Must not know how a figure was measured.

use super::*;

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

    pub(crate) fn render(&self, bench: &Bench) -> String {
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
             store that builds the request body and answers at once; the whole batch again with every item \
             attested (`audit_receiver::attest`: each item's attested bytes and leaf hash, one Ed25519 signature \
             per 16 items, the inclusion paths, the `attestation` attribute in the request body). What the \
             attestation costs: \"Attestation: what it costs the receiver\" below.\n\n{}",
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
        // The goal: at the template's default memory, a batch of 100 in at most 2.5 RTT,
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
             the records. Peak RSS is the process's high-water mark after that batch. \
             audit-receiver attests every item, as deployed (`ATTESTATION_KEY_ID`: the stand-in \
             answers its one KMS Sign at start).\n\n\
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
        out.push_str(&self.attestation_paragraph());
        out
    }

    /// What the attestation adds to ours, measured with and without it in turns.
    fn attestation_paragraph(&self) -> String {
        let size = self.cpu_sizes[&Contender::Ours];
        let mut out = format!(
            "What the attestation adds (SPEC: at most 15 % CPU per record): audit-receiver with \
             and without `ATTESTATION_KEY_ID`, one after the other in turns, the least of each \
             (each run itself the median of three batches of {size}; a shared machine only ever \
             adds to a run's CPU):\n\n\
             | transport | without | with | adds |\n| --- | ---: | ---: | ---: |\n"
        );
        for (tls, figure) in &self.attestation {
            let name = if *tls { "TLS" } else { "plain HTTP" };
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} |",
                cell(figure, |c| format!("{:.1} µs", c.plain)),
                cell(figure, |c| format!("{:.1} µs", c.attested)),
                cell(figure, |c| format!(
                    "{:+.1} µs ({:+.0} %)",
                    c.attested - c.plain,
                    100.0 * c.share()
                )),
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

    pub(crate) fn charts(&self, root: &Path) {
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
