//! Owns recording auditctl's own access to the trail (docs/auditctl.md "Access to the trail is
//! itself recorded"): the audit event a command sends to the access queue before
//! it reads anything (outcome `success`), the second one sent when the read then fails (outcome
//! `failure`, naming the first: `failed.rs`), the arguments they carry, the check that the access
//! queue is the stack's (the one the table names in its tag), and the port that names the caller
//! and sends them. Must not know how a command reads the table or the dead-letter queue, nor its
//! flags (auditctl's commands/arguments.rs captures them).

use std::future::Future;

use audit_aws::{AwsError, ErrorKind};
use audit_model::message::{AuditMessage, EventOutcome, canonical_time};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use crate::stack::{ACCESS_QUEUE_TAG, StackTags, TagError, queue_arn};

mod failed;

pub use failed::{ACCESS_EVENT_ID, FailedRead, FailureNotSent, ReadFailure};

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

/// The `outcome` of the event sent before the read: the read goes ahead, recorded. Should the
/// read then fail, a second event says so (`FAILED`, naming this one: `failed.rs`).
pub const OUTCOME: EventOutcome = EventOutcome::Success;

/// The `outcome` of the event sent when the read, recorded as `OUTCOME`, failed.
pub const FAILED: EventOutcome = EventOutcome::Failure;

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
    checked_event(
        Body {
            action,
            resource,
            arguments,
            caller,
        },
        OUTCOME,
        Map::new(),
        message_id,
        at,
    )
}

/// What an access event says, whichever its outcome.
#[derive(Clone, Copy)]
struct Body<'a> {
    action: Action,
    resource: &'a str,
    arguments: &'a Map<String, Value>,
    caller: &'a Caller,
}

/// The event of `body` with `outcome` and the fields `more`, checked with the model's rules.
fn checked_event(
    body: Body<'_>,
    outcome: EventOutcome,
    more: Map<String, Value>,
    message_id: String,
    at: DateTime<Utc>,
) -> Result<AccessEvent, AccessError> {
    let mut fields = json!({
        "messageId": message_id,
        "auditTime": canonical_time(at),
        "actor": body.caller.arn,
        "callerUserId": body.caller.user_id,
        "action": body.action.name(),
        "resource": body.resource,
        "outcome": outcome.as_str(),
        "arguments": body.arguments,
        "tool": "auditctl",
        "version": env!("CARGO_PKG_VERSION"),
    });
    if let Value::Object(fields) = &mut fields {
        fields.extend(more);
    }
    let body = fields.to_string();
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
        /// The table whose tag named this access queue, the caller, and the table's tags, once
        /// checked: a run that records many accesses (`auditctl ui`) checks them once and then
        /// only sends.
        checked: tokio::sync::OnceCell<Box<(String, Caller, StackTags)>>,
        /// The last access recorded, for a command's failure after it (`Recorder::outcome`).
        last: std::sync::Mutex<Option<Box<failed::Sent>>>,
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
                last: std::sync::Mutex::new(None),
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
            Self::Send { checked, .. } => checked.get().map(|checked| &checked.1),
            Self::Skipped | Self::NotConfigured => None,
        }
    }

    /// The table's tags as read to check the access queue, once an access was recorded (`None`
    /// when skipped or not yet sent: the caller reads them itself).
    pub fn stack_tags(&self) -> Option<&StackTags> {
        match self {
            Self::Send { checked, .. } => checked.get().map(|checked| &checked.2),
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
                last,
            } => {
                let caller = match checked.get().map(|checked| &**checked) {
                    Some((checked_table, caller, _)) if checked_table == table => caller.clone(),
                    _ => {
                        let tags = check_queue(log, table).await?;
                        let caller = log.caller().await?;
                        // Kept for the first table checked (the only one a run uses).
                        let _ = checked.set(Box::new((table.to_owned(), caller.clone(), tags)));
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
                if let Ok(mut last) = last.lock() {
                    *last = Some(Box::new(failed::Sent {
                        message_id: event.message_id.clone(),
                        action,
                        resource: resource.to_owned(),
                        arguments: arguments.cloned(),
                    }));
                }
                Ok(Recorded::Sent {
                    message_id: event.message_id,
                })
            }
        }
    }
}

/// The access queue is the stack's: its URL names the ARN that the stack's table names. The
/// table's tags, when it is.
async fn check_queue(log: &impl AccessLog, table: &str) -> Result<StackTags, AccessError> {
    let url = log.queue_url();
    if url.trim().is_empty() {
        return Err(AccessError::EmptyQueueUrl);
    }
    let given = log.queue_arn()?;
    let tags = log.stack_tags(table).await?;
    let expected = tags
        .access_queue_arn
        .clone()
        .ok_or_else(|| AccessError::NoQueueTag {
            table: table.to_owned(),
            url: url.to_owned(),
        })?;
    if given == expected {
        Ok(tags)
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
mod tests;
