//! Black-box tests of `auditctl` against a real local endpoint (moto's server over HTTP): given
//! items written by the function's own code and messages in the queues, when the binary runs,
//! then its output, exit status and the queues are as the SPEC says.

#[path = "../../receiver/tests/support/mod.rs"]
mod support;
/// `auditctl verify` (tests/verify/mod.rs: a module of this binary, which shares its harness).
mod verify;

use std::collections::{HashMap, HashSet};
use std::process::{Command, Output};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use audit_receiver::message::canonical_time;
use aws_lambda_events::sqs::SqsMessageAttribute;
use aws_sdk_sqs::types::{MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName};
use serde_json::Value;
use support::http::{Request, read_request, write_response};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A number beyond f64's precision: printed with every digit.
const BIG: &str = "1234567890123456789012345.5";

// -----------------------------------------------------------------------------------------
// Harness

/// Runs auditctl against `endpoint` with a clean AWS environment.
fn auditctl(endpoint: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_auditctl"));
    for name in [
        "AWS_PROFILE",
        "TABLE_NAME",
        "AUDIT_QUEUE_URL",
        "DEAD_LETTER_QUEUE_URL",
        "AWS_ENDPOINT_URL",
    ] {
        command.env_remove(name);
    }
    command
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL", endpoint)
        .args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("auditctl runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn ok(output: Output) -> String {
    assert!(
        output.status.success(),
        "auditctl failed: {:?}\n{}",
        output.status,
        stderr(&output)
    );
    stdout(&output)
}

/// `--format jsonl` output as JSON values.
fn jsonl(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// (auditTime, messageId) of each row.
fn keys(rows: &[Value]) -> Vec<(String, String)> {
    rows.iter()
        .map(|r| {
            (
                r["auditTime"].as_str().unwrap().to_owned(),
                r["messageId"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A trail over three UTC days, written through the function's own handler in a shuffled
/// order: producer ids, equal times (also written with different offsets), and SQS ids.
/// Returns every (canonical auditTime, messageId), sorted.
async fn write_trail(moto: &Moto) -> Vec<(String, String)> {
    create_table(&moto.client(), TABLE).await;
    let handler = handler(&moto.endpoint, TABLE, settings());
    let mut messages: Vec<(String, String)> = Vec::new(); // (messageId, auditTime as sent)
    for day in 22..=24 {
        for i in 0..14u32 {
            let hour = (i * 5) % 24;
            // The same instant written with three offsets, so equal canonical times happen.
            let time = match i % 3 {
                0 => format!("2026-11-{day}T{hour:02}:30:00.250Z"),
                1 => format!("2026-11-{day}T{:02}:30:00.250+01:00", (hour + 1) % 24),
                _ => format!("2026-11-{day}T{hour:02}:00:00.250-00:30"),
            };
            messages.push((format!("m-{day}-{i:02}"), time));
        }
        // A run of equal times in one day, ids out of order.
        for id in ["tie-c", "tie-a", "tie-b", "tie-e", "tie-d"] {
            messages.push((
                format!("{id}-{day}"),
                format!("2026-11-{day}T12:00:00.000Z"),
            ));
        }
    }
    // Hour 24 wraps: those are dropped by parse (hour 00 of the next day would differ); keep the
    // set valid by skipping what does not parse.
    messages.retain(|(_, t)| chrono::DateTime::parse_from_rfc3339(t).is_ok());
    fastrand::seed(7);
    fastrand::shuffle(&mut messages);
    let mut expected = Vec::new();
    for chunk in messages.chunks(10) {
        let records = chunk
            .iter()
            .map(|(id, time)| {
                let body = serde_json::json!({"messageId": id, "auditTime": time, "auditText": format!("text of {id}"), "amount": serde_json::Number::from_str(BIG).unwrap()});
                record(&format!("sqs-{id}"), &body.to_string())
            })
            .collect();
        let response = handler.handle(event(records)).await.unwrap();
        assert!(failed(&response).is_empty());
        for (id, time) in chunk {
            let utc = chrono::DateTime::parse_from_rfc3339(time).unwrap().to_utc();
            expected.push((canonical_time(utc), id.clone()));
        }
    }
    expected.sort();
    expected
}

// -----------------------------------------------------------------------------------------
// query

#[tokio::test]
async fn query_merges_three_days_of_shards_in_time_then_id_order_across_small_pages() {
    let moto = Moto::start();
    let expected = write_trail(&moto).await;
    assert!(expected.len() > 50);

    let output = ok(auditctl(
        &moto.endpoint,
        &[
            "query",
            "--from",
            "2026-11-22T00:00:00Z",
            "--to",
            "2026-11-24T23:59:59.999Z",
            "--format",
            "jsonl",
            "--page-size",
            "2",
        ],
        &[],
    ));
    let rows = jsonl(&output);
    assert_eq!(keys(&rows), expected);
    // Plain JSON: extra is an object, numbers keep their digits.
    assert_eq!(rows[0]["extra"]["amount"].to_string(), BIG);
    assert!(rows[0]["auditBucket"].as_str().unwrap().contains('#'));
}

#[tokio::test]
async fn desc_reverses_time_and_id_and_limit_stops_early() {
    let moto = Moto::start();
    let expected = write_trail(&moto).await;
    let range = [
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-25T00:00:00Z",
    ];

    let args = [
        &["query", "--format", "jsonl", "--desc", "--page-size", "3"][..],
        &range,
    ]
    .concat();
    let rows = jsonl(&ok(auditctl(&moto.endpoint, &args, &[])));
    let mut reversed = expected.clone();
    reversed.reverse();
    assert_eq!(keys(&rows), reversed);

    let args = [
        &["query", "--format", "jsonl", "--limit", "7", "--stats"][..],
        &range,
    ]
    .concat();
    let output = auditctl(&moto.endpoint, &args, &[]);
    let stats = stderr(&output);
    let rows = jsonl(&ok(output));
    assert_eq!(keys(&rows), expected[..7]);
    // 1 DescribeTable + the first day's 32 shards, one page each: no later day is read.
    assert!(stats.contains("7 rows, 33 requests"), "{stats}");
}

#[tokio::test]
async fn range_edges_are_inclusive_to_the_millisecond() {
    let moto = Moto::start();
    let expected = write_trail(&moto).await;
    let query = |from: &str, to: &str| {
        keys(&jsonl(&ok(auditctl(
            &moto.endpoint,
            &["query", "--from", from, "--to", to, "--format", "jsonl"],
            &[],
        ))))
    };
    let run: Vec<(String, String)> = expected
        .iter()
        .filter(|(t, _)| t == "2026-11-23T12:00:00.000Z")
        .cloned()
        .collect();
    assert_eq!(run.len(), 5);
    // Exactly the instant, given in another offset: both edges included.
    assert_eq!(
        query("2026-11-23T13:00:00+01:00", "2026-11-23T12:00:00.000Z"),
        run
    );
    // --to with sub-millisecond digits truncates: .0009 still includes .000.
    assert_eq!(
        query("2026-11-23T12:00:00Z", "2026-11-23T12:00:00.0009Z"),
        run
    );
    // --from with sub-millisecond digits rounds up: .0001 excludes .000.
    assert!(query("2026-11-23T12:00:00.0001Z", "2026-11-23T12:00:00.9Z").is_empty());
    // One millisecond before and after: nothing of the run.
    assert!(query("2026-11-23T11:59:59.000Z", "2026-11-23T11:59:59.999Z").is_empty());
    let after = query("2026-11-23T12:00:00.001Z", "2026-11-23T23:59:59.999Z");
    assert!(
        after
            .iter()
            .all(|(t, _)| t.as_str() > "2026-11-23T12:00:00.000Z")
    );
    assert_eq!(
        after,
        expected
            .iter()
            .filter(|(t, _)| t.as_str() > "2026-11-23T12:00:00.000Z" && t.as_str() < "2026-11-24")
            .cloned()
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn csv_and_table_formats_print_the_same_rows() {
    let moto = Moto::start();
    let expected = write_trail(&moto).await;
    let range = [
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-22T23:59:59Z",
    ];
    let day: Vec<&(String, String)> = expected
        .iter()
        .filter(|(t, _)| t.starts_with("2026-11-22"))
        .collect();

    let args = [&["query", "--format", "csv"][..], &range].concat();
    let csv = ok(auditctl(&moto.endpoint, &args, &[]));
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines[0],
        "auditTime,messageId,actor,action,resource,outcome,sourceIp,auditText,sqsMessageId,sentAt,receivedAt,receiveCount,eventSource,extra"
    );
    assert_eq!(lines.len(), 1 + day.len());
    let first = lines[1];
    assert!(
        first.starts_with(&format!(
            "{},{},,,,,,text of {},sqs-{}",
            day[0].0, day[0].1, day[0].1, day[0].1
        )),
        "{first}"
    );
    assert!(
        first.ends_with(&format!(r#","{{""amount"":{BIG}}}""#)),
        "extra is quoted JSON: {first}"
    );

    let args = [&["query"][..], &range].concat();
    let table = ok(auditctl(&moto.endpoint, &args, &[]));
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].contains("auditTime") && lines[0].contains("auditText"),
        "{table}"
    );
    assert_eq!(lines.len(), 2 + day.len(), "{table}");
    assert!(lines[2].contains(&day[0].1));
    let width = lines[0].chars().count();
    assert!(
        lines.iter().all(|l| l.chars().count() == width),
        "aligned:\n{table}"
    );
}

#[tokio::test]
async fn get_prints_the_items_of_one_message_id() {
    let moto = Moto::start();
    write_trail(&moto).await;
    let rows = jsonl(&ok(auditctl(
        &moto.endpoint,
        &["get", "tie-b-23", "--format", "jsonl"],
        &[],
    )));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["auditText"], "text of tie-b-23");
    assert_eq!(rows[0]["auditTime"], "2026-11-23T12:00:00.000Z");
    assert!(
        jsonl(&ok(auditctl(
            &moto.endpoint,
            &["get", "nobody", "--format", "jsonl"],
            &[]
        )))
        .is_empty()
    );
}

// -----------------------------------------------------------------------------------------
// errors

#[tokio::test]
async fn a_missing_table_or_index_fails_with_the_fix() {
    let moto = Moto::start();
    let range = [
        "query",
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-23T00:00:00Z",
    ];

    let output = auditctl(&moto.endpoint, &range, &[("TABLE_NAME", "Nope")]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("table Nope not found at")
            && message.contains(&moto.endpoint)
            && message.contains("set TABLE_NAME or --table"),
        "{message}"
    );
    let output = auditctl(&moto.endpoint, &["get", "x", "--table", "Nope"], &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));

    create_table_with(&moto.client(), "Old", false).await;
    let output = auditctl(&moto.endpoint, &range, &[("TABLE_NAME", "Old")]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("has no index byAuditTime")
            && message.contains("deploy the current template.yaml"),
        "{message}"
    );
}

#[tokio::test]
async fn bad_times_and_missing_queue_urls_say_what_to_do() {
    let moto = Moto::start();
    let output = auditctl(
        &moto.endpoint,
        &[
            "query",
            "--from",
            "2026-11-22 10:00",
            "--to",
            "2026-11-22T11:00:00Z",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output)
            .contains("--from '2026-11-22 10:00': add an offset, e.g. 2026-11-22T10:00:00Z"),
        "{}",
        stderr(&output)
    );
    let output = auditctl(
        &moto.endpoint,
        &[
            "query",
            "--from",
            "2026-11-22T12:00:00Z",
            "--to",
            "2026-11-22T11:00:00Z",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(2), "from after to");
    let output = auditctl(
        &moto.endpoint,
        &["query", "--from", "2026-11-22T12:00:00Z"],
        &[],
    );
    assert_eq!(output.status.code(), Some(2), "clap's own usage error");

    let output = auditctl(&moto.endpoint, &["dlq", "list"], &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains(
            "set DEAD_LETTER_QUEUE_URL or --dlq-url (stack output AuditDeadLetterQueueUrl)"
        ),
        "{}",
        stderr(&output)
    );
    let output = auditctl(
        &moto.endpoint,
        &["dlq", "redrive"],
        &[("DEAD_LETTER_QUEUE_URL", "http://x")],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("set AUDIT_QUEUE_URL or --queue-url"),
        "{}",
        stderr(&output)
    );
}

// -----------------------------------------------------------------------------------------
// lookups: who did what, to what

/// One structured event as a producer sends it.
#[derive(Debug, Clone, Default)]
struct Event {
    id: String,
    /// As sent (any offset).
    time: String,
    actor: Option<String>,
    action: Option<String>,
    resource: Option<String>,
    outcome: Option<&'static str>,
    /// As sent (any text form).
    source_ip: Option<&'static str>,
}

impl Event {
    fn body(&self) -> Value {
        let mut body = serde_json::json!({
            "messageId": self.id,
            "auditTime": self.time,
            "amount": serde_json::Number::from_str(BIG).unwrap(),
        });
        let fields = [
            ("actor", self.actor.clone()),
            ("action", self.action.clone()),
            ("resource", self.resource.clone()),
            ("outcome", self.outcome.map(str::to_owned)),
            ("sourceIp", self.source_ip.map(str::to_owned)),
        ];
        for (name, value) in fields {
            if let Some(value) = value {
                body[name] = Value::String(value);
            }
        }
        if self.action.is_none() {
            body["auditText"] = Value::String(format!("text of {}", self.id));
        }
        body
    }

    /// (canonical auditTime, messageId): the merge key.
    fn key(&self) -> (String, String) {
        let utc = chrono::DateTime::parse_from_rfc3339(&self.time)
            .unwrap()
            .to_utc();
        (canonical_time(utc), self.id.clone())
    }

    /// The IP as stored: canonical.
    fn stored_ip(&self) -> Option<String> {
        self.source_ip
            .map(|ip| ip.parse::<std::net::IpAddr>().unwrap().to_string())
    }

    /// The shard of its lookup keys.
    fn lookup_shard(&self) -> u32 {
        audit_model::message::fnv1a_32(self.id.as_bytes()) % audit_model::keys::LOOKUP_SHARDS
    }
}

/// Writes the events through the function's own handler, in a shuffled order.
async fn write_events(moto: &Moto, events: &[Event]) {
    create_table(&moto.client(), TABLE).await;
    let handler = handler(&moto.endpoint, TABLE, settings());
    let mut shuffled = events.to_vec();
    fastrand::seed(18);
    fastrand::shuffle(&mut shuffled);
    for chunk in shuffled.chunks(10) {
        let records = chunk
            .iter()
            .map(|e| record(&format!("sqs-{}", e.id), &e.body().to_string()))
            .collect();
        let response = handler.handle(event(records)).await.unwrap();
        assert!(failed(&response).is_empty(), "{response:?}");
    }
}

/// The keys of the events that `keep` keeps, in (auditTime, messageId) order.
fn expected(events: &[Event], keep: impl Fn(&Event) -> bool) -> Vec<(String, String)> {
    let mut keys: Vec<(String, String)> =
        events.iter().filter(|e| keep(e)).map(Event::key).collect();
    keys.sort();
    keys
}

/// Three UTC days of structured events: three actors, four actions, two resources, outcomes and
/// addresses mixed (the same IPv6 address sent in two text forms), times sent with offsets, a
/// run of equal times per day across shards, and events without an actor (free text only, or an
/// action only).
fn structured_events() -> Vec<Event> {
    let mut events = Vec::new();
    for day in 22..=24 {
        for i in 0..12usize {
            let hour = i * 2;
            let time = if i % 2 == 0 {
                format!("2026-11-{day}T{hour:02}:15:00.500Z")
            } else {
                format!("2026-11-{day}T{:02}:15:00.500+01:00", hour + 1)
            };
            events.push(Event {
                id: format!("e-{day}-{i:02}"),
                time,
                actor: Some(["alice", "bob", "mallory"][i % 3].to_owned()),
                action: Some(
                    [
                        "invoice.delete",
                        "user.login",
                        "invoice.view",
                        "user.logout",
                    ][i % 4]
                        .to_owned(),
                ),
                resource: [Some("invoice/1"), Some("invoice/2"), None][(i / 3) % 3]
                    .map(str::to_owned),
                outcome: [Some("success"), Some("failure"), None][(i / 2) % 3],
                source_ip: [
                    Some("192.0.2.10"),
                    Some("2001:DB8:0:0::1"),
                    None,
                    Some("2001:db8::1"),
                ][(i / 3 + i / 6) % 4],
            });
        }
        // Equal times: alice deleting invoice/1 four times at one instant, ids out of order.
        for id in ["tie-d", "tie-a", "tie-c", "tie-b"] {
            events.push(Event {
                id: format!("{id}-{day}"),
                time: format!("2026-11-{day}T12:00:00.000Z"),
                actor: Some("alice".into()),
                action: Some("invoice.delete".into()),
                resource: Some("invoice/1".into()),
                outcome: Some("failure"),
                source_ip: Some("2001:db8::1"),
            });
        }
        // No actor: free text only, and an action only.
        for i in 0..2 {
            events.push(Event {
                id: format!("plain-{day}-{i}"),
                time: format!("2026-11-{day}T12:00:00.000Z"),
                ..Event::default()
            });
            events.push(Event {
                id: format!("anon-{day}-{i}"),
                time: format!("2026-11-{day}T12:00:00.000Z"),
                action: Some("invoice.delete".into()),
                resource: Some("invoice/1".into()),
                ..Event::default()
            });
        }
    }
    events
}

/// `auditctl query` over the three days with `args`, as jsonl rows.
fn lookup(moto: &Moto, args: &[&str]) -> Vec<Value> {
    let range = [
        "query",
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-24T23:59:59.999Z",
        "--format",
        "jsonl",
    ];
    jsonl(&ok(auditctl(
        &moto.endpoint,
        &[&range[..], args].concat(),
        &[],
    )))
}

fn is(field: &Option<String>, value: &str) -> bool {
    field.as_deref() == Some(value)
}

#[tokio::test]
async fn lookups_by_actor_action_and_resource_merge_the_shards_of_three_days_in_time_then_id_order()
{
    let moto = Moto::start();
    let events = structured_events();
    write_events(&moto, &events).await;
    let alice: Vec<&Event> = events.iter().filter(|e| is(&e.actor, "alice")).collect();
    let shards: HashSet<u32> = alice.iter().map(|e| e.lookup_shard()).collect();
    assert_eq!(shards.len(), 4, "alice's events are in all 4 shards");
    let ties: HashSet<u32> = alice
        .iter()
        .filter(|e| e.id.starts_with("tie-") && e.id.ends_with("-23"))
        .map(|e| e.lookup_shard())
        .collect();
    assert!(ties.len() >= 2, "equal times across shards: {ties:?}");

    let by_alice = expected(&events, |e| is(&e.actor, "alice"));
    for page_size in ["500", "2"] {
        let rows = lookup(&moto, &["--actor", "alice", "--page-size", page_size]);
        assert_eq!(keys(&rows), by_alice, "--page-size {page_size}");
    }
    let mut reversed = by_alice.clone();
    reversed.reverse();
    let rows = lookup(&moto, &["--actor", "alice", "--desc", "--page-size", "3"]);
    assert_eq!(keys(&rows), reversed, "--desc reverses time and id");
    // The full items: every attribute the function wrote, not only what the index projects.
    let row = &rows[0];
    assert_eq!(row["extra"]["amount"].to_string(), BIG);
    assert!(row["auditBucket"].as_str().unwrap().contains('#'));
    assert!(row["actorKey"].as_str().unwrap().starts_with("alice#"));

    let rows = lookup(&moto, &["--action", "invoice.delete"]);
    assert_eq!(
        keys(&rows),
        expected(&events, |e| is(&e.action, "invoice.delete")),
        "an action, with or without an actor"
    );
    let rows = lookup(&moto, &["--resource", "invoice/1", "--page-size", "2"]);
    assert_eq!(
        keys(&rows),
        expected(&events, |e| is(&e.resource, "invoice/1"))
    );
    assert!(lookup(&moto, &["--actor", "nobody"]).is_empty());

    // A narrower range: one day and a few hours, edges inclusive.
    let rows = jsonl(&ok(auditctl(
        &moto.endpoint,
        &[
            "query",
            "--actor",
            "alice",
            "--from",
            "2026-11-23T13:00:00+01:00",
            "--to",
            "2026-11-23T12:00:00.000Z",
            "--format",
            "jsonl",
        ],
        &[],
    )));
    assert_eq!(
        keys(&rows),
        expected(&events, |e| is(&e.actor, "alice")
            && e.key().0 == "2026-11-23T12:00:00.000Z"),
        "the run of equal times, ordered by id"
    );
    assert_eq!(rows.len(), 4);
}

#[tokio::test]
async fn lookups_filter_by_outcome_source_ip_in_any_form_and_the_other_fields() {
    let moto = Moto::start();
    let events = structured_events();
    write_events(&moto, &events).await;
    let v6 = Some("2001:db8::1".to_owned());
    // Each lookup finds exactly what the filter keeps, and something.
    let check = |args: &[&str], keep: &dyn Fn(&Event) -> bool| {
        let want = expected(&events, keep);
        assert!(!want.is_empty(), "{args:?} finds something");
        let rows = lookup(&moto, args);
        assert_eq!(keys(&rows), want, "{args:?}");
        rows
    };

    check(&["--actor", "alice", "--outcome", "failure"], &|e| {
        is(&e.actor, "alice") && e.outcome == Some("failure")
    });
    check(&["--action", "user.login", "--outcome", "success"], &|e| {
        is(&e.action, "user.login") && e.outcome == Some("success")
    });
    // The IPv6 address in a third text form finds both forms it was sent in.
    assert!(
        events
            .iter()
            .any(|e| is(&e.actor, "alice") && e.source_ip == Some("2001:DB8:0:0::1")),
        "sent in upper case too"
    );
    let rows = check(
        &["--actor", "alice", "--source-ip", "2001:0DB8:0000::0001"],
        &|e| is(&e.actor, "alice") && e.stored_ip() == v6,
    );
    assert!(rows.iter().all(|r| r["sourceIp"] == "2001:db8::1"));
    check(&["--actor", "alice", "--source-ip", "192.0.2.10"], &|e| {
        is(&e.actor, "alice") && e.stored_ip().as_deref() == Some("192.0.2.10")
    });
    check(
        &["--resource", "invoice/2", "--source-ip", "2001:db8::1"],
        &|e| is(&e.resource, "invoice/2") && e.stored_ip() == v6,
    );

    // The other fields: --by names the index, the rest filter.
    let both = |e: &Event| is(&e.actor, "alice") && is(&e.action, "invoice.delete");
    for by in ["actor", "action"] {
        check(
            &["--actor", "alice", "--action", "invoice.delete", "--by", by],
            &both,
        );
    }
    check(
        &[
            "--actor",
            "bob",
            "--action",
            "user.login",
            "--resource",
            "invoice/1",
            "--outcome",
            "success",
            "--by",
            "resource",
        ],
        &|e| {
            is(&e.actor, "bob")
                && is(&e.action, "user.login")
                && is(&e.resource, "invoice/1")
                && e.outcome == Some("success")
        },
    );
    let rows = lookup(
        &moto,
        &[
            "--resource",
            "invoice/1",
            "--actor",
            "mallory",
            "--by",
            "resource",
            "--desc",
        ],
    );
    let mut want = expected(&events, |e| {
        is(&e.resource, "invoice/1") && is(&e.actor, "mallory")
    });
    want.reverse();
    assert!(!want.is_empty());
    assert_eq!(keys(&rows), want, "--desc with a filter");

    // The same filters on a time query (--by time, or no field that picks an index).
    check(
        &[
            "--actor",
            "alice",
            "--action",
            "invoice.delete",
            "--by",
            "time",
        ],
        &both,
    );
    check(
        &[
            "--outcome",
            "failure",
            "--source-ip",
            "2001:DB8::1",
            "--page-size",
            "2",
        ],
        &|e| e.outcome == Some("failure") && e.stored_ip() == v6,
    );
}

#[tokio::test]
async fn an_actor_too_long_for_a_dynamodb_key_is_found_by_its_lookup_exactly() {
    // 1,024 characters of 3 bytes each: a valid actor, and 3,072 bytes, over DynamoDB's 2,048-byte
    // key limit. It is keyed by its SHA-256; a second actor differing in its last character
    // shares nothing with it.
    let moto = Moto::start();
    let long = "€".repeat(1024);
    let other = format!("{}x", "€".repeat(1023));
    let event = |id: &str, actor: &str| Event {
        id: id.to_owned(),
        time: "2026-11-22T10:00:00Z".to_owned(),
        actor: Some(actor.to_owned()),
        action: Some("user.login".to_owned()),
        resource: None,
        outcome: None,
        source_ip: None,
    };
    let events = vec![event("long-1", &long), event("long-2", &other)];
    write_events(&moto, &events).await;
    let items = scan(&moto.client(), TABLE).await;
    for item in &items {
        let key = s(item, "actorKey");
        assert!(key.starts_with("sha256:") && key.len() <= 2048, "{key}");
    }
    let found = lookup(&moto, &["--actor", &long]);
    assert_eq!(keys(&found), expected(&events, |e| e.id == "long-1"));
    assert_eq!(found[0]["actor"].as_str(), Some(long.as_str()));
}

#[tokio::test]
async fn items_without_the_field_are_not_in_its_index_and_a_time_query_finds_them() {
    let moto = Moto::start();
    let events = structured_events();
    write_events(&moto, &events).await;

    let everything = lookup(&moto, &[]);
    assert_eq!(keys(&everything), expected(&events, |_| true));
    let plain: Vec<&Value> = everything
        .iter()
        .filter(|r| r["messageId"].as_str().unwrap().starts_with("plain-"))
        .collect();
    assert_eq!(plain.len(), 6);
    assert!(
        plain
            .iter()
            .all(|r| r.get("actorKey").is_none() && r.get("actor").is_none())
    );

    // byActor holds exactly the items with an actor: a Query per shard of each actor finds them
    // all and nothing else.
    let client = moto.client();
    let mut in_index = HashSet::new();
    for actor in ["alice", "bob", "mallory"] {
        for shard in 0..audit_model::keys::LOOKUP_SHARDS {
            let page = client
                .query()
                .table_name(TABLE)
                .index_name("byActor")
                .key_condition_expression("actorKey = :k")
                .expression_attribute_values(
                    ":k",
                    aws_sdk_dynamodb::types::AttributeValue::S(format!("{actor}#{shard}")),
                )
                .send()
                .await
                .unwrap();
            in_index.extend(page.items().iter().map(|i| s(i, "messageId")));
        }
    }
    let with_actor: HashSet<String> = events
        .iter()
        .filter(|e| e.actor.is_some())
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(in_index, with_actor);
    // An action-only event is found by its action, never by an actor.
    let rows = lookup(
        &moto,
        &[
            "--action",
            "invoice.delete",
            "--resource",
            "invoice/1",
            "--by",
            "action",
        ],
    );
    assert!(rows.iter().any(|r| r["messageId"] == "anon-23-0"));
    assert!(rows.iter().filter(|r| r.get("actor").is_none()).count() == 6);
}

/// A scripted DynamoDB endpoint in front of moto: BatchGetItem processes at most `most` keys a
/// request and returns the rest as UnprocessedKeys (as DynamoDB does when the read capacity is
/// exhausted), and gives the items back in reverse order (DynamoDB's order is none in
/// particular). Every other request is forwarded as it is.
struct ScriptedDynamo {
    endpoint: String,
    batch_gets: Arc<AtomicUsize>,
}

impl ScriptedDynamo {
    fn start(upstream: &str, most: usize) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.set_nonblocking(true).unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let batch_gets = Arc::new(AtomicUsize::new(0));
        let counter = batch_gets.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                while let Ok((mut socket, _)) = listener.accept().await {
                    let upstream = upstream.clone();
                    let counter = counter.clone();
                    tokio::spawn(async move {
                        let mut buffer = Vec::new();
                        while let Some(request) = read_request(&mut socket, &mut buffer).await {
                            let (status, content_type, body) =
                                if request.target == "DynamoDB_20120810.BatchGetItem" {
                                    counter.fetch_add(1, Ordering::SeqCst);
                                    batch_get_some(&upstream, &request, most).await
                                } else {
                                    forward(&upstream, &request, &request.body).await
                                };
                            let headers = [("Content-Type", content_type.as_str())];
                            if write_response(&mut socket, status, &headers, &body)
                                .await
                                .is_err()
                            {
                                return;
                            }
                        }
                    });
                }
            });
        });
        Self {
            endpoint,
            batch_gets,
        }
    }
}

/// A BatchGetItem of the first `most` keys asked; the rest come back as UnprocessedKeys; the
/// items in reverse order.
async fn batch_get_some(upstream: &str, request: &Request, most: usize) -> (u16, String, Vec<u8>) {
    let mut asked: Value = serde_json::from_slice(&request.body).unwrap();
    let (table, wanted) = {
        let items = asked["RequestItems"].as_object().unwrap();
        assert_eq!(items.len(), 1, "one table");
        let (table, wanted) = items.iter().next().unwrap();
        (table.clone(), wanted["Keys"].as_array().unwrap().clone())
    };
    assert!(
        wanted.len() <= 100,
        "at most 100 keys a request: {}",
        wanted.len()
    );
    let (now, later) = wanted.split_at(wanted.len().min(most));
    asked["RequestItems"][&table]["Keys"] = Value::Array(now.to_vec());
    let (status, content_type, body) =
        forward(upstream, request, &serde_json::to_vec(&asked).unwrap()).await;
    let mut answer: Value = serde_json::from_slice(&body).unwrap();
    if let Some(items) = answer["Responses"][&table].as_array_mut() {
        items.reverse();
    }
    if !later.is_empty() {
        answer["UnprocessedKeys"] = serde_json::json!({ &table: { "Keys": later } });
    }
    (status, content_type, serde_json::to_vec(&answer).unwrap())
}

/// `carol`: `n` events in one UTC day (2026-11-23), three at each instant, spread over the 4
/// shards of her lookup key with the given count in each.
fn carol(per_shard: [usize; 4]) -> Vec<Event> {
    let mut count = [0usize; 4];
    let mut events = Vec::new();
    let mut i = 0;
    while count != per_shard {
        let id = format!("carol-{i:04}");
        i += 1;
        let shard = audit_model::message::fnv1a_32(id.as_bytes()) % 4;
        let shard = shard as usize;
        if count[shard] == per_shard[shard] {
            continue;
        }
        count[shard] += 1;
        let n = events.len();
        let second = 8 * 3600 + (n / 3) * 7;
        events.push(Event {
            id,
            time: format!(
                "2026-11-23T{:02}:{:02}:{:02}.000Z",
                second / 3600,
                second / 60 % 60,
                second % 60
            ),
            actor: Some("carol".into()),
            action: Some(["report.view", "report.export"][n % 2].to_owned()),
            resource: Some(format!("report/{}", n % 5)),
            outcome: Some(["success", "failure"][(n / 2) % 2]),
            source_ip: Some("192.0.2.77"),
        });
    }
    events
}

#[tokio::test]
async fn an_actor_with_many_events_in_a_day_costs_the_documented_requests_over_1_or_30_days() {
    let moto = Moto::start();
    // 130 events: the shards hold 33, 33, 33 and 31 (odd: no page is exactly full at size 2).
    let events = carol([33, 33, 33, 31]);
    write_events(&moto, &events).await;
    let all = expected(&events, |_| true);
    let run = |from: &str, to: &str, extra: &[&str]| {
        let args = [
            &["query", "--actor", "carol", "--from", from, "--to", to][..],
            &["--format", "jsonl", "--stats"],
            extra,
        ]
        .concat();
        let output = auditctl(&moto.endpoint, &args, &[]);
        let stats = stderr(&output);
        (keys(&jsonl(&ok(output))), stats)
    };
    let day = ("2026-11-23T00:00:00Z", "2026-11-23T23:59:59.999Z");
    let month = ("2026-11-01T00:00:00Z", "2026-11-30T23:59:59.999Z");
    for (from, to) in [day, month] {
        // Per shard ⌊n/4 ÷ page⌋ + 1 Query, ⌈n/100⌉ BatchGetItem, 1 DescribeTable.
        let (rows, stats) = run(from, to, &[]);
        assert_eq!(rows, all);
        assert!(
            stats.contains(
                "130 rows, 7 requests: 1 DescribeTable + 4 Query + 2 BatchGetItem, 130 items read"
            ),
            "{stats}"
        );
        let (rows, stats) = run(from, to, &["--page-size", "2"]);
        assert_eq!(rows, all, "pages of 2");
        assert!(
            stats.contains("130 rows, 70 requests: 1 DescribeTable + 67 Query + 2 BatchGetItem"),
            "17 + 17 + 17 + 16 Queries: {stats}"
        );
    }
    let (rows, stats) = run(day.0, day.1, &["--desc", "--page-size", "2"]);
    let mut reversed = all.clone();
    reversed.reverse();
    assert_eq!(rows, reversed);
    assert!(stats.contains("67 Query + 2 BatchGetItem"), "{stats}");

    // A filter: the index reads as many (Limit counts before the filter), fewer items fetched.
    let (rows, stats) = run(
        day.0,
        day.1,
        &[
            "--outcome",
            "failure",
            "--action",
            "report.view",
            "--by",
            "actor",
        ],
    );
    let want = expected(&events, |e| {
        e.outcome == Some("failure") && is(&e.action, "report.view")
    });
    assert_eq!(rows, want);
    assert!(want.len() > 20 && want.len() < 100);
    assert!(
        stats.contains(&format!(
            "{} rows, 6 requests: 1 DescribeTable + 4 Query + 1 BatchGetItem, 130 items read",
            want.len()
        )),
        "{stats}"
    );

    // --limit stops reading: one BatchGetItem of 7 keys, pages of 7.
    let (rows, stats) = run(day.0, day.1, &["--limit", "7"]);
    assert_eq!(rows, all[..7]);
    let queries: u64 = stats
        .split(" + ")
        .nth(1)
        .and_then(|q| q.strip_suffix(" Query"))
        .and_then(|q| q.parse().ok())
        .unwrap_or_else(|| panic!("{stats}"));
    assert!((4..=12).contains(&queries), "{stats}");
    // At most 3 pages a shard (the one merged, one waiting, one being read), fewer than the 20
    // of reading it all in pages of 7.
    assert!(
        stats.contains("7 rows,") && stats.contains(" + 1 BatchGetItem"),
        "{stats}"
    );
}

#[tokio::test]
async fn unprocessed_keys_are_retried_and_the_rows_keep_the_merge_order() {
    let moto = Moto::start();
    let events = carol([33, 33, 33, 31]);
    write_events(&moto, &events).await;
    let dynamo = ScriptedDynamo::start(&moto.endpoint, 40);
    let output = auditctl(
        &dynamo.endpoint,
        &[
            "query",
            "--actor",
            "carol",
            "--from",
            "2026-11-23T00:00:00Z",
            "--to",
            "2026-11-24T00:00:00Z",
            "--format",
            "jsonl",
            "--stats",
            "--page-size",
            "10",
        ],
        &[],
    );
    let stats = stderr(&output);
    let rows = jsonl(&ok(output));
    assert_eq!(keys(&rows), expected(&events, |_| true));
    // 100 keys: 40, then 40 of the 60 left, then 20; 30 keys: 30.
    assert_eq!(dynamo.batch_gets.load(Ordering::SeqCst), 4);
    assert!(stats.contains(" + 4 BatchGetItem"), "{stats}");
}

/// The item as moto stores it, in DynamoDB's JSON (a GetItem over plain HTTP, no SDK).
async fn raw_item(
    endpoint: &str,
    message_id: &str,
    audit_time: &str,
) -> serde_json::Map<String, Value> {
    let body = serde_json::json!({
        "TableName": TABLE,
        "Key": {"messageId": {"S": message_id}, "auditTime": {"S": audit_time}},
    });
    let request = Request {
        method: "POST".into(),
        path: "/".into(),
        target: "DynamoDB_20120810.GetItem".into(),
        headers: vec![
            ("Host".into(), endpoint.trim_start_matches("http://").into()),
            ("Content-Type".into(), "application/x-amz-json-1.0".into()),
            ("X-Amz-Target".into(), "DynamoDB_20120810.GetItem".into()),
            (
                "Authorization".into(),
                "AWS4-HMAC-SHA256 Credential=test/20261122/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0".into(),
            ),
        ],
        body: Vec::new(),
    };
    let upstream = endpoint.trim_start_matches("http://");
    let (status, _, answer) = forward(upstream, &request, body.to_string().as_bytes()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    answer["Item"].as_object().cloned().expect("the item")
}

#[tokio::test]
async fn jsonl_prints_the_models_item_line_of_the_stored_item_in_a_lookup_a_time_query_and_get() {
    let moto = Moto::start();
    let mut events = structured_events();
    events.retain(|e| e.id.ends_with("-23-00") || e.id.starts_with("tie-a-23"));
    write_events(&moto, &events).await;
    // An item with extra of every JSON type, written through the function too.
    let handler = handler(&moto.endpoint, TABLE, settings());
    let body = serde_json::json!({
        "messageId": "rich-1", "auditTime": "2026-11-23T12:00:00+02:00", "actor": "alice",
        "action": "invoice.delete", "sourceIp": "2001:DB8::1", "outcome": "success",
        "nested": {"list": [1, 2.50, "x", true, null, {"deep": BIG}]},
        "amount": serde_json::Number::from_str("0.000100").unwrap(),
        "text": "quote \" backslash \\ tab \t é 日本",
    });
    let response = handler
        .handle(event(vec![record("sqs-rich-1", &body.to_string())]))
        .await
        .unwrap();
    assert!(failed(&response).is_empty());

    let line = audit_model::line::item_line(
        &raw_item(&moto.endpoint, "rich-1", "2026-11-23T10:00:00.000Z").await,
    );
    assert!(line.contains(r#""sourceIp":"2001:db8::1""#), "{line}");
    assert!(line.contains(r#""amount":0.000100"#), "{line}");
    let find = |text: &str| -> String {
        text.lines()
            .find(|l| l.contains(r#""messageId":"rich-1""#))
            .unwrap_or_else(|| panic!("{text}"))
            .to_owned()
    };
    let from_lookup = ok(auditctl(
        &moto.endpoint,
        &[
            "query",
            "--actor",
            "alice",
            "--from",
            "2026-11-23T00:00:00Z",
            "--to",
            "2026-11-23T23:59:59Z",
            "--format",
            "jsonl",
        ],
        &[],
    ));
    assert_eq!(find(&from_lookup), line, "lookup");
    let from_time_query = ok(auditctl(
        &moto.endpoint,
        &[
            "query",
            "--from",
            "2026-11-23T00:00:00Z",
            "--to",
            "2026-11-23T23:59:59Z",
            "--format",
            "jsonl",
        ],
        &[],
    ));
    assert_eq!(find(&from_time_query), line, "time query");
    let from_get = ok(auditctl(
        &moto.endpoint,
        &["get", "rich-1", "--format", "jsonl"],
        &[],
    ));
    assert_eq!(from_get, format!("{line}\n"), "get");
    // Every line of the lookup is the model's line of its stored item.
    for row in from_lookup.lines() {
        let value: Value = serde_json::from_str(row).unwrap();
        let stored = raw_item(
            &moto.endpoint,
            value["messageId"].as_str().unwrap(),
            value["auditTime"].as_str().unwrap(),
        )
        .await;
        assert_eq!(row, audit_model::line::item_line(&stored));
    }
}

#[tokio::test]
async fn table_and_csv_show_who_did_what_to_what_and_get_shows_them_too() {
    let moto = Moto::start();
    let events = structured_events();
    write_events(&moto, &events).await;
    let range = [
        "--from",
        "2026-11-23T12:00:00Z",
        "--to",
        "2026-11-23T12:00:00Z",
    ];
    let csv = ok(auditctl(
        &moto.endpoint,
        &[
            &["query", "--actor", "alice", "--format", "csv"][..],
            &range,
        ]
        .concat(),
        &[],
    ));
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines[0],
        "auditTime,messageId,actor,action,resource,outcome,sourceIp,auditText,sqsMessageId,sentAt,receivedAt,receiveCount,eventSource,extra"
    );
    assert_eq!(lines.len(), 1 + 4);
    assert!(
        lines[1].starts_with(
            "2026-11-23T12:00:00.000Z,tie-a-23,alice,invoice.delete,invoice/1,failure,2001:db8::1,,sqs-tie-a-23,"
        ),
        "{}",
        lines[1]
    );

    let table = ok(auditctl(
        &moto.endpoint,
        &[&["query"][..], &range].concat(),
        &[],
    ));
    let lines: Vec<&str> = table.lines().collect();
    for column in [
        "actor",
        "action",
        "resource",
        "outcome",
        "sourceIp",
        "auditText",
    ] {
        assert!(
            lines[0].contains(&format!("| {column} ")),
            "{column}: {}",
            lines[0]
        );
    }
    let tie = lines.iter().find(|l| l.contains("tie-a-23")).unwrap();
    assert!(
        tie.contains("| alice ")
            && tie.contains("| invoice.delete ")
            && tie.contains("| 2001:db8::1 "),
        "{tie}"
    );
    let width = lines[0].chars().count();
    assert!(lines.iter().all(|l| l.chars().count() == width), "{table}");

    let get = ok(auditctl(&moto.endpoint, &["get", "tie-a-23"], &[]));
    assert!(
        get.contains("| alice ") && get.contains("| failure "),
        "{get}"
    );
}

#[tokio::test]
async fn a_table_without_the_lookup_index_says_to_deploy_the_template_and_a_time_query_still_works()
{
    let moto = Moto::start();
    // An older deployment: the time index only.
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
        Projection, ProjectionType, ScalarAttributeType,
    };
    let key = |name: &str, kind| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .unwrap()
    };
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .unwrap()
    };
    moto.client()
        .create_table()
        .table_name("Old")
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key("messageId", KeyType::Hash))
        .key_schema(key("auditTime", KeyType::Range))
        .attribute_definitions(attribute("messageId"))
        .attribute_definitions(attribute("auditTime"))
        .attribute_definitions(attribute("auditBucket"))
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name("byAuditTime")
                .key_schema(key("auditBucket", KeyType::Hash))
                .key_schema(key("auditTime", KeyType::Range))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::All)
                        .build(),
                )
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let range = [
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-23T00:00:00Z",
    ];
    for (flag, index) in [
        ("--actor", "byActor"),
        ("--action", "byAction"),
        ("--resource", "byResource"),
    ] {
        let output = auditctl(
            &moto.endpoint,
            &[&["query", flag, "x", "--table", "Old"][..], &range].concat(),
            &[],
        );
        assert_eq!(output.status.code(), Some(1));
        let field = flag.trim_start_matches("--");
        assert!(
            stderr(&output).contains(&format!(
                "table Old has no index {index} (lookups by {field} read it): deploy the current template.yaml, which adds it"
            )),
            "{}",
            stderr(&output)
        );
    }
    let output = auditctl(
        &moto.endpoint,
        &[
            &["query", "--outcome", "failure", "--table", "Old"][..],
            &range,
        ]
        .concat(),
        &[],
    );
    assert!(output.status.success(), "{}", stderr(&output));
}

#[tokio::test]
async fn lookup_usage_errors_exit_2_and_name_the_fix() {
    // Nothing is asked of the endpoint: usage is checked first.
    let endpoint = "http://127.0.0.1:9";
    let range = [
        "query",
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-23T00:00:00Z",
    ];
    let cases: [(&[&str], &str); 7] = [
        (
            &["--actor", "alice", "--resource", "invoice/1"],
            "--actor and --resource given: say which index to read with --by actor or --by resource",
        ),
        (
            &["--actor", "alice", "--by", "action"],
            "--by action needs --action VALUE",
        ),
        (&["--actor", ""], "--actor is empty"),
        (
            &["--source-ip", "2001:db8::1%eth0"],
            "invalid value '2001:db8::1%eth0' for '--source-ip <IP>': not an IPv4 or IPv6 address",
        ),
        (
            &["--source-ip", "192.0.2.300"],
            "not an IPv4 or IPv6 address",
        ),
        (
            &["--actor", "alice", "--outcome", "failed"],
            "invalid value 'failed' for '--outcome <OUTCOME>': one of success, failure, unknown",
        ),
        (
            &["--actor", "a", "--by", "everything"],
            "invalid value 'everything' for '--by <INDEX>'",
        ),
    ];
    for (args, message) in cases {
        let output = auditctl(endpoint, &[&range[..], args].concat(), &[]);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(message),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

// -----------------------------------------------------------------------------------------
// dead-letter queue

struct Queues {
    sqs: aws_sdk_sqs::Client,
    source: String,
    dlq: String,
}

async fn queues(moto: &Moto) -> Queues {
    let sqs = sqs_client(&moto.endpoint);
    let dlq = sqs
        .create_queue()
        .queue_name("AuditDeadLetterQueue")
        .send()
        .await
        .unwrap();
    let source = sqs
        .create_queue()
        .queue_name("AuditQueue")
        .send()
        .await
        .unwrap();
    Queues {
        sqs,
        source: source.queue_url.unwrap(),
        dlq: dlq.queue_url.unwrap(),
    }
}

impl Queues {
    fn env(&self) -> [(&'static str, &str); 2] {
        [
            ("DEAD_LETTER_QUEUE_URL", &self.dlq),
            ("AUDIT_QUEUE_URL", &self.source),
        ]
    }

    /// Sends a dead-lettered message as the function does (reason and context), or as SQS
    /// moves one (`reason` None: no attributes of ours).
    async fn dead_letter(&self, body: &str, reason: Option<&str>) -> String {
        let mut send = self
            .sqs
            .send_message()
            .queue_url(&self.dlq)
            .message_body(body);
        if let Some(reason) = reason {
            let context = audit_receiver::deadletter::FailureContext {
                reason: reason.to_owned(),
                detail: "test".into(),
                sqs_message_id: format!("orig-{reason}-{}", body.len()),
                sent_timestamp: Some("1795348800000".into()),
                receive_count: Some(5),
                failed_at: "2026-11-22T10:00:00.000Z".into(),
                event_source_arn: None,
            };
            let string = |v: String| {
                MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(v)
                    .build()
                    .unwrap()
            };
            send = send
                .message_attributes("failureReason", string(reason.to_owned()))
                .message_attributes("failureContext", string(context.to_json()));
        }
        send.send().await.unwrap().message_id.unwrap()
    }

    /// Visible messages right now (a receive that hides nothing: visibility 0), by id.
    async fn visible(&self, url: &str) -> HashMap<String, aws_sdk_sqs::types::Message> {
        let mut seen = HashMap::new();
        for _ in 0..5 {
            let out = self
                .sqs
                .receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .visibility_timeout(0)
                .message_attribute_names("All")
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .send()
                .await
                .unwrap();
            for m in out.messages.unwrap_or_default() {
                seen.insert(m.message_id.clone().unwrap(), m);
            }
        }
        seen
    }

    /// The audit queue's visible messages without the access events auditctl sent there (each
    /// command that works the dead-letter queue records its own access first): what was moved.
    async fn moved(&self) -> HashMap<String, aws_sdk_sqs::types::Message> {
        let mut moved = self.visible(&self.source).await;
        moved.retain(|_, m| !is_access_event(m.body().unwrap_or_default()));
        moved
    }

    async fn depth(&self, url: &str) -> (u64, u64) {
        let out = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .unwrap();
        let attrs = out.attributes.unwrap_or_default();
        let n = |name| {
            attrs
                .get(&name)
                .and_then(|v: &String| v.parse().ok())
                .unwrap_or(0)
        };
        (
            n(QueueAttributeName::ApproximateNumberOfMessages),
            n(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
        )
    }
}

#[tokio::test]
async fn dlq_list_shows_reasons_and_identity_and_leaves_every_message_visible() {
    let moto = Moto::start();
    let q = queues(&moto).await;
    let conflict = q
        .dead_letter(r#"{"auditText":"secret one"}"#, Some("conflict"))
        .await;
    let throttled = q
        .dead_letter(r#"{"auditText":"secret two!"}"#, Some("throttled"))
        .await;
    let moved = q.dead_letter(r#"{"auditText":"secret three"}"#, None).await;

    let rows = jsonl(&ok(auditctl(
        &moto.endpoint,
        &["dlq", "list", "--format", "jsonl"],
        &q.env(),
    )));
    assert_eq!(rows.len(), 3);
    let by_id: HashMap<&str, &Value> = rows
        .iter()
        .map(|r| (r["messageId"].as_str().unwrap(), r))
        .collect();
    assert_eq!(by_id[conflict.as_str()]["reason"], "conflict");
    assert_eq!(
        by_id[conflict.as_str()]["originalSqsMessageId"],
        format!("orig-conflict-{}", r#"{"auditText":"secret one"}"#.len())
    );
    assert_eq!(
        by_id[conflict.as_str()]["failedAt"],
        "2026-11-22T10:00:00.000Z"
    );
    assert_eq!(by_id[conflict.as_str()]["receiveCount"], 5);
    assert_eq!(
        by_id[throttled.as_str()]["bodyBytes"],
        r#"{"auditText":"secret two!"}"#.len()
    );
    assert_eq!(by_id[moved.as_str()]["reason"], "max_receives");
    assert_eq!(
        by_id[moved.as_str()]["originalSqsMessageId"],
        moved.as_str()
    );
    assert!(rows.iter().all(|r| r.get("body").is_none()));
    // Right after the command, every message is visible again, none held.
    assert_eq!(q.depth(&q.dlq).await, (3, 0));

    let table = ok(auditctl(&moto.endpoint, &["dlq", "list"], &q.env()));
    assert!(
        !table.contains("secret"),
        "no bodies without --show-body:\n{table}"
    );
    assert!(
        table.contains("max_receives") && table.contains("conflict"),
        "{table}"
    );

    let rows = jsonl(&ok(auditctl(
        &moto.endpoint,
        &[
            "dlq",
            "list",
            "--show-body",
            "--reason",
            "conflict",
            "--format",
            "jsonl",
        ],
        &q.env(),
    )));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["body"], r#"{"auditText":"secret one"}"#);
    assert_eq!(q.depth(&q.dlq).await, (3, 0));
}

#[tokio::test]
async fn redrive_moves_only_the_reason_asked_and_a_dry_run_changes_nothing() {
    let moto = Moto::start();
    let q = queues(&moto).await;
    for i in 0..3 {
        q.dead_letter(&format!(r#"{{"auditText":"t{i}"}}"#), Some("throttled"))
            .await;
    }
    let conflict = q
        .dead_letter(r#"{"auditText":"c"}"#, Some("conflict"))
        .await;

    let dry = ok(auditctl(
        &moto.endpoint,
        &["dlq", "redrive", "--reason", "throttled", "--dry-run"],
        &q.env(),
    ));
    assert!(dry.contains("would move 3 message(s)"), "{dry}");
    assert_eq!(
        q.depth(&q.dlq).await,
        (4, 0),
        "a dry run leaves everything visible"
    );
    assert_eq!(q.depth(&q.source).await, (1, 0), "only its access event");

    let out = ok(auditctl(
        &moto.endpoint,
        &[
            "dlq",
            "redrive",
            "--reason",
            "throttled",
            "--max",
            "2",
            "--rate",
            "100",
        ],
        &q.env(),
    ));
    assert!(
        out.contains("moved 2 message(s)") && out.contains("throttled"),
        "{out}"
    );
    assert_eq!(q.depth(&q.dlq).await, (2, 0));
    assert_eq!(q.depth(&q.source).await, (2 + 2, 0), "and 2 access events");

    let out = ok(auditctl(
        &moto.endpoint,
        &["dlq", "redrive", "--reason", "throttled"],
        &q.env(),
    ));
    assert!(out.contains("moved 1 message(s)"), "{out}");
    let left = q.visible(&q.dlq).await;
    assert_eq!(
        left.keys().collect::<Vec<_>>(),
        [&conflict],
        "conflict is left for a person"
    );

    // Moved messages keep body and attributes byte for byte.
    let sent = q.moved().await;
    assert_eq!(sent.len(), 3);
    for m in sent.values() {
        assert!(m.body().unwrap().starts_with(r#"{"auditText":"t"#));
        let attrs = m.message_attributes.as_ref().unwrap();
        assert_eq!(attrs["failureReason"].string_value(), Some("throttled"));
        let context = audit_receiver::deadletter::FailureContext::parse(
            attrs["failureContext"].string_value().unwrap(),
        )
        .unwrap();
        assert!(context.sqs_message_id.starts_with("orig-throttled-"));
    }
}

#[tokio::test]
async fn redrive_keeps_the_identity_of_a_message_sqs_moved_through_the_function() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let q = queues(&moto).await;
    // SQS moved this message itself after maxReceiveCount: no failureContext, and (as SQS keeps
    // them on that move) its own message id and SentTimestamp are the original delivery's. The
    // body has no messageId and no auditTime: the key is (SQS id, SentTimestamp).
    let body = r#"{"auditText":"payment captured","amount":12.50}"#;
    let original = q.dead_letter(body, None).await;
    let sent_timestamp = q.visible(&q.dlq).await[&original]
        .attributes
        .as_ref()
        .unwrap()[&MessageSystemAttributeName::SentTimestamp]
        .clone();
    // Its first delivery was written (the success was then lost, so SQS kept retrying).
    let handler = handler(&moto.endpoint, TABLE, settings());
    let mut first = record(&original, body);
    first
        .attributes
        .insert("SentTimestamp".into(), sent_timestamp.clone());
    assert!(failed(&handler.handle(event(vec![first])).await.unwrap()).is_empty());
    assert_eq!(scan(&moto.client(), TABLE).await.len(), 1);

    let out = ok(auditctl(&moto.endpoint, &["dlq", "redrive"], &q.env()));
    assert!(
        out.contains("moved 1 message(s)") && out.contains("max_receives"),
        "{out}"
    );
    assert!(q.visible(&q.dlq).await.is_empty());

    // The redriven message, as the event source mapping would deliver it.
    let redriven = q.moved().await;
    let (new_id, message) = redriven
        .iter()
        .next()
        .expect("one message in the audit queue");
    assert_ne!(new_id, &original, "SendMessage gives a new id");
    assert_eq!(message.body(), Some(body), "body byte for byte");
    let attrs = message.message_attributes.clone().unwrap();
    let context = audit_receiver::deadletter::FailureContext::parse(
        attrs["failureContext"].string_value().unwrap(),
    )
    .unwrap();
    assert_eq!(context.reason, "max_receives");
    assert_eq!(context.sqs_message_id, original);
    assert_eq!(
        context.sent_timestamp.as_deref(),
        Some(sent_timestamp.as_str())
    );

    let mut delivery = record(new_id, message.body().unwrap());
    delivery.attributes.insert(
        "SentTimestamp".into(),
        message.attributes.as_ref().unwrap()[&MessageSystemAttributeName::SentTimestamp].clone(),
    );
    for (name, value) in attrs {
        let mut attribute = SqsMessageAttribute::default();
        attribute.data_type = Some(value.data_type().to_owned());
        attribute.string_value = value.string_value().map(str::to_owned);
        delivery.message_attributes.insert(name, attribute);
    }
    let response = handler.handle(event(vec![delivery])).await.unwrap();
    assert!(failed(&response).is_empty(), "a duplicate is a success");

    let items = scan(&moto.client(), TABLE).await;
    assert_eq!(items.len(), 1, "exactly one item for the original identity");
    assert_eq!(s(&items[0], "messageId"), original);
    let expected_time = canonical_time(
        audit_receiver::message::parse_sent_timestamp(Some(&sent_timestamp)).unwrap(),
    );
    assert_eq!(s(&items[0], "auditTime"), expected_time);
}

// -----------------------------------------------------------------------------------------
// dlq list: every message, or how many of how many

/// An SQS endpoint in front of moto that answers ReceiveMessage as SQS itself may on a queue
/// spread over many servers: the k-th receive (from 1) comes back empty when `empty(k)` says so,
/// the others with at most `most` messages, while messages remain. Every other request is
/// forwarded as it is. Scripted by count, never by time.
struct ScriptedSqs {
    endpoint: String,
    receives: Arc<AtomicUsize>,
}

impl ScriptedSqs {
    fn start(upstream: &str, empty: fn(usize) -> bool, most: u64) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.set_nonblocking(true).unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let receives = Arc::new(AtomicUsize::new(0));
        let counter = receives.clone();
        // A thread of its own: the test's runtime is blocked while auditctl runs.
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                while let Ok((mut socket, _)) = listener.accept().await {
                    let upstream = upstream.clone();
                    let counter = counter.clone();
                    tokio::spawn(async move {
                        let mut buffer = Vec::new();
                        while let Some(request) = read_request(&mut socket, &mut buffer).await {
                            let (status, content_type, body) = if request.target
                                == "AmazonSQS.ReceiveMessage"
                            {
                                let k = counter.fetch_add(1, Ordering::SeqCst) + 1;
                                if empty(k) {
                                    (200, "application/x-amz-json-1.0".to_owned(), b"{}".to_vec())
                                } else {
                                    let mut asked: Value =
                                        serde_json::from_slice(&request.body).unwrap();
                                    asked["MaxNumberOfMessages"] = most.into();
                                    let body = serde_json::to_vec(&asked).unwrap();
                                    forward(&upstream, &request, &body).await
                                }
                            } else {
                                forward(&upstream, &request, &request.body).await
                            };
                            let headers = [("Content-Type", content_type.as_str())];
                            if write_response(&mut socket, status, &headers, &body)
                                .await
                                .is_err()
                            {
                                return;
                            }
                        }
                    });
                }
            });
        });
        Self { endpoint, receives }
    }

    fn receives(&self) -> usize {
        self.receives.load(Ordering::SeqCst)
    }
}

/// One request to moto on a connection of its own: the answer's status, content type and body.
async fn forward(upstream: &str, request: &Request, body: &[u8]) -> (u16, String, Vec<u8>) {
    let mut head = format!("{} {} HTTP/1.1\r\n", request.method, request.path);
    for (name, value) in &request.headers {
        let name_lower = name.to_ascii_lowercase();
        if name_lower != "content-length" && name_lower != "connection" {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    let mut stream = tokio::net::TcpStream::connect(upstream).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let end = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&response[..end]).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        .map(|(_, value)| value.trim().to_owned())
        .unwrap_or_default();
    (status, content_type, response[end..].to_vec())
}

#[tokio::test]
async fn dlq_list_lists_every_message_of_a_queue_that_answers_receives_short_and_empty() {
    let moto = Moto::start();
    let q = queues(&moto).await;
    let mut sent = HashSet::new();
    for i in 0..37 {
        let reason = ["throttled", "conflict"][i % 2];
        sent.insert(
            q.dead_letter(&format!(r#"{{"auditText":"t{i}"}}"#), Some(reason))
                .await,
        );
    }
    // Receives 1 and 2 of every 4 come back empty (two in a row), the others with at most 4
    // messages: more than one receive returns, and empty answers while messages remain.
    let sqs = ScriptedSqs::start(&moto.endpoint, |k| k % 4 == 1 || k % 4 == 2, 4);

    let output = auditctl(
        &sqs.endpoint,
        &["dlq", "list", "--format", "jsonl"],
        &q.env(),
    );
    let rows = jsonl(&ok(output));
    let listed: Vec<String> = rows
        .iter()
        .map(|r| r["messageId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed.len(), 37, "each message once");
    assert_eq!(listed.into_iter().collect::<HashSet<_>>(), sent);
    assert!(sqs.receives() >= 20, "{} receives", sqs.receives());
    assert_eq!(
        q.depth(&q.dlq).await,
        (37, 0),
        "every message visible again"
    );
}

#[tokio::test]
async fn dlq_list_says_how_many_it_listed_of_how_many_and_exits_1_when_another_consumer_holds_some()
{
    let moto = Moto::start();
    let q = queues(&moto).await;
    for i in 0..12 {
        q.dead_letter(&format!(r#"{{"auditText":"t{i}"}}"#), Some("throttled"))
            .await;
    }
    // Another consumer holds 4 in flight, far longer than the test runs.
    let taken = q
        .sqs
        .receive_message()
        .queue_url(&q.dlq)
        .max_number_of_messages(4)
        .visibility_timeout(3600)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(taken.len(), 4);
    let taken: HashSet<String> = taken.into_iter().filter_map(|m| m.message_id).collect();

    let output = auditctl(
        &moto.endpoint,
        &["dlq", "list", "--format", "jsonl"],
        &q.env(),
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("listed 8 of 12 messages")
            && message.contains("4 are in flight with another consumer")
            && message.contains("run auditctl dlq list again"),
        "{message}"
    );
    let rows = jsonl(&stdout(&output));
    assert_eq!(rows.len(), 8, "everything it got is printed");
    assert!(
        rows.iter()
            .all(|r| !taken.contains(r["messageId"].as_str().unwrap()))
    );
    assert_eq!(
        q.depth(&q.dlq).await,
        (8, 4),
        "its own visible again, the other consumer's still held"
    );

    // The table says the same.
    let output = auditctl(&moto.endpoint, &["dlq", "list"], &q.env());
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("listed 8 of 12 messages"));
    assert_eq!(stdout(&output).lines().count(), 2 + 8);
}

#[tokio::test]
async fn dlq_redrive_moves_every_message_of_a_queue_that_answers_receives_short_and_empty() {
    let moto = Moto::start();
    let q = queues(&moto).await;
    let mut bodies = HashSet::new();
    for i in 0..37 {
        let reason = ["throttled", "conflict"][i % 2];
        let body = format!(r#"{{"auditText":"t{i}"}}"#);
        q.dead_letter(&body, Some(reason)).await;
        bodies.insert(body);
    }
    // As for list: receives 1 and 2 of every 4 empty, the others at most 4 messages.
    let sqs = ScriptedSqs::start(&moto.endpoint, |k| k % 4 == 1 || k % 4 == 2, 4);

    let dry = ok(auditctl(
        &sqs.endpoint,
        &["dlq", "redrive", "--dry-run"],
        &q.env(),
    ));
    assert!(dry.contains("would move 37 message(s)"), "{dry}");
    assert_eq!(q.depth(&q.dlq).await, (37, 0), "a dry run moves nothing");

    let out = ok(auditctl(
        &sqs.endpoint,
        &["dlq", "redrive", "--reason", "throttled"],
        &q.env(),
    ));
    assert!(
        out.contains("moved 19 message(s)") && out.contains("left in the dead-letter queue: 18"),
        "{out}"
    );
    assert_eq!(q.depth(&q.dlq).await, (18, 0));
    let out = ok(auditctl(&sqs.endpoint, &["dlq", "redrive"], &q.env()));
    assert!(out.contains("moved 18 message(s)"), "{out}");
    assert_eq!(q.depth(&q.dlq).await, (0, 0));
    assert_eq!(
        q.depth(&q.source).await,
        (37 + 3, 0),
        "each message once, and the 3 commands' access events"
    );
    let mut moved = HashSet::new();
    loop {
        // Received and hidden for the rest of the test, so that each is read once.
        let batch = q
            .sqs
            .receive_message()
            .queue_url(&q.source)
            .max_number_of_messages(10)
            .visibility_timeout(600)
            .send()
            .await
            .unwrap()
            .messages
            .unwrap_or_default();
        if batch.is_empty() {
            break;
        }
        moved.extend(batch.into_iter().filter_map(|m| m.body));
    }
    moved.retain(|body| !is_access_event(body));
    assert_eq!(moved, bodies, "every body as it was");
    assert!(sqs.receives() >= 30, "{} receives", sqs.receives());
}

#[tokio::test]
async fn dlq_redrive_says_how_many_it_saw_of_how_many_and_exits_1_when_another_consumer_holds_some()
{
    let moto = Moto::start();
    let q = queues(&moto).await;
    for i in 0..12 {
        q.dead_letter(&format!(r#"{{"auditText":"t{i}"}}"#), Some("throttled"))
            .await;
    }
    let taken = q
        .sqs
        .receive_message()
        .queue_url(&q.dlq)
        .max_number_of_messages(4)
        .visibility_timeout(3600)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(taken.len(), 4);

    let output = auditctl(&moto.endpoint, &["dlq", "redrive"], &q.env());
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("moved 8 message(s)"),
        "{}",
        stdout(&output)
    );
    let message = stderr(&output);
    assert!(
        message.contains("saw 8 of 12 messages")
            && message.contains("4 are in flight with another consumer")
            && message.contains("run auditctl dlq redrive again once they are visible"),
        "{message}"
    );
    assert_eq!(
        q.depth(&q.dlq).await,
        (0, 4),
        "the other consumer's still held"
    );
    assert_eq!(q.depth(&q.source).await, (8 + 1, 0), "and its access event");
}

// -----------------------------------------------------------------------------------------
// dlq list --show-body: the whole body, in every format

/// RFC 4180 records: fields separated by commas, records by CRLF, a quoted field may hold
/// anything (a quote doubled).
fn csv_records(text: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\r') if chars.peek() == Some(&'\n') => {
                chars.next();
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            (false, c) => field.push(c),
        }
    }
    records
}

/// About 5 KB of audit text with line breaks (LF and CRLF), tabs, quotes, commas and text
/// beyond ASCII.
fn long_body() -> String {
    let mut text = String::new();
    let mut line = 0;
    while text.len() < 5000 {
        line += 1;
        let end = if line % 5 == 0 { "\r\n" } else { "\n" };
        text.push_str(&format!(
            "line {line}:\tZoë paid 12,50 € to \"Łukasz\" — 日本語 🦀 ok{end}"
        ));
    }
    format!(r#"{{"auditText":"{}"}}"#, text)
}

#[tokio::test]
async fn dlq_list_show_body_prints_a_body_of_several_kb_in_full_in_every_format() {
    let moto = Moto::start();
    let q = queues(&moto).await;
    let long = long_body();
    assert!(long.len() > 5000 && long.contains('\n') && !long.is_ascii());
    let short = r#"{"auditText":"short one"}"#.to_owned();
    let long_id = q.dead_letter(&long, Some("conflict")).await;
    let short_id = q.dead_letter(&short, Some("throttled")).await;
    let bodies = HashMap::from([(long_id.clone(), &long), (short_id.clone(), &short)]);

    let run = |format: &'static str| {
        ok(auditctl(
            &moto.endpoint,
            &["dlq", "list", "--show-body", "--format", format],
            &q.env(),
        ))
    };

    let rows = jsonl(&run("jsonl"));
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let id = row["messageId"].as_str().unwrap();
        assert_eq!(row["body"].as_str(), Some(bodies[id].as_str()), "jsonl");
    }

    let records = csv_records(&run("csv"));
    assert_eq!(records.len(), 3, "a header and two rows");
    let column = |name: &str| records[0].iter().position(|c| c == name).unwrap();
    let (id_at, body_at) = (column("messageId"), column("body"));
    for record in &records[1..] {
        assert_eq!(&record[body_at], bodies[&record[id_at]], "csv");
    }

    // The table: each message's row, then its body in full between two marker lines.
    let table = run("table");
    for (id, body) in &bodies {
        let start_marker = format!("\n--- body of {id}, {} bytes ---\n", body.len());
        let at = table
            .find(&start_marker)
            .unwrap_or_else(|| panic!("{table}"));
        let row = table.find(&format!("| {id} |")).expect("its row");
        assert!(row < at, "the row comes before its body");
        let start = at + start_marker.len();
        assert_eq!(&table[start..start + body.len()], body.as_str(), "table");
        assert!(
            table[start + body.len()..].starts_with("\n--- end of body ---\n"),
            "{table}"
        );
    }
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(rows.len(), 3, "a header and two rows: {table}");
    assert!(
        !rows[0].contains("body "),
        "no cut body column: {}",
        rows[0]
    );
    let width = rows[0].chars().count();
    assert!(rows.iter().all(|l| l.chars().count() == width), "{table}");
    assert_eq!(q.depth(&q.dlq).await, (2, 0));
}

// =========================================================================================
// Access to the trail is itself recorded (src/access.rs; SPEC "Access to the trail is itself
// recorded"): query, get, dlq list and dlq redrive first send one audit event of their own to
// the audit queue, which the function writes like any other event.

/// moto's answer to sts:GetCallerIdentity for the key `test`.
const MOTO_CALLER: &str = "arn:aws:sts::123456789012:user/moto";

/// An access event of auditctl: its action is `auditctl.<command>`.
fn is_access_event(body: &str) -> bool {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|b| b["action"].as_str().map(|a| a.starts_with("auditctl.")))
        .unwrap_or(false)
}

impl Queues {
    /// Every message of the audit queue, received and deleted: what the next command adds is
    /// then all the queue holds.
    async fn take(&self) -> Vec<aws_sdk_sqs::types::Message> {
        let mut taken = Vec::new();
        loop {
            let batch = self
                .sqs
                .receive_message()
                .queue_url(&self.source)
                .max_number_of_messages(10)
                .message_attribute_names("All")
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .send()
                .await
                .unwrap()
                .messages
                .unwrap_or_default();
            if batch.is_empty() {
                return taken;
            }
            for m in batch {
                self.sqs
                    .delete_message()
                    .queue_url(&self.source)
                    .receipt_handle(m.receipt_handle().unwrap())
                    .send()
                    .await
                    .unwrap();
                taken.push(m);
            }
        }
    }

    /// The one access event a command sent: the audit queue holds it and nothing else.
    async fn one_access_event(&self) -> (aws_sdk_sqs::types::Message, Value) {
        let mut taken = self.take().await;
        assert_eq!(taken.len(), 1, "exactly one message: {taken:?}");
        let message = taken.remove(0);
        let body = serde_json::from_str(message.body().unwrap()).unwrap();
        (message, body)
    }
}

/// Delivers messages of the audit queue to the function as the event source mapping does.
async fn write_through_function(moto: &Moto, messages: &[aws_sdk_sqs::types::Message]) {
    let handler = handler(&moto.endpoint, TABLE, settings());
    let records = messages
        .iter()
        .map(|m| {
            let mut delivery = record(m.message_id().unwrap(), m.body().unwrap());
            delivery.attributes.insert(
                "SentTimestamp".into(),
                m.attributes.as_ref().unwrap()[&MessageSystemAttributeName::SentTimestamp].clone(),
            );
            delivery
        })
        .collect();
    let response = handler.handle(event(records)).await.unwrap();
    assert!(failed(&response).is_empty(), "{response:?}");
}

/// The fields every access event carries, as the SPEC says; returns its arguments.
fn assert_access_event(body: &Value, action: &str, resource: &str) -> Value {
    assert_eq!(body["actor"], MOTO_CALLER, "{body}");
    assert_eq!(body["action"], action, "{body}");
    assert_eq!(body["resource"], resource, "{body}");
    assert_eq!(
        body["outcome"], "unknown",
        "sent before the command runs: {body}"
    );
    let id = body["messageId"].as_str().unwrap();
    let hex = id
        .strip_prefix("auditctl-")
        .unwrap_or_else(|| panic!("{id}"));
    assert!(
        hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()),
        "{id}"
    );
    let time = body["auditTime"].as_str().unwrap();
    let sent = chrono::DateTime::parse_from_rfc3339(time).unwrap().to_utc();
    assert_eq!(canonical_time(sent), time, "canonical time");
    let age = chrono::Utc::now() - sent;
    assert!(
        age >= chrono::TimeDelta::zero() && age < chrono::TimeDelta::minutes(2),
        "{time}"
    );
    assert!(body.get("sourceIp").is_none(), "{body}");
    assert!(body.get("auditText").is_none(), "{body}");
    assert_eq!(body["tool"], "auditctl");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    body["arguments"].clone()
}

#[tokio::test]
async fn each_command_that_reads_the_trail_or_moves_dead_letters_records_one_access_event_the_function_writes()
 {
    let moto = Moto::start();
    write_trail(&moto).await;
    let q = queues(&moto).await;
    q.dead_letter(r#"{"auditText":"t"}"#, Some("throttled"))
        .await;
    let mut events = Vec::new();

    // query: the table, and the arguments as given.
    let rows = jsonl(&ok(auditctl(
        &moto.endpoint,
        &[
            "query",
            "--from",
            "2026-11-22T00:00:00Z",
            "--to",
            "2026-11-22T23:59:59Z",
            "--limit",
            "3",
            "--desc",
            "--format",
            "jsonl",
        ],
        &q.env(),
    )));
    assert_eq!(rows.len(), 3, "and then it reads");
    let (message, body) = q.one_access_event().await;
    let arguments = assert_access_event(&body, "auditctl.query", TABLE);
    assert_eq!(arguments["from"], "2026-11-22T00:00:00Z");
    assert_eq!(arguments["to"], "2026-11-22T23:59:59Z");
    assert_eq!(arguments["limit"], "3");
    assert_eq!(arguments["desc"], true);
    assert_eq!(arguments["format"], "jsonl");
    assert_eq!(arguments["queueUrl"], q.source.as_str());
    assert!(arguments.get("pageSize").is_none(), "defaults are left out");
    let query_event = body["messageId"].as_str().unwrap().to_owned();
    events.push(message);

    // get: the table, and the messageId asked for.
    ok(auditctl(
        &moto.endpoint,
        &["get", "tie-b-23", "--table", TABLE],
        &q.env(),
    ));
    let (message, body) = q.one_access_event().await;
    let arguments = assert_access_event(&body, "auditctl.get", TABLE);
    assert_eq!(arguments["messageId"], "tie-b-23");
    assert_eq!(arguments["table"], TABLE);
    events.push(message);

    // dlq list and dlq redrive: the dead-letter queue, by its URL.
    ok(auditctl(
        &moto.endpoint,
        &["dlq", "list", "--reason", "throttled", "--show-body"],
        &q.env(),
    ));
    let (message, body) = q.one_access_event().await;
    let arguments = assert_access_event(&body, "auditctl.dlq.list", &q.dlq);
    assert_eq!(arguments["reason"], "throttled");
    assert_eq!(arguments["showBody"], true);
    assert_eq!(arguments["dlqUrl"], q.dlq.as_str());
    events.push(message);

    let out = ok(auditctl(
        &moto.endpoint,
        &["dlq", "redrive", "--dry-run", "--max", "5"],
        &q.env(),
    ));
    assert!(out.contains("would move 1 message(s)"), "{out}");
    let (message, body) = q.one_access_event().await;
    let arguments = assert_access_event(&body, "auditctl.dlq.redrive", &q.dlq);
    assert_eq!(arguments["dryRun"], true);
    assert_eq!(arguments["max"], "5");
    events.push(message);

    // Through the same queue and the real function, the events are in the trail: a lookup by
    // action finds the query's own access, one by actor all four.
    write_through_function(&moto, &events).await;
    let lookup = |field: &str, value: &str| {
        jsonl(&ok(auditctl(
            &moto.endpoint,
            &[
                "query",
                field,
                value,
                "--from",
                "2026-11-01T00:00:00Z",
                "--to",
                "2100-01-01T00:00:00Z",
                "--format",
                "jsonl",
                "--no-audit-event",
            ],
            &q.env(),
        )))
    };
    let found = lookup("--action", "auditctl.query");
    assert_eq!(found.len(), 1, "{found:?}");
    let item = &found[0];
    assert_eq!(item["messageId"], query_event.as_str());
    assert_eq!(item["actor"], MOTO_CALLER);
    assert_eq!(item["resource"], TABLE);
    assert_eq!(item["outcome"], "unknown");
    assert_eq!(item["extra"]["arguments"]["limit"], "3");
    assert_eq!(item["extra"]["tool"], "auditctl");
    let by_caller = lookup("--actor", MOTO_CALLER);
    let mut actions: Vec<&str> = by_caller
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    actions.sort();
    assert_eq!(
        actions,
        [
            "auditctl.dlq.list",
            "auditctl.dlq.redrive",
            "auditctl.get",
            "auditctl.query"
        ]
    );
}

#[tokio::test]
async fn an_access_event_that_cannot_be_sent_fails_the_command_which_reads_nothing() {
    let moto = Moto::start();
    write_trail(&moto).await;
    let q = queues(&moto).await;
    for i in 0..2 {
        q.dead_letter(&format!(r#"{{"auditText":"t{i}"}}"#), Some("throttled"))
            .await;
    }
    let missing = format!("{}/123456789012/NoSuchAuditQueue", moto.endpoint);
    let env = [
        ("DEAD_LETTER_QUEUE_URL", q.dlq.as_str()),
        ("AUDIT_QUEUE_URL", missing.as_str()),
    ];
    let commands: [&[&str]; 4] = [
        &[
            "query",
            "--from",
            "2026-11-22T00:00:00Z",
            "--to",
            "2026-11-24T23:59:59Z",
        ],
        &["get", "tie-b-23"],
        &["dlq", "list", "--show-body"],
        &["dlq", "redrive"],
    ];
    for args in commands {
        let output = auditctl(&moto.endpoint, args, &env);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(
            stdout(&output),
            "",
            "{args:?}: nothing read, nothing printed"
        );
        let message = stderr(&output);
        assert!(
            message.contains("access not recorded, so nothing was read")
                && message.contains(&missing)
                && message
                    .contains("check AUDIT_QUEUE_URL or --queue-url (stack output AuditQueueUrl)"),
            "{args:?}: {message}"
        );
    }
    // An empty URL (AUDIT_QUEUE_URL= ) is no way around it.
    let output = auditctl(
        &moto.endpoint,
        &["get", "tie-b-23"],
        &[("AUDIT_QUEUE_URL", "")],
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).contains("the audit queue URL is empty"),
        "{}",
        stderr(&output)
    );
    // The dead-letter queue was never received from: both messages there, received once now.
    let held = q
        .sqs
        .receive_message()
        .queue_url(&q.dlq)
        .max_number_of_messages(10)
        .visibility_timeout(0)
        .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(held.len(), 2);
    for m in held {
        assert_eq!(
            m.attributes.unwrap()[&MessageSystemAttributeName::ApproximateReceiveCount],
            "1"
        );
    }
    assert_eq!(q.depth(&q.source).await, (0, 0));
}

#[tokio::test]
async fn no_audit_event_sends_nothing_and_without_an_audit_queue_the_access_is_said_unrecorded() {
    let moto = Moto::start();
    write_trail(&moto).await;
    let q = queues(&moto).await;
    q.dead_letter(r#"{"auditText":"t"}"#, Some("throttled"))
        .await;
    let query = [
        "query",
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-22T23:59:59Z",
        "--format",
        "jsonl",
    ];

    for args in [
        &[&query[..], &["--no-audit-event"]].concat()[..],
        &["--no-audit-event", "dlq", "list"],
    ] {
        let output = auditctl(&moto.endpoint, args, &q.env());
        assert!(
            stderr(&output).contains("access not recorded: --no-audit-event"),
            "{}",
            stderr(&output)
        );
        assert!(!ok(output).is_empty(), "it reads");
    }
    assert_eq!(q.depth(&q.source).await, (0, 0), "nothing sent");

    // No audit queue: it reads, and says the access was not recorded and how to record it.
    let output = auditctl(&moto.endpoint, &query, &[]);
    let message = stderr(&output);
    assert!(
        message.contains("access not recorded: no audit queue")
            && message.contains("set AUDIT_QUEUE_URL or --queue-url (stack output AuditQueueUrl)"),
        "{message}"
    );
    assert!(!jsonl(&ok(output)).is_empty());
}
