//! Owns the access event of a read that failed: the event sent before the read says outcome
//! `success` (the read goes ahead, recorded); when the read then fails, a second event says
//! outcome `failure`, names the first by its messageId (`accessEventId`) and carries the error's
//! kind and text, cut short (docs/auditctl.md "Access to the trail is itself recorded"). Every
//! read goes through one of two wrappers here: `Recorder::read` (a request of `auditctl ui`) or
//! `Recorder::outcome` (a command's result). Must not know which command read, nor how its errors
//! are worded for people (the command's `FailedRead`).

use std::future::Future;

use chrono::Utc;
use serde_json::{Map, Value, json};

use super::{
    AccessError, AccessEvent, AccessLog, Action, Body, Caller, FAILED, Recorded, Recorder,
    checked_event, new_message_id,
};

/// The failure event's field that names the access event it completes: that event's messageId.
pub const ACCESS_EVENT_ID: &str = "accessEventId";
/// The failure event's field that holds the error: `{"kind": …, "text": …}`.
pub const ERROR: &str = "error";
/// The longest error text a failure event carries, in characters (longer is cut, with `…`).
pub const TEXT_LIMIT: usize = 300;

/// What a read's failure event says of its error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadFailure {
    /// Short, in snake case: `table_not_found`, `denied`, `usage`, …
    pub kind: String,
    /// The error's text (cut to `TEXT_LIMIT` characters when sent).
    pub text: String,
}

/// A command's or a request's error, as its failure event says it.
pub trait FailedRead: Sized {
    /// What failed; `None` when the error is not the read failing (`verify` read everything and
    /// found problems; the reader of the output closed it).
    fn failure(&self) -> Option<ReadFailure>;
    /// The same error, saying too that its failure event could not be sent (`why`).
    fn unrecorded(self, why: FailureNotSent) -> Self;
}

/// The failure event of a read could not be sent: the command reports its own error, and this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the failure record of this read was not sent, so the trail holds only its access event {first} (outcome success): {why}"
)]
pub struct FailureNotSent {
    /// The messageId of the access event sent before the read.
    pub first: String,
    /// Why the failure event could not be sent.
    pub why: String,
}

/// An access recorded (sent): what its failure event repeats (held by `Recorder::Send`).
#[derive(Debug, Clone)]
pub struct Sent {
    pub(super) message_id: String,
    pub(super) action: Action,
    pub(super) resource: String,
    /// The request's own arguments, when not the run's (`record_with`).
    pub(super) arguments: Option<Map<String, Value>>,
}

impl<L: AccessLog> Recorder<L> {
    /// Records the access (`record_with`), then runs `read`; when `read` fails after the access
    /// was sent, sends its failure event before giving the error back. The read runs only once
    /// its access is recorded: an error recording it is returned, and `read` never starts.
    pub async fn read<T, E>(
        &self,
        action: Action,
        resource: &str,
        table: &str,
        arguments: Option<&Map<String, Value>>,
        read: impl Future<Output = Result<T, E>>,
    ) -> Result<(Recorded, T), E>
    where
        E: FailedRead + From<AccessError>,
    {
        let recorded = self.record_with(action, resource, table, arguments).await?;
        match read.await {
            Ok(value) => Ok((recorded, value)),
            Err(error) => Err(self
                .fail(&recorded, action, resource, arguments, error)
                .await),
        }
    }

    /// `error`, a read's failure after its access was `recorded` (by `read`) with `action`,
    /// `resource` and `arguments`, once its failure event is sent: for a request that shows a
    /// failure within its page (the health page's verify run).
    pub async fn fail<E: FailedRead>(
        &self,
        recorded: &Recorded,
        action: Action,
        resource: &str,
        arguments: Option<&Map<String, Value>>,
        error: E,
    ) -> E {
        match recorded {
            Recorded::Sent { message_id } => {
                let sent = Sent {
                    message_id: message_id.clone(),
                    action,
                    resource: resource.to_owned(),
                    arguments: arguments.cloned(),
                };
                self.failed(&sent, error).await
            }
            Recorded::Skipped => error,
        }
    }

    /// A command's result: when it failed after recording its access (the last one this run
    /// recorded), the failure event is sent. For a run that records one access, every command
    /// but `auditctl ui` (whose requests go through `read`); a failure before the access was
    /// recorded sends nothing (nothing was read).
    pub async fn outcome<T, E: FailedRead>(&self, result: Result<T, E>) -> Result<T, E> {
        let error = match result {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let sent = match self {
            Self::Send { last, .. } => last.lock().ok().and_then(|mut last| last.take()),
            Self::Skipped | Self::NotConfigured => None,
        };
        Err(match sent {
            Some(sent) => self.failed(&sent, error).await,
            None => error,
        })
    }

    /// `error`, once its failure event is sent, or saying why it could not be.
    async fn failed<E: FailedRead>(&self, sent: &Sent, error: E) -> E {
        let Some(failure) = error.failure() else {
            return error;
        };
        match self.send_failure(sent, &failure).await {
            Ok(()) => error,
            Err(why) => error.unrecorded(FailureNotSent {
                first: sent.message_id.clone(),
                why: detail(&why),
            }),
        }
    }

    async fn send_failure(&self, sent: &Sent, failure: &ReadFailure) -> Result<(), AccessError> {
        let Self::Send {
            log,
            arguments,
            checked,
            ..
        } = self
        else {
            return Ok(());
        };
        let caller = match checked.get().map(|checked| &**checked) {
            Some((_, caller, _)) => caller.clone(),
            None => log.caller().await?,
        };
        let event = failure_event(
            sent,
            sent.arguments.as_ref().unwrap_or(arguments),
            &caller,
            failure,
            new_message_id(),
        )?;
        log.send(&event).await
    }
}

/// The failure event of the access `sent` (its action, resource and arguments), by `caller`:
/// outcome `failure`, `accessEventId` the first event's messageId, `error` the failure's kind
/// and text (at most `TEXT_LIMIT` characters).
fn failure_event(
    sent: &Sent,
    arguments: &Map<String, Value>,
    caller: &Caller,
    failure: &ReadFailure,
    message_id: String,
) -> Result<AccessEvent, AccessError> {
    let mut text: String = failure.text.chars().take(TEXT_LIMIT).collect();
    if failure.text.chars().nth(TEXT_LIMIT).is_some() {
        text.push('…');
    }
    let mut more = Map::new();
    more.insert(ACCESS_EVENT_ID.into(), sent.message_id.clone().into());
    more.insert(ERROR.into(), json!({"kind": failure.kind, "text": text}));
    checked_event(
        Body {
            action: sent.action,
            resource: &sent.resource,
            arguments,
            caller,
        },
        FAILED,
        more,
        message_id,
        Utc::now(),
    )
}

/// Why an event could not be sent, without the words of a refused read ("so nothing was read"):
/// the failure event is sent after the read.
fn detail(error: &AccessError) -> String {
    match error {
        AccessError::QueueNotFound { url } => format!("access queue {url} not found"),
        AccessError::Denied { url, detail } => {
            format!("not allowed to send to the access queue {url}: {detail}")
        }
        AccessError::Send { url, detail } => {
            format!("sending to the access queue {url} failed: {detail}")
        }
        AccessError::Caller(detail) => {
            format!("sts:GetCallerIdentity (who is reading) failed: {detail}")
        }
        AccessError::Invalid(detail) => format!("it would not be a valid audit event ({detail})"),
        other => other.to_string(),
    }
}
