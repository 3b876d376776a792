//! Owns recording auditctl's own access to the trail (docs/auditctl.md "Access to the trail is
//! itself recorded"): the audit event a command sends to the access queue before
//! it reads anything, the arguments it carries, the check that the access queue is the stack's (the
//! one the table names in its tag), and the port that names the caller and sends it. Must not know
//! how a command reads the table or the dead-letter queue, nor its flags (auditctl's
//! commands/arguments.rs captures them).

use std::future::Future;

use audit_aws::{AwsError, ErrorKind};
use audit_model::message::{AuditMessage, EventOutcome, canonical_time};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use crate::stack::{ACCESS_QUEUE_TAG, StackTags, TagError, queue_arn};

/// What a command does to the trail: the event's `action`. A new command that reads the trail is
/// a variant here and one `record` call in its arm of main.rs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Query,
    Get,
    DlqList,
    DlqRedrive,
    Verify,
    ArchiveRepair,
    /// `auditctl prove`: one event's line and its inclusion proof.
    Prove,
    /// `auditctl export --evidence`: a bundle of events and their proofs.
    Export,
    /// `auditctl ui`: a search (and each further page of it).
    UiSearch,
    /// `auditctl ui`: an event's page.
    UiView,
    /// `auditctl ui`: an export of a search.
    UiExport,
    /// `auditctl ui`: a redrive of the dead-letter queue.
    UiRedrive,
    /// `auditctl ui`: `verify` run from the health page over the periods in view.
    UiVerify,
}

impl Action {
    pub const fn name(self) -> &'static str {
        match self {
            Self::Query => "auditctl.query",
            Self::Get => "auditctl.get",
            Self::DlqList => "auditctl.dlq.list",
            Self::DlqRedrive => "auditctl.dlq.redrive",
            Self::Verify => "auditctl.verify",
            Self::ArchiveRepair => "auditctl.archive.repair",
            Self::Prove => "auditctl.prove",
            Self::Export => "auditctl.export",
            Self::UiSearch => "auditctl.ui.search",
            Self::UiView => "auditctl.ui.view",
            Self::UiExport => "auditctl.ui.export",
            Self::UiRedrive => "auditctl.ui.redrive",
            Self::UiVerify => "auditctl.ui.verify",
        }
    }
}

/// The event's `outcome`. It is sent before the command runs, so the command's result is not
/// known yet: the event records the attempt to access, whatever came of it.
pub const OUTCOME: EventOutcome = EventOutcome::Unknown;

/// The note on stderr with `--no-audit-event`.
pub const SKIPPED: &str = "access not recorded: --no-audit-event";

/// Why the access could not be recorded. The command then reads nothing and exits 1 (2 for
/// `NotConfigured`, a usage error).
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// No access queue and no `--no-audit-event`: a read would go unrecorded, so it is refused
    /// (docs/auditctl.md, "Access is recorded").
    #[error(
        "access not recorded, so nothing was read: no access queue; set ACCESS_QUEUE_URL or --access-queue-url (stack output AuditAccessQueueUrl) so that auditctl records its access to the trail, or pass --no-audit-event to read without recording on purpose"
    )]
    NotConfigured,
    #[error(
        "access not recorded, so nothing was read: sts:GetCallerIdentity (who is reading) failed: {0}; check the AWS credentials (--profile, AWS_PROFILE, AWS_ACCESS_KEY_ID) and the region (--region, AWS_REGION)"
    )]
    Caller(String),
    #[error(
        "access not recorded, so nothing was read: the access queue URL is empty: set ACCESS_QUEUE_URL or --access-queue-url to it (stack output AuditAccessQueueUrl), or leave both unset"
    )]
    EmptyQueueUrl,
    #[error(
        "access not recorded, so nothing was read: the access queue URL {url} names no SQS queue ({why}); set ACCESS_QUEUE_URL or --access-queue-url to the stack output AuditAccessQueueUrl"
    )]
    BadQueueUrl { url: String, why: String },
    #[error(
        "access not recorded, so nothing was read: the access queue is checked against the table's tag {ACCESS_QUEUE_TAG}: {0}"
    )]
    Tags(#[from] TagError),
    #[error(
        "access not recorded, so nothing was read: table {table} has no tag {ACCESS_QUEUE_TAG} naming the stack's access queue, so the access queue {url} cannot be checked: update the stack (deploy the current template.yaml, which tags the table) or check TABLE_NAME (--table; --table-name for verify); --no-audit-event skips recording on purpose"
    )]
    NoQueueTag { table: String, url: String },
    #[error(
        "access not recorded, so nothing was read: the access queue {url} ({given}) is not the stack's: table {table} names {expected} (tag {ACCESS_QUEUE_TAG}); set ACCESS_QUEUE_URL or --access-queue-url to the stack output AuditAccessQueueUrl"
    )]
    WrongQueue {
        url: String,
        given: String,
        expected: String,
        table: String,
    },
    #[error(
        "access not recorded, so nothing was read: access queue {url} not found: check ACCESS_QUEUE_URL or --access-queue-url (stack output AuditAccessQueueUrl), or deploy the stack"
    )]
    QueueNotFound { url: String },
    #[error(
        "access not recorded, so nothing was read: not allowed to send to the access queue {url}: {detail}; attach AuditReaderPolicy or AuditOperatorPolicy (both grant sqs:SendMessage on the access queue)"
    )]
    Denied { url: String, detail: String },
    #[error(
        "access not recorded, so nothing was read: sending to the access queue {url} failed: {detail}; check ACCESS_QUEUE_URL or --access-queue-url and the endpoint"
    )]
    Send { url: String, detail: String },
    #[error(
        "access not recorded, so nothing was read: the event would not be a valid audit event ({0}); shorten the argument named"
    )]
    Invalid(String),
}

/// Who is reading, as sts:GetCallerIdentity answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The event's `actor`.
    pub arn: String,
    /// The event's `callerUserId`: the principal's user id (`AIDA…`, or `AROA…:<session>` for a
    /// role), which SQS attests as the delivery's `SenderId`. The function takes an access event
    /// only when the two are equal.
    pub user_id: String,
}

/// One access event, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessEvent {
    /// The event's `messageId`, also the FIFO deduplication id.
    pub message_id: String,
    /// The native audit event body (JSON).
    pub body: String,
}

/// The port the event goes through: who the caller is, the access queue and the ARN it names,
/// what the stack's table says the access queue is.
pub trait AccessLog: Send + Sync {
    /// The caller's ARN and user id.
    fn caller(&self) -> impl Future<Output = Result<Caller, AccessError>> + Send;
    /// The access queue's URL, as given.
    fn queue_url(&self) -> &str;
    /// The ARN the access queue's URL names.
    fn queue_arn(&self) -> Result<String, AccessError>;
    /// The tags of `table`, the stack's table.
    fn stack_tags(
        &self,
        table: &str,
    ) -> impl Future<Output = Result<StackTags, AccessError>> + Send;
    /// Sends the event to the access queue.
    fn send(&self, event: &AccessEvent) -> impl Future<Output = Result<(), AccessError>> + Send;
}

/// An argument's name as the access event's `arguments` key: camelCase (`dry-run`, `message_id`
/// -> `dryRun`, `messageId`), for the command line's flags and the viewer's fields alike.
pub fn argument_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '-' || c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A fresh `messageId`: `auditctl-` and 32 hex digits.
pub fn new_message_id() -> String {
    format!("auditctl-{:032x}", fastrand::u128(..))
}

/// The event of `caller` doing `action` on `resource` with `arguments` at `at`: a native body
/// whose `callerUserId`, `arguments`, `tool` and `version` land in the item's `extra`. `sourceIp`
/// is left out: auditctl does not know the address AWS sees. Checked with the model's own rules,
/// so that what is sent is written, never dead-lettered.
pub fn event(
    action: Action,
    resource: &str,
    arguments: &Map<String, Value>,
    caller: &Caller,
    message_id: String,
    at: DateTime<Utc>,
) -> Result<AccessEvent, AccessError> {
    let body = json!({
        "messageId": message_id,
        "auditTime": canonical_time(at),
        "actor": caller.arn,
        "callerUserId": caller.user_id,
        "action": action.name(),
        "resource": resource,
        "outcome": OUTCOME.as_str(),
        "arguments": arguments,
        "tool": "auditctl",
        "version": env!("CARGO_PKG_VERSION"),
    })
    .to_string();
    AuditMessage::parse(Some(&body), None).map_err(|e| AccessError::Invalid(e.to_string()))?;
    Ok(AccessEvent { message_id, body })
}

/// What `record` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    Sent { message_id: String },
    Skipped,
}

/// How this run records its access, decided once from the flags.
pub enum Recorder<L> {
    /// Send each access event through `log`.
    Send {
        log: L,
        arguments: Map<String, Value>,
        /// The table whose tag named this access queue, and the caller, once checked: a run
        /// that records many accesses (`auditctl ui`) checks them once and then only sends.
        checked: tokio::sync::OnceCell<(String, Caller)>,
    },
    /// `--no-audit-event`: skipped on purpose.
    Skipped,
    /// No access queue configured: every read is refused (`AccessError::NotConfigured`).
    NotConfigured,
}

impl<L: AccessLog> Recorder<L> {
    /// `log` is there when an access queue is configured; `skip` is `--no-audit-event`.
    pub fn new(log: Option<L>, skip: bool, arguments: Map<String, Value>) -> Self {
        match (skip, log) {
            (true, _) => Self::Skipped,
            (false, Some(log)) => Self::Send {
                log,
                arguments,
                checked: tokio::sync::OnceCell::new(),
            },
            (false, None) => Self::NotConfigured,
        }
    }

    /// Whether this run may read at all: refused when no access queue is configured and
    /// `--no-audit-event` was not given. A command that reads many times (`auditctl ui`) asks
    /// this once before it starts.
    pub fn ready(&self) -> Result<(), AccessError> {
        match self {
            Self::NotConfigured => Err(AccessError::NotConfigured),
            Self::Send { .. } | Self::Skipped => Ok(()),
        }
    }

    /// Who the access was recorded as, once recorded (`None` when skipped or not yet sent).
    pub fn caller(&self) -> Option<&Caller> {
        match self {
            Self::Send { checked, .. } => checked.get().map(|(_, caller)| caller),
            Self::Skipped | Self::NotConfigured => None,
        }
    }

    /// Records the access, before the command reads anything: the event is sent, or stderr says
    /// why it is not. An error means it could not be sent: the command must read nothing.
    ///
    /// The access queue must be the stack's: the ARN its URL names must be the one the stack's
    /// `table` names in its tag `audit:access-queue-arn`, so that a wrong URL cannot record the
    /// access where no one looks.
    pub async fn record(
        &self,
        action: Action,
        resource: &str,
        table: &str,
    ) -> Result<Recorded, AccessError> {
        self.record_with(action, resource, table, None).await
    }

    /// As `record`, with `arguments` in place of the command's own when given: what one request
    /// of `auditctl ui` asked for (its search, the event it shows).
    pub async fn record_with(
        &self,
        action: Action,
        resource: &str,
        table: &str,
        arguments: Option<&Map<String, Value>>,
    ) -> Result<Recorded, AccessError> {
        match self {
            Self::Skipped => {
                eprintln!("{SKIPPED}");
                Ok(Recorded::Skipped)
            }
            Self::NotConfigured => Err(AccessError::NotConfigured),
            Self::Send {
                log,
                arguments: given,
                checked,
            } => {
                let caller = match checked.get() {
                    Some((checked_table, caller)) if checked_table == table => caller.clone(),
                    _ => {
                        check_queue(log, table).await?;
                        let caller = log.caller().await?;
                        // Kept for the first table checked (the only one a run uses).
                        let _ = checked.set((table.to_owned(), caller.clone()));
                        caller
                    }
                };
                let event = event(
                    action,
                    resource,
                    arguments.unwrap_or(given),
                    &caller,
                    new_message_id(),
                    Utc::now(),
                )?;
                log.send(&event).await?;
                Ok(Recorded::Sent {
                    message_id: event.message_id,
                })
            }
        }
    }
}

/// The access queue is the stack's: its URL names the ARN that the stack's table names.
async fn check_queue(log: &impl AccessLog, table: &str) -> Result<(), AccessError> {
    let url = log.queue_url();
    if url.trim().is_empty() {
        return Err(AccessError::EmptyQueueUrl);
    }
    let given = log.queue_arn()?;
    let expected = log
        .stack_tags(table)
        .await?
        .access_queue_arn
        .ok_or_else(|| AccessError::NoQueueTag {
            table: table.to_owned(),
            url: url.to_owned(),
        })?;
    if given == expected {
        Ok(())
    } else {
        Err(AccessError::WrongQueue {
            url: url.to_owned(),
            given,
            expected,
            table: table.to_owned(),
        })
    }
}

/// The SDK adapter: sts:GetCallerIdentity (which needs no permission), the table's tags
/// (dynamodb:DescribeTable and dynamodb:ListTagsOfResource) and sqs:SendMessage to the access
/// queue. The queue's ARN is read off its URL, with no request and so no permission: the region
/// from an AWS host, else (a local endpoint) the configured one.
pub struct SdkAccessLog {
    sts: aws_sdk_sts::Client,
    sqs: aws_sdk_sqs::Client,
    dynamodb: aws_sdk_dynamodb::Client,
    queue_url: String,
    region: Option<String>,
    location: String,
}

impl SdkAccessLog {
    pub fn new(config: &aws_config::SdkConfig, queue_url: String) -> Self {
        Self {
            sts: aws_sdk_sts::Client::new(config),
            sqs: aws_sdk_sqs::Client::new(config),
            dynamodb: audit_aws::config::dynamodb(config),
            queue_url,
            region: config.region().map(|r| r.as_ref().to_owned()),
            location: audit_aws::config::location(config),
        }
    }
}

impl AccessLog for SdkAccessLog {
    async fn caller(&self) -> Result<Caller, AccessError> {
        let identity = self
            .sts
            .get_caller_identity()
            .send()
            .await
            .map_err(|e| AccessError::Caller(audit_aws::error::describe(&e)))?;
        let given = |value: Option<String>| value.filter(|v| !v.is_empty());
        Ok(Caller {
            arn: given(identity.arn)
                .ok_or_else(|| AccessError::Caller("the answer names no ARN".into()))?,
            user_id: given(identity.user_id)
                .ok_or_else(|| AccessError::Caller("the answer names no UserId".into()))?,
        })
    }

    fn queue_url(&self) -> &str {
        &self.queue_url
    }

    fn queue_arn(&self) -> Result<String, AccessError> {
        queue_arn(&self.queue_url, self.region.as_deref()).map_err(|why| AccessError::BadQueueUrl {
            url: self.queue_url.clone(),
            why,
        })
    }

    async fn stack_tags(&self, table: &str) -> Result<StackTags, AccessError> {
        Ok(StackTags::read(&self.dynamodb, table, &self.location).await?)
    }

    async fn send(&self, event: &AccessEvent) -> Result<(), AccessError> {
        let mut send = self
            .sqs
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(&event.body);
        if self.queue_url.ends_with(".fifo") {
            send = send
                .message_group_id("auditctl")
                .message_deduplication_id(&event.message_id);
        }
        match send.send().await {
            Ok(_) => Ok(()),
            Err(error) => {
                let url = self.queue_url.clone();
                let error = AwsError::from_sdk(&error);
                Err(match error.kind {
                    ErrorKind::NotFound => AccessError::QueueNotFound { url },
                    ErrorKind::Denied => AccessError::Denied {
                        url,
                        detail: error.text,
                    },
                    _ => AccessError::Send {
                        url,
                        detail: error.text,
                    },
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
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
            if self.refuse {
                return Err(AccessError::QueueNotFound { url: "q".into() });
            }
            self.sent.lock().unwrap().push(event.clone());
            Ok(())
        }
    }

    const ARN: &str = "arn:aws:iam::123456789012:user/alice";
    const USER_ID: &str = "AIDAEXAMPLEALICE00001";
    const QUEUE_URL: &str =
        "https://sqs.us-east-1.amazonaws.com/123456789012/audit-AuditAccessQueue";
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
        assert_eq!(message.fields.outcome, Some(EventOutcome::Unknown));
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
        assert_eq!(body["outcome"], "unknown");
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
}
