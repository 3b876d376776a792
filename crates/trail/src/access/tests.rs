//! The access recorder over its in-memory twin: the events sent, and the refusals that send
//! nothing (docs/auditctl.md "Access to the trail is itself recorded").

use super::*;
use std::sync::Mutex;

/// An in-memory twin of the port: a fixed caller (or a failure), an access queue URL (its
/// ARN read as the adapter reads it, in us-east-1), the tables' tags, the events sent.
#[derive(Default)]
struct Twin {
    caller: Option<Caller>,
    queue_url: String,
    tables: Vec<(&'static str, StackTags)>,
    refuse: bool,
    /// Sends this many events, then refuses.
    refuse_after: Option<usize>,
    sent: Mutex<Vec<AccessEvent>>,
}

impl AccessLog for Twin {
    async fn caller(&self) -> Result<Caller, AccessError> {
        self.caller
            .clone()
            .ok_or_else(|| AccessError::Caller("InvalidClientTokenId: no such key".into()))
    }

    fn queue_url(&self) -> &str {
        &self.queue_url
    }

    fn queue_arn(&self) -> Result<String, AccessError> {
        queue_arn(&self.queue_url, Some("us-east-1")).map_err(|why| AccessError::BadQueueUrl {
            url: self.queue_url.clone(),
            why,
        })
    }

    async fn stack_tags(&self, table: &str) -> Result<StackTags, AccessError> {
        self.tables
            .iter()
            .find(|(name, _)| *name == table)
            .map(|(_, tags)| tags.clone())
            .ok_or_else(|| {
                TagError::TableNotFound {
                    table: table.to_owned(),
                    at: "memory".to_owned(),
                }
                .into()
            })
    }

    async fn send(&self, event: &AccessEvent) -> Result<(), AccessError> {
        let sent = self.sent.lock().unwrap().len();
        if self.refuse || self.refuse_after.is_some_and(|n| sent >= n) {
            return Err(AccessError::QueueNotFound { url: "q".into() });
        }
        self.sent.lock().unwrap().push(event.clone());
        Ok(())
    }
}

const ARN: &str = "arn:aws:iam::123456789012:user/alice";
const USER_ID: &str = "AIDAEXAMPLEALICE00001";
const QUEUE_URL: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/audit-AuditAccessQueue";
const QUEUE_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:audit-AuditAccessQueue";

fn alice() -> Caller {
    Caller {
        arn: ARN.into(),
        user_id: USER_ID.into(),
    }
}

/// The stack: table `T` names the access queue.
fn stack() -> Twin {
    Twin {
        caller: Some(alice()),
        queue_url: QUEUE_URL.into(),
        tables: vec![(
            "T",
            StackTags {
                access_queue_arn: Some(QUEUE_ARN.into()),
                receiver_role_id: None,
                retention_days: None,
            },
        )],
        ..Twin::default()
    }
}

fn arguments() -> Map<String, Value> {
    json!({"from": "2026-11-22T00:00:00Z", "limit": "20", "desc": true})
        .as_object()
        .unwrap()
        .clone()
}

#[test]
fn the_event_passes_the_models_rules_with_every_field_in_place() {
    let at = DateTime::parse_from_rfc3339("2026-11-22T10:00:00.123456Z")
        .unwrap()
        .to_utc();
    let id = new_message_id();
    let event = event(
        Action::DlqRedrive,
        "https://sqs.us-east-1.amazonaws.com/123456789012/audit-AuditDeadLetterQueue",
        &arguments(),
        &alice(),
        id.clone(),
        at,
    )
    .unwrap();
    let message = AuditMessage::parse(Some(&event.body), None).unwrap();
    assert_eq!(message.producer_message_id.as_deref(), Some(id.as_str()));
    assert_eq!(
        canonical_time(message.audit_time),
        "2026-11-22T10:00:00.123Z"
    );
    assert_eq!(message.audit_text, None);
    assert_eq!(message.fields.actor.as_deref(), Some(ARN));
    assert_eq!(
        message.fields.action.as_deref(),
        Some("auditctl.dlq.redrive")
    );
    assert!(
        message
            .fields
            .resource
            .unwrap()
            .ends_with("DeadLetterQueue")
    );
    assert_eq!(message.fields.outcome, Some(EventOutcome::Success));
    assert_eq!(message.fields.source_ip, None);
    assert_eq!(message.extra["callerUserId"], USER_ID);
    assert_eq!(message.extra["arguments"], Value::Object(arguments()));
    assert_eq!(message.extra["tool"], "auditctl");
    assert_eq!(message.extra["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(message.extra.len(), 4);
}

#[test]
fn message_ids_are_fresh_and_hex() {
    let a = new_message_id();
    let b = new_message_id();
    assert_ne!(a, b);
    let hex = a.strip_prefix("auditctl-").unwrap();
    assert_eq!(hex.len(), 32);
    assert!(
        hex.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_uppercase())
    );
}

#[test]
fn an_event_the_function_would_refuse_is_not_sent() {
    let long = "x".repeat(2000); // resource is at most 1,024 characters
    let error = event(
        Action::Get,
        &long,
        &Map::new(),
        &alice(),
        new_message_id(),
        Utc::now(),
    )
    .unwrap_err();
    assert!(error.to_string().contains("resource"), "{error}");
}

#[tokio::test]
async fn a_recorder_sends_one_event_naming_the_caller_to_the_stacks_access_queue() {
    let recorder = Recorder::new(Some(stack()), false, arguments());
    let recorded = recorder.record(Action::Query, "AuditMessages", "T").await;
    let Recorder::Send { log, .. } = &recorder else {
        panic!("a queue was given")
    };
    let sent = log.sent.lock().unwrap().clone();
    assert_eq!(
        recorded.unwrap(),
        Recorded::Sent {
            message_id: sent[0].message_id.clone()
        }
    );
    assert_eq!(sent.len(), 1);
    let body: Value = serde_json::from_str(&sent[0].body).unwrap();
    assert_eq!(body["actor"], ARN);
    assert_eq!(body["callerUserId"], USER_ID);
    assert_eq!(body["action"], "auditctl.query");
    assert_eq!(body["resource"], "AuditMessages");
    assert_eq!(body["outcome"], "success");
}

/// The error of recording through `log` on table `T`, and that nothing was sent.
async fn refused(log: Twin) -> String {
    let recorder = Recorder::new(Some(log), false, Map::new());
    let error = recorder.record(Action::Get, "T", "T").await.unwrap_err();
    let Recorder::Send { log, .. } = &recorder else {
        panic!()
    };
    assert!(log.sent.lock().unwrap().is_empty(), "nothing sent");
    let error = error.to_string();
    assert!(
        error.starts_with("access not recorded, so nothing was read: "),
        "{error}"
    );
    error
}

#[tokio::test]
async fn a_caller_that_cannot_be_named_or_a_refused_send_is_an_error() {
    let nobody = refused(Twin {
        caller: None,
        ..stack()
    })
    .await;
    assert!(nobody.contains("sts:GetCallerIdentity"), "{nobody}");
    let not_found = refused(Twin {
        refuse: true,
        ..stack()
    })
    .await;
    assert!(
        not_found.contains("ACCESS_QUEUE_URL") && not_found.contains("AuditAccessQueueUrl"),
        "{not_found}"
    );
    let empty = refused(Twin {
        queue_url: " ".into(),
        ..stack()
    })
    .await;
    assert!(empty.contains("the access queue URL is empty"), "{empty}");
}

#[tokio::test]
async fn an_access_queue_that_is_not_the_one_the_table_names_is_refused() {
    let other = "https://sqs.us-east-1.amazonaws.com/123456789012/SomewhereElse";
    let wrong = refused(Twin {
        queue_url: other.into(),
        ..stack()
    })
    .await;
    assert!(
        wrong.contains(&format!(
            "the access queue {other} (arn:aws:sqs:us-east-1:123456789012:SomewhereElse) is not the stack's: table T names {QUEUE_ARN} (tag audit:access-queue-arn); set ACCESS_QUEUE_URL or --access-queue-url to the stack output AuditAccessQueueUrl"
        )),
        "{wrong}"
    );
    // The same name in another region or account is another queue.
    for url in [
        "https://sqs.eu-west-1.amazonaws.com/123456789012/audit-AuditAccessQueue",
        "https://sqs.us-east-1.amazonaws.com/210987654321/audit-AuditAccessQueue",
    ] {
        let wrong = refused(Twin {
            queue_url: url.into(),
            ..stack()
        })
        .await;
        assert!(wrong.contains("is not the stack's"), "{wrong}");
    }
    let not_a_queue = refused(Twin {
        queue_url: "https://example.com/q".into(),
        ..stack()
    })
    .await;
    assert!(not_a_queue.contains("names no SQS queue"), "{not_a_queue}");
}

#[tokio::test]
async fn a_table_without_the_tag_or_not_found_is_refused() {
    let untagged = refused(Twin {
        tables: vec![("T", StackTags::default())],
        ..stack()
    })
    .await;
    assert!(
        untagged.contains("table T has no tag audit:access-queue-arn")
            && untagged.contains("update the stack")
            && untagged.contains("--no-audit-event"),
        "{untagged}"
    );
    let missing = refused(Twin {
        tables: vec![],
        ..stack()
    })
    .await;
    assert!(
        missing.contains("table T not found") && missing.contains("TABLE_NAME"),
        "{missing}"
    );
}

#[tokio::test]
async fn skipped_sends_nothing_and_not_configured_is_refused_reading_no_tags() {
    let skipped = Recorder::new(
        Some(Twin {
            tables: vec![],
            ..stack()
        }),
        true,
        Map::new(),
    );
    assert_eq!(
        skipped.record(Action::Query, "T", "T").await.unwrap(),
        Recorded::Skipped
    );
    assert!(skipped.ready().is_ok());
    let none: Recorder<Twin> = Recorder::new(None, false, Map::new());
    let refused = none.record(Action::Query, "T", "T").await.unwrap_err();
    assert!(matches!(refused, AccessError::NotConfigured), "{refused}");
    assert!(matches!(none.ready(), Err(AccessError::NotConfigured)));
    let message = refused.to_string();
    assert!(
        message.starts_with("access not recorded, so nothing was read: no access queue")
            && message.contains("set ACCESS_QUEUE_URL or --access-queue-url")
            && message.contains("--no-audit-event"),
        "{message}"
    );
}

/// A read's error in the tests: its kind and text, and the note when its failure event was not
/// sent; `Done` stands for an error that is no failed read (verify's problems).
#[derive(Debug, PartialEq)]
enum ReadError {
    Failed(&'static str, String, Option<String>),
    Done,
    Access(String),
}

impl From<AccessError> for ReadError {
    fn from(error: AccessError) -> Self {
        Self::Access(error.to_string())
    }
}

impl FailedRead for ReadError {
    fn failure(&self) -> Option<ReadFailure> {
        match self {
            Self::Failed(kind, text, _) => Some(ReadFailure {
                kind: (*kind).into(),
                text: text.clone(),
            }),
            Self::Done | Self::Access(_) => None,
        }
    }

    fn unrecorded(self, why: FailureNotSent) -> Self {
        match self {
            Self::Failed(kind, text, _) => Self::Failed(kind, text, Some(why.to_string())),
            other => other,
        }
    }
}

fn not_found() -> ReadError {
    ReadError::Failed(
        "table_not_found",
        "table T not found at memory".into(),
        None,
    )
}

fn bodies(recorder: &Recorder<Twin>) -> Vec<Value> {
    let Recorder::Send { log, .. } = recorder else {
        panic!("a queue was given")
    };
    log.sent
        .lock()
        .unwrap()
        .iter()
        .map(|e| serde_json::from_str(&e.body).unwrap())
        .collect()
}

#[tokio::test]
async fn a_read_that_succeeds_sends_one_event_with_outcome_success() {
    let recorder = Recorder::new(Some(stack()), false, arguments());
    let (recorded, rows) = recorder
        .read(Action::Query, "T", "T", None, async {
            Ok::<_, ReadError>(3)
        })
        .await
        .unwrap();
    assert_eq!(rows, 3);
    let sent = bodies(&recorder);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["outcome"], "success");
    assert_eq!(
        recorded,
        Recorded::Sent {
            message_id: sent[0]["messageId"].as_str().unwrap().into()
        }
    );
    assert!(sent[0].get(ACCESS_EVENT_ID).is_none(), "{}", sent[0]);
}

#[tokio::test]
async fn a_read_that_fails_sends_a_second_event_with_outcome_failure_naming_the_first() {
    let recorder = Recorder::new(Some(stack()), false, arguments());
    let own = json!({"messageId": "m-1"}).as_object().unwrap().clone();
    let error = recorder
        .read(Action::UiView, "T", "T", Some(&own), async {
            Err::<(), _>(not_found())
        })
        .await
        .unwrap_err();
    assert_eq!(error, not_found(), "the read's own error, unchanged");
    let sent = bodies(&recorder);
    assert_eq!(sent.len(), 2, "{sent:?}");
    let (first, failure) = (&sent[0], &sent[1]);
    assert_eq!(first["outcome"], "success");
    assert_eq!(failure["outcome"], "failure");
    assert_eq!(failure[ACCESS_EVENT_ID], first["messageId"]);
    assert_ne!(failure["messageId"], first["messageId"]);
    assert_eq!(
        failure["error"],
        json!({"kind": "table_not_found", "text": "table T not found at memory"})
    );
    for same in ["actor", "callerUserId", "action", "resource", "arguments"] {
        assert_eq!(failure[same], first[same], "{same}");
    }
    assert_eq!(failure["arguments"], Value::Object(own));
    // It passes the model's rules: the function writes it.
    let message = AuditMessage::parse(Some(&failure.to_string()), None).unwrap();
    assert_eq!(message.fields.outcome, Some(EventOutcome::Failure));
    assert_eq!(
        message.extra[ACCESS_EVENT_ID],
        first["messageId"].as_str().unwrap()
    );
}

#[tokio::test]
async fn a_commands_failure_after_its_access_sends_the_failure_event_and_before_it_none() {
    // Failed before anything was recorded (its arguments): nothing sent, nothing read.
    let recorder = Recorder::new(Some(stack()), false, arguments());
    let before = recorder.outcome(Err::<(), _>(not_found())).await;
    assert_eq!(before, Err(not_found()));
    assert!(bodies(&recorder).is_empty());
    // Recorded, then failed: the failure names the access recorded.
    recorder.record(Action::Get, "T", "T").await.unwrap();
    let after = recorder.outcome(Err::<(), _>(not_found())).await;
    assert_eq!(after, Err(not_found()));
    let sent = bodies(&recorder);
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1]["outcome"], "failure");
    assert_eq!(sent[1][ACCESS_EVENT_ID], sent[0]["messageId"]);
    assert_eq!(sent[1]["action"], "auditctl.get");
    assert_eq!(sent[1]["arguments"], Value::Object(arguments()));
    // Succeeded, or failed for no failed read (problems found): nothing more.
    let recorder = Recorder::new(Some(stack()), false, arguments());
    recorder.record(Action::Verify, "b", "T").await.unwrap();
    assert_eq!(recorder.outcome(Ok::<_, ReadError>(())).await, Ok(()));
    assert_eq!(
        recorder.outcome(Err::<(), _>(ReadError::Done)).await,
        Err(ReadError::Done)
    );
    assert_eq!(bodies(&recorder).len(), 1);
}

#[tokio::test]
async fn a_failure_event_that_cannot_be_sent_leaves_the_error_and_says_so() {
    let recorder = Recorder::new(
        Some(Twin {
            refuse_after: Some(1),
            ..stack()
        }),
        false,
        arguments(),
    );
    let error = recorder
        .read(Action::Query, "T", "T", None, async {
            Err::<(), _>(not_found())
        })
        .await
        .unwrap_err();
    let sent = bodies(&recorder);
    assert_eq!(sent.len(), 1);
    let ReadError::Failed("table_not_found", text, Some(note)) = error else {
        panic!("{error:?}")
    };
    assert_eq!(text, "table T not found at memory", "its own error first");
    assert_eq!(
        note,
        format!(
            "the failure record of this read was not sent, so the trail holds only its access event {} (outcome success): access queue q not found",
            sent[0]["messageId"].as_str().unwrap()
        )
    );
}

#[tokio::test]
async fn a_long_error_text_is_cut_and_an_unrecorded_read_sends_no_failure() {
    let recorder = Recorder::new(Some(stack()), false, arguments());
    let long = "é".repeat(failed::TEXT_LIMIT + 50);
    let _ = recorder
        .read(Action::Query, "T", "T", None, async {
            Err::<(), _>(ReadError::Failed("failed", long.clone(), None))
        })
        .await;
    let text = bodies(&recorder)[1]["error"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(text.chars().count(), failed::TEXT_LIMIT + 1);
    assert!(text.ends_with("é…"), "{text}");
    // --no-audit-event: the read goes ahead unrecorded, and so does its failure.
    let skipped: Recorder<Twin> = Recorder::new(None, true, Map::new());
    let error = skipped
        .read(Action::Query, "T", "T", None, async {
            Err::<(), _>(not_found())
        })
        .await
        .unwrap_err();
    assert_eq!(error, not_found());
    // Not recorded at all: the read never starts.
    let none: Recorder<Twin> = Recorder::new(None, false, Map::new());
    let started = std::sync::atomic::AtomicBool::new(false);
    let refused = none
        .read(Action::Query, "T", "T", None, async {
            started.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, ReadError>(())
        })
        .await
        .unwrap_err();
    assert!(matches!(refused, ReadError::Access(_)), "{refused:?}");
    assert!(!started.load(std::sync::atomic::Ordering::SeqCst));
}
