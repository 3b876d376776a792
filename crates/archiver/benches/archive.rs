//! The archiver's CPU per event and events per second for stream batches of 100 and 1,000
//! INSERTs (the receiver's items, about 0.7 KB each), on the in-memory bucket, next to the
//! physical bound of the same work: gzip (flate2's default level) of the same JSON lines and
//! SHA-256 (aws-lc-rs) of the compressed bytes, on the same core. Then again inside cgroups with
//! the CPU share of a 256 MB and a 128 MB Lambda function (memory/1,769 of a vCPU), when the
//! machine has a cgroup v1 cpu controller and we may write it.
//!
//! `cargo bench -p audit-archiver --bench archive` (docs/archive.md has the numbers).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use audit_archiver::batch::{Ports, Settings, archive_batch};
use audit_archiver::budget::Budget;
use audit_archiver::clock::ManualClock;
use audit_archiver::encode::{gzip_lines, trail_line};
use audit_archiver::event::{StreamEvent, read_records};
use audit_aws::s3::memory::MemoryBucket;
use aws_lc_rs::digest::{SHA256, digest};
use chrono::DateTime;
use serde_json::{Map, Value, json};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Lambda gives a function one vCPU at 1,769 MB.
const ONE_VCPU_MB: u64 = 1769;
const SHARE_ENV: &str = "ARCHIVER_BENCH_SHARE_MB";

fn main() {
    if let Ok(mb) = std::env::var(SHARE_ENV) {
        run(&format!("{mb} MB share"));
        return;
    }
    println!(
        "| CPU | batch | events/s | CPU µs/event | bound µs/event (gzip + SHA-256) | archiver ÷ bound | gzip bytes/event |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    run("whole core");
    for mb in [256u64, 128] {
        match in_cgroup(mb) {
            Ok(()) => {}
            Err(why) => println!("| {mb} MB share | skipped: {why} | | | | | |"),
        }
    }
}

/// Runs this benchmark again inside a cgroup with the CPU quota of `mb` of Lambda memory.
fn in_cgroup(mb: u64) -> Result<(), String> {
    let root = Path::new("/sys/fs/cgroup/cpu");
    if !root.join("cpu.cfs_quota_us").exists() {
        return Err("no cgroup v1 cpu controller".into());
    }
    let dir = root.join(format!("audit-archiver-bench-{mb}"));
    let period = 100_000u64;
    let quota = (period * mb / ONE_VCPU_MB).max(1_000);
    std::fs::create_dir_all(&dir)
        .and_then(|_| std::fs::write(dir.join("cpu.cfs_period_us"), period.to_string()))
        .and_then(|_| std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string()))
        .map_err(|e| format!("cannot write {}: {e}", dir.display()))?;
    let me: PathBuf = std::env::current_exe().map_err(|e| e.to_string())?;
    // A shell joins the cgroup and becomes the benchmark, so it runs inside from the start.
    let status = Command::new("sh")
        .arg("-c")
        .arg(r#"echo $$ > "$0" && exec "$@""#)
        .arg(dir.join("cgroup.procs"))
        .arg(&me)
        .env(SHARE_ENV, mb.to_string())
        .status()
        .map_err(|e| e.to_string());
    let _ = std::fs::remove_dir(&dir);
    match status? {
        s if s.success() => Ok(()),
        s => Err(format!("exited with {s}")),
    }
}

/// The CPU time this process has used (user + system), from /proc.
fn cpu_time() -> Duration {
    let ticks_per_second = 100.0; // USER_HZ on Linux
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // After the command's ')': state is field 0, utime 11, stime 12.
    Duration::from_secs_f64((ticks(11) + ticks(12)) / ticks_per_second)
}

/// The receiver's item for message `i`, in DynamoDB's JSON: distinct ids, times and text.
fn item(i: u64, rng: &mut fastrand::Rng) -> Map<String, Value> {
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
    let id = uuid(rng);
    let time = format!(
        "2026-11-22T10:{:02}:{:02}.{:03}Z",
        (i / 60) % 60,
        i % 60,
        rng.u32(..1000)
    );
    let actor = format!("user-{}", rng.u32(..500));
    let action = [
        "invoice.read",
        "invoice.update",
        "user.login",
        "report.export",
    ][rng.usize(..4)];
    let resource = format!("invoice/{}", rng.u32(..100_000));
    let value = json!({
        "messageId": {"S": id},
        "auditTime": {"S": time},
        "auditBucket": {"S": format!("2026-11-22#{:02}", rng.u32(..16))},
        "auditText": {"S": format!("{actor} performed {action} on {resource} from the billing console (session {})", uuid(rng))},
        "actor": {"S": actor},
        "actorKey": {"S": format!("{actor}#{}", rng.u32(..4))},
        "action": {"S": action},
        "actionKey": {"S": format!("{action}#{}", rng.u32(..4))},
        "resource": {"S": resource},
        "resourceKey": {"S": format!("{resource}#{}", rng.u32(..4))},
        "outcome": {"S": "success"},
        "sourceIp": {"S": format!("10.{}.{}.{}", rng.u8(..), rng.u8(..), rng.u8(..))},
        "receiveCount": {"N": "1"},
        "sqsMessageId": {"S": uuid(rng)},
        "sentAt": {"S": time},
        "receivedAt": {"S": time},
        "extra": {"M": {"amount": {"N": format!("{}.{:02}", rng.u32(..10_000), rng.u32(..100))},
                        "currency": {"S": "EUR"}}}
    });
    value.as_object().cloned().unwrap_or_default()
}

/// A stream batch of `size` INSERTs as Lambda sends it (JSON text), and the items.
fn batch(size: u64) -> (String, Vec<Map<String, Value>>) {
    let mut rng = fastrand::Rng::with_seed(7);
    let items: Vec<Map<String, Value>> = (0..size).map(|i| item(i, &mut rng)).collect();
    let records: Vec<Value> = items
        .iter()
        .enumerate()
        .map(|(i, image)| {
            json!({
                "eventID": format!("{:032x}", rng.u128(..)),
                "eventName": "INSERT",
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": {
                    "ApproximateCreationDateTime": 1_795_341_600,
                    "Keys": {"messageId": image["messageId"], "auditTime": image["auditTime"]},
                    "NewImage": image,
                    "SequenceNumber": format!("{}", 4_421_584_500_000_000_017_000_000_000u128 + i as u128),
                    "SizeBytes": 700,
                    "StreamViewType": "NEW_AND_OLD_IMAGES"
                },
                "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/AuditMessages/stream/2026-11-22T00:00:00.000"
            })
        })
        .collect();
    (json!({ "Records": records }).to_string(), items)
}

fn run(cpu: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let clock = ManualClock::new(DateTime::from_timestamp(1_795_342_500, 0).unwrap_or_default());
    for size in [100u64, 1000] {
        let (text, items) = batch(size);
        let iterations = (40_000 / size).max(20);
        let mut bytes = 0usize;
        let mut once = || {
            let event: StreamEvent = serde_json::from_str(&text).expect("the event");
            let reads = read_records(event);
            let bucket = MemoryBucket::new();
            let report = runtime.block_on(archive_batch(
                Ports {
                    bucket: &bucket,
                    clock: &clock,
                },
                &Settings::default(),
                &reads,
                Budget::unlimited(),
            ));
            assert_eq!(report.archived as u64, size, "{:?}", report.failure);
            bytes = report.bytes_written();
        };
        for _ in 0..3 {
            once();
        }
        let (wall, cpu_used) = measure(iterations, &mut once);
        let events = (iterations * size) as f64;

        // The bound: the same lines gzip-compressed, and the compressed bytes hashed.
        let lines: Vec<String> = items.iter().map(trail_line).collect();
        let mut bound_once = || {
            let gz = gzip_lines(lines.iter().map(String::as_str)).expect("gzip");
            std::hint::black_box(digest(&SHA256, &gz));
        };
        bound_once();
        let (bound_wall, _) = measure(iterations, &mut bound_once);

        let cpu_us = cpu_used.as_secs_f64() * 1e6 / events;
        let wall_us = wall.as_secs_f64() * 1e6 / events;
        let bound_us = bound_wall.as_secs_f64() * 1e6 / events;
        println!(
            "| {cpu} | {size} | {:.0} | {cpu_us:.1} | {bound_us:.1} | {:.1}× | {:.0} |",
            events / wall.as_secs_f64(),
            wall_us / bound_us,
            bytes as f64 / size as f64,
        );
    }
}

/// Runs `f` `iterations` times: wall-clock and CPU time.
fn measure(iterations: u64, f: &mut impl FnMut()) -> (Duration, Duration) {
    let cpu_before = cpu_time();
    let started = Instant::now();
    for _ in 0..iterations {
        f();
    }
    (started.elapsed(), cpu_time().saturating_sub(cpu_before))
}
