//! Owns reading a record's delivery, once, at the start of its processing: its own SQS id, the
//! original delivery's identity across redrives (its own, or the one its `failureContext`
//! carries when a redriver sent it), the receive count, the sender and the FIFO group. Must not
//! know the store or the dead-letter queue.

use std::borrow::Cow;

use aws_lambda_events::sqs::SqsMessage;
use chrono::{DateTime, Utc};

use crate::deadletter::{FAILURE_CONTEXT, FailureContext, MalformedContext};
use audit_model::access::Source;
use audit_model::context::Redrivers;
use audit_model::message::{Delivery, parse_sent_timestamp};

/// What a record's delivery says, read once and passed on to scheduling, the write, settling and
/// the dead letter. It borrows the record; `item_delivery` gives the model's `Delivery`, which
/// the item is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct Received<'a> {
    /// This delivery's SQS message id (the batch has checked that every record has one).
    pub sqs_message_id: Option<&'a str>,
    /// The SQS message id of the original delivery: this one's, or the one a redriven record
    /// carries in its `failureContext`.
    pub original_message_id: Cow<'a, str>,
    /// The original delivery's `SentTimestamp` (epoch milliseconds) as SQS wrote it.
    pub original_sent_timestamp: Option<Cow<'a, str>>,
    /// `original_sent_timestamp` read as a time, when it is one.
    pub sent_at: Option<DateTime<Utc>>,
    /// `ApproximateReceiveCount`.
    pub receive_count: Option<u64>,
    /// The source queue's ARN.
    pub event_source: Option<&'a str>,
    /// SQS's `SenderId` attribute: who AWS says sent this delivery (a user id, or a role id and
    /// session name). The item's `senderId`.
    pub sender_id: Option<&'a str>,
    /// The first delivery's `SenderId`, when a valid `failureContext` carries it: the item's
    /// `originalSenderId`.
    pub original_sender_id: Option<Cow<'a, str>>,
    /// The record's `MessageGroupId` when it comes from a FIFO queue.
    pub fifo_group: Option<&'a str>,
    /// Why the record's `failureContext` was ignored, when it has one that is malformed: the
    /// record is then its own original delivery.
    pub malformed_context: Option<MalformedContext>,
    /// The record carries a `failureContext` from a sender that is neither the function's role
    /// nor the redrive role: its delivery facts are not taken, the record is its own original.
    pub unvouched_context: bool,
}

impl<'a> Received<'a> {
    /// Reads the record's delivery. Its `failureContext` (the original SQS id, `SentTimestamp`
    /// and sender) is taken only when `redrivers` vouch for the delivery's attested sender.
    pub fn read(record: &'a SqsMessage, redrivers: &Redrivers) -> Self {
        let own_sent = record.attributes.get("SentTimestamp").map(String::as_str);
        let sender_id = record.attributes.get("SenderId").map(String::as_str);
        let context = record
            .message_attributes
            .get(FAILURE_CONTEXT)
            .and_then(|a| a.string_value.as_deref());
        let unvouched_context = context.is_some() && !redrivers.vouch_for(sender_id);
        let context = context
            .filter(|_| !unvouched_context)
            .map(FailureContext::parse);
        let (original_message_id, original_sent_timestamp, original_sender_id, malformed_context) =
            match context {
                Some(Ok(c)) => (
                    Cow::Owned(c.sqs_message_id),
                    c.sent_timestamp.map(Cow::Owned),
                    c.original_sender_id.map(Cow::Owned),
                    None,
                ),
                malformed => (
                    Cow::Borrowed(record.message_id.as_deref().unwrap_or_default()),
                    own_sent.map(Cow::Borrowed),
                    None,
                    malformed.and_then(Result::err),
                ),
            };
        let fifo = record
            .event_source_arn
            .as_deref()
            .is_some_and(|arn| arn.ends_with(".fifo"));
        Self {
            sqs_message_id: record.message_id.as_deref(),
            sent_at: parse_sent_timestamp(original_sent_timestamp.as_deref()),
            original_message_id,
            original_sent_timestamp,
            receive_count: record
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|c| c.trim().parse().ok()),
            event_source: record.event_source_arn.as_deref(),
            sender_id,
            original_sender_id,
            fifo_group: record
                .attributes
                .get("MessageGroupId")
                .filter(|_| fifo)
                .map(String::as_str),
            malformed_context,
            unvouched_context,
        }
    }

    /// The model's `Delivery` of the item written for this record.
    pub fn item_delivery(&self) -> Delivery {
        Delivery {
            sqs_message_id: self.sqs_message_id.unwrap_or_default().to_owned(),
            original_message_id: self.original_message_id.clone().into_owned(),
            sent_at: self.sent_at,
            receive_count: self.receive_count,
            event_source: self.event_source.map(str::to_owned),
            sender_id: self.sender_id.map(str::to_owned),
            original_sender_id: self.original_sender_id.as_deref().map(str::to_owned),
        }
    }

    /// The access queue when the record's `eventSourceARN` is `access_queue_arn`, else another.
    pub fn source(&self, access_queue_arn: Option<&str>) -> Source {
        match (access_queue_arn, self.event_source) {
            (Some(access), Some(arn)) if access == arn => Source::AccessQueue,
            _ => Source::Other,
        }
    }

    /// Who sent the first delivery, as AWS attested it: the one a valid `failureContext` carries,
    /// else this delivery's own sender. What a dead letter's `failureContext` keeps.
    pub fn first_sender(&self) -> Option<&str> {
        self.original_sender_id.as_deref().or(self.sender_id)
    }
}
