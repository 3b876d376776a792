//! The OCSF copy's CPU and bytes per event (docs/ocsf.md "Figures"): N archived lines made from
//! the sample lines (tests/e2e/data/ocsf-trail-lines.jsonl, as local/ocsf_bytes.py makes them:
//! each with its own messageId, an auditTime 8 s after the one before, five actors), mapped to
//! OCSF records, then written as Parquet in objects of `--batch` lines (the writer's stream batch,
//! template.yaml's `OcsfBatchSize`), one object per class. Prints the process's CPU time per
//! event for each step, measured from /proc/self/stat (one thread), and the bytes per event.
//!
//! cargo bench -p audit-ocsf --bench encode -- [--events 100000] [--batch 1000]

use std::path::Path;
use std::time::Instant;

use audit_ocsf::{Class, Place, Record, record, write};
use serde_json::{Value, json};

/// This process's user + system CPU time, in seconds (Linux's /proc/self/stat, in clock ticks).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    let after = &stat[stat.rfind(')').expect("a command in parentheses") + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // The kernel's USER_HZ is 100 on Linux.
    ticks / 100.0
}

fn number(args: &[String], flag: &str, default: usize) -> usize {
    args.windows(2)
        .find(|w| w[0] == flag)
        .map(|w| {
            w[1].parse()
                .unwrap_or_else(|_| panic!("{flag}: not a number"))
        })
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let events = number(&args, "--events", 100_000);
    let batch = number(&args, "--batch", 1000).max(1);
    let sample =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2e/data/ocsf-trail-lines.jsonl");
    let base: Vec<Value> = std::fs::read_to_string(&sample)
        .expect("the sample lines")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let start = chrono::DateTime::parse_from_rfc3339("2026-11-22T00:00:00Z").unwrap();
    let actors = ["alice", "bob", "carol", "dave", "erin"];
    let lines: Vec<String> = (0..events)
        .map(|n| {
            let mut item = base[n % base.len()].clone();
            item["messageId"] = json!(format!("m-{n:08}"));
            let at = start + chrono::Duration::seconds(8 * n as i64);
            item["auditTime"] = json!(at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string());
            if item.get("actor").is_some() {
                item["actor"] = json!(actors[n % actors.len()]);
            }
            item.to_string()
        })
        .collect();
    let line_bytes: usize = lines.iter().map(|l| l.len() + 1).sum();

    let wall = Instant::now();
    let cpu = cpu_seconds();
    let records: Vec<Record> = lines
        .iter()
        .enumerate()
        .filter_map(|(n, line)| {
            record(
                line,
                Place {
                    object: "trail/dt=2026-11-22/hour=00/p1795305600-0000-a0.jsonl.gz",
                    line_number: (n % batch) as u64,
                },
            )
            .ok()
        })
        .collect();
    let map_cpu = cpu_seconds() - cpu;
    let map_wall = wall.elapsed().as_secs_f64();
    assert_eq!(records.len(), events, "every line maps");

    let wall = Instant::now();
    let cpu = cpu_seconds();
    let (mut bytes, mut objects) = (0usize, 0usize);
    for chunk in records.chunks(batch) {
        for class in [Class::ApiActivity, Class::Authentication] {
            let mut of: Vec<Record> = chunk.iter().filter(|r| r.class == class).cloned().collect();
            let mut out = Vec::new();
            if write(&mut of, &mut out).expect("written").is_some() {
                bytes += out.len();
                objects += 1;
            }
        }
    }
    let write_cpu = cpu_seconds() - cpu;
    let write_wall = wall.elapsed().as_secs_f64();
    let per = |seconds: f64| seconds * 1e6 / events as f64;
    println!(
        "ocsf: {events} events, batches of {batch}: map {:.1} µs/event CPU ({:.1} wall), write {:.1} µs/event CPU ({:.1} wall); {objects} objects, {:.1} bytes/event Parquet ({:.1} bytes/event as JSON lines uncompressed)",
        per(map_cpu),
        per(map_wall),
        per(write_cpu),
        per(write_wall),
        bytes as f64 / events as f64,
        line_bytes as f64 / events as f64,
    );
}
