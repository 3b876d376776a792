//! Owns a record's identity across redrives: its own delivery, or the original one that its
//! `failureContext` carries. Must not know the store or the dead-letter queue.

use aws_lambda_events::sqs::SqsMessage;

use crate::deadletter::{FAILURE_CONTEXT, FailureContext, MalformedContext};

/// The identity of the record's original delivery: its own, or the one its `failureContext`
/// carries when it was dead-lettered before and redriven. A malformed context is ignored; it is
/// returned beside the identity so that the caller logs it once per record.
pub(super) struct Original {
    pub(super) message_id: String,
    pub(super) sent_timestamp: Option<String>,
}

pub(super) fn original(record: &SqsMessage) -> (Original, Option<MalformedContext>) {
    let own_id = record.message_id.clone().unwrap_or_default();
    let own_sent = record.attributes.get("SentTimestamp").cloned();
    let context = record
        .message_attributes
        .get(FAILURE_CONTEXT)
        .and_then(|a| a.string_value.as_deref())
        .map(FailureContext::parse);
    match context {
        Some(Ok(c)) => (
            Original {
                message_id: c.sqs_message_id,
                sent_timestamp: c.sent_timestamp,
            },
            None,
        ),
        malformed => (
            Original {
                message_id: own_id,
                sent_timestamp: own_sent,
            },
            malformed.and_then(Result::err),
        ),
    }
}

pub(super) fn receive_count(record: &SqsMessage) -> Option<u64> {
    record
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|c| c.trim().parse().ok())
}
