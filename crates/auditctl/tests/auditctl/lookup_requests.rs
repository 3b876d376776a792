//! Owns what a lookup costs in DynamoDB requests, its retries of unprocessed keys, and the items
//! the index lists that the table no longer holds, against a scripted endpoint in front of moto.
//! Must not know how the rows are printed.

use audit_testkit::net::on_own_thread;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::Value;

use crate::harness::*;
use crate::lookups::{Event, expected, is, write_events};
use crate::support::http::{Request, read_request, write_response};
use crate::support::*;

/// What the scripted endpoint does to a BatchGetItem.
#[derive(Clone)]
enum Script {
    /// Processes at most this many keys a request and returns the rest as UnprocessedKeys (as
    /// DynamoDB does when the read capacity is exhausted), and gives the items back in reverse
    /// order (DynamoDB's order is none in particular).
    Unprocessed { most: usize },
    /// Deletes these items (messageId, auditTime) from moto's table, as TTL does, before it
    /// forwards the first BatchGetItem: the index has listed them, the table no longer holds
    /// them when they are read.
    DeleteBeforeFirst { items: Vec<(String, String)> },
}

/// A scripted DynamoDB endpoint in front of moto: BatchGetItem as its `Script` says. Every other
/// request is forwarded as it is.
struct ScriptedDynamo {
    endpoint: String,
    batch_gets: Arc<AtomicUsize>,
}

impl ScriptedDynamo {
    fn start(upstream: &str, script: Script) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.set_nonblocking(true).unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let batch_gets = Arc::new(AtomicUsize::new(0));
        let counter = batch_gets.clone();
        on_own_thread(move || async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((mut socket, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let counter = counter.clone();
                let script = script.clone();
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    while let Some(request) = read_request(&mut socket, &mut buffer).await {
                        let (status, content_type, body) =
                            if request.target == "DynamoDB_20120810.BatchGetItem" {
                                let first = counter.fetch_add(1, Ordering::SeqCst) == 0;
                                match &script {
                                    Script::Unprocessed { most } => {
                                        batch_get_some(&upstream, &request, *most).await
                                    }
                                    Script::DeleteBeforeFirst { items } => {
                                        if first {
                                            delete(&upstream, items).await;
                                        }
                                        forward(&upstream, &request, &request.body).await
                                    }
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
        Self {
            endpoint,
            batch_gets,
        }
    }
}

/// Deletes the items (messageId, auditTime) from moto's table.
async fn delete(upstream: &str, items: &[(String, String)]) {
    let client = client(&format!("http://{upstream}"));
    for (message_id, audit_time) in items {
        client
            .delete_item()
            .table_name(TABLE)
            .key("messageId", AttributeValue::S(message_id.clone()))
            .key("auditTime", AttributeValue::S(audit_time.clone()))
            .send()
            .await
            .expect("moto deletes the item");
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
    let dynamo = ScriptedDynamo::start(&moto.endpoint, Script::Unprocessed { most: 40 });
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

#[tokio::test]
async fn items_the_index_lists_but_the_table_no_longer_holds_are_named_on_stderr_and_the_rest_printed()
 {
    let moto = Moto::start();
    let events = carol([3, 3, 3, 3]);
    write_events(&moto, &events).await;
    let all = expected(&events, |_| true);
    // Two items expire between the index listing them and the table being read.
    let gone = [all[2].clone(), all[7].clone()];
    let gone_ids: Vec<(String, String)> = gone
        .iter()
        .map(|(time, id)| (id.clone(), time.clone()))
        .collect();
    let dynamo = ScriptedDynamo::start(
        &moto.endpoint,
        Script::DeleteBeforeFirst { items: gone_ids },
    );
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
        ],
        &[],
    );
    let warnings = stderr(&output);
    let rows = jsonl(&ok(output));
    let rest: Vec<(String, String)> = all.iter().filter(|k| !gone.contains(k)).cloned().collect();
    assert_eq!(keys(&rows), rest, "the others, in order");
    let lines: Vec<&str> = warnings
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect();
    assert_eq!(lines.len(), 2, "{warnings}");
    for ((time, id), line) in gone.iter().zip(&lines) {
        let key = format!(
            "carol#{}",
            audit_model::message::fnv1a_32(id.as_bytes()) % 4
        );
        assert_eq!(
            *line,
            format!(
                "warning: index byActor lists messageId {id} at auditTime {time} under actorKey {key}, but table {TABLE} no longer holds it (expired by TTL or deleted since the index listed it): left out"
            )
        );
    }
    assert!(
        warnings.contains("10 rows,")
            && warnings.contains(", 2 listed by the index but no longer in the table"),
        "{warnings}"
    );
}
