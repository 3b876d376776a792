//! Owns the dead-letter message of a failed record: the body byte for byte, its attributes, and
//! `failureReason` and `failureContext` with the original delivery's identity and attested
//! sender. Must not know when a record is dead-lettered.

use aws_lambda_events::sqs::SqsMessage;
use chrono::{DateTime, Utc};

use super::Failure;
use super::delivery::Received;
use crate::deadletter::{
    Attribute, DeadLetter, FAILURE_CONTEXT, FAILURE_REASON, FailureContext,
    MAX_ORIGINAL_ATTRIBUTES, SendError,
};
use audit_aws::sqs::attributes;
use audit_model::message::canonical_time;

/// The dead-letter message of a failed record: its body byte for byte, its attributes, and
/// `failureReason` and `failureContext` (with the original delivery's identity).
pub fn dead_letter(
    record: &SqsMessage,
    failure: &Failure,
    now: DateTime<Utc>,
) -> Result<DeadLetter, SendError> {
    letter(record, &Received::read(record), failure, now)
}

/// `dead_letter` of a record whose delivery was read.
pub(super) fn letter(
    record: &SqsMessage,
    delivery: &Received<'_>,
    failure: &Failure,
    now: DateTime<Utc>,
) -> Result<DeadLetter, SendError> {
    let body = match record.body.as_deref() {
        Some(body) if !body.is_empty() => body.to_owned(),
        _ => return Err(SendError::NoBody),
    };
    let mut attributes = attributes::from_event(
        &record.message_attributes,
        &[FAILURE_REASON, FAILURE_CONTEXT],
    );
    if attributes.len() > MAX_ORIGINAL_ATTRIBUTES {
        return Err(SendError::TooManyAttributes(attributes.len()));
    }
    // A malformed context was logged when the record was processed; here it is only ignored.
    let context = FailureContext {
        reason: failure.code().to_owned(),
        detail: failure.to_string(),
        sqs_message_id: delivery.original_message_id.clone().into_owned(),
        sent_timestamp: delivery
            .original_sent_timestamp
            .as_ref()
            .map(|t| t.clone().into_owned()),
        receive_count: delivery.receive_count,
        failed_at: canonical_time(now),
        event_source_arn: delivery.event_source.map(str::to_owned),
        original_sender_id: delivery.first_sender().map(str::to_owned),
    };
    attributes.insert(FAILURE_REASON.into(), Attribute::string(failure.code()));
    attributes.insert(FAILURE_CONTEXT.into(), Attribute::string(context.to_json()));
    let group_id = delivery.fifo_group.map(str::to_owned);
    Ok(DeadLetter {
        body,
        attributes,
        // FIFO: the record's own SQS message id deduplicates a repeated send of this delivery;
        // a redriven delivery has a new id, so a second failure is never deduplicated away.
        deduplication_id: group_id
            .as_ref()
            .and(delivery.sqs_message_id.map(str::to_owned)),
        group_id,
    })
}
