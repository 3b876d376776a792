//! Owns that access to the trail is itself recorded (src/access.rs; docs/auditctl.md "Access to the
//! trail is itself recorded"): one access event per command, on the stack's access queue only,
//! written by the function. Must not know what each command prints.

use audit_receiver::message::canonical_time;
use audit_testkit::endpoint::sdk_config;
use audit_trail::stack::ACCESS_QUEUE_TAG;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use serde_json::Value;

use crate::dlq::{Queues, queues};
use crate::harness::*;
use crate::support::*;

// Access to the trail is itself recorded (src/access.rs; docs/auditctl.md "Access to the trail is
// itself recorded"): query, get, dlq list, dlq redrive and verify first send one audit event of
// their own to the access queue, once the stack's table names it in its tag; the function writes it
// like any other event.

/// moto's answer to sts:GetCallerIdentity for the key `test`.
const MOTO_CALLER: &str = "arn:aws:sts::123456789012:user/moto";

/// The user id moto's STS answers for the tests' credentials: the `callerUserId` auditctl
/// must send.
async fn moto_user_id(moto: &Moto) -> String {
    aws_sdk_sts::Client::new(&sdk_config(&moto.endpoint))
        .get_caller_identity()
        .send()
        .await
        .unwrap()
        .user_id
        .unwrap()
}

impl Queues {
    /// Every message of the access queue, received and deleted: what the next command adds is
    /// then all the queue holds.
    pub(crate) async fn take(&self) -> Vec<aws_sdk_sqs::types::Message> {
        let mut taken = Vec::new();
        loop {
            let batch = self
                .sqs
                .receive_message()
                .queue_url(&self.access)
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
                    .queue_url(&self.access)
                    .receipt_handle(m.receipt_handle().unwrap())
                    .send()
                    .await
                    .unwrap();
                taken.push(m);
            }
        }
    }

    /// The one access event a command sent: the access queue holds it and nothing else.
    pub(crate) async fn one_access_event(&self) -> (aws_sdk_sqs::types::Message, Value) {
        let mut taken = self.take().await;
        assert_eq!(taken.len(), 1, "exactly one message: {taken:?}");
        let message = taken.remove(0);
        let body = serde_json::from_str(message.body().unwrap()).unwrap();
        (message, body)
    }
}

/// Delivers messages of the access queue to the function as its event source mapping does
/// (the access queue's ARN, SentTimestamp and SenderId as SQS gave them).
pub(crate) async fn write_through_function(
    moto: &Moto,
    q: &Queues,
    messages: &[aws_sdk_sqs::types::Message],
) {
    // The function as the template configures it: it knows which queue is the access queue.
    let mut settings = settings();
    settings.access_queue_arn = Some(q.access_arn.clone());
    let handler = handler(&moto.endpoint, TABLE, settings);
    let records = messages
        .iter()
        .map(|m| {
            let mut delivery = record(m.message_id().unwrap(), m.body().unwrap());
            delivery.event_source_arn = Some(q.access_arn.clone());
            let system = m.attributes.as_ref().unwrap();
            for name in [
                MessageSystemAttributeName::SentTimestamp,
                MessageSystemAttributeName::SenderId,
            ] {
                delivery
                    .attributes
                    .insert(name.as_str().into(), system[&name].clone());
            }
            delivery
        })
        .collect();
    let response = handler.handle(event(records)).await.unwrap();
    assert!(failed(&response).is_empty(), "{response:?}");
}

/// The fields every access event carries (docs/auditctl.md "Access to the trail is itself
/// recorded": `actor`, `callerUserId`, `action`, `resource`, `outcome` `success`, `messageId`
/// `auditctl-` and 32 hex digits, `auditTime` now); returns its arguments.
pub(crate) fn assert_access_event(body: &Value, action: &str, resource: &str) -> Value {
    assert_eq!(body["actor"], MOTO_CALLER, "{body}");
    assert!(
        body["callerUserId"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "{body}"
    );
    assert_eq!(body["action"], action, "{body}");
    assert_eq!(body["resource"], resource, "{body}");
    assert_eq!(
        body["outcome"], "success",
        "sent before the command reads: the read goes ahead, recorded: {body}"
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

/// The trail's items of one actor, action or resource (`field` its flag), read without recording.
fn lookup(moto: &Moto, q: &Queues, field: &str, value: &str) -> Vec<Value> {
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
}

#[tokio::test]
async fn each_command_that_reads_the_trail_or_moves_dead_letters_records_one_access_event_the_function_writes()
 {
    let moto = Moto::start();
    write_trail(&moto).await;
    let q = queues(&moto).await;
    q.dead_letter(r#"{"auditText":"t"}"#, Some("throttled"))
        .await;
    let user_id = moto_user_id(&moto).await;
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
    assert_eq!(body["callerUserId"], user_id.as_str(), "what STS answers");
    assert_eq!(arguments["from"], "2026-11-22T00:00:00Z");
    assert_eq!(arguments["to"], "2026-11-22T23:59:59Z");
    assert_eq!(arguments["limit"], "3");
    assert_eq!(arguments["desc"], true);
    assert_eq!(arguments["format"], "jsonl");
    assert_eq!(arguments["accessQueueUrl"], q.access.as_str());
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
    assert_eq!(body["callerUserId"], user_id.as_str());
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
    assert_eq!(body["callerUserId"], user_id.as_str());
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
    assert_eq!(body["callerUserId"], user_id.as_str());
    assert_eq!(arguments["dryRun"], true);
    assert_eq!(arguments["max"], "5");
    events.push(message);
    assert_eq!(q.depth(&q.source).await, (0, 0), "none on the audit queue");

    // Through the access queue and the real function, the events are in the trail: a lookup by
    // action finds the query's own access, one by actor all four.
    write_through_function(&moto, &q, &events).await;
    let lookup = |field: &str, value: &str| lookup(&moto, &q, field, value);
    let found = lookup("--action", "auditctl.query");
    assert_eq!(found.len(), 1, "{found:?}");
    let item = &found[0];
    assert_eq!(item["messageId"], query_event.as_str());
    assert_eq!(item["actor"], MOTO_CALLER);
    assert_eq!(item["resource"], TABLE);
    assert_eq!(item["outcome"], "success");
    assert_eq!(item["extra"]["arguments"]["limit"], "3");
    assert_eq!(item["extra"]["callerUserId"], user_id.as_str());
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
async fn a_read_that_fails_after_its_access_is_recorded_sends_a_failure_event_naming_it() {
    let moto = Moto::start();
    write_trail(&moto).await;
    let q = queues(&moto).await;
    // The dead-letter queue named is not there: the access is recorded, then the listing fails.
    let missing = format!("{}/123456789012/NoSuchDeadLetterQueue", moto.endpoint);
    let env = [
        ("DEAD_LETTER_QUEUE_URL", missing.as_str()),
        ("AUDIT_QUEUE_URL", q.source.as_str()),
        ("ACCESS_QUEUE_URL", q.access.as_str()),
    ];
    let output = auditctl(&moto.endpoint, &["dlq", "list"], &env);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let said = stderr(&output);
    assert_eq!(
        said,
        format!(
            "error: queue {missing} not found: check DEAD_LETTER_QUEUE_URL or --dlq-url, or deploy the stack\n"
        ),
        "the command's own error, and nothing about its records when both were sent"
    );
    let taken = q.take().await;
    assert_eq!(taken.len(), 2, "{taken:?}");
    let bodies: Vec<Value> = taken
        .iter()
        .map(|m| serde_json::from_str(m.body().unwrap()).unwrap())
        .collect();
    let first = bodies
        .iter()
        .find(|b| b["outcome"] == "success")
        .expect("the access event sent before the read");
    let failure = bodies
        .iter()
        .find(|b| b["outcome"] == "failure")
        .expect("the failure event sent after it");
    assert_access_event(first, "auditctl.dlq.list", &missing);
    assert_eq!(failure["accessEventId"], first["messageId"]);
    assert_eq!(failure["action"], "auditctl.dlq.list");
    assert_eq!(failure["resource"], missing.as_str());
    assert_eq!(failure["actor"], MOTO_CALLER);
    assert_eq!(failure["arguments"], first["arguments"]);
    assert_eq!(failure["error"]["kind"], "queue_not_found");
    assert_eq!(
        failure["error"]["text"],
        format!(
            "queue {missing} not found: check DEAD_LETTER_QUEUE_URL or --dlq-url, or deploy the stack"
        )
    );

    // Through the real function both are in the trail, in the order sent: success, then failure.
    write_through_function(&moto, &q, &taken).await;
    let found = lookup(&moto, &q, "--action", "auditctl.dlq.list");
    let outcomes: Vec<(&str, &str)> = found
        .iter()
        .map(|r| {
            (
                r["outcome"].as_str().unwrap(),
                r["messageId"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("success", first["messageId"].as_str().unwrap()),
            ("failure", failure["messageId"].as_str().unwrap()),
        ]
    );
    assert_eq!(found[1]["extra"]["accessEventId"], first["messageId"]);
    assert_eq!(found[1]["extra"]["error"]["kind"], "queue_not_found");
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
    // The table names an access queue that is gone: the check passes, the send fails.
    let missing = format!("{}/123456789012/NoSuchAccessQueue", moto.endpoint);
    q.tag(&[(
        ACCESS_QUEUE_TAG,
        "arn:aws:sqs:us-east-1:123456789012:NoSuchAccessQueue",
    )])
    .await;
    let env = [
        ("DEAD_LETTER_QUEUE_URL", q.dlq.as_str()),
        ("AUDIT_QUEUE_URL", q.source.as_str()),
        ("ACCESS_QUEUE_URL", missing.as_str()),
    ];
    for args in EVERY_COMMAND {
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
                && message.contains(
                    "check ACCESS_QUEUE_URL or --access-queue-url (stack output AuditAccessQueueUrl)"
                ),
            "{args:?}: {message}"
        );
    }
    // An empty URL (ACCESS_QUEUE_URL= ) is no way around it.
    let output = auditctl(
        &moto.endpoint,
        &["get", "tie-b-23"],
        &[("ACCESS_QUEUE_URL", "")],
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).contains("the access queue URL is empty"),
        "{}",
        stderr(&output)
    );
    never_received(&q, 2).await;
    assert_eq!(q.depth(&q.source).await, (0, 0));
    assert_eq!(q.depth(&q.access).await, (0, 0));
}

/// The dead-letter queue was never received from: its `n` messages are there, received once
/// now.
async fn never_received(q: &Queues, n: usize) {
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
    assert_eq!(held.len(), n);
    for m in held {
        assert_eq!(
            m.attributes.unwrap()[&MessageSystemAttributeName::ApproximateReceiveCount],
            "1"
        );
    }
}

/// Every command that records its access, with what verify needs to get that far.
const EVERY_COMMAND: [&[&str]; 5] = [
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
    &[
        "verify",
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-22T23:59:59Z",
        "--bucket",
        "archive",
        "--key-id",
        "alias/digest",
    ],
];

#[tokio::test]
async fn an_access_queue_that_is_not_the_stacks_is_refused_naming_the_one_expected_and_nothing_is_read()
 {
    let moto = Moto::start();
    write_trail(&moto).await;
    let q = queues(&moto).await;
    q.dead_letter(r#"{"auditText":"t"}"#, Some("throttled"))
        .await;
    // The audit queue given as the access queue (a configuration from before the access queue):
    // reachable, and anyone with the producer policy could write there.
    let audit_queue_arn = "arn:aws:sqs:us-east-1:123456789012:AuditQueue";
    let env = [
        ("DEAD_LETTER_QUEUE_URL", q.dlq.as_str()),
        ("AUDIT_QUEUE_URL", q.source.as_str()),
        ("ACCESS_QUEUE_URL", q.source.as_str()),
    ];
    for args in EVERY_COMMAND {
        let output = auditctl(&moto.endpoint, args, &env);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {message}");
        assert_eq!(stdout(&output), "", "{args:?}: nothing read");
        assert!(
            message.contains(&format!(
                "error: access not recorded, so nothing was read: the access queue {} ({audit_queue_arn}) is not the stack's: table {TABLE} names {} (tag audit:access-queue-arn); set ACCESS_QUEUE_URL or --access-queue-url to the stack output AuditAccessQueueUrl",
                q.source, q.access_arn
            )),
            "{args:?}: {message}"
        );
    }
    // The table that names it is the one TABLE_NAME names: another table is no way around it.
    let output = auditctl(
        &moto.endpoint,
        &["get", "tie-b-23"],
        &[
            ("ACCESS_QUEUE_URL", q.access.as_str()),
            ("TABLE_NAME", "Nope"),
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("table Nope not found")
            && stderr(&output).contains("set TABLE_NAME"),
        "{}",
        stderr(&output)
    );
    assert_eq!(q.depth(&q.source).await, (0, 0), "nothing sent anywhere");
    assert_eq!(q.depth(&q.access).await, (0, 0));
    never_received(&q, 1).await;
}

#[tokio::test]
async fn a_table_without_the_access_queue_tag_is_refused_until_the_stack_is_updated() {
    let moto = Moto::start();
    write_trail(&moto).await;
    let q = queues(&moto).await;
    q.dead_letter(r#"{"auditText":"t"}"#, Some("throttled"))
        .await;
    q.untag(ACCESS_QUEUE_TAG).await;
    for args in EVERY_COMMAND {
        let output = auditctl(&moto.endpoint, args, &q.env());
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {message}");
        assert_eq!(stdout(&output), "", "{args:?}: nothing read");
        assert!(
            message.contains(&format!(
                "table {TABLE} has no tag audit:access-queue-arn naming the stack's access queue, so the access queue {} cannot be checked: update the stack",
                q.access
            )) && message.contains("--no-audit-event skips recording on purpose"),
            "{args:?}: {message}"
        );
    }
    assert_eq!(q.depth(&q.access).await, (0, 0));
    never_received(&q, 1).await;
    // Skipped on purpose, it reads.
    let output = auditctl(
        &moto.endpoint,
        &["get", "tie-b-23", "--no-audit-event", "--format", "jsonl"],
        &q.env(),
    );
    assert_eq!(jsonl(&ok(output)).len(), 1);
}

#[tokio::test]
async fn no_audit_event_sends_nothing_and_without_an_access_queue_nothing_is_read() {
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
    assert_eq!(q.depth(&q.access).await, (0, 0), "nothing sent");

    // No access queue: a usage error (exit 2) that says how to record the access, or how to read
    // unrecorded on purpose; nothing read, for a command as for the viewer.
    for args in [&query[..], &["dlq", "list"], &["ui"]] {
        let output = auditctl_as_given(&moto.endpoint, args, &q.env()[..2]);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {message}");
        assert!(
            message.contains("error: access not recorded, so nothing was read: no access queue")
                && message.contains(
                    "set ACCESS_QUEUE_URL or --access-queue-url (stack output AuditAccessQueueUrl)"
                )
                && message.contains("--no-audit-event"),
            "{args:?}: {message}"
        );
        assert!(stdout(&output).is_empty(), "{args:?}: nothing read");
    }
    assert_eq!(q.depth(&q.access).await, (0, 0), "nothing sent");
}
