//! Owns recording auditctl's own access to the trail (SPEC "Access to the trail is itself
//! recorded", PCI DSS 10.2.1.3): the audit event a command sends to the audit queue before it
//! reads anything, the arguments it carries, and the port that names the caller and sends it.
//! Must not know how a command reads the table or the dead-letter queue.

use std::future::Future;

use audit_aws::{AwsError, ErrorKind};
use audit_model::message::{AuditMessage, EventOutcome, canonical_time};
use chrono::{DateTime, Utc};
use clap::ArgMatches;
use clap::parser::ValueSource;
use serde_json::{Map, Value, json};

/// What a command does to the trail: the event's `action`. A new command that reads the trail is
/// a variant here and one `record` call in its arm of main.rs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Query,
    Get,
    DlqList,
    DlqRedrive,
    Verify,
}

impl Action {
    pub const fn name(self) -> &'static str {
        match self {
            Self::Query => "auditctl.query",
            Self::Get => "auditctl.get",
            Self::DlqList => "auditctl.dlq.list",
            Self::DlqRedrive => "auditctl.dlq.redrive",
            Self::Verify => "auditctl.verify",
        }
    }
}

/// The event's `outcome`. It is sent before the command runs, so the command's result is not
/// known yet: the event records the attempt to access, whatever came of it.
pub const OUTCOME: EventOutcome = EventOutcome::Unknown;

/// The note on stderr when no audit queue is configured.
pub const NOT_CONFIGURED: &str = "access not recorded: no audit queue; set AUDIT_QUEUE_URL or --queue-url (stack output AuditQueueUrl) so that auditctl records its access to the trail, or pass --no-audit-event to skip it on purpose";
/// The note on stderr with `--no-audit-event`.
pub const SKIPPED: &str = "access not recorded: --no-audit-event";

/// Why the access could not be recorded. The command then reads nothing and exits 1.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error(
        "access not recorded, so nothing was read: sts:GetCallerIdentity (who is reading) failed: {0}; check the AWS credentials (--profile, AWS_PROFILE, AWS_ACCESS_KEY_ID) and the region (--region, AWS_REGION)"
    )]
    Caller(String),
    #[error(
        "access not recorded, so nothing was read: the audit queue URL is empty: set AUDIT_QUEUE_URL or --queue-url to it (stack output AuditQueueUrl), or leave both unset"
    )]
    EmptyQueueUrl,
    #[error(
        "access not recorded, so nothing was read: audit queue {url} not found: check AUDIT_QUEUE_URL or --queue-url (stack output AuditQueueUrl), or deploy the stack"
    )]
    QueueNotFound { url: String },
    #[error(
        "access not recorded, so nothing was read: not allowed to send to the audit queue {url}: {detail}; attach AuditReaderPolicy or AuditOperatorPolicy (both grant sqs:SendMessage on it)"
    )]
    Denied { url: String, detail: String },
    #[error(
        "access not recorded, so nothing was read: sending to the audit queue {url} failed: {detail}; check AUDIT_QUEUE_URL or --queue-url and the endpoint"
    )]
    Send { url: String, detail: String },
    #[error(
        "access not recorded, so nothing was read: the event would not be a valid audit event ({0}); shorten the argument named"
    )]
    Invalid(String),
}

/// One access event, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessEvent {
    /// The event's `messageId`, also the FIFO deduplication id.
    pub message_id: String,
    /// The native audit event body (JSON).
    pub body: String,
}

/// The port the event goes through: who the caller is, and the audit queue.
pub trait AccessLog: Send + Sync {
    /// The caller's ARN.
    fn caller(&self) -> impl Future<Output = Result<String, AccessError>> + Send;
    /// Sends the event to the audit queue.
    fn send(&self, event: &AccessEvent) -> impl Future<Output = Result<(), AccessError>> + Send;
}

/// A fresh `messageId`: `auditctl-` and 32 hex digits.
pub fn new_message_id() -> String {
    format!("auditctl-{:032x}", fastrand::u128(..))
}

/// The event of `actor` doing `action` on `resource` with `arguments` at `at`: a native body
/// whose `arguments`, `tool` and `version` land in the item's `extra`. `sourceIp` is left out:
/// auditctl does not know the address AWS sees. Checked with the model's own rules, so that
/// what is sent is written, never dead-lettered.
pub fn event(
    action: Action,
    resource: &str,
    arguments: &Map<String, Value>,
    actor: &str,
    message_id: String,
    at: DateTime<Utc>,
) -> Result<AccessEvent, AccessError> {
    let body = json!({
        "messageId": message_id,
        "auditTime": canonical_time(at),
        "actor": actor,
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

/// Every argument the command was given, on its command line or by an environment variable,
/// under its long name in camelCase (`--dry-run` -> `dryRun`, `MESSAGE_ID` -> `messageId`): a
/// flag as `true`, a value as the text given. Defaults are left out (the help states them).
/// `command` must be built (`Command::build`), so that the global flags are in each subcommand.
pub fn given_arguments(command: &clap::Command, matches: &ArgMatches) -> Map<String, Value> {
    let (mut command, mut matches) = (command, matches);
    while let Some((name, sub)) = matches.subcommand() {
        let Some(subcommand) = command.find_subcommand(name) else {
            break;
        };
        (command, matches) = (subcommand, sub);
    }
    let mut given = Map::new();
    for id in matches.ids() {
        let Some(arg) = command.get_arguments().find(|a| a.get_id() == id) else {
            continue; // a group of arguments, not one
        };
        if !matches!(
            matches.value_source(id.as_str()),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        ) {
            continue;
        }
        let value = if arg.get_action().takes_values() {
            let mut values: Vec<Value> = matches
                .get_raw(id.as_str())
                .into_iter()
                .flatten()
                .map(|v| Value::String(v.to_string_lossy().into_owned()))
                .collect();
            if values.len() == 1 {
                values.remove(0)
            } else {
                Value::Array(values)
            }
        } else {
            Value::Bool(true)
        };
        given.insert(camel_case(arg.get_long().unwrap_or(id.as_str())), value);
    }
    given
}

/// `dry-run` and `message_id` -> `dryRun` and `messageId`.
fn camel_case(name: &str) -> String {
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

/// What `record` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    Sent { message_id: String },
    Skipped,
    NotConfigured,
}

/// How this run records its access, decided once from the flags.
pub enum Recorder<L> {
    /// Send each access event through `log`.
    Send {
        log: L,
        arguments: Map<String, Value>,
    },
    /// `--no-audit-event`: skipped on purpose.
    Skipped,
    /// No audit queue configured.
    NotConfigured,
}

impl<L: AccessLog> Recorder<L> {
    /// `log` is there when an audit queue is configured; `skip` is `--no-audit-event`.
    pub fn new(log: Option<L>, skip: bool, arguments: Map<String, Value>) -> Self {
        match (skip, log) {
            (true, _) => Self::Skipped,
            (false, Some(log)) => Self::Send { log, arguments },
            (false, None) => Self::NotConfigured,
        }
    }

    /// Records the access, before the command reads anything: the event is sent, or stderr says
    /// why it is not. An error means it could not be sent: the command must read nothing.
    pub async fn record(&self, action: Action, resource: &str) -> Result<Recorded, AccessError> {
        match self {
            Self::Skipped => {
                eprintln!("{SKIPPED}");
                Ok(Recorded::Skipped)
            }
            Self::NotConfigured => {
                eprintln!("{NOT_CONFIGURED}");
                Ok(Recorded::NotConfigured)
            }
            Self::Send { log, arguments } => {
                let actor = log.caller().await?;
                let event = event(
                    action,
                    resource,
                    arguments,
                    &actor,
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

/// The SDK adapter: sts:GetCallerIdentity (which needs no permission) and sqs:SendMessage to
/// the audit queue.
pub struct SdkAccessLog {
    sts: aws_sdk_sts::Client,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SdkAccessLog {
    pub fn new(config: &aws_config::SdkConfig, queue_url: String) -> Self {
        Self {
            sts: aws_sdk_sts::Client::new(config),
            sqs: aws_sdk_sqs::Client::new(config),
            queue_url,
        }
    }
}

impl AccessLog for SdkAccessLog {
    async fn caller(&self) -> Result<String, AccessError> {
        let identity = self
            .sts
            .get_caller_identity()
            .send()
            .await
            .map_err(|e| AccessError::Caller(audit_aws::error::describe(&e)))?;
        identity
            .arn
            .filter(|arn| !arn.is_empty())
            .ok_or_else(|| AccessError::Caller("the answer names no ARN".into()))
    }

    async fn send(&self, event: &AccessEvent) -> Result<(), AccessError> {
        if self.queue_url.trim().is_empty() {
            return Err(AccessError::EmptyQueueUrl);
        }
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

    /// An in-memory twin of the port: a fixed caller (or a failure), the events sent.
    #[derive(Default)]
    struct Twin {
        caller: Option<String>,
        refuse: bool,
        sent: Mutex<Vec<AccessEvent>>,
    }

    impl AccessLog for Twin {
        async fn caller(&self) -> Result<String, AccessError> {
            self.caller
                .clone()
                .ok_or_else(|| AccessError::Caller("InvalidClientTokenId: no such key".into()))
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
            ARN,
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
        assert_eq!(message.extra["arguments"], Value::Object(arguments()));
        assert_eq!(message.extra["tool"], "auditctl");
        assert_eq!(message.extra["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(message.extra.len(), 3);
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
            ARN,
            new_message_id(),
            Utc::now(),
        )
        .unwrap_err();
        assert!(error.to_string().contains("resource"), "{error}");
    }

    #[tokio::test]
    async fn a_recorder_sends_one_event_naming_the_caller() {
        let recorder = Recorder::new(
            Some(Twin {
                caller: Some(ARN.into()),
                ..Twin::default()
            }),
            false,
            arguments(),
        );
        let recorded = recorder.record(Action::Query, "AuditMessages").await;
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
        assert_eq!(body["action"], "auditctl.query");
        assert_eq!(body["resource"], "AuditMessages");
        assert_eq!(body["outcome"], "unknown");
    }

    #[tokio::test]
    async fn a_caller_that_cannot_be_named_or_a_refused_send_is_an_error() {
        let nobody = Recorder::new(Some(Twin::default()), false, Map::new());
        let error = nobody.record(Action::Get, "T").await.unwrap_err();
        assert!(
            error.to_string().contains("sts:GetCallerIdentity")
                && error.to_string().contains("nothing was read"),
            "{error}"
        );
        let Recorder::Send { log, .. } = &nobody else {
            panic!()
        };
        assert!(log.sent.lock().unwrap().is_empty());

        let refused = Recorder::new(
            Some(Twin {
                caller: Some(ARN.into()),
                refuse: true,
                ..Twin::default()
            }),
            false,
            Map::new(),
        );
        let error = refused.record(Action::DlqList, "q").await.unwrap_err();
        assert!(error.to_string().contains("AUDIT_QUEUE_URL"), "{error}");
    }

    #[tokio::test]
    async fn skipped_or_not_configured_sends_nothing() {
        let twin = Twin {
            caller: Some(ARN.into()),
            ..Twin::default()
        };
        let skipped = Recorder::new(Some(twin), true, Map::new());
        assert_eq!(
            skipped.record(Action::Query, "T").await.unwrap(),
            Recorded::Skipped
        );
        let none: Recorder<Twin> = Recorder::new(None, false, Map::new());
        assert_eq!(
            none.record(Action::Query, "T").await.unwrap(),
            Recorded::NotConfigured
        );
    }

    #[test]
    fn the_arguments_are_those_given_by_long_name_in_camel_case() {
        use clap::{Arg, ArgAction, Command};
        let mut command = Command::new("auditctl")
            .arg(
                Arg::new("queue_url")
                    .long("queue-url")
                    .global(true)
                    .env("AUDITCTL_TEST_UNSET_QUEUE"),
            )
            .subcommand(
                Command::new("dlq").subcommand(
                    Command::new("redrive")
                        .arg(
                            Arg::new("dry_run")
                                .long("dry-run")
                                .action(ArgAction::SetTrue),
                        )
                        .arg(Arg::new("max").long("max"))
                        .arg(Arg::new("rate").long("rate").default_value("10"))
                        .arg(Arg::new("message_id")),
                ),
            );
        command.build();
        let matches = command
            .clone()
            .try_get_matches_from([
                "auditctl",
                "dlq",
                "redrive",
                "--dry-run",
                "--max",
                "5",
                "id-1",
                "--queue-url",
                "https://q",
            ])
            .unwrap();
        assert_eq!(
            Value::Object(given_arguments(&command, &matches)),
            json!({"dryRun": true, "max": "5", "messageId": "id-1", "queueUrl": "https://q"}),
            "the default --rate is left out"
        );
    }
}
