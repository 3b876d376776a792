//! What the benchmarks share: the batch they measure, built the same way for every size and for
//! the Python peer (which reads the events this writes), and a small timing loop.
#![allow(dead_code)] // each benchmark uses a different part

pub mod chart;

use std::time::{Duration, Instant};

use aws_lambda_events::sqs::{SqsEvent, SqsMessage};

pub const QUEUE_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:AuditQueue";

/// A realistic audit record: ~400 bytes of body, the structured fields (who, what, to what, with
/// what result, from where) and nested extra fields.
pub fn record(i: usize) -> SqsMessage {
    let mut record = SqsMessage::default();
    record.message_id = Some(format!("5f0c{i:08x}-7d1e-4a4b-9c3f-{i:012x}"));
    record.receipt_handle = Some(format!("AQEB{i:040x}=="));
    record.body = Some(format!(
        r#"{{"auditText":"user u-{i} signed in from 203.0.113.{}","auditTime":"2026-11-22T10:{:02}:{:02}.{:03}+01:00","actor":"u-{i}","action":"user.login","resource":"session/{i:08x}","outcome":"success","sourceIp":"203.0.113.{}","user":{{"roles":["admin","billing"]}},"requestId":"req-{i:016x}","mfa":true,"attempt":{}}}"#,
        i % 250,
        (i / 60) % 60,
        i % 60,
        i % 1000,
        i % 250,
        i % 5
    ));
    record.md5_of_body = Some("d41d8cd98f00b204e9800998ecf8427e".into());
    record.event_source = Some("aws:sqs".into());
    record.event_source_arn = Some(QUEUE_ARN.into());
    record.aws_region = Some("us-east-1".into());
    for (name, value) in [
        ("ApproximateReceiveCount", "1".to_owned()),
        (
            "SentTimestamp",
            (1_795_348_800_000u64 + i as u64).to_string(),
        ),
        ("SenderId", "AROAEXAMPLE:orders-service".to_owned()),
        (
            "ApproximateFirstReceiveTimestamp",
            (1_795_348_800_015u64 + i as u64).to_string(),
        ),
    ] {
        record.attributes.insert(name.into(), value);
    }
    record
}

/// A batch of `size` distinct records; `seed` keeps batches of one run apart.
pub fn event(size: usize, seed: usize) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = (0..size).map(|i| record(seed * 1_000_000 + i)).collect();
    event
}

/// Median and best of repeated runs of `f`, for at least `min_runs` runs or `budget`.
pub fn measure(min_runs: usize, budget: Duration, mut f: impl FnMut()) -> (Duration, Duration) {
    for _ in 0..2 {
        f(); // warm-up
    }
    let mut samples = Vec::new();
    let started = Instant::now();
    while samples.len() < min_runs || (started.elapsed() < budget && samples.len() < 1000) {
        let t = Instant::now();
        f();
        samples.push(t.elapsed());
    }
    samples.sort();
    (samples[samples.len() / 2], samples[0])
}

pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
