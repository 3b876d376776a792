//! SQS records as Lambda delivers them from the audit queue, for the functions' tests; knows
//! the event's shape only, no function.

use aws_lambda_events::sqs::SqsMessage;

/// The audit queue's ARN in the tests' account and region.
pub const QUEUE_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:AuditQueue";

/// An SQS record as Lambda delivers it from the audit queue (a standard queue, first receive).
pub fn record(sqs_message_id: &str, body: &str) -> SqsMessage {
    let mut record = SqsMessage::default();
    record.message_id = Some(sqs_message_id.to_owned());
    record.receipt_handle = Some(format!("AQEB-{sqs_message_id}"));
    record.body = Some(body.to_owned());
    record.event_source = Some("aws:sqs".to_owned());
    record.event_source_arn = Some(QUEUE_ARN.to_owned());
    record.aws_region = Some("us-east-1".to_owned());
    record
        .attributes
        .insert("SentTimestamp".into(), "1795348800000".into());
    record
        .attributes
        .insert("ApproximateReceiveCount".into(), "1".into());
    record
}
