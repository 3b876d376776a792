//! Dead-lettering against a real local SQS and DynamoDB (moto's server over HTTP): given the
//! function with `DEAD_LETTER_QUEUE_URL`, when records fail, then the dead-letter queue holds
//! each one once with its body, its attributes and its reason, the batch response reports only
//! what could not be dead-lettered, and a redrive finds the item it may already have written.

mod support;

use std::collections::HashMap;

use audit_aws::dynamodb::{DynamoDbStore, StoreError};
use audit_aws::sqs::SqsDeadLetterQueue;
use audit_receiver::batch::{Failure, dead_letter};
use audit_receiver::deadletter::{FAILURE_CONTEXT, FAILURE_REASON, FailureContext};
use audit_receiver::{Handler, Redrivers};
use aws_lambda_events::encodings::Base64Data;
use aws_lambda_events::sqs::{SqsMessage, SqsMessageAttribute};
use aws_sdk_sqs::types::{
    Message, MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName,
};
use support::*;

const TIME: &str = "2026-11-22T10:00:00Z";
/// A producer's attested sender: a role id and its session name.
const PRODUCER: &str = "AROAPRODUCER:orders-service";

async fn create_queue(sqs: &aws_sdk_sqs::Client, name: &str, max_size: Option<u32>) -> String {
    let mut request = sqs.create_queue().queue_name(name);
    if name.ends_with(".fifo") {
        request = request.attributes(QueueAttributeName::FifoQueue, "true");
    }
    if let Some(size) = max_size {
        request = request.attributes(QueueAttributeName::MaximumMessageSize, size.to_string());
    }
    request
        .send()
        .await
        .expect("create queue")
        .queue_url
        .expect("queue url")
}

/// The `failureContext` as sent, read field by field (not `FailureContext::parse`, which also
/// decides whether it can stand for an identity: a record with no `SentTimestamp` of its own
/// gets a context without one, which is reported but names no usable original time).
fn context(message: &Message) -> FailureContext {
    serde_json::from_str(&attribute(message, FAILURE_CONTEXT).expect("failureContext"))
        .expect("a failureContext of the documented fields")
}

/// A message received from a queue, as Lambda's event source mapping puts it in the event.
fn as_record(message: &Message, queue_arn: &str) -> SqsMessage {
    let mut record = SqsMessage::default();
    record.message_id = message.message_id.clone();
    record.receipt_handle = message.receipt_handle.clone();
    record.body = message.body.clone();
    record.event_source = Some("aws:sqs".into());
    record.event_source_arn = Some(queue_arn.into());
    for (name, value) in message.attributes().into_iter().flatten() {
        record
            .attributes
            .insert(name.as_str().to_owned(), value.clone());
    }
    for (name, value) in message.message_attributes().into_iter().flatten() {
        let mut a = SqsMessageAttribute::default();
        a.data_type = Some(value.data_type().to_owned());
        a.string_value = value.string_value().map(str::to_owned);
        a.binary_value = value.binary_value().map(|b| base64_data(b.as_ref()));
        record.message_attributes.insert(name.clone(), a);
    }
    record
}

/// `Base64Data` is `#[non_exhaustive]`: built from its Default.
fn base64_data(bytes: &[u8]) -> Base64Data {
    let mut data = Base64Data::default();
    data.extend_from_slice(bytes);
    data
}

struct Stack {
    moto: Moto,
    sqs: aws_sdk_sqs::Client,
    dlq_url: String,
}

impl Stack {
    async fn start(dlq_name: &str) -> Self {
        let moto = Moto::start();
        create_table(&moto.client(), TABLE).await;
        let sqs = sqs_client(&moto.endpoint);
        let dlq_url = create_queue(&sqs, dlq_name, None).await;
        Self { moto, sqs, dlq_url }
    }

    fn handler(&self) -> Handler<DynamoDbStore, SqsDeadLetterQueue> {
        handler(&self.moto.endpoint, TABLE, settings())
            .with_dead_letters(SqsDeadLetterQueue::new(self.sqs.clone(), &self.dlq_url))
    }

    async fn dead_letters(&self) -> Vec<Message> {
        receive_all(&self.sqs, &self.dlq_url).await
    }
}

#[tokio::test]
async fn every_permanent_failure_is_dead_lettered_at_once_with_its_reason_and_reported_succeeded() {
    let stack = Stack::start("AuditDeadLetterQueue").await;
    let handler = stack.handler();
    // A stored item, so that another payload under its key is a conflict.
    let stored = r#"{"auditText":"kept","messageId":"p-1","auditTime":"2026-11-22T10:00:00Z"}"#;
    handler
        .handle(event(vec![record("seed", stored)]))
        .await
        .unwrap();

    let big = format!(
        r#"{{"auditText":"{}","auditTime":"{TIME}"}}"#,
        "x".repeat(410_000)
    );
    let cases: Vec<(&str, String)> = vec![
        ("invalid_json", "{\"auditText\": oops".into()),
        ("not_an_object", "[1,2,3]".into()),
        ("missing_audit_text", format!(r#"{{"auditTime":"{TIME}"}}"#)),
        ("empty_audit_text", r#"{"auditText":""}"#.into()),
        ("invalid_field_type", r#"{"auditText":["a"]}"#.into()),
        (
            "audit_time_without_offset",
            r#"{"auditText":"x","auditTime":"2026-11-22T10:00:00"}"#.into(),
        ),
        (
            "invalid_audit_time",
            r#"{"auditText":"x","auditTime":"noon"}"#.into(),
        ),
        (
            "invalid_message_id",
            format!(r#"{{"auditText":"x","messageId":"","auditTime":"{TIME}"}}"#),
        ),
        (
            "message_id_without_audit_time",
            r#"{"auditText":"x","messageId":"p-2"}"#.into(),
        ),
        (
            "invalid_number",
            format!(r#"{{"auditText":"x","auditTime":"{TIME}","n":1e400}}"#),
        ),
        ("item_too_large", big),
        (
            "conflict",
            r#"{"auditText":"changed","messageId":"p-1","auditTime":"2026-11-22T12:00:00+02:00"}"#
                .into(),
        ),
    ];
    let mut records: Vec<SqsMessage> = cases
        .iter()
        .map(|(reason, body)| {
            let mut r = record(&format!("sqs-{reason}"), body);
            r.message_attributes
                .insert("tenant".into(), message_attribute("acme"));
            r
        })
        .collect();
    let mut no_time = record("sqs-missing_audit_time", r#"{"auditText":"x"}"#);
    no_time.attributes.remove("SentTimestamp");
    no_time
        .message_attributes
        .insert("tenant".into(), message_attribute("acme"));
    records.push(no_time);

    let response = handler.handle(event(records)).await.unwrap();

    assert!(
        failed(&response).is_empty(),
        "dead-lettered records are reported succeeded: {:?}",
        failed(&response)
    );
    let letters = stack.dead_letters().await;
    assert_eq!(letters.len(), cases.len() + 1, "each exactly once");
    let by_id: HashMap<String, &Message> = letters
        .iter()
        .map(|m| (context(m).sqs_message_id, m))
        .collect();
    for (reason, body) in cases
        .iter()
        .map(|(r, b)| (*r, b.as_str()))
        .chain([("missing_audit_time", r#"{"auditText":"x"}"#)])
    {
        let letter = by_id[&format!("sqs-{reason}")];
        assert_eq!(letter.body(), Some(body), "{reason}: body byte for byte");
        assert_eq!(attribute(letter, FAILURE_REASON).as_deref(), Some(reason));
        assert_eq!(attribute(letter, "tenant").as_deref(), Some("acme"));
        let context = context(letter);
        assert_eq!(context.reason, reason);
        assert_eq!(context.receive_count, Some(1));
        assert_eq!(context.event_source_arn.as_deref(), Some(QUEUE_ARN));
        assert!(!context.detail.is_empty());
        // The detail is the error in words, never the body or the audit text.
        for secret in [body, "oops", "changed", "xxxxxxxx"] {
            assert!(
                secret.len() < 3 || !context.detail.contains(secret),
                "{reason}: detail {:?} quotes the body",
                context.detail
            );
        }
    }
    let items = scan(&stack.moto.client(), TABLE).await;
    assert_eq!(items.len(), 1, "only the seed item");
    assert_eq!(s(&items[0], "auditText"), "kept");
}

#[tokio::test]
async fn a_transient_failure_comes_back_until_its_last_receive_then_is_dead_lettered() {
    let stack = Stack::start("AuditDeadLetterQueue").await;
    // No table: table_not_found, a transient reason (the table may be being created).
    let handler = handler(&stack.moto.endpoint, "NoSuchTable", settings())
        .with_dead_letters(SqsDeadLetterQueue::new(stack.sqs.clone(), &stack.dlq_url));
    let body = r#"{"auditText":"x"}"#;
    let mut early = record("early", body);
    early
        .attributes
        .insert("ApproximateReceiveCount".into(), "4".into());
    let mut last = record("last", body);
    last.attributes
        .insert("ApproximateReceiveCount".into(), "5".into());

    let response = handler.handle(event(vec![early, last])).await.unwrap();

    assert_eq!(failed(&response), ["early"]);
    let letters = stack.dead_letters().await;
    assert_eq!(letters.len(), 1);
    assert_eq!(
        attribute(&letters[0], FAILURE_REASON).as_deref(),
        Some("table_not_found")
    );
    assert_eq!(context(&letters[0]).receive_count, Some(5));
}

#[tokio::test]
async fn a_dead_letter_queue_that_does_not_exist_leaves_every_record_to_sqs() {
    let stack = Stack::start("AuditDeadLetterQueue").await;
    let missing = format!("{}/123456789012/NoSuchQueue", stack.moto.endpoint);
    let handler = handler(&stack.moto.endpoint, TABLE, settings())
        .with_dead_letters(SqsDeadLetterQueue::new(stack.sqs.clone(), missing));
    let records = vec![
        record("bad-1", "not json"),
        record("ok", r#"{"auditText":"fine"}"#),
        record("bad-2", "[]"),
    ];

    let response = handler.handle(event(records)).await.unwrap();

    assert_eq!(failed(&response), ["bad-1", "bad-2"], "nothing lost");
    assert_eq!(scan(&stack.moto.client(), TABLE).await.len(), 1);
}

#[tokio::test]
async fn a_body_at_the_size_limit_is_dead_lettered_whole() {
    let stack = Stack::start("AuditDeadLetterQueue").await;
    let handler = stack.handler();
    // 262,144 bytes: the limit of a queue created without MaximumMessageSize (moto and SQS).
    let body = format!("[{}11]", "1,".repeat(131_070));
    assert_eq!(body.len(), 262_144);

    let response = handler
        .handle(event(vec![record("huge", &body)]))
        .await
        .unwrap();

    assert!(failed(&response).is_empty());
    let letters = stack.dead_letters().await;
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].body(), Some(body.as_str()));
    assert_eq!(
        attribute(&letters[0], FAILURE_REASON).as_deref(),
        Some("not_an_object")
    );
}

#[tokio::test]
async fn a_dead_letter_queue_that_refuses_the_size_leaves_the_record_to_sqs() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let sqs = sqs_client(&moto.endpoint);
    // A dead-letter queue that takes less than the source queue: the send is refused.
    let dlq_url = create_queue(&sqs, "SmallDeadLetterQueue", Some(1_024)).await;
    let handler = handler(&moto.endpoint, TABLE, settings())
        .with_dead_letters(SqsDeadLetterQueue::new(sqs.clone(), &dlq_url));
    let body = format!("[{}1]", "1,".repeat(1_000));

    let response = handler
        .handle(event(vec![record("big", &body), record("small", "[]")]))
        .await
        .unwrap();

    assert_eq!(failed(&response), ["big"], "reported, so SQS keeps it");
    let letters = receive_all(&sqs, &dlq_url).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].body(), Some("[]"));
}

#[tokio::test]
async fn original_attributes_are_kept_and_more_than_eight_leave_no_room() {
    let stack = Stack::start("AuditDeadLetterQueue").await;
    let handler = stack.handler();
    let mut eight = record("eight", "[]");
    for i in 0..7 {
        eight
            .message_attributes
            .insert(format!("s{i}"), message_attribute("v"));
    }
    let mut binary = SqsMessageAttribute::default();
    binary.data_type = Some("Binary".into());
    binary.binary_value = Some(base64_data(&[0, 159, 146, 150]));
    eight.message_attributes.insert("blob".into(), binary);
    let mut ten = record("ten", "[]");
    for i in 0..10 {
        ten.message_attributes
            .insert(format!("s{i}"), message_attribute("v"));
    }

    let response = handler.handle(event(vec![eight, ten])).await.unwrap();

    assert_eq!(failed(&response), ["ten"]);
    let letters = stack.dead_letters().await;
    assert_eq!(letters.len(), 1);
    let attributes = letters[0].message_attributes().unwrap();
    assert_eq!(attributes.len(), 10);
    assert_eq!(
        attributes["blob"]
            .binary_value()
            .map(|b| b.as_ref().to_vec()),
        Some(vec![0, 159, 146, 150])
    );
    assert_eq!(attributes["blob"].data_type(), "Binary");
}

#[tokio::test]
async fn a_fifo_poison_record_is_dead_lettered_in_its_group_and_the_group_goes_on() {
    let stack = Stack::start("AuditDeadLetterQueue.fifo").await;
    let handler = stack.handler();
    let fifo_arn = "arn:aws:sqs:us-east-1:123456789012:AuditQueue.fifo";
    let fifo = |id: &str, body: &str| {
        let mut r = record(id, body);
        r.event_source_arn = Some(fifo_arn.into());
        r.attributes
            .insert("MessageGroupId".into(), "cart-7".into());
        r
    };
    let records = vec![
        fifo(
            "f1",
            &format!(r#"{{"auditText":"opened","auditTime":"{TIME}"}}"#),
        ),
        fifo("f2", "{broken"),
        fifo(
            "f3",
            r#"{"auditText":"closed","auditTime":"2026-11-22T10:00:01Z"}"#,
        ),
    ];

    let response = handler.handle(event(records)).await.unwrap();

    assert!(failed(&response).is_empty());
    assert_eq!(scan(&stack.moto.client(), TABLE).await.len(), 2);
    let letters = stack.dead_letters().await;
    assert_eq!(letters.len(), 1);
    let system = letters[0].attributes().unwrap();
    assert_eq!(
        system
            .get(&MessageSystemAttributeName::MessageGroupId)
            .map(String::as_str),
        Some("cart-7")
    );
    assert_eq!(
        system
            .get(&MessageSystemAttributeName::MessageDeduplicationId)
            .map(String::as_str),
        Some("f2")
    );
}

#[tokio::test]
async fn a_producer_id_without_audit_time_sent_twice_is_dead_lettered_not_written_twice() {
    // The hole this closes: keyed by (messageId, SentTimestamp), each re-send made a new item.
    let stack = Stack::start("AuditDeadLetterQueue").await;
    let handler = stack.handler();
    let body = r#"{"auditText":"payment captured","messageId":"pay-9"}"#;
    let first = record("send-1", body);
    let mut again = record("send-2", body);
    again
        .attributes
        .insert("SentTimestamp".into(), "1795349999000".into());

    handler.handle(event(vec![first])).await.unwrap();
    let response = handler.handle(event(vec![again])).await.unwrap();

    assert!(failed(&response).is_empty());
    assert!(scan(&stack.moto.client(), TABLE).await.is_empty());
    let reasons: Vec<_> = stack
        .dead_letters()
        .await
        .iter()
        .map(|m| attribute(m, FAILURE_REASON).unwrap_or_default())
        .collect();
    assert_eq!(
        reasons,
        [
            "message_id_without_audit_time",
            "message_id_without_audit_time"
        ]
    );
}

/// Sends a dead-lettered message back to the source queue as `auditctl dlq redrive` does (body
/// and attributes kept), then receives it there: a new SQS message id and `SentTimestamp`.
async fn redrive(stack: &Stack, letter: &Message, source_url: &str) -> SqsMessage {
    let mut send = stack
        .sqs
        .send_message()
        .queue_url(source_url)
        .set_message_body(letter.body.clone());
    for (name, value) in letter.message_attributes().into_iter().flatten() {
        send = send.message_attributes(
            name,
            MessageAttributeValue::builder()
                .data_type(value.data_type())
                .set_string_value(value.string_value().map(str::to_owned))
                .build()
                .unwrap(),
        );
    }
    send.send().await.expect("redrive send");
    let received = receive_all(&stack.sqs, source_url).await;
    assert_eq!(received.len(), 1);
    assert_ne!(received[0].message_id, letter.message_id);
    as_record(&received[0], QUEUE_ARN)
}

#[tokio::test]
async fn a_message_written_then_dead_lettered_and_redriven_leaves_one_item() {
    // The hole this closes: a write whose answer was lost is dead-lettered on the last receive;
    // the redrive has a new SQS id and SentTimestamp, so without failureContext the body below
    // (no messageId, no auditTime) would become a second item.
    let stack = Stack::start("AuditDeadLetterQueue").await;
    let source = create_queue(&stack.sqs, "AuditQueue", None).await;
    let handler = stack.handler();
    let original = record("orig-id", r#"{"auditText":"role granted"}"#);
    handler.handle(event(vec![original.clone()])).await.unwrap();
    let letter = dead_letter(
        &original,
        &Redrivers::default(),
        &Failure::Store(StoreError::Unavailable("the response was lost".into())),
        chrono::Utc::now(),
    )
    .unwrap();
    let mut send = stack
        .sqs
        .send_message()
        .queue_url(&stack.dlq_url)
        .message_body(&letter.body);
    for (name, a) in &letter.attributes {
        send = send.message_attributes(
            name,
            MessageAttributeValue::builder()
                .data_type(&a.data_type)
                .set_string_value(a.string_value.clone())
                .build()
                .unwrap(),
        );
    }
    send.send().await.unwrap();
    let letters = stack.dead_letters().await;

    for _ in 0..2 {
        let redriven = redrive(&stack, &letters[0], &source).await;
        let response = handler.handle(event(vec![redriven])).await.unwrap();
        assert!(failed(&response).is_empty());
    }

    let items = scan(&stack.moto.client(), TABLE).await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(s(&items[0], "messageId"), "orig-id");
    assert_eq!(s(&items[0], "sqsMessageId"), "orig-id");
    assert_eq!(s(&items[0], "auditTime"), "2026-11-22T12:00:00.000Z");
    assert_eq!(s(&items[0], "sentAt"), "2026-11-22T12:00:00.000Z");
}

#[tokio::test]
async fn a_transient_failure_dead_lettered_on_its_last_receive_is_written_once_when_redriven() {
    let stack = Stack::start("AuditDeadLetterQueue").await;
    let source = create_queue(&stack.sqs, "AuditQueue", None).await;
    let missing_table = handler(&stack.moto.endpoint, "NotYetCreated", settings())
        .with_dead_letters(SqsDeadLetterQueue::new(stack.sqs.clone(), &stack.dlq_url));
    let mut last = record(
        "first-id",
        r#"{"auditText":"invoice approved","amount":12.50}"#,
    );
    last.attributes
        .insert("ApproximateReceiveCount".into(), "5".into());
    last.attributes.insert("SenderId".into(), PRODUCER.into());
    missing_table.handle(event(vec![last])).await.unwrap();
    let letters = stack.dead_letters().await;
    assert_eq!(letters.len(), 1);
    assert_eq!(
        context(&letters[0]).original_sender_id.as_deref(),
        Some(PRODUCER),
        "the dead letter names the first delivery's attested sender"
    );

    let handler = stack.handler();
    let mut redrivers = Vec::new();
    for _ in 0..2 {
        let redriven = redrive(&stack, &letters[0], &source).await;
        redrivers.push(redriven.attributes.get("SenderId").cloned());
        let response = handler.handle(event(vec![redriven])).await.unwrap();
        assert!(failed(&response).is_empty());
    }

    let items = scan(&stack.moto.client(), TABLE).await;
    assert_eq!(items.len(), 1);
    assert_eq!(s(&items[0], "messageId"), "first-id");
    assert_eq!(s(&items[0], "auditTime"), "2026-11-22T12:00:00.000Z");
    assert_ne!(
        s(&items[0], "sqsMessageId"),
        "first-id",
        "written by the redrive"
    );
    // Sent by whoever redrove it (the SenderId SQS gave the redrive), first sent by the producer.
    let redriver = redrivers[0]
        .clone()
        .expect("SQS names every message's sender");
    assert_eq!(s(&items[0], "senderId"), redriver);
    assert_eq!(s(&items[0], "originalSenderId"), PRODUCER);
}
