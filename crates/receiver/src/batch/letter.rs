//! Owns the dead-letter message of a failed record: the body byte for byte, its attributes, and
//! `failureReason` and `failureContext` with the original delivery's identity. Must not know
//! when a record is dead-lettered.

use std::collections::BTreeMap;

use aws_lambda_events::sqs::SqsMessage;
use chrono::{DateTime, Utc};

use super::Failure;
use super::identity::{original, receive_count};
use super::schedule::fifo_group;
use crate::deadletter::{
    Attribute, DeadLetter, FAILURE_CONTEXT, FAILURE_REASON, FailureContext,
    MAX_ORIGINAL_ATTRIBUTES, SendError,
};
use audit_model::message::canonical_time;

/// The dead-letter message of a failed record: its body byte for byte, its attributes, and
/// `failureReason` and `failureContext` (with the original delivery's identity).
pub fn dead_letter(
    record: &SqsMessage,
    failure: &Failure,
    now: DateTime<Utc>,
) -> Result<DeadLetter, SendError> {
    let body = match record.body.as_deref() {
        Some(body) if !body.is_empty() => body.to_owned(),
        _ => return Err(SendError::NoBody),
    };
    let mut attributes: BTreeMap<String, Attribute> = record
        .message_attributes
        .iter()
        .filter(|(name, _)| *name != FAILURE_REASON && *name != FAILURE_CONTEXT)
        .map(|(name, a)| {
            let attribute = Attribute {
                data_type: a.data_type.clone().unwrap_or_else(|| "String".into()),
                string_value: a.string_value.clone(),
                binary_value: a.binary_value.as_ref().map(|b| b.0.clone()),
            };
            (name.clone(), attribute)
        })
        .collect();
    if attributes.len() > MAX_ORIGINAL_ATTRIBUTES {
        return Err(SendError::TooManyAttributes(attributes.len()));
    }
    // A malformed context was logged when the record was processed; here it is only ignored.
    let (original, _) = original(record);
    let context = FailureContext {
        reason: failure.code().to_owned(),
        detail: failure.to_string(),
        sqs_message_id: original.message_id,
        sent_timestamp: original.sent_timestamp,
        receive_count: receive_count(record),
        failed_at: canonical_time(now),
        event_source_arn: record.event_source_arn.clone(),
    };
    attributes.insert(FAILURE_REASON.into(), Attribute::string(failure.code()));
    attributes.insert(FAILURE_CONTEXT.into(), Attribute::string(context.to_json()));
    let group_id = fifo_group(record).map(str::to_owned);
    Ok(DeadLetter {
        body,
        attributes,
        // FIFO: the record's own SQS message id deduplicates a repeated send of this delivery;
        // a redriven delivery has a new id, so a second failure is never deduplicated away.
        deduplication_id: group_id.as_ref().and(record.message_id.clone()),
        group_id,
    })
}
