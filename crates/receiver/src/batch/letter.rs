//! Owns the dead-letter message of a failed record: the body byte for byte, its attributes, and
//! `failureReason` and `failureContext` with the original delivery's identity and attested
//! sender, made to fit the queue's size when it must be. Must not know when a record is
//! dead-lettered.

use aws_lambda_events::sqs::SqsMessage;
use chrono::{DateTime, Utc};

use super::Failure;
use super::delivery::Received;
use crate::deadletter::{
    Attribute, DeadLetter, FAILURE_CONTEXT, FAILURE_REASON, FailureContext,
    MAX_ORIGINAL_ATTRIBUTES, SendError,
};
use audit_aws::sqs::attributes;
use audit_model::context::Redrivers;
use audit_model::message::canonical_time;

/// The dead-letter message of a failed record: its body byte for byte, its attributes, and
/// `failureReason` and `failureContext` (with the original delivery's identity, its context
/// taken when `redrivers` vouch for its sender, and the failing delivery's own sender).
pub fn dead_letter(
    record: &SqsMessage,
    redrivers: &Redrivers,
    failure: &Failure,
    now: DateTime<Utc>,
) -> Result<DeadLetter, SendError> {
    letter(record, &Received::read(record, redrivers), failure, now)
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
        sender_id: delivery.sender_id.map(str::to_owned),
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

/// What marks a `detail` that was cut to fit.
const CUT: &str = "…";

/// `letter` made to fit `limit` bytes as SQS counts them (`DeadLetter::size`), by giving up, in
/// this order and only as far as needed, what a person can do without: the end of
/// `failureContext.detail` (the error in words: its start stays, marked `…`), then its
/// `eventSourceArn`, `receiveCount` and `failedAt`. What is never given up: the body and the
/// original attributes (byte for byte), `failureReason`, and the context's reason and identity
/// (`sqsMessageId`, `sentTimestamp` and whatever else identifies the original delivery), which
/// a redrive needs. Stops when it fits or nothing is left to give up: the caller checks the
/// size (a body that does not fit on its own cannot be dead-lettered by the function, and SQS's
/// own redrive policy applies).
///
/// Why after SQS refused, not before: the limit is the dead-letter queue's `MaximumMessageSize`
/// (1 KiB to 1 MiB), which the function does not know without reading the queue's attributes
/// (another call, another permission); SQS names it when it refuses a message, and a refused
/// message is not in the queue, so sending the fitted one makes the one copy.
pub(super) fn shrink_to(letter: &DeadLetter, limit: usize) -> DeadLetter {
    let mut letter = letter.clone();
    let Some(mut context) = letter
        .string_attribute(FAILURE_CONTEXT)
        .and_then(|text| serde_json::from_str::<FailureContext>(text).ok())
    else {
        return letter;
    };
    let over = |letter: &DeadLetter| letter.size().saturating_sub(limit);
    // The detail: cut by at least the excess (each byte of it is at least one byte of JSON).
    while over(&letter) > 0 && !context.detail.is_empty() {
        let mut keep = context
            .detail
            .len()
            .saturating_sub(over(&letter) + CUT.len());
        while !context.detail.is_char_boundary(keep) {
            keep -= 1;
        }
        context.detail.truncate(keep);
        if keep > 0 {
            context.detail.push_str(CUT);
        }
        set_context(&mut letter, &context);
    }
    let optional: [fn(&mut FailureContext); 3] = [
        |c| c.event_source_arn = None,
        |c| c.receive_count = None,
        |c| c.failed_at.clear(),
    ];
    for give_up in optional {
        if over(&letter) == 0 {
            break;
        }
        give_up(&mut context);
        set_context(&mut letter, &context);
    }
    letter
}

fn set_context(letter: &mut DeadLetter, context: &FailureContext) {
    letter
        .attributes
        .insert(FAILURE_CONTEXT.into(), Attribute::string(context.to_json()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn with_context(context: &FailureContext) -> DeadLetter {
        let mut attributes = BTreeMap::new();
        attributes.insert(FAILURE_REASON.into(), Attribute::string("conflict"));
        attributes.insert(FAILURE_CONTEXT.into(), Attribute::string(context.to_json()));
        DeadLetter {
            body: "x".repeat(1_000),
            attributes,
            group_id: None,
            deduplication_id: None,
        }
    }

    fn context_of(letter: &DeadLetter) -> FailureContext {
        serde_json::from_str(letter.string_attribute(FAILURE_CONTEXT).unwrap()).unwrap()
    }

    #[test]
    fn the_detail_goes_first_then_the_optional_fields_and_never_the_identity() {
        let full = FailureContext {
            reason: "conflict".into(),
            detail: "é".repeat(100),
            sqs_message_id: "id-1".into(),
            sent_timestamp: Some("1795348800000".into()),
            receive_count: Some(3),
            failed_at: "2026-11-22T12:00:00.000Z".into(),
            event_source_arn: Some("arn:aws:sqs:us-east-1:123456789012:AuditQueue".into()),
            original_sender_id: Some("AROAEXAMPLE:orders-service".into()),
            sender_id: None,
        };
        let letter = with_context(&full);
        assert_eq!(shrink_to(&letter, letter.size()), letter, "fits: unchanged");

        // 50 bytes less: the detail is cut on a character's boundary and marked.
        let cut = shrink_to(&letter, letter.size() - 50);
        assert!(cut.size() <= letter.size() - 50);
        let context = context_of(&cut);
        assert!(context.detail.ends_with(CUT), "{}", context.detail);
        assert!(context.detail.len() < full.detail.len());
        assert_eq!(context.event_source_arn, full.event_source_arn);

        // Without the detail it does not fit: the optional fields go, in order, as far as needed.
        let without_detail = with_context(&FailureContext {
            detail: String::new(),
            ..full.clone()
        });
        let cut = shrink_to(&letter, without_detail.size() - 10);
        let context = context_of(&cut);
        assert_eq!(context.detail, "");
        assert_eq!(context.event_source_arn, None);
        assert_eq!(context.receive_count, Some(3));

        // Nothing left to give up: the least it can carry, with its reason and identity.
        let least = shrink_to(&letter, 0);
        let context = context_of(&least);
        assert_eq!(least.string_attribute(FAILURE_REASON), Some("conflict"));
        assert_eq!(
            (context.reason.as_str(), context.sqs_message_id.as_str()),
            ("conflict", "id-1")
        );
        assert_eq!(context.sent_timestamp, full.sent_timestamp);
        assert_eq!(
            (context.receive_count, context.failed_at.as_str()),
            (None, "")
        );
        assert_eq!(
            context.original_sender_id, full.original_sender_id,
            "the attested first sender is identity too: never given up"
        );
        assert_eq!(least.body, letter.body);
    }
}
