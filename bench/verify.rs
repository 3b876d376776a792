//! `auditctl verify` over an archive of N events (default 1,000,000) on moto's S3 and KMS, next to
//! the physical bound of the same work on the same cores: `sha256sum` over the same bytes, and
//! SHA-256 + gunzip + line count of them in this process.
//!
//! For each `--events` size, on a fresh moto server (127.0.0.1, a free port, its own process
//! group, killed with `killpg` from code when the run ends):
//!
//! 1. the archive bucket as the template defines it (versioning, Object Lock with a COMPLIANCE
//!    default retention) and a digest key (ECC_NIST_P256, SIGN_VERIFY);
//! 2. N synthetic events as the archiver writes them: items shaped as the receiver writes them
//!    (about 300 to 700 bytes as a line), `trail_line` of each, `gzip_lines` of `--per-object`
//!    lines, the archiver's own request (`objects::Encoded::request`: `x-amz-checksum-sha256`,
//!    user metadata `events`) created with `S3Bucket::put_if_absent` under an `ObjectKey` of kind
//!    Trail written inside its period; `--objects-per-period` objects a period, every tenth period
//!    (from the fifth) empty, so that the range grows with N and a period's load does not;
//! 3. the archiver's sealer (`seal::Sealer` with `KmsSigner`) run once after the last period, with
//!    no deadline: one digest per period, empty ones included;
//! 4. `auditctl verify --from <first period> --to <end of the last> --no-audit-event` (the release
//!    binary, `target/release/auditctl` or `$AUDITCTL`), exit 0 and its summary's event count = N
//!    required; its wall time, its CPU (user + sys) and peak RSS from `wait4`, moto's CPU meanwhile;
//! 5. every object version downloaded into `target/bench/verify/`, then `sha256sum` of the files
//!    (wall and CPU from `wait4`), and SHA-256 + gunzip + counting lines of the same bytes here, on
//!    one thread; and the sealer's extra work for the transparency log (gunzip, lines, leaf hashes,
//!    `TreeEdge` with its tiles) next to SHA-256 of the same lines, on one thread;
//! 6. with `--prove K`: `auditctl prove` of K events spread over the archive (found from their
//!    `--audit-time`, the table being empty as for expired items), its wall time and what it read
//!    (objects, bytes: its stderr), and `auditctl check-proof` of each proof with the key's PEM and
//!    no AWS configuration; with the log's PUTs and bytes per million events from the sealer's
//!    report. `--prove-only` skips verify and the bounds (the 10,000,000-event stand-in);
//! 7. with `--evidence`: `auditctl export --evidence` of the whole range (every period, no filter)
//!    into a directory, a `.zip` and a `.tar.gz`, each followed by `auditctl check-proof` of the
//!    bundle with the key's PEM and no AWS configuration (it must say OK, every event proven and
//!    the bundle complete): the wall time, CPU and peak RSS of each, moto's CPU during the export,
//!    the bundle's bytes against the events' own (the archived lines', which events.jsonl must hold
//!    exactly), by file for the directory and the `.zip`'s members. `--evidence-only` skips verify
//!    and the bounds.
//!
//! Prints one Markdown table row per size. moto (Python) serves every byte over loopback on the
//! same 2 cores, so its CPU is part of verify's wall time: auditctl's CPU per event is the figure
//! that transfers to S3.
//!
//! ```text
//! cargo build --release --bin auditctl
//! cargo bench -p audit-bench --bench verify -- [--events 100000,1000000] [--per-object 1000]
//!     [--objects-per-period 12] [--period 3600] [--bound-only] [--prove K] [--prove-only]
//!     [--evidence] [--evidence-only]
//! ```
//! (`make bench-verify` does both; `make bench-evidence` the bundles of 100,000 events.) `--bound-only` builds the archive and measures the bounds
//! without running auditctl.

#[path = "../crates/archiver/tests/support/moto.rs"]
mod moto;

#[path = "verify/archive.rs"]
mod archive;
#[path = "verify/bounds.rs"]
mod bounds;
#[path = "verify/commands.rs"]
mod commands;
#[path = "verify/evidence.rs"]
mod evidence;
#[path = "verify/usage.rs"]
mod usage;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use audit_archiver::budget::Budget;
use audit_archiver::encode::{gzip_lines, trail_line};
use audit_archiver::marker::{Confirmed, Marker, RunEntry, marker_key};
use audit_archiver::objects::Encoded;
use audit_archiver::seal::Sealer;
use audit_archiver::signer::kms::KmsSigner;
use audit_aws::s3::memory::MemoryBucket;
use audit_aws::s3::{Bucket, Created};
use audit_model::archive::{ObjectKind, PeriodLength, SEAL_DELAY};
use audit_model::digest::hex;
use audit_model::note::origin;
use audit_model::tlog::{TreeEdge, leaf_hash};
use aws_lc_rs::digest::{SHA256, digest};
use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use flate2::read::GzDecoder;
use futures::{StreamExt, TryStreamExt};
use moto::{BUCKET, Moto};
use serde_json::{Map, Value, json};

use archive::*;
use bounds::*;
use commands::*;
use evidence::*;
use usage::*;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The first period's start: 2026-10-01T00:00:00Z, in the past (verify treats the periods as due).
const FIRST_PERIOD: i64 = 1_790_812_800;
/// The first event's stream sequence number (DynamoDB's are about this long).
const FIRST_SEQUENCE: u128 = 4_421_584_500_000_000_017_000_000_000;
/// Every tenth period, from the fifth, has no object (its digest lists none).
const EMPTY_EVERY: u64 = 10;
const EMPTY_AT: u64 = 4;
/// The sealer's log CPU rows, printed after the verify table.
static LOG_ROWS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
/// The prove table's rows, printed after the verify table.
static PROVE_ROWS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
/// Object writes and downloads in flight.
const CONCURRENCY: usize = 8;

#[derive(Debug, Clone)]
struct Options {
    sizes: Vec<u64>,
    per_object: u64,
    objects_per_period: u64,
    period: PeriodLength,
    bound_only: bool,
    /// Events proved with `auditctl prove` (and checked with `check-proof`) after sealing.
    prove: u64,
    /// No verify run and no bound (the 10,000,000-event stand-in for `prove`).
    prove_only: bool,
    /// Evidence bundles of the whole range exported and checked (`evidence.rs`).
    evidence: bool,
    /// The bundles only: no verify run and no bound.
    evidence_only: bool,
    /// moto's own `moto_server` (or `$MOTO_SERVER`), without bench/moto_server.py's listing fix.
    moto_as_is: bool,
}

impl Options {
    fn parse() -> Self {
        let args: Vec<String> = std::env::args().collect();
        let value = |name: &str| {
            args.iter()
                .position(|a| a == name)
                .and_then(|i| args.get(i + 1))
                .cloned()
        };
        let number = |name: &str, default: u64| {
            value(name).map_or(default, |v| {
                v.replace('_', "")
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}: not a number: {v}"))
            })
        };
        let sizes = value("--events")
            .unwrap_or_else(|| "1000000".into())
            .split(',')
            .map(|n| {
                n.replace('_', "")
                    .parse()
                    .unwrap_or_else(|_| panic!("--events: not a number: {n}"))
            })
            .collect();
        let seconds = u32::try_from(number("--period", 3600)).expect("--period fits u32");
        let options = Self {
            sizes,
            per_object: number("--per-object", 1000),
            objects_per_period: number("--objects-per-period", 12),
            period: PeriodLength::new(seconds)
                .unwrap_or_else(|| panic!("--period {seconds}: 10 to 86400, dividing a day")),
            bound_only: args.iter().any(|a| a == "--bound-only"),
            prove: number("--prove", 0),
            prove_only: args.iter().any(|a| a == "--prove-only"),
            moto_as_is: args.iter().any(|a| a == "--moto-as-is"),
            evidence: args
                .iter()
                .any(|a| a == "--evidence" || a == "--evidence-only"),
            evidence_only: args.iter().any(|a| a == "--evidence-only"),
        };
        assert!(options.per_object > 0 && options.objects_per_period > 0);
        assert!(options.sizes.iter().all(|&n| n > 0), "--events: at least 1");
        assert!(
            !(options.evidence && options.prove_only),
            "--evidence needs the archive on moto: not with --prove-only"
        );
        options
    }
}

fn header() {
    println!(
        "| events | objects | periods (empty) | gzip MB (raw MB) | verify wall | events/s | auditctl CPU | CPU µs/event | peak RSS | moto CPU | sha256sum wall | sha256sum MB/s | verify ÷ sha256sum | SHA-256 + gunzip + count, one thread | auditctl CPU ÷ that |"
    );
    println!(
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
}

async fn run(options: &Options, events: u64, auditctl: &Path, work: &Path) {
    let plan = Plan::new(events, options);
    let period = options.period;
    let empty = plan.periods
        - plan
            .objects
            .iter()
            .map(|o| o.written_at.timestamp())
            .map(|t| {
                period
                    .period_of(DateTime::from_timestamp(t, 0).expect("a time"))
                    .start
            })
            .collect::<std::collections::BTreeSet<_>>()
            .len() as u64;
    eprintln!(
        "{events} events: {} objects of up to {} events over {} periods of {} s ({empty} empty)",
        plan.objects.len(),
        options.per_object,
        plan.periods,
        period.seconds()
    );
    let moto = Moto::start();
    moto.create_bucket(BUCKET).await;
    let key_arn = moto.create_digest_key().await;
    if options.prove_only {
        return prove_standin(options, &moto, &key_arn, &plan, events, auditctl, work).await;
    }
    // The items as the receiver writes them: each attested (verify checks them with the key).
    let attestation_key = moto.create_digest_key().await;
    let attesting = std::sync::Arc::new(Attesting::new(&moto, &attestation_key).await);
    let written = write_archive(&moto, &plan, period, Some(attesting)).await;
    eprintln!(
        "  written in {:.1} s: {:.1} MB gzip, {:.1} MB of lines ({:.0} bytes a line, {:.0} gzip bytes an event)",
        written.seconds,
        written.bytes as f64 / 1e6,
        written.raw_bytes as f64 / 1e6,
        written.raw_bytes as f64 / events as f64,
        written.bytes as f64 / events as f64
    );
    let sealed = seal(&moto, &key_arn, &plan, period).await;
    eprintln!(
        "  sealed {} digests in {:.1} s; the log: {} leaves, {} PUTs, {:.1} MB ({:.0} PUTs and {:.1} MB per million events)",
        sealed.digests,
        sealed.seconds,
        sealed.leaves,
        sealed.log_puts,
        sealed.log_bytes as f64 / 1e6,
        sealed.log_puts as f64 * 1e6 / events as f64,
        sealed.log_bytes as f64 / events as f64
    );
    assert_eq!(sealed.digests as u64, plan.periods, "one digest per period");
    assert_eq!(sealed.leaves, events, "a leaf per event");
    if options.prove > 0 {
        let proved = run_prove(
            auditctl,
            &moto,
            &key_arn,
            &plan,
            period,
            options.prove,
            work,
        )
        .await;
        push_prove_row(events, &sealed, &proved);
    }
    if options.evidence {
        run_evidence(
            auditctl,
            &moto,
            &key_arn,
            &plan,
            period,
            events,
            written.raw_bytes,
            work,
        )
        .await;
    }
    if options.prove_only || options.evidence_only {
        return;
    }

    // Without the attestation key first (the attestations not checked), then with it: its cost.
    let unattested = (!options.bound_only)
        .then(|| run_verify(auditctl, &moto, &key_arn, None, &plan, period, events));
    if let Some(v) = &unattested {
        eprintln!(
            "  without ATTESTATION_KEY_ID: verify {:.2} s wall, {:.2} s CPU, peak RSS {:.1} MB",
            v.wall,
            v.usage.cpu.as_secs_f64(),
            v.usage.max_rss_kib as f64 / 1024.0
        );
    }
    let verified = (!options.bound_only).then(|| {
        run_verify(
            auditctl,
            &moto,
            &key_arn,
            Some(&attestation_key),
            &plan,
            period,
            events,
        )
    });
    if let Some(v) = &verified {
        for line in v.summary.lines() {
            eprintln!("  auditctl: {line}");
        }
    }
    let started = Instant::now();
    let bodies = download(&moto).await;
    eprintln!(
        "  downloaded {} objects in {:.1} s",
        bodies.len(),
        started.elapsed().as_secs_f64()
    );
    if let Some((cpu, hwm)) = moto_usage() {
        eprintln!(
            "  moto: {:.1} s CPU in all, peak RSS {:.0} MB",
            cpu.as_secs_f64(),
            hwm as f64 / 1024.0
        );
    }
    drop(moto);
    assert_eq!(bodies.len(), plan.objects.len());
    let bound = bound(&bodies, &work.join("verify"), events);
    assert_eq!(bound.bytes, written.bytes);
    drop(bodies);

    let mb = bound.bytes as f64 / 1e6;
    let sha_rate = mb / bound.sha256sum_wall;
    let in_process = format!(
        "{:.2} s CPU ({:.2} s wall, {:.2} µs/event)",
        bound.in_process_cpu.as_secs_f64(),
        bound.in_process_wall,
        bound.in_process_cpu.as_secs_f64() * 1e6 / events as f64
    );
    let cells = match &verified {
        Some(v) => {
            let cpu = v.usage.cpu.as_secs_f64();
            [
                format!("{:.2} s", v.wall),
                format!("{:.0}", events as f64 / v.wall),
                format!("{cpu:.2} s"),
                format!("{:.2}", cpu * 1e6 / events as f64),
                format!("{:.1} MB", v.usage.max_rss_kib as f64 / 1024.0),
                v.moto_cpu
                    .map_or("n/a".into(), |c| format!("{:.2} s", c.as_secs_f64())),
                format!("{:.3} s", bound.sha256sum_wall),
                format!("{sha_rate:.0}"),
                format!("{:.0}×", v.wall / bound.sha256sum_wall),
                in_process,
                format!("{:.1}×", cpu / bound.in_process_cpu.as_secs_f64()),
            ]
        }
        None => {
            let skipped = || "—".to_owned();
            [
                skipped(),
                skipped(),
                skipped(),
                skipped(),
                skipped(),
                skipped(),
                format!("{:.3} s", bound.sha256sum_wall),
                format!("{sha_rate:.0}"),
                skipped(),
                in_process,
                skipped(),
            ]
        }
    };
    println!(
        "| {events} | {} | {} ({empty}) | {mb:.1} ({:.1}) | {} |",
        bound.files,
        plan.periods,
        written.raw_bytes as f64 / 1e6,
        cells.join(" | ")
    );
    eprintln!(
        "  sha256sum: {:.3} s wall, {:.3} s CPU over {} files",
        bound.sha256sum_wall,
        bound.sha256sum_cpu.as_secs_f64(),
        bound.files
    );
}

/// An executable that starts moto's server through bench/moto_server.py (ListObjectVersions
/// without moto's deep copy of every stored body; the script says why) with the project's .venv.
fn moto_launcher(root: &Path, work: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let python = root.join(".venv/bin/python3");
    assert!(python.exists(), "{} not found: make venv", python.display());
    std::fs::create_dir_all(work).expect("target/bench");
    let launcher = work.join("verify-moto-server");
    let script = format!(
        "#!/bin/sh\nexec '{}' '{}' \"$@\"\n",
        python.display(),
        root.join("bench/moto_server.py").display()
    );
    std::fs::write(&launcher, script).expect("the moto launcher");
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755))
        .expect("the moto launcher's mode");
    launcher
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(MEASURE_CHILD) {
        measure_child(&args[2..]);
    }
    // `cargo bench` passes --bench; a test runner listing or running targets does not.
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    let options = Options::parse();
    // The workspace's root: this package is bench/.
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let work = root.join("target/bench");
    let auditctl = std::env::var_os("AUDITCTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/release/auditctl"));
    if !options.bound_only || options.evidence {
        assert!(
            auditctl.exists(),
            "{} not found: cargo build --release --bin auditctl (or --bound-only)",
            auditctl.display()
        );
    }
    if !options.moto_as_is {
        let launcher = moto_launcher(&root, &work);
        // SAFETY: no other thread runs yet (the runtime is built below); MotoServer::start reads
        // it.
        unsafe { std::env::set_var("MOTO_LAUNCHER", launcher) };
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    if !options.evidence_only {
        header();
    }
    for &events in &options.sizes {
        runtime.block_on(run(&options, events, &auditctl, &work));
    }
    let rows = LOG_ROWS.lock().unwrap_or_else(|e| e.into_inner());
    if !rows.is_empty() {
        println!();
        println!(
            "| events | sealing's extra CPU per event (gunzip, leaf hashes, tiles; one thread) | SHA-256 of the same lines (one thread) | ratio |"
        );
        println!("| ---: | ---: | ---: | ---: |");
        for row in rows.iter() {
            println!("{row}");
        }
    }
    drop(rows);
    let rows = PROVE_ROWS.lock().unwrap_or_else(|e| e.into_inner());
    if !rows.is_empty() {
        println!();
        println!(
            "| events | digests | sealing wall per event | log PUTs | log MB | log PUTs per 1M events | log MB per 1M events | prove median | prove max | prove read (the most) | check-proof median | proof bytes |"
        );
        println!(
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |"
        );
        for row in rows.iter() {
            println!("{row}");
        }
    }
    print_evidence();
    println!();
    println!(
        "moto (Python) serves every byte over loopback on the same {} cores, so its CPU is part of \
         verify's wall time; auditctl's CPU per event is the figure that transfers to S3. \
         sha256sum: the second of two runs over the same bytes as files in the page cache.",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
}
