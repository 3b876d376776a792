//! Owns `dlq list` and `dlq redrive` on a queue that answers receives short and empty, and what
//! they say when another consumer holds messages. Must not know the messages' reasons.

use audit_testkit::net::on_own_thread;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use crate::dlq::queues;
use crate::harness::*;
use crate::support::http::{read_request, write_response};
use crate::support::*;

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
        on_own_thread(move || async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((mut socket, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    while let Some(request) = read_request(&mut socket, &mut buffer).await {
                        let (status, content_type, body) =
                            if request.target == "AmazonSQS.ReceiveMessage" {
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
        Self { endpoint, receives }
    }

    fn receives(&self) -> usize {
        self.receives.load(Ordering::SeqCst)
    }
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
    assert_eq!(q.depth(&q.source).await, (37, 0), "each message once");
    assert_eq!(
        q.depth(&q.access).await,
        (3, 0),
        "the 3 commands' access events, on the access queue"
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
    assert!(!moved.iter().any(|body| is_access_event(body)));
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
    assert_eq!(q.depth(&q.source).await, (8, 0));
    // Its access event, then its failure (exit 1: it saw 8 of 12), naming it.
    let mut events: Vec<Value> = q
        .take()
        .await
        .iter()
        .map(|m| serde_json::from_str(m.body().unwrap()).unwrap())
        .collect();
    events.sort_by_key(|e| e["outcome"] != "success");
    let outcomes: Vec<&Value> = events.iter().map(|e| &e["outcome"]).collect();
    assert_eq!(outcomes, ["success", "failure"]);
    assert_eq!(events[1]["accessEventId"], events[0]["messageId"]);
    assert_eq!(events[1]["error"]["kind"], "incomplete");
}
