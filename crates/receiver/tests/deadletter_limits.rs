//! Dead-lettering at SQS's limits, against moto behind a proxy that plays SQS where moto does
//! not: a `SendMessage` answered late (SQS took the message, its answer is slow) near the
//! invocation's deadline, and a queue's size counted as SQS counts it (moto counts the body only).
//! Each ends with exactly one copy in the dead-letter queue, with its reason.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use audit_aws::sqs::SqsDeadLetterQueue;
use audit_receiver::Redrivers;
use audit_receiver::batch::{Failure, dead_letter};
use audit_receiver::deadletter::{FAILURE_CONTEXT, FAILURE_REASON};
use audit_receiver::message::AuditMessage;
use aws_sdk_sqs::types::Message;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::Value;
use support::http::{read_request, write_response};
use support::*;
use tokio::net::{TcpListener, TcpStream};

const SEND: &str = "AmazonSQS.SendMessage";

/// What the proxy does with `SendMessage`.
#[derive(Clone, Copy, Default)]
struct Sqs {
    /// Forward it, then hold the answer this long (SQS took the message; its answer is late).
    answer_after: Duration,
    /// Refuse it, as SQS does, when its size counted as SQS counts it is over this.
    max_message_bytes: Option<usize>,
}

/// A proxy in front of moto's SQS, playing `sqs` on `SendMessage`; every other request is
/// forwarded as it came. Keeps the size of every `SendMessage` as SQS counts it, and whether it
/// was taken.
struct Proxy {
    endpoint: String,
    sends: Arc<Mutex<Vec<(usize, bool)>>>,
}

impl Proxy {
    async fn start(upstream: &str, sqs: Sqs) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let sends = Arc::new(Mutex::new(Vec::new()));
        let kept = sends.clone();
        let upstream = upstream.trim_start_matches("http://").to_owned();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, upstream.clone(), sqs, kept.clone()));
            }
        });
        Self { endpoint, sends }
    }

    fn sends(&self) -> Vec<(usize, bool)> {
        self.sends.lock().unwrap().clone()
    }
}

async fn serve(
    mut socket: TcpStream,
    upstream: String,
    sqs: Sqs,
    sends: Arc<Mutex<Vec<(usize, bool)>>>,
) {
    let mut buffer = Vec::new();
    while let Some(request) = read_request(&mut socket, &mut buffer).await {
        let send = request.target == SEND;
        if send {
            let size = sqs_size(&request.body);
            let refused = sqs.max_message_bytes.is_some_and(|limit| size > limit);
            sends.lock().unwrap().push((size, !refused));
            if let (true, Some(limit)) = (refused, sqs.max_message_bytes) {
                // SQS's answer (as moto gives it for a body over the queue's size).
                let body = format!(
                    r#"{{"__type":"com.amazonaws.sqs#InvalidParameterValue","Message":"One or more parameters are invalid. Reason: Message must be shorter than {limit} bytes."}}"#
                );
                let headers = [
                    ("Content-Type", "application/x-amz-json-1.0"),
                    (
                        "X-Amzn-Errortype",
                        "com.amazonaws.sqs#InvalidParameterValue",
                    ),
                    ("x-amzn-query-error", "InvalidParameterValue;Sender"),
                ];
                if write_response(&mut socket, 400, &headers, body.as_bytes())
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
        }
        let Some(answer) = relay(&request, &upstream).await else {
            return;
        };
        if send {
            // The message is in the queue; the answer is late.
            tokio::time::sleep(sqs.answer_after).await;
        }
        if send_back(&mut socket, answer).await.is_err() {
            return;
        }
    }
}

/// A `SendMessage` request's size as SQS counts it against `MaximumMessageSize`: the body and
/// every message attribute's name, data type and value, in bytes.
fn sqs_size(request: &[u8]) -> usize {
    let request: Value = serde_json::from_slice(request).expect("a JSON SendMessage");
    let text =
        |value: &Value, name: &str| value.get(name).and_then(Value::as_str).map_or(0, str::len);
    let attributes = request
        .get("MessageAttributes")
        .and_then(Value::as_object)
        .map_or(0, |all| {
            all.iter()
                .map(|(name, attribute)| {
                    assert!(
                        attribute.get("BinaryValue").is_none(),
                        "String attributes only here"
                    );
                    name.len() + text(attribute, "DataType") + text(attribute, "StringValue")
                })
                .sum()
        });
    text(&request, "MessageBody") + attributes
}

/// moto with the table and a dead-letter queue, and the proxy in front of its SQS.
struct Stack {
    moto: Moto,
    sqs: aws_sdk_sqs::Client,
    dlq_url: String,
    proxy: Proxy,
}

impl Stack {
    async fn start(sqs: Sqs) -> Self {
        let moto = Moto::start();
        create_table(&moto.client(), TABLE).await;
        let client = sqs_client(&moto.endpoint);
        let dlq_url = client
            .create_queue()
            .queue_name("AuditDeadLetterQueue")
            .send()
            .await
            .expect("create queue")
            .queue_url
            .expect("queue url");
        let proxy = Proxy::start(&moto.endpoint, sqs).await;
        Self {
            moto,
            sqs: client,
            dlq_url,
            proxy,
        }
    }

    /// The function's dead-letter adapter, through the proxy.
    fn dead_letter_queue(&self) -> SqsDeadLetterQueue {
        SqsDeadLetterQueue::new(sqs_client(&self.proxy.endpoint), &self.dlq_url)
    }

    async fn dead_letters(&self) -> Vec<Message> {
        receive_all(&self.sqs, &self.dlq_url).await
    }
}

#[tokio::test]
async fn a_dead_letter_send_answered_late_near_the_deadline_makes_one_copy_with_its_reason() {
    // Given SQS that takes a dead letter at once and answers 2 s later, and a margin of 4 s: no
    // write after deadline - 4 s, no send started after deadline - 2 s, and one started waited
    // for until deadline - 1 s.
    let stack = Stack::start(Sqs {
        answer_after: Duration::from_millis(2_000),
        ..Sqs::default()
    })
    .await;
    let mut settings = settings();
    settings.deadline_margin = Duration::from_millis(4_000);
    let handler =
        handler(&stack.moto.endpoint, TABLE, settings).with_dead_letters(stack.dead_letter_queue());

    // When a record on its last receive comes with 3.6 s left: too late to write (deadline), so
    // dead-lettered on its last receive; its send starts at once and is answered after ~2 s,
    // 0.4 s after deadline - 2 s (where sends used to be cut off) and 0.6 s before deadline - 1 s.
    let mut last = record("last", r#"{"auditText":"x"}"#);
    last.attributes
        .insert("ApproximateReceiveCount".into(), "5".into());
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let mut context = Context::default();
    context.deadline = now_ms + 3_600;
    let mut event = aws_lambda_events::sqs::SqsEvent::default();
    event.records = vec![last];
    let response = handler
        .handle(LambdaEvent::new(event, context))
        .await
        .unwrap();

    // Then the send is waited for, not cut off after SQS took it: the record is reported
    // succeeded (not failed, which would make SQS move a second copy), and the queue holds one
    // copy with its reason.
    assert!(failed(&response).is_empty(), "{:?}", failed(&response));
    let letters = stack.dead_letters().await;
    assert_eq!(letters.len(), 1);
    assert_eq!(
        attribute(&letters[0], FAILURE_REASON).as_deref(),
        Some("deadline")
    );
    assert_eq!(stack.proxy.sends().len(), 1);
}

#[tokio::test]
async fn a_body_near_the_queues_size_is_dead_lettered_once_with_its_reason() {
    // Given a dead-letter queue that takes 4,096 bytes, counted as SQS counts them, and a poison
    // record whose body and attribute take 3,900: with failureReason and failureContext, over.
    let limit = 4_096;
    let stack = Stack::start(Sqs {
        max_message_bytes: Some(limit),
        ..Sqs::default()
    })
    .await;
    let handler = handler(&stack.moto.endpoint, TABLE, settings())
        .with_dead_letters(stack.dead_letter_queue());
    let body = format!("[{}1]", "1,".repeat(1_900));
    let mut poison = record("near", &body);
    poison
        .message_attributes
        .insert("tenant".into(), message_attribute(&"t".repeat(84)));
    let too_big = format!("[{}1]", "1,".repeat(2_100));

    let response = handler
        .handle(event(vec![poison, record("over", &too_big)]))
        .await
        .unwrap();

    // Then the first send is refused as too large, and the letter, fitted to the size SQS named,
    // is taken: one copy, with the body and attribute byte for byte, its reason and identity. A
    // body over the size on its own cannot be dead-lettered by the function: reported failed,
    // it stays on SQS's path.
    assert_eq!(failed(&response), ["over"]);
    let letters = stack.dead_letters().await;
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(letter.body(), Some(body.as_str()));
    assert_eq!(attribute(letter, "tenant"), Some("t".repeat(84)));
    assert_eq!(
        attribute(letter, FAILURE_REASON).as_deref(),
        Some("not_an_object")
    );
    let context: Value =
        serde_json::from_str(&attribute(letter, FAILURE_CONTEXT).unwrap()).unwrap();
    assert_eq!(context["reason"], "not_an_object");
    assert_eq!(context["sqsMessageId"], "near");
    assert!(context["sentTimestamp"].is_string(), "{context}");
    let sends = stack.proxy.sends();
    let taken: Vec<usize> = sends.iter().filter(|s| s.1).map(|s| s.0).collect();
    assert_eq!(taken.len(), 1, "{sends:?}");
    assert!(taken[0] <= limit, "{sends:?}");
}

#[tokio::test]
async fn the_adapters_size_of_a_letter_is_what_sqs_counts() {
    let stack = Stack::start(Sqs::default()).await;
    let mut poison = record("p", "[]");
    poison
        .message_attributes
        .insert("tenant".into(), message_attribute("acmé"));
    let invalid = AuditMessage::parse(Some("[]"), None).unwrap_err();
    let letter = dead_letter(
        &poison,
        &Redrivers::default(),
        &Failure::Invalid(invalid),
        chrono::Utc::now(),
    )
    .unwrap();

    stack.dead_letter_queue().send(&letter).await.unwrap();

    assert_eq!(stack.proxy.sends(), [(letter.size(), true)]);
}
