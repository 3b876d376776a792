//! Owns `auditctl dlq list` and `dlq redrive` against moto's queues: reasons, identity, visibility,
//! the redrive by reason, and bodies shown in full. Must not know the paging of receives.

use std::collections::HashMap;

use audit_receiver::message::canonical_time;
use audit_testkit::endpoint::receive;
use aws_lambda_events::sqs::SqsMessageAttribute;
use aws_sdk_sqs::types::{MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName};
use serde_json::Value;

use audit_trail::stack::{ACCESS_QUEUE_TAG, RECEIVER_ROLE_TAG};

use crate::harness::*;
use crate::support::*;

/// The receiver function's role id the stack's table names by default in the tests: not moto's
/// SenderId, so that a claimed original sender is not trusted unless a test says so.
pub(crate) const RECEIVER_ROLE_ID: &str = "AROAEXAMPLERECEIVER01";

/// The stack's queues, and its table (created when the test has not) tagged as template.yaml
/// tags it: the access queue's ARN and the receiver's role id.
pub(crate) struct Queues {
    pub(crate) sqs: aws_sdk_sqs::Client,
    pub(crate) dynamodb: aws_sdk_dynamodb::Client,
    pub(crate) source: String,
    pub(crate) access: String,
    pub(crate) access_arn: String,
    pub(crate) dlq: String,
}

pub(crate) async fn queues(moto: &Moto) -> Queues {
    let sqs = sqs_client(&moto.endpoint);
    let create = |name: &'static str| {
        let sqs = sqs.clone();
        async move {
            sqs.create_queue()
                .queue_name(name)
                .send()
                .await
                .unwrap()
                .queue_url
                .unwrap()
        }
    };
    let dlq = create("AuditDeadLetterQueue").await;
    let source = create("AuditQueue").await;
    let access = create("AuditAccessQueue").await;
    let access_arn = sqs
        .get_queue_attributes()
        .queue_url(&access)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&QueueAttributeName::QueueArn]
        .clone();
    let dynamodb = moto.client();
    if dynamodb
        .describe_table()
        .table_name(TABLE)
        .send()
        .await
        .is_err()
    {
        create_table(&dynamodb, TABLE).await;
    }
    let q = Queues {
        sqs,
        dynamodb,
        source,
        access,
        access_arn,
        dlq,
    };
    q.tag(&[
        (ACCESS_QUEUE_TAG, &q.access_arn),
        (RECEIVER_ROLE_TAG, RECEIVER_ROLE_ID),
    ])
    .await;
    q
}

impl Queues {
    pub(crate) fn env(&self) -> [(&'static str, &str); 3] {
        [
            ("DEAD_LETTER_QUEUE_URL", &self.dlq),
            ("AUDIT_QUEUE_URL", &self.source),
            ("ACCESS_QUEUE_URL", &self.access),
        ]
    }

    async fn table_arn(&self) -> String {
        self.dynamodb
            .describe_table()
            .table_name(TABLE)
            .send()
            .await
            .unwrap()
            .table
            .unwrap()
            .table_arn
            .unwrap()
    }

    /// Sets tags on the stack's table (TagResource), as the template does.
    pub(crate) async fn tag(&self, tags: &[(&str, &str)]) {
        let mut request = self
            .dynamodb
            .tag_resource()
            .resource_arn(self.table_arn().await);
        for (key, value) in tags {
            request = request.tags(
                aws_sdk_dynamodb::types::Tag::builder()
                    .key(*key)
                    .value(*value)
                    .build()
                    .unwrap(),
            );
        }
        request.send().await.unwrap();
    }

    /// Removes a tag from the stack's table (an older stack's table lacks it).
    pub(crate) async fn untag(&self, key: &str) {
        self.dynamodb
            .untag_resource()
            .resource_arn(self.table_arn().await)
            .tag_keys(key)
            .send()
            .await
            .unwrap();
    }

    /// Sends a dead-lettered message as the function does (reason and context), or as SQS
    /// moves one (`reason` None: no attributes of ours).
    pub(crate) async fn dead_letter(&self, body: &str, reason: Option<&str>) -> String {
        self.dead_letter_claiming(body, reason, None).await
    }

    /// As `dead_letter`, with a context that claims `original_sender` as the first delivery's
    /// sender.
    pub(crate) async fn dead_letter_claiming(
        &self,
        body: &str,
        reason: Option<&str>,
        original_sender: Option<&str>,
    ) -> String {
        self.dead_letter_from(body, reason, original_sender, None)
            .await
    }

    /// A dead letter whose context names the queue it came from.
    pub(crate) async fn dead_letter_from(
        &self,
        body: &str,
        reason: Option<&str>,
        original_sender: Option<&str>,
        source: Option<&str>,
    ) -> String {
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
                event_source_arn: source.map(str::to_owned),
                original_sender_id: original_sender.map(str::to_owned),
                sender_id: None,
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
            for m in receive(&self.sqs, url, 0).await {
                seen.insert(m.message_id.clone().unwrap(), m);
            }
        }
        seen
    }

    /// The audit queue's visible messages: what was moved. The access events of the commands
    /// that moved them are on the access queue, never here.
    async fn moved(&self) -> HashMap<String, aws_sdk_sqs::types::Message> {
        let moved = self.visible(&self.source).await;
        assert!(
            !moved
                .values()
                .any(|m| is_access_event(m.body().unwrap_or_default())),
            "no access event on the audit queue"
        );
        moved
    }

    /// The `SenderId` SQS gave a message of the dead-letter queue.
    pub(crate) async fn sender_of(&self, message_id: &str) -> String {
        self.visible(&self.dlq).await[message_id]
            .attributes
            .as_ref()
            .unwrap()[&MessageSystemAttributeName::SenderId]
            .clone()
    }

    pub(crate) async fn depth(&self, url: &str) -> (u64, u64) {
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
    assert_eq!(q.depth(&q.source).await, (0, 0), "nothing moved");
    assert_eq!(q.depth(&q.access).await, (1, 0), "its access event");

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
    assert_eq!(q.depth(&q.source).await, (2, 0));
    assert_eq!(q.depth(&q.access).await, (2, 0), "2 access events");

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
    // Sent by whoever ran the redrive, as SQS attests it: the redrive role of `settings()`.
    delivery.attributes.insert(
        "SenderId".into(),
        message.attributes.as_ref().unwrap()[&MessageSystemAttributeName::SenderId].clone(),
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

#[tokio::test]
async fn redrive_gives_a_message_sqs_moved_its_own_sender_id_as_the_original_sender() {
    let moto = Moto::start();
    let q = queues(&moto).await;
    // SQS moved it after maxReceiveCount: no failureContext, and its own SenderId (which SQS
    // keeps on that move) is the first delivery's sender.
    let moved = q.dead_letter(r#"{"auditText":"moved by SQS"}"#, None).await;
    let sender = q.sender_of(&moved).await;
    assert!(!sender.is_empty());

    let rows = jsonl(&ok(auditctl(
        &moto.endpoint,
        &["dlq", "list", "--format", "jsonl"],
        &q.env(),
    )));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["originalSenderId"], sender.as_str(), "{}", rows[0]);
    assert_eq!(rows[0]["senderId"], sender.as_str());
    let table = ok(auditctl(&moto.endpoint, &["dlq", "list"], &q.env()));
    assert!(
        table.contains("| originalSenderId ")
            && table.contains(&format!("| {}", &sender[..sender.len().min(20)])),
        "{table}"
    );

    ok(auditctl(&moto.endpoint, &["dlq", "redrive"], &q.env()));
    let sent = q.moved().await;
    assert_eq!(sent.len(), 1);
    let message = sent.values().next().unwrap();
    let context = audit_receiver::deadletter::FailureContext::parse(
        message.message_attributes.as_ref().unwrap()["failureContext"]
            .string_value()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(context.reason, "max_receives");
    assert_eq!(context.sqs_message_id, moved);
    assert_eq!(context.original_sender_id.as_deref(), Some(sender.as_str()));
}

#[tokio::test]
async fn a_claimed_original_sender_is_kept_only_when_the_receiver_functions_role_sent_the_dead_letter()
 {
    const CLAIM: &str = "AROAEXAMPLEPRODUCER1:orders-service";
    let moto = Moto::start();
    // The table names a receiver role that did not send what follows.
    let q = queues(&moto).await;
    let claimed = q
        .dead_letter_claiming(r#"{"auditText":"claimed"}"#, Some("throttled"), Some(CLAIM))
        .await;
    let sender = q.sender_of(&claimed).await;
    let role = sender.split(':').next().unwrap().to_owned();
    assert_ne!(role, RECEIVER_ROLE_ID);

    // The listing does not show the claim, and says why.
    let output = auditctl(
        &moto.endpoint,
        &["dlq", "list", "--format", "jsonl"],
        &q.env(),
    );
    let note = stderr(&output);
    let rows = jsonl(&ok(output));
    assert_eq!(rows[0]["originalSenderId"], Value::Null, "{}", rows[0]);
    assert_eq!(rows[0]["senderId"], sender.as_str());
    assert!(
        note.contains(&format!(
            "note: {claimed}: its failureContext claims originalSenderId {CLAIM}, not shown: the message was sent to the dead-letter queue by {sender}, not by the receiver function's role {RECEIVER_ROLE_ID}"
        )),
        "{note}"
    );

    // The redrive removes the claim before the resend, says so, and keeps the rest.
    let output = auditctl(&moto.endpoint, &["dlq", "redrive"], &q.env());
    let note = stderr(&output);
    assert!(ok(output).contains("moved 1 message(s)"));
    assert!(
        note.contains(&format!(
            "note: {claimed}: failureContext.originalSenderId {CLAIM} removed before the resend: the message was sent to the dead-letter queue by {sender}"
        )),
        "{note}"
    );
    let sent = q.moved().await;
    let text = sent
        .values()
        .next()
        .unwrap()
        .message_attributes
        .as_ref()
        .unwrap()["failureContext"]
        .string_value()
        .unwrap()
        .to_owned();
    assert!(!text.contains("originalSenderId"), "{text}");
    let context = audit_receiver::deadletter::FailureContext::parse(&text).unwrap();
    assert_eq!(context.original_sender_id, None);
    assert_eq!(context.reason, "throttled");
    assert!(context.sqs_message_id.starts_with("orig-throttled-"));
    assert_eq!(context.sent_timestamp.as_deref(), Some("1795348800000"));
    assert_eq!(context.detail, "test");

    // The table names the role that sent the dead letter (moto gives every message one
    // SenderId; its part before ':' stands for the function's role id): the claim is kept, the
    // context byte for byte.
    q.tag(&[(RECEIVER_ROLE_TAG, &role)]).await;
    let vouched = q
        .dead_letter_claiming(r#"{"auditText":"vouched"}"#, Some("throttled"), Some(CLAIM))
        .await;
    let as_sent = q.visible(&q.dlq).await[&vouched]
        .message_attributes
        .as_ref()
        .unwrap()["failureContext"]
        .string_value()
        .unwrap()
        .to_owned();
    let output = auditctl(
        &moto.endpoint,
        &["dlq", "list", "--format", "jsonl"],
        &q.env(),
    );
    assert!(!stderr(&output).contains("note:"), "{}", stderr(&output));
    assert_eq!(jsonl(&ok(output))[0]["originalSenderId"], CLAIM);
    let output = auditctl(&moto.endpoint, &["dlq", "redrive"], &q.env());
    assert!(!stderr(&output).contains("note:"), "{}", stderr(&output));
    ok(output);
    let resent = q
        .moved()
        .await
        .into_values()
        .find(|m| m.body() == Some(r#"{"auditText":"vouched"}"#))
        .unwrap();
    let text = resent.message_attributes.as_ref().unwrap()["failureContext"]
        .string_value()
        .unwrap();
    assert_eq!(text, as_sent, "the context as the function sent it");
    assert_eq!(
        audit_receiver::deadletter::FailureContext::parse(text)
            .unwrap()
            .original_sender_id
            .as_deref(),
        Some(CLAIM)
    );

    // A table without the role's tag (a stack not yet updated): no claim can be trusted.
    q.untag(RECEIVER_ROLE_TAG).await;
    let unknown = q
        .dead_letter_claiming(r#"{"auditText":"unknown"}"#, Some("throttled"), Some(CLAIM))
        .await;
    let output = auditctl(&moto.endpoint, &["dlq", "redrive", "--dry-run"], &q.env());
    let note = stderr(&output);
    assert!(ok(output).contains("would move 1 message(s)"));
    assert!(
        note.contains(&format!(
            "note: {unknown}: failureContext.originalSenderId {CLAIM} would be removed before the resend: the table has no tag audit:receiver-role-id"
        )),
        "{note}"
    );
}

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

#[tokio::test]
async fn an_access_event_is_left_in_the_dead_letter_queue_and_the_rest_redriven() {
    let moto = Moto::start();
    let q = queues(&moto).await;
    // An access event that failed for a transient reason, and an application event beside it.
    let access = q
        .dead_letter_from(
            r#"{"action":"auditctl.query","callerUserId":"AIDAEXAMPLE"}"#,
            Some("throttled"),
            None,
            Some(&q.access_arn),
        )
        .await;
    let application = q
        .dead_letter(r#"{"auditText":"an application event"}"#, Some("throttled"))
        .await;

    let output = auditctl(&moto.endpoint, &["dlq", "redrive"], &q.env());
    let note = stderr(&output);
    let out = ok(output);
    // Sent again by the operator, it would be refused (reserved_action on the audit queue,
    // access_event_invalid on the access queue): it stays, and the command says why.
    assert!(out.contains("moved 1 message(s)"), "{out}");
    assert!(
        note.contains(&format!(
            "{access} left in the dead-letter queue: an access event"
        )),
        "{note}"
    );
    let moved = q.moved().await;
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert!(
        moved
            .values()
            .any(|m| m.body() == Some(r#"{"auditText":"an application event"}"#))
    );
    let left = q.visible(&q.dlq).await;
    assert!(
        left.contains_key(&access) && !left.contains_key(&application),
        "{left:?}"
    );
}
