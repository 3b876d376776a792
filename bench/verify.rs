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
//!    report. `--prove-only` skips verify and the bounds (the 10,000,000-event stand-in).
//!
//! Prints one Markdown table row per size. moto (Python) serves every byte over loopback on the
//! same 2 cores, so its CPU is part of verify's wall time: auditctl's CPU per event is the figure
//! that transfers to S3.
//!
//! ```text
//! cargo build --release --bin auditctl
//! cargo bench -p audit-bench --bench verify -- [--events 100000,1000000] [--per-object 1000]
//!     [--objects-per-period 12] [--period 3600] [--bound-only] [--prove K] [--prove-only]
//! ```
//! (`make bench-verify` does both.) `--bound-only` builds the archive and measures the bounds
//! without running auditctl.

#[path = "../crates/archiver/tests/support/moto.rs"]
mod moto;

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
use audit_model::tlog::{TreeEdge, leaf_hash};
use aws_lc_rs::digest::{SHA256, digest};
use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use flate2::read::GzDecoder;
use futures::{StreamExt, TryStreamExt};
use moto::{BUCKET, Moto};
use serde_json::{Map, Value, json};

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
        };
        assert!(options.per_object > 0 && options.objects_per_period > 0);
        assert!(options.sizes.iter().all(|&n| n > 0), "--events: at least 1");
        options
    }
}

/// Where each object goes: its index, events and the time it is written.
#[derive(Debug, Clone)]
struct Planned {
    index: u64,
    first_event: u64,
    events: u64,
    written_at: DateTime<Utc>,
}

/// The archive's layout for `events`: objects in order, `objects_per_period` to a period (every
/// tenth period empty), each written at its slot inside its period.
struct Plan {
    objects: Vec<Planned>,
    /// Periods from the first to the last non-empty one.
    periods: u64,
}

impl Plan {
    fn new(events: u64, options: &Options) -> Self {
        let length = i64::from(options.period.seconds());
        let slot = length
            / i64::try_from(options.objects_per_period)
                .unwrap_or(1)
                .max(1);
        let mut objects = Vec::new();
        let (mut period, mut in_period, mut first_event) = (0u64, 0u64, 0u64);
        while first_event < events {
            if period % EMPTY_EVERY == EMPTY_AT || in_period == options.objects_per_period {
                period += 1;
                in_period = 0;
                continue;
            }
            let start = FIRST_PERIOD + i64::try_from(period).unwrap_or(0) * length;
            let offset = (i64::try_from(in_period).unwrap_or(0) * slot + 1).min(length - 1);
            let count = options.per_object.min(events - first_event);
            objects.push(Planned {
                index: objects.len() as u64,
                first_event,
                events: count,
                written_at: DateTime::from_timestamp(start + offset, 0).expect("a time"),
            });
            first_event += count;
            in_period += 1;
        }
        Self {
            objects,
            periods: period + 1,
        }
    }

    fn end(&self, period: PeriodLength) -> i64 {
        FIRST_PERIOD + i64::try_from(self.periods).unwrap_or(0) * i64::from(period.seconds())
    }
}

/// One event's item as the receiver writes it, in DynamoDB's JSON, for event `i` of an object
/// written at `at`: distinct ids and times, text and fields of varied length.
fn item(i: u64, at: DateTime<Utc>, rng: &mut fastrand::Rng) -> Map<String, Value> {
    let uuid = |rng: &mut fastrand::Rng| {
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            rng.u32(..),
            rng.u16(..),
            rng.u16(..0x1000),
            rng.u16(..),
            rng.u64(..1 << 48)
        )
    };
    // The producer's time a few seconds before the write; received just before the write.
    let audit_time = at - chrono::Duration::milliseconds(rng.i64(1_000..30_000));
    let received = at - chrono::Duration::milliseconds(rng.i64(50..900));
    let time = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Millis, true);
    let actor = format!("user-{}", rng.u32(..500));
    let action = [
        "invoice.read",
        "invoice.update",
        "user.login",
        "report.export",
        "payment.refund",
    ][rng.usize(..5)];
    let resource = format!("invoice/{}", rng.u32(..100_000));
    let outcome = ["success", "success", "success", "failure", "denied"][rng.usize(..5)];
    let detail = [
        "",
        " from the billing console",
        " through the public API with a service token",
        " after a step-up authentication (second factor confirmed by the user's registered device)",
    ][rng.usize(..4)];
    let value = json!({
        "messageId": {"S": uuid(rng)},
        "auditTime": {"S": time(audit_time)},
        "auditBucket": {"S": format!("{}#{:02}", &time(audit_time)[..10], rng.u32(..32))},
        "auditText": {"S": format!("{actor} performed {action} on {resource}{detail} (event {i})")},
        "actor": {"S": actor},
        "actorKey": {"S": format!("{actor}#{}", rng.u32(..4))},
        "action": {"S": action},
        "actionKey": {"S": format!("{action}#{}", rng.u32(..4))},
        "resource": {"S": resource},
        "resourceKey": {"S": format!("{resource}#{}", rng.u32(..4))},
        "outcome": {"S": outcome},
        "sourceIp": {"S": format!("10.{}.{}.{}", rng.u8(..), rng.u8(..), rng.u8(..))},
        "receiveCount": {"N": "1"},
        "sqsMessageId": {"S": uuid(rng)},
        "sentAt": {"S": time(received - chrono::Duration::milliseconds(20))},
        "receivedAt": {"S": time(received)},
        "extra": {"M": {"amount": {"N": format!("{}.{:02}", rng.u32(..10_000), rng.u32(..100))},
                        "currency": {"S": "EUR"}}}
    });
    value.as_object().cloned().unwrap_or_default()
}

/// One object's bytes, its key and request, as the archiver makes them, the run marker that
/// attests it (written first, as the archiver does); and its raw line bytes.
fn encode(
    planned: &Planned,
    period: PeriodLength,
) -> (audit_aws::s3::NewObject, audit_aws::s3::NewObject, u64) {
    let mut rng = fastrand::Rng::with_seed(planned.index);
    let lines: Vec<String> = (planned.first_event..planned.first_event + planned.events)
        .map(|i| trail_line(&item(i, planned.written_at, &mut rng)))
        .collect();
    let raw: u64 = lines.iter().map(|l| l.len() as u64 + 1).sum();
    let body = gzip_lines(lines.iter().map(String::as_str)).expect("gzip in memory");
    let mut sha256 = [0u8; 32];
    sha256.copy_from_slice(digest(&SHA256, &body).as_ref());
    let sequence = |event: u64| (FIRST_SEQUENCE + u128::from(event)).to_string();
    let encoded = Encoded {
        kind: ObjectKind::Trail,
        first_sequence: sequence(planned.first_event),
        last_sequence: sequence(planned.first_event + planned.events - 1),
        event_ids: (planned.first_event..planned.first_event + planned.events)
            .map(|e| format!("{:032x}", u128::from(e).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
            .collect(),
        body: Bytes::from(body),
        sha256,
    };
    let key = encoded
        .key(planned.written_at, period, 0)
        .expect("a padded sequence number");
    let run: Vec<RunEntry> = (planned.first_event..planned.first_event + planned.events)
        .zip(&encoded.event_ids)
        .map(|(event, id)| RunEntry(sequence(event), id.clone()))
        .collect();
    let marker_key = marker_key(&run[0], 0).expect("a padded sequence number");
    let marker = Marker::new(
        run,
        &[Confirmed {
            key: key.clone(),
            event_ids: encoded.event_ids.clone(),
            sha256: hex(&encoded.sha256),
        }],
        planned.written_at.timestamp_millis(),
    );
    let marker_body = Bytes::from(marker.to_json());
    let mut marker_sha256 = [0u8; 32];
    marker_sha256.copy_from_slice(digest(&SHA256, &marker_body).as_ref());
    let marker_request = audit_aws::s3::NewObject {
        key: marker_key.clone(),
        body: marker_body,
        content_type: "application/json",
        sha256: marker_sha256,
        metadata: Vec::new(),
    };
    (marker_request, encoded.request(key, &marker_key), raw)
}

/// What writing the archive gave.
struct Written {
    bytes: u64,
    raw_bytes: u64,
    seconds: f64,
}

async fn write_archive(moto: &Moto, plan: &Plan, period: PeriodLength) -> Written {
    write_into(&moto.archive(BUCKET), plan, period).await
}

/// Writes the plan's objects (and their markers) into `bucket` as the archiver does.
async fn write_into<B: Bucket>(bucket: &B, plan: &Plan, period: PeriodLength) -> Written {
    let started = Instant::now();
    let written = AtomicU64::new(0);
    let sizes: Vec<(u64, u64)> = futures::stream::iter(plan.objects.iter().cloned())
        .map(|planned| {
            let (bucket, written) = (&bucket, &written);
            async move {
                let (marker, object, raw) =
                    tokio::task::spawn_blocking(move || encode(&planned, period))
                        .await
                        .expect("encoding");
                let bytes = object.body.len() as u64;
                let key = object.key.clone();
                let result = match bucket.put_if_absent(marker).await {
                    Ok(Created::New { .. }) => bucket.put_if_absent(object).await,
                    other => other,
                };
                let done = written.fetch_add(1, Ordering::Relaxed) + 1;
                if done % 100 == 0 {
                    eprintln!(
                        "  {done} objects written ({:.1} s)",
                        started.elapsed().as_secs_f64()
                    );
                }
                match result {
                    Ok(Created::New { .. }) => Ok((bytes, raw)),
                    other => Err(format!("{key}: {other:?}")),
                }
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("writing the archive: {e}"));
    Written {
        bytes: sizes.iter().map(|(b, _)| b).sum(),
        raw_bytes: sizes.iter().map(|(_, r)| r).sum(),
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// What sealing wrote: digests, and the transparency log's leaves, PUTs and bytes.
struct Sealed {
    digests: usize,
    leaves: u64,
    log_puts: u64,
    log_bytes: u64,
    seconds: f64,
}

/// Seals every period with the archiver's sealer and KMS key.
async fn seal(moto: &Moto, key_arn: &str, plan: &Plan, period: PeriodLength) -> Sealed {
    seal_in(&moto.archive(BUCKET), moto, key_arn, plan, period).await
}

/// Seals every period of `bucket` with the archiver's sealer, signing with moto's KMS key.
async fn seal_in<B: Bucket>(
    bucket: &B,
    moto: &Moto,
    key_arn: &str,
    plan: &Plan,
    period: PeriodLength,
) -> Sealed {
    let started = Instant::now();
    let signer = KmsSigner::new(moto.kms(), key_arn);
    let now = DateTime::from_timestamp(plan.end(period) + SEAL_DELAY.as_secs() as i64 + 1, 0)
        .expect("a time");
    let report = Sealer {
        bucket,
        signer: &signer,
        bucket_name: BUCKET,
        period,
    }
    .run(now, Budget::unlimited())
    .await;
    assert_eq!(report.failure, None, "sealing failed");
    assert_eq!(report.left, 0, "periods left unsealed");
    let events: u64 = report.sealed.iter().map(|s| s.events).sum();
    let objects: usize = report.sealed.iter().map(|s| s.objects).sum();
    assert_eq!(objects, plan.objects.len(), "every object in a digest");
    assert_eq!(
        events,
        plan.objects.iter().map(|o| o.events).sum::<u64>(),
        "every event in a digest"
    );
    Sealed {
        digests: report.sealed.len(),
        leaves: report.sealed.iter().map(|s| s.leaves).sum(),
        log_puts: report.sealed.iter().map(|s| s.log_puts).sum(),
        log_bytes: report.sealed.iter().map(|s| s.log_bytes).sum(),
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// A finished child's exit code, CPU (user + sys) and peak RSS (KiB), from `wait4`.
struct Usage {
    code: Option<i32>,
    cpu: Duration,
    max_rss_kib: u64,
}

/// Reaps `child` (std's `Child::wait` would find it gone).
fn wait4(child: Child) -> Usage {
    let pid = i32::try_from(child.id()).expect("a pid");
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it and status for our own unreaped child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to locals; pid is our child, reaped only here.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let error = std::io::Error::last_os_error();
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::Interrupted,
            "wait4: {error}"
        );
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Usage {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        cpu: Duration::from_secs_f64(seconds(usage.ru_utime) + seconds(usage.ru_stime)),
        max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    }
}

/// The moto server: this process's child running `moto_server` (`None` when not found): its CPU
/// time (user + sys) and peak RSS in KiB (VmHWM), from /proc.
fn moto_usage() -> Option<(Duration, u64)> {
    let me = std::process::id().to_string();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        // After the command's ')': state 0, ppid 1, utime 11, stime 12 (USER_HZ ticks).
        if fields.get(1) != Some(&me.as_str()) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmdline).contains("moto_server") {
            continue;
        }
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
        let hwm = std::fs::read_to_string(entry.path().join("status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        return Some((
            Duration::from_secs_f64((ticks(11)? + ticks(12)?) / 100.0),
            hwm,
        ));
    }
    None
}

fn moto_cpu() -> Option<Duration> {
    moto_usage().map(|(cpu, _)| cpu)
}

/// The argument that makes this binary run a command and measure it (`measure_child`).
const MEASURE_CHILD: &str = "--measure-child";
/// The line `measure_child` ends its stderr with: exit code, CPU s, peak RSS KiB, wall s.
const MEASURED: &str = "measured-child: ";

/// Runs `command` (this binary re-executed with `--measure-child`), waits for it with `wait4` and
/// ends stderr with its exit code, CPU, peak RSS and wall time.
///
/// Why not from the benchmark itself: Rust's `Command` (as Python's subprocess) starts a child
/// with vfork/`posix_spawn`, so until its `exec` the child runs in the parent's address space, and
/// Linux keeps that address space's high-water mark as the child's `ru_maxrss`: a child of a
/// process that ever held 500 MB reports at least 500 MB (checked here with `/bin/true`). This
/// benchmark holds tens of MB by then (more with N), a fresh copy of it a few MB, less than
/// auditctl's own peak, so that the peak read here is auditctl's.
fn measure_child(command: &[String]) -> ! {
    let started = Instant::now();
    let child = Command::new(&command[0])
        .args(&command[1..])
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", command[0]));
    let usage = wait4(child);
    eprintln!(
        "{MEASURED}{} {:.6} {} {:.6}",
        usage.code.unwrap_or(-1),
        usage.cpu.as_secs_f64(),
        usage.max_rss_kib,
        started.elapsed().as_secs_f64()
    );
    std::process::exit(0)
}

/// What `auditctl verify` did.
struct Verified {
    wall: f64,
    usage: Usage,
    moto_cpu: Option<Duration>,
    summary: String,
}

fn run_verify(
    auditctl: &Path,
    moto: &Moto,
    key_arn: &str,
    plan: &Plan,
    period: PeriodLength,
    events: u64,
) -> Verified {
    let at = |seconds: i64, millis: i64| {
        DateTime::from_timestamp_millis(seconds * 1000 + millis)
            .expect("a time")
            .to_rfc3339_opts(SecondsFormat::Millis, true)
    };
    let from = at(FIRST_PERIOD, 0);
    let to = at(plan.end(period), -1);
    eprintln!(
        "verify: {} verify --from {from} --to {to} --no-audit-event",
        auditctl.display()
    );
    let moto_before = moto_cpu();
    let started = Instant::now();
    // Through a fresh copy of this binary: see `measure_child`.
    let mut child = Command::new(std::env::current_exe().expect("this benchmark's path"))
        .arg(MEASURE_CHILD)
        .arg(auditctl)
        .args(["verify", "--from", &from, "--to", &to, "--no-audit-event"])
        .env("AWS_ENDPOINT_URL", &moto.endpoint)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .env("ARCHIVE_BUCKET", BUCKET)
        .env("DIGEST_KEY_ID", key_arn)
        .env("DIGEST_PERIOD_SECONDS", period.seconds().to_string())
        .env_remove("AUDIT_QUEUE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", auditctl.display()));
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = reader(Box::new(child.stdout.take().expect("stdout")));
    let stderr = reader(Box::new(child.stderr.take().expect("stderr")));
    let status = child.wait().expect("the measuring process");
    let moto_cpu = moto_before
        .zip(moto_cpu())
        .map(|(a, b)| b.saturating_sub(a));
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let measured = stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(MEASURED))
        .map(|rest| rest.split_whitespace().collect::<Vec<_>>());
    let (usage, wall) = match measured.as_deref() {
        Some([code, cpu, rss, wall]) => (
            Usage {
                code: code.parse().ok(),
                cpu: Duration::from_secs_f64(cpu.parse().unwrap_or(0.0)),
                max_rss_kib: rss.parse().unwrap_or(0),
            },
            wall.parse().unwrap_or(0.0),
        ),
        _ => panic!("auditctl was not measured ({status}):\n{stderr}"),
    };
    eprintln!(
        "  verify: {wall:.2} s from its start to its exit, {:.2} s with the measuring process",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        usage.code,
        Some(0),
        "auditctl verify failed:\n{stdout}\n{stderr}"
    );
    let checked = stdout
        .lines()
        .find_map(|l| l.strip_prefix("events"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok());
    assert_eq!(
        checked,
        Some(events),
        "auditctl verify's summary does not count {events} events:\n{stdout}"
    );
    Verified {
        wall,
        usage,
        moto_cpu,
        summary: stdout,
    }
}

/// The bounds: every object version's bytes in files, `sha256sum` of them, and SHA-256 + gunzip +
/// line count of the same bytes on this thread.
struct Bound {
    files: usize,
    bytes: u64,
    sha256sum_wall: f64,
    sha256sum_cpu: Duration,
    in_process_cpu: Duration,
    in_process_wall: f64,
}

/// Every version under `trail/`, read with S3's own client (ListObjectVersions, GetObject by
/// version id).
async fn download(moto: &Moto) -> Vec<Bytes> {
    let s3 = moto.s3();
    let mut versions = Vec::new();
    let (mut key_marker, mut version_marker) = (None, None);
    loop {
        let page = s3
            .list_object_versions()
            .bucket(BUCKET)
            .prefix("trail/")
            .set_key_marker(key_marker.take())
            .set_version_id_marker(version_marker.take())
            .send()
            .await
            .expect("list versions");
        assert!(page.delete_markers().is_empty(), "no delete marker");
        versions.extend(page.versions().iter().map(|v| {
            (
                v.key().unwrap_or_default().to_owned(),
                v.version_id().unwrap_or_default().to_owned(),
            )
        }));
        if page.is_truncated() != Some(true) {
            break;
        }
        key_marker = page.next_key_marker().map(str::to_owned);
        version_marker = page.next_version_id_marker().map(str::to_owned);
    }
    futures::stream::iter(versions)
        .map(|(key, version)| {
            let s3 = &s3;
            async move {
                s3.get_object()
                    .bucket(BUCKET)
                    .key(&key)
                    .version_id(&version)
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("{key} {version}: {e}"))
                    .body
                    .collect()
                    .await
                    .expect("a body")
                    .into_bytes()
            }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    // SAFETY: timespec is plain data, filled by clock_gettime.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a local.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn bound(bodies: &[Bytes], dir: &Path, events: u64) -> Bound {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("the bound's directory");
    let mut files = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let file = dir.join(format!("{i:06}.jsonl.gz"));
        std::fs::write(&file, body).expect("write an object");
        files.push(file);
    }
    // Twice; the second is reported (the files are in the page cache either way).
    let mut measured = (0.0, Duration::ZERO);
    for _ in 0..2 {
        let started = Instant::now();
        let child = Command::new("sha256sum")
            .args(&files)
            .stdout(Stdio::null())
            .spawn()
            .expect("sha256sum");
        let usage = wait4(child);
        assert_eq!(usage.code, Some(0), "sha256sum failed");
        measured = (started.elapsed().as_secs_f64(), usage.cpu);
    }
    let _ = std::fs::remove_dir_all(dir);

    let (cpu, started) = (thread_cpu(), Instant::now());
    let mut lines = 0u64;
    let mut buffer = vec![0u8; 64 * 1024];
    for body in bodies {
        std::hint::black_box(digest(&SHA256, body));
        let mut decoder = GzDecoder::new(&body[..]);
        loop {
            let n = decoder.read(&mut buffer).expect("gunzip");
            if n == 0 {
                break;
            }
            lines += buffer[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        }
    }
    let in_process_wall = started.elapsed().as_secs_f64();
    let in_process_cpu = thread_cpu().saturating_sub(cpu);
    assert_eq!(lines, events, "the downloaded objects hold every event");
    let (log_cpu, lines_sha256_cpu) = log_work(bodies, events);
    let per_event = |d: Duration| d.as_secs_f64() * 1e6 / events as f64;
    LOG_ROWS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(format!(
            "| {events} | {:.2} µs | {:.2} µs | {:.1}× |",
            per_event(log_cpu),
            per_event(lines_sha256_cpu),
            log_cpu.as_secs_f64() / lines_sha256_cpu.as_secs_f64().max(1e-9)
        ));
    Bound {
        files: files.len(),
        bytes: bodies.iter().map(|b| b.len() as u64).sum(),
        sha256sum_wall: measured.0,
        sha256sum_cpu: measured.1,
        in_process_cpu,
        in_process_wall,
    }
}

/// The sealer's extra CPU for the transparency log over `bodies` (what `seal/log.rs` does with
/// each listed object: gunzip, lines, `leaf_hash`, `TreeEdge::push` with its full tiles), and
/// SHA-256 of the same lines' bytes on the same thread (the physical bound: every byte hashed once).
fn log_work(bodies: &[Bytes], events: u64) -> (Duration, Duration) {
    let cpu = thread_cpu();
    let mut edge = TreeEdge::default();
    let mut tiles = 0usize;
    for body in bodies {
        let mut raw = Vec::new();
        GzDecoder::new(&body[..])
            .read_to_end(&mut raw)
            .expect("gunzip");
        let mut full = Vec::new();
        for line in raw.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            edge.push(leaf_hash(line), &mut full);
        }
        tiles += full.len();
        std::hint::black_box(&full);
    }
    std::hint::black_box(edge.root());
    let log_cpu = thread_cpu().saturating_sub(cpu);
    assert_eq!(edge.size, events, "a leaf per event");
    let raws: Vec<Vec<u8>> = bodies
        .iter()
        .map(|body| {
            let mut raw = Vec::new();
            GzDecoder::new(&body[..])
                .read_to_end(&mut raw)
                .expect("gunzip");
            raw
        })
        .collect();
    let cpu = thread_cpu();
    for raw in &raws {
        for line in raw.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            std::hint::black_box(digest(&SHA256, line));
        }
    }
    let sha = thread_cpu().saturating_sub(cpu);
    eprintln!(
        "  the log's work (gunzip, leaves, {tiles} full tiles): {:.3} s CPU, {:.2} µs/event; SHA-256 of the same lines: {:.3} s, {:.2} µs/event",
        log_cpu.as_secs_f64(),
        log_cpu.as_secs_f64() * 1e6 / events as f64,
        sha.as_secs_f64(),
        sha.as_secs_f64() * 1e6 / events as f64
    );
    (log_cpu, sha)
}

/// The item of event `event` of the plan, as `encode` made it (its object's generator replayed).
fn planned_item(plan: &Plan, event: u64) -> Map<String, Value> {
    let object = plan
        .objects
        .iter()
        .rfind(|o| o.first_event <= event)
        .expect("an object holds the event");
    let mut rng = fastrand::Rng::with_seed(object.index);
    let mut found = Map::new();
    for i in object.first_event..=event {
        found = item(i, object.written_at, &mut rng);
    }
    found
}

/// What proving gave: each proof's wall time and what prove read (its stderr's last words), and
/// each check-proof's wall time.
struct Proved {
    prove_walls: Vec<f64>,
    reads: Vec<String>,
    check_walls: Vec<f64>,
    proof_bytes: usize,
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

/// `auditctl prove` for `count` events spread over the archive (the table exists and is empty:
/// prove finds each event from its --audit-time, as for an expired item), each proof checked with
/// `auditctl check-proof` against the key's public key from KMS.
async fn run_prove(
    auditctl: &Path,
    moto: &Moto,
    key_arn: &str,
    plan: &Plan,
    period: PeriodLength,
    count: u64,
    work: &Path,
) -> Proved {
    let events: u64 = plan.objects.iter().map(|o| o.events).sum();
    moto.create_table().await;
    let der = moto
        .kms()
        .get_public_key()
        .key_id(key_arn)
        .send()
        .await
        .expect("the key's public key")
        .public_key
        .expect("a public key")
        .into_inner();
    std::fs::create_dir_all(work).expect("target/bench");
    let pem = work.join("prove-key.pem");
    let encoded = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&der)
    };
    let lines: Vec<&str> = encoded
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    std::fs::write(
        &pem,
        format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            lines.join("\n")
        ),
    )
    .expect("the key's PEM");
    let mut proved = Proved {
        prove_walls: Vec::new(),
        reads: Vec::new(),
        check_walls: Vec::new(),
        proof_bytes: 0,
    };
    for n in 0..count {
        let event = (n * events / count + n * 7919) % events;
        let item = planned_item(plan, event);
        let text = |field: &str| item[field]["S"].as_str().unwrap_or_default().to_owned();
        let (message_id, audit_time) = (text("messageId"), text("auditTime"));
        let out = work.join(format!("proof-{n}.json"));
        let started = Instant::now();
        let output = Command::new(auditctl)
            .args([
                "--no-audit-event",
                "prove",
                &message_id,
                "--audit-time",
                &audit_time,
            ])
            .arg("--out")
            .arg(&out)
            .env("AWS_ENDPOINT_URL", &moto.endpoint)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env_remove("AWS_PROFILE")
            .env("TABLE_NAME", moto::TABLE)
            .env("ARCHIVE_BUCKET", BUCKET)
            .env("DIGEST_KEY_ID", key_arn)
            .env("DIGEST_PERIOD_SECONDS", period.seconds().to_string())
            .output()
            .expect("auditctl prove");
        let wall = started.elapsed().as_secs_f64();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "auditctl prove {message_id} failed:\n{stderr}"
        );
        proved.prove_walls.push(wall);
        proved.reads.push(
            stderr
                .trim()
                .rsplit("; ")
                .next()
                .unwrap_or_default()
                .to_owned(),
        );
        proved.proof_bytes = std::fs::metadata(&out).map_or(0, |m| m.len() as usize);
        let started = Instant::now();
        let output = Command::new(auditctl)
            .arg("check-proof")
            .arg(&out)
            .arg("--public-key")
            .arg(&pem)
            .env_clear()
            .output()
            .expect("auditctl check-proof");
        proved.check_walls.push(started.elapsed().as_secs_f64());
        assert!(
            output.status.success(),
            "check-proof refused {message_id}: {}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
    eprintln!(
        "  prove: {count} events, median {:.3} s (max {:.3} s); check-proof median {:.1} ms (max {:.1} ms); a proof is {} bytes",
        median(&proved.prove_walls),
        proved.prove_walls.iter().copied().fold(0.0, f64::max),
        median(&proved.check_walls) * 1e3,
        proved.check_walls.iter().copied().fold(0.0, f64::max) * 1e3,
        proved.proof_bytes
    );
    for read in &proved.reads {
        eprintln!("    prove read: {read}");
    }
    proved
}

/// The `--prove-only` stand-in: written and sealed by the archiver's code in its in-memory bucket
/// twin (moto's listings walk every key of the bucket, so sealing thousands of periods on moto
/// grows with the square of the archive), signed by moto's KMS key; then everything `prove` reads
/// (the objects under `trail/`, `digest/` and `log/`, with their metadata; not the run markers
/// under `state/`) copied to moto's bucket, where `auditctl prove` reads it over HTTP.
async fn prove_standin(
    options: &Options,
    moto: &Moto,
    key_arn: &str,
    plan: &Plan,
    events: u64,
    auditctl: &Path,
    work: &Path,
) {
    let period = options.period;
    let memory = MemoryBucket::new();
    let written = write_into(&memory, plan, period).await;
    eprintln!(
        "  written in memory in {:.1} s: {:.1} MB gzip",
        written.seconds,
        written.bytes as f64 / 1e6
    );
    let sealed = seal_in(&memory, moto, key_arn, plan, period).await;
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
    assert_eq!(sealed.leaves, events, "a leaf per event");
    let started = Instant::now();
    let keys: Vec<String> = ["trail/", "digest/", "log/"]
        .iter()
        .flat_map(|prefix| memory.keys(prefix))
        .collect();
    let s3 = moto.s3();
    futures::stream::iter(keys.iter())
        .map(|key| {
            let (s3, memory) = (&s3, &memory);
            async move {
                let Some(version) = memory.current(key) else {
                    return;
                };
                let mut put = s3
                    .put_object()
                    .bucket(BUCKET)
                    .key(key)
                    .body(version.body.clone().into())
                    .checksum_algorithm(aws_sdk_s3::types::ChecksumAlgorithm::Sha256);
                for (name, value) in &version.metadata {
                    put = put.metadata(*name, value);
                }
                put.send()
                    .await
                    .unwrap_or_else(|e| panic!("copying {key} to moto: {e}"));
            }
        })
        .buffer_unordered(CONCURRENCY * 2)
        .collect::<Vec<()>>()
        .await;
    eprintln!(
        "  copied {} objects to moto in {:.1} s",
        keys.len(),
        started.elapsed().as_secs_f64()
    );
    let proved = run_prove(auditctl, moto, key_arn, plan, period, options.prove, work).await;
    push_prove_row(events, &sealed, &proved);
}

fn push_prove_row(events: u64, sealed: &Sealed, proved: &Proved) {
    let reads = proved
        .reads
        .iter()
        .max_by_key(|r| r.len())
        .cloned()
        .unwrap_or_default();
    PROVE_ROWS.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
        "| {events} | {} | {:.1} µs | {} | {:.1} MB | {:.0} | {:.2} MB | {:.3} s | {:.3} s | {} | {:.1} ms | {} |",
        sealed.digests,
        sealed.seconds * 1e6 / events as f64,
        sealed.log_puts,
        sealed.log_bytes as f64 / 1e6,
        sealed.log_puts as f64 * 1e6 / events as f64,
        sealed.log_bytes as f64 / events as f64,
        median(&proved.prove_walls),
        proved.prove_walls.iter().copied().fold(0.0, f64::max),
        reads,
        median(&proved.check_walls) * 1e3,
        proved.proof_bytes
    ));
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
    let written = write_archive(&moto, &plan, period).await;
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
    if options.prove_only {
        return;
    }

    let verified =
        (!options.bound_only).then(|| run_verify(auditctl, &moto, &key_arn, &plan, period, events));
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
    if !options.bound_only {
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
    header();
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
    println!();
    println!(
        "moto (Python) serves every byte over loopback on the same {} cores, so its CPU is part of \
         verify's wall time; auditctl's CPU per event is the figure that transfers to S3. \
         sha256sum: the second of two runs over the same bytes as files in the page cache.",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
}
