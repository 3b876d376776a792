//! Owns what operators see: one log line per failed record, the per-invocation summary line and
//! the CloudWatch EMF metrics document. Must never log a body or an auditText at INFO or above.

use std::time::Duration;

use audit_aws::telemetry::{self as lambda, Metrics, by_reason, millis_since, whole_millis};
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::batch::{BatchReport, Failure, Outcome};

/// The EMF namespace of the function's metrics.
pub const NAMESPACE: &str = "AuditReceiver";

/// Logs the failures and the summary, and prints the metrics document on stdout.
pub fn publish(
    report: &BatchReport,
    duration: Duration,
    now: DateTime<Utc>,
    function_name: Option<&str>,
) {
    for record in &report.records {
        let sqs_message_id = record.sqs_message_id.as_str();
        let (failure, message) = match &record.outcome {
            Outcome::Failed(failure) => (failure, "record failed"),
            Outcome::DeadLettered(failure) => (failure, "record dead-lettered"),
            _ => continue,
        };
        let reason = failure.code();
        let dead_letter_error = record.dead_letter_error.as_ref().map(ToString::to_string);
        match failure {
            // A conflict is a producer bug or tampering: a person has to look at it.
            Failure::Conflict | Failure::Panic => {
                tracing::error!(sqs_message_id, reason, error = %failure, dead_letter_error, "{message}")
            }
            _ => {
                tracing::warn!(sqs_message_id, reason, error = %failure, dead_letter_error, "{message}")
            }
        }
    }
    tracing::info!(
        batch_size = report.received,
        written = report.written(),
        duplicates = report.duplicates(),
        dead_lettered = report.dead_lettered().count(),
        dead_lettered_by_reason = by_reason(report.dead_lettered_by_reason()),
        failed = report.failures().count(),
        failed_by_reason = by_reason(report.failed_by_reason()),
        oldest_message_age_ms = oldest_age_ms(report, now),
        duration_ms = whole_millis(duration),
        "batch processed"
    );
    lambda::emit(&metrics_document(report, duration, now, function_name));
}

/// The EMF document: Written, Duplicates, DeadLettered and Failed, one `DeadLettered.<reason>` and
/// `Failed.<reason>` per reason seen, BatchSize, OldestMessageAgeMs (now − earliest
/// SentTimestamp) and DurationMs. Duplicates, DeadLettered and Failed only when not zero
/// (`Metrics::trouble`: a metric that stays zero costs nothing).
pub fn metrics_document(
    report: &BatchReport,
    duration: Duration,
    now: DateTime<Utc>,
    function_name: Option<&str>,
) -> Value {
    let mut metrics = Metrics::new();
    metrics.count("BatchSize", report.received);
    metrics.count("Written", report.written());
    metrics.trouble("Duplicates", report.duplicates());
    metrics.trouble("DeadLettered", report.dead_lettered().count());
    metrics.trouble("Failed", report.failures().count());
    for (code, count) in report.dead_lettered_by_reason() {
        metrics.count(format!("DeadLettered.{code}"), count);
    }
    for (code, count) in report.failed_by_reason() {
        metrics.count(format!("Failed.{code}"), count);
    }
    if let Some(age) = oldest_age_ms(report, now) {
        metrics.millis("OldestMessageAgeMs", age);
    }
    metrics.millis("DurationMs", whole_millis(duration));
    metrics.document(NAMESPACE, now.timestamp_millis(), function_name)
}

fn oldest_age_ms(report: &BatchReport, now: DateTime<Utc>) -> Option<u64> {
    report.oldest_sent_at.map(|sent| millis_since(sent, now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::RecordOutcome;
    use audit_model::message::InvalidMessage;
    use serde_json::json;

    fn report() -> BatchReport {
        let record = |id: &str, outcome| RecordOutcome {
            sqs_message_id: id.into(),
            outcome,
            dead_letter_error: None,
        };
        BatchReport {
            received: 6,
            records: vec![
                record("a", Outcome::Written),
                record("b", Outcome::Duplicate),
                record("c", Outcome::Failed(Failure::Conflict)),
                record(
                    "d",
                    Outcome::Failed(Failure::Invalid(InvalidMessage::EmptyAuditText)),
                ),
                record(
                    "e",
                    Outcome::DeadLettered(Failure::Invalid(InvalidMessage::MissingAuditText)),
                ),
            ],
            oldest_sent_at: DateTime::from_timestamp_millis(1_795_348_800_000),
        }
    }

    #[test]
    fn metrics_document_is_valid_emf_with_one_metric_per_reason() {
        let now = DateTime::from_timestamp_millis(1_795_348_801_500).unwrap();
        let doc = metrics_document(
            &report(),
            Duration::from_millis(12),
            now,
            Some("audit-receiver"),
        );
        assert_eq!(doc["_aws"]["Timestamp"], 1_795_348_801_500i64);
        let directive = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "AuditReceiver");
        assert_eq!(directive["Dimensions"], json!([["FunctionName"]]));
        assert_eq!(doc["FunctionName"], "audit-receiver");
        assert_eq!(doc["BatchSize"], 6);
        assert_eq!(doc["DeadLettered"], 1);
        assert_eq!(doc["DeadLettered.missing_audit_text"], 1);
        assert_eq!(doc["Written"], 1);
        assert_eq!(doc["Duplicates"], 1);
        assert_eq!(doc["Failed"], 2);
        assert_eq!(doc["Failed.conflict"], 1);
        assert_eq!(doc["Failed.empty_audit_text"], 1);
        assert_eq!(doc["OldestMessageAgeMs"], 1500);
        assert_eq!(doc["DurationMs"], 12);
        // Every declared metric has a value in the document, as EMF requires.
        for metric in directive["Metrics"].as_array().unwrap() {
            let name = metric["Name"].as_str().unwrap();
            assert!(doc.get(name).is_some(), "{name} declared without a value");
        }
    }

    #[test]
    fn a_clean_batch_publishes_no_count_of_trouble() {
        // Zero duplicates, dead letters and failures are not published: a metric with no data in
        // an hour is not billed for it, and their alarms read missing data as zero.
        let clean = BatchReport {
            received: 1,
            records: vec![RecordOutcome {
                sqs_message_id: "a".into(),
                outcome: Outcome::Written,
                dead_letter_error: None,
            }],
            oldest_sent_at: None,
        };
        let doc = metrics_document(&clean, Duration::ZERO, Utc::now(), Some("f"));
        let declared: Vec<&str> = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap())
            .collect();
        assert_eq!(declared, ["BatchSize", "Written", "DurationMs"]);
        assert!(doc.get("Failed").is_none() && doc.get("DeadLettered").is_none());
    }

    #[test]
    fn without_a_function_name_the_metrics_have_no_dimension() {
        let doc = metrics_document(&report(), Duration::ZERO, Utc::now(), None);
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([[]])
        );
        assert!(doc.get("FunctionName").is_none());
    }
}
