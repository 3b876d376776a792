//! Owns one dead-letter message as received and what it says: its reason, its identity
//! (`failureContext`), and its original sender as AWS attests it. Must not know how the queue is
//! read or moved (`mod.rs`, `redrive.rs`); the context's format is the model's.

use std::collections::BTreeMap;

use audit_aws::sqs::{Attribute, Received, System};
use serde_json::{Value, json};

use audit_model::context::{
    FAILURE_CONTEXT, FAILURE_REASON, FailureContext, MAX_RECEIVES, is_principal,
};
use audit_model::message::canonical_time;

/// The `failureContext` field that names the first delivery's sender.
pub(super) const ORIGINAL_SENDER_ID: &str = "originalSenderId";

/// Who first sent a dead-lettered message, as far as AWS attests it (docs/events.md
/// "Claimed and attested: `actor` and `senderId`").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OriginalSender {
    /// No valid `failureContext`: SQS moved the message (or someone sent it here directly), and
    /// its own `SenderId` is the first sender's.
    Own(String),
    /// The `failureContext`'s claim, made by the receiver function: the message's own `SenderId`
    /// is the function's role. Kept.
    Vouched(String),
    /// A claim the receiver function did not make (the message's own `SenderId` is another
    /// principal's, or there is none, or the function's role id is not known): dropped from the
    /// context before a redrive.
    Unvouched { claim: String, why: String },
    /// Not known: no `SenderId`, or a context that names no sender.
    Unknown,
}

impl OriginalSender {
    /// The sender a redrive carries on, if any.
    pub fn attested(&self) -> Option<&str> {
        match self {
            Self::Own(id) | Self::Vouched(id) => Some(id),
            Self::Unvouched { .. } | Self::Unknown => None,
        }
    }
}

/// One message of the dead-letter queue, as received.
#[derive(Debug, Clone)]
pub struct DlqMessage {
    pub message_id: String,
    pub(super) receipt_handle: String,
    pub body: String,
    pub attributes: BTreeMap<String, Attribute>,
    pub(super) system: System,
}

impl From<Received> for DlqMessage {
    fn from(message: Received) -> Self {
        Self {
            message_id: message.message_id,
            receipt_handle: message.receipt_handle,
            body: message.body,
            attributes: message.attributes,
            system: message.system,
        }
    }
}

impl DlqMessage {
    fn string_attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .get(name)
            .and_then(|a| a.string_value.as_deref())
    }

    /// The `failureContext` it carries, when valid.
    pub fn context(&self) -> Option<FailureContext> {
        self.string_attribute(FAILURE_CONTEXT)
            .and_then(|text| FailureContext::parse(text).ok())
    }

    /// `failureReason`, else the context's reason, else `max_receives`: with neither, SQS moved
    /// it after `maxReceiveCount` receives.
    pub fn reason(&self) -> String {
        self.string_attribute(FAILURE_REASON)
            .map(str::to_owned)
            .or_else(|| self.context().map(|c| c.reason).filter(|r| !r.is_empty()))
            .unwrap_or_else(|| MAX_RECEIVES.to_owned())
    }

    /// The SQS message id of the original delivery.
    pub fn original_id(&self) -> String {
        self.context()
            .map(|c| c.sqs_message_id)
            .unwrap_or_else(|| self.message_id.clone())
    }

    /// Who sent this message to the dead-letter queue, as SQS attests it (`SenderId`): the
    /// receiver function's role for what it dead-lettered, the first sender for what SQS moved.
    pub fn sender_id(&self) -> Option<&str> {
        self.system.sender_id.as_deref().filter(|id| !id.is_empty())
    }

    /// The `failureContext` as a JSON object, when it is one.
    pub(super) fn context_object(&self) -> Option<serde_json::Map<String, Value>> {
        self.string_attribute(FAILURE_CONTEXT)
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
            .and_then(|value| match value {
                Value::Object(object) => Some(object),
                _ => None,
            })
    }

    /// The first delivery's sender, as AWS attests it: `receiver_role_id` is the receiver
    /// function's role id (the table's tag `audit:receiver-role-id`), whose claims alone are
    /// trusted.
    pub fn original_sender(&self, receiver_role_id: Option<&str>) -> OriginalSender {
        let Some(context) = self.context() else {
            return self.sender_id().map_or(OriginalSender::Unknown, |id| {
                OriginalSender::Own(id.to_owned())
            });
        };
        let Some(claim) = self
            .context_object()
            .and_then(|mut object| object.remove(ORIGINAL_SENDER_ID))
        else {
            return OriginalSender::Unknown;
        };
        let why = match (self.sender_id(), receiver_role_id) {
            (Some(sender), Some(role)) if is_principal(sender, role) => {
                return context
                    .original_sender_id
                    .map_or(OriginalSender::Unknown, OriginalSender::Vouched);
            }
            (Some(sender), Some(role)) => format!(
                "the message was sent to the dead-letter queue by {sender}, not by the receiver function's role {role}"
            ),
            (None, _) => "the message has no SenderId".to_owned(),
            (Some(_), None) => {
                "the table has no tag audit:receiver-role-id naming the receiver function's role, so no claim can be trusted (update the stack)".to_owned()
            }
        };
        OriginalSender::Unvouched {
            claim: match claim {
                Value::String(text) => text,
                other => other.to_string(),
            },
            why,
        }
    }

    /// Receives at the source when it failed (from the context), else the queue's own count.
    pub fn receive_count(&self) -> Option<u64> {
        self.context()
            .and_then(|c| c.receive_count)
            .or(self.system.approximate_receive_count)
    }

    /// The queue it came from: its context's `eventSourceArn`, else the attribute SQS sets when
    /// it moves a message (`DeadLetterQueueSourceArn`).
    pub fn source_arn(&self) -> Option<String> {
        self.context()
            .and_then(|c| c.event_source_arn)
            .or_else(|| self.system.dead_letter_queue_source_arn.clone())
    }

    /// The context as a message whose context is missing or malformed gets it for a redrive:
    /// its own message id and `SentTimestamp` are those of the original delivery (SQS keeps both
    /// when it moves a message after `maxReceiveCount`).
    pub fn context_for_redrive(&self) -> FailureContext {
        self.context().unwrap_or_else(|| FailureContext {
            reason: MAX_RECEIVES.to_owned(),
            detail:
                "moved by SQS after maxReceiveCount receives; context added by auditctl dlq redrive"
                    .to_owned(),
            sqs_message_id: self.message_id.clone(),
            sent_timestamp: self.system.sent_timestamp.clone(),
            receive_count: self.system.approximate_receive_count,
            failed_at: canonical_time(chrono::Utc::now()),
            event_source_arn: self.system.dead_letter_queue_source_arn.clone(),
            // Its own SenderId: SQS keeps it when it moves a message.
            original_sender_id: self.sender_id().map(str::to_owned),
            sender_id: self.sender_id().map(str::to_owned),
        })
    }

    pub(super) fn json(&self, sender: &OriginalSender, show_body: bool) -> Value {
        let mut value = json!({
            "messageId": self.message_id,
            "reason": self.reason(),
            "originalSqsMessageId": self.original_id(),
            "originalSenderId": sender.attested(),
            "senderId": self.sender_id(),
            "failedAt": self.context().map(|c| c.failed_at).filter(|t| !t.is_empty()),
            "receiveCount": self.receive_count(),
            "bodyBytes": self.body.len(),
            "failureContext": self.string_attribute(FAILURE_CONTEXT)
                .and_then(|t| serde_json::from_str::<Value>(t).ok()),
        });
        if show_body {
            value["body"] = Value::String(self.body.clone());
        }
        value
    }

    pub(super) fn cells(&self, sender: &OriginalSender) -> Vec<String> {
        vec![
            self.message_id.clone(),
            self.reason(),
            self.original_id(),
            self.context().map(|c| c.failed_at).unwrap_or_default(),
            self.receive_count()
                .map(|n| n.to_string())
                .unwrap_or_default(),
            self.body.len().to_string(),
            sender.attested().unwrap_or_default().to_owned(),
            self.sender_id().unwrap_or_default().to_owned(),
        ]
    }
}
