//! Black-box tests of the function against a real local DynamoDB (moto's server over HTTP):
//! given a table, when a batch is handled, then the response and the items are as README.md
//! "How a batch is handled" and docs/events.md "The item" say.

mod support;

use aws_sdk_dynamodb::types::AttributeValue;
use support::*;

const TIME: &str = "2026-11-22T12:00:00+02:00";

fn body(text: &str) -> String {
    format!(r#"{{"auditText":"{text}","auditTime":"{TIME}"}}"#)
}

#[tokio::test]
async fn items_are_written_with_every_attribute_of_the_layout() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let mut settings = settings();
    settings.retention_days = Some(30);
    let handler = handler(&moto.endpoint, TABLE, settings);

    let mut record = record(
        "sqs-1",
        r#"{"auditText":"user alice signed in","auditTime":"2026-11-22T12:00:00.123456+02:00","actor":"alice"}"#,
    );
    record
        .attributes
        .insert("ApproximateReceiveCount".into(), "3".into());
    record
        .attributes
        .insert("SenderId".into(), "AROAPRODUCER:orders-service".into());
    let before = chrono::Utc::now();
    let response = handler.handle(event(vec![record])).await.unwrap();
    let after = chrono::Utc::now();

    assert!(failed(&response).is_empty());
    let items = scan(&moto.client(), TABLE).await;
    assert_eq!(items.len(), 1);
    let item = &items[0];
    assert_eq!(s(item, "messageId"), "sqs-1");
    assert_eq!(s(item, "auditTime"), "2026-11-22T10:00:00.123Z");
    assert_eq!(s(item, "auditText"), "user alice signed in");
    // FNV-1a("sqs-1") % 32 = 24: the time index's key.
    assert_eq!(s(item, "auditBucket"), "2026-11-22#24");
    assert_eq!(s(item, "sqsMessageId"), "sqs-1");
    assert_eq!(s(item, "sentAt"), "2026-11-22T12:00:00.000Z");
    assert_eq!(item["receiveCount"], AttributeValue::N("3".into()));
    assert_eq!(s(item, "eventSource"), QUEUE_ARN);
    // Who AWS says sent it, beside who the producer says acted (actor).
    assert_eq!(s(item, "senderId"), "AROAPRODUCER:orders-service");
    assert!(!item.contains_key("originalSenderId"), "not a redrive");
    let received = s(item, "receivedAt");
    assert_eq!(received.len(), "2026-11-22T10:00:00.000Z".len());
    let received = chrono::DateTime::parse_from_rfc3339(&received).unwrap();
    assert!(received >= before - chrono::Duration::milliseconds(1) && received <= after);
    // actor is a top-level attribute, with the key of the byActor index; there is no extra.
    assert_eq!(s(item, "actor"), "alice");
    assert_eq!(s(item, "actorKey"), "alice#0");
    assert!(!item.contains_key("extra"));
    // TTL: 30 days after the audit time (2026-11-22T10:00:00Z = 1795341600).
    assert_eq!(
        item["expiresAt"],
        AttributeValue::N((1_795_341_600 + 30 * 86_400).to_string())
    );
    assert_eq!(
        item.len(),
        13,
        "no attribute beyond the layout: {:?}",
        item.keys()
    );
}

#[tokio::test]
async fn duplicate_delivery_leaves_one_unchanged_item() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let handler = handler(&moto.endpoint, TABLE, settings());

    let first = record("sqs-1", &body("payment captured"));
    handler.handle(event(vec![first.clone()])).await.unwrap();
    let stored = scan(&moto.client(), TABLE).await;

    let mut again = first;
    again
        .attributes
        .insert("ApproximateReceiveCount".into(), "2".into());
    let response = handler.handle(event(vec![again])).await.unwrap();

    assert!(failed(&response).is_empty(), "a duplicate is a success");
    assert_eq!(
        scan(&moto.client(), TABLE).await,
        stored,
        "the item is unchanged"
    );
}

#[tokio::test]
async fn conflict_keeps_the_original_and_fails_the_record() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let handler = handler(&moto.endpoint, TABLE, settings());

    let original = r#"{"messageId":"order-42","auditText":"refund 10 EUR","auditTime":"2026-11-22T10:00:00Z"}"#;
    let changed = r#"{"messageId":"order-42","auditText":"refund 1000 EUR","auditTime":"2026-11-22T10:00:00Z"}"#;
    handler
        .handle(event(vec![record("sqs-1", original)]))
        .await
        .unwrap();
    let stored = scan(&moto.client(), TABLE).await;

    let response = handler
        .handle(event(vec![
            record("sqs-2", changed),
            record("sqs-3", &body("unrelated")),
        ]))
        .await
        .unwrap();

    assert_eq!(failed(&response), ["sqs-2"]);
    let items = scan(&moto.client(), TABLE).await;
    assert_eq!(items.len(), 2);
    assert!(items.contains(&stored[0]), "the original item is untouched");
}

#[tokio::test]
async fn producer_message_id_and_audit_time_key_the_item_so_a_re_send_with_a_new_sqs_id_writes_nothing()
 {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let handler = handler(&moto.endpoint, TABLE, settings());
    let payload = r#"{"messageId":"orders-2026-42","auditText":"order 42 refunded","auditTime":"2026-11-22T10:15:00Z","amount":12.50}"#;

    handler
        .handle(event(vec![record("sqs-original", payload)]))
        .await
        .unwrap();
    let stored = scan(&moto.client(), TABLE).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(s(&stored[0], "messageId"), "orders-2026-42");
    assert_eq!(s(&stored[0], "sqsMessageId"), "sqs-original");

    // A producer re-send (or a redrive) arrives with a new SQS message id and SentTimestamp;
    // redrives of messages without messageId or auditTime: tests/deadletter.rs.
    let mut redriven = record("sqs-redriven", payload);
    redriven
        .attributes
        .insert("SentTimestamp".into(), "1795352400000".into());
    let response = handler.handle(event(vec![redriven])).await.unwrap();

    assert!(failed(&response).is_empty());
    assert_eq!(scan(&moto.client(), TABLE).await, stored);
}

#[tokio::test]
async fn extra_fields_land_in_extra_with_dynamodb_types() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let handler = handler(&moto.endpoint, TABLE, settings());
    let body = r#"{"auditText":"key rotated","auditTime":"2026-11-22T10:00:00Z","user":{"id":"u-1","roles":["admin"]},"attempt":3,"mfa":true,"ticket":null,"ledger":123456789012345678901234567890}"#;

    let response = handler
        .handle(event(vec![record("sqs-1", body)]))
        .await
        .unwrap();

    assert!(failed(&response).is_empty());
    let items = scan(&moto.client(), TABLE).await;
    let extra = items[0]["extra"].as_m().unwrap();
    assert_eq!(extra.len(), 5);
    let user = extra["user"].as_m().unwrap();
    assert_eq!(user["id"], AttributeValue::S("u-1".into()));
    assert_eq!(
        user["roles"],
        AttributeValue::L(vec![AttributeValue::S("admin".into())])
    );
    assert_eq!(extra["attempt"], AttributeValue::N("3".into()));
    assert_eq!(extra["mfa"], AttributeValue::Bool(true));
    assert_eq!(extra["ticket"], AttributeValue::Null(true));
    assert_eq!(
        extra["ledger"],
        AttributeValue::N("123456789012345678901234567890".into())
    );
}

#[tokio::test]
async fn a_body_that_would_exceed_400_kb_fails_alone() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let handler = handler(&moto.endpoint, TABLE, settings());
    let huge = format!(
        r#"{{"auditText":"export","auditTime":"2026-11-22T10:00:00Z","manifest":"{}"}}"#,
        "m".repeat(410 * 1024)
    );

    let response = handler
        .handle(event(vec![
            record("big", &huge),
            record("small", &body("neighbour")),
        ]))
        .await
        .unwrap();

    assert_eq!(failed(&response), ["big"]);
    let items = scan(&moto.client(), TABLE).await;
    assert_eq!(items.len(), 1);
    assert_eq!(s(&items[0], "messageId"), "small");
}

#[tokio::test]
async fn a_missing_table_fails_every_record_without_an_invocation_error() {
    let moto = Moto::start();
    let handler = handler(&moto.endpoint, "NoSuchTable", settings());
    let records = vec![
        record("m1", &body("a")),
        record("m2", &body("b")),
        record("m3", "not json"),
    ];

    let response = handler
        .handle(event(records))
        .await
        .expect("no invocation error");

    assert_eq!(failed(&response), ["m1", "m2", "m3"]);
}

#[tokio::test]
async fn five_hundred_records_in_one_batch_are_all_written() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let handler = handler(&moto.endpoint, TABLE, settings());
    let records: Vec<_> = (0..500)
        .map(|i| {
            record(
                &format!("sqs-{i:03}"),
                &format!(r#"{{"auditText":"event {i}","seq":{i}}}"#),
            )
        })
        .collect();

    let response = handler.handle(event(records)).await.unwrap();

    assert!(failed(&response).is_empty());
    let items = scan(&moto.client(), TABLE).await;
    assert_eq!(items.len(), 500);
    for (i, item) in items.iter().enumerate() {
        assert_eq!(s(item, "messageId"), format!("sqs-{i:03}"));
        assert_eq!(s(item, "auditText"), format!("event {i}"));
    }
}

#[tokio::test]
async fn a_record_without_message_id_fails_the_invocation_and_writes_nothing() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let handler = handler(&moto.endpoint, TABLE, settings());
    let mut nameless = record("x", &body("b"));
    nameless.message_id = None;

    let error = handler
        .handle(event(vec![record("m1", &body("a")), nameless]))
        .await
        .unwrap_err();

    assert!(error.to_string().contains("no messageId"), "{error}");
    assert!(scan(&moto.client(), TABLE).await.is_empty());
}

#[tokio::test]
async fn every_events_file_gets_the_documented_response() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let handler = handler(&moto.endpoint, TABLE, settings());

    // The order the README gives: redelivery and conflicting-payload follow what they repeat.
    for name in EVENT_FILES {
        let response = handler.handle(event_file(name)).await.expect(name);
        let response = serde_json::to_value(&response).unwrap();
        assert_eq!(response, expected_response(name), "{name}");
    }
    // clean 3 + mixed 2 + producer 1 + extra 1 + fifo 4 + oversized 1 + CloudEvents 2 +
    // EventBridge 2 + CloudTrail 4.
    assert_eq!(scan(&moto.client(), TABLE).await.len(), 20);
}

#[tokio::test]
async fn cloudtrail_events_are_stored_saying_who_did_what_to_what_with_what_result() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let handler = handler(&moto.endpoint, TABLE, settings());

    let response = handler
        .handle(event_file("cloudtrail-batch.json"))
        .await
        .unwrap();

    assert!(
        failed(&response).is_empty(),
        "an AWS event is never refused"
    );
    let mut items = scan(&moto.client(), TABLE).await;
    items.sort_by_key(|item| s(item, "auditTime"));
    let field = |item: &Item, name: &str| item.get(name).map(|_| s(item, name));
    let fields: Vec<_> = items
        .iter()
        .map(|item| {
            ["action", "actor", "outcome", "resource", "sourceIp"].map(|name| field(item, name))
        })
        .collect();
    let some = |text: &str| Some(text.to_owned());
    assert_eq!(
        fields,
        [
            [
                some("s3:DeleteBucket"),
                some("arn:aws:sts::123456789012:assumed-role/Admin/mallory"),
                some("failure"),
                some("arn:aws:s3:::invoices-archive"),
                some("203.0.113.66"),
            ],
            // The object's ARN is 1,542 characters: no resource, and the item is kept.
            [
                some("s3:DeleteObject"),
                some("arn:aws:sts::123456789012:assumed-role/Admin/alice"),
                some("success"),
                None,
                some("2001:db8::7"),
            ],
            [
                some("signin:ConsoleLogin"),
                some("AIDAEXAMPLEUSERID"),
                some("failure"),
                None,
                some("198.51.100.23"),
            ],
            [
                some("kms:RotateKey"),
                some("kms.amazonaws.com"),
                some("success"),
                some("arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"),
                None,
            ],
        ]
    );
    let extra = items[1]["extra"].as_m().unwrap();
    let detail = extra["detail"].as_m().unwrap();
    let resources = detail["resources"].as_l().unwrap();
    let long_arn = resources[0].as_m().unwrap()["ARN"].as_s().unwrap();
    assert_eq!(long_arn.chars().count(), 1542, "kept where it came from");
    assert_eq!(
        extra["detail-type"],
        AttributeValue::S("AWS API Call via CloudTrail".into())
    );
}

#[tokio::test]
async fn extra_at_dynamodb_nesting_limit_is_written_and_deeper_fails_alone() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let handler = handler(&moto.endpoint, TABLE, settings());
    // 30 objects around a string put it at level 32, the item's extra map being level 1.
    let nested = |levels: usize| {
        format!(
            r#"{{"action":"a","auditTime":"2026-11-22T10:00:00Z","deep":{}"leaf"{}}}"#,
            r#"{"n":"#.repeat(levels),
            "}".repeat(levels)
        )
    };

    let response = handler
        .handle(event(vec![
            record("at-limit", &nested(30)),
            record("deeper", &nested(31)),
        ]))
        .await
        .unwrap();

    assert_eq!(failed(&response), ["deeper"]);
    let items = scan(&moto.client(), TABLE).await;
    assert_eq!(items.len(), 1);
    assert_eq!(s(&items[0], "messageId"), "at-limit");
    let mut value = &items[0]["extra"].as_m().unwrap()["deep"];
    for _ in 0..30 {
        value = &value.as_m().unwrap()["n"];
    }
    assert_eq!(value, &AttributeValue::S("leaf".into()));
}

#[test]
fn every_events_file_is_listed_in_the_test() {
    let mut files: Vec<String> = std::fs::read_dir(events_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = EVENT_FILES.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(files, listed);
}
