//! Owns what operators see: one log line per failed record, the per-invocation summary line and
//! the CloudWatch EMF metrics document. Must never log a body or an auditText at INFO or above.

use std::io::Write;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use crate::batch::{BatchReport, Failure};

/// The EMF namespace of the function's metrics.
pub const NAMESPACE: &str = "AuditReceiver";

/// Logs the failures and the summary, and prints the metrics document on stdout.
pub fn publish(
    report: &BatchReport,
    duration: Duration,
    now: DateTime<Utc>,
    function_name: Option<&str>,
) {
    for (sqs_message_id, failure) in report.failures() {
        let reason = failure.code();
        match failure {
            // A conflict is a producer bug or tampering: a person has to look at it.
            Failure::Conflict | Failure::Panic => {
                tracing::error!(sqs_message_id, reason, error = %failure, "record failed")
            }
            _ => tracing::warn!(sqs_message_id, reason, error = %failure, "record failed"),
        }
    }
    let failed_by_reason = report
        .failed_by_reason()
        .iter()
        .map(|(code, n)| format!("{code}={n}"))
        .collect::<Vec<_>>()
        .join(",");
    tracing::info!(
        batch_size = report.received,
        written = report.written(),
        duplicates = report.duplicates(),
        failed = report.failures().count(),
        failed_by_reason,
        oldest_message_age_ms = oldest_age_ms(report, now),
        duration_ms = duration.as_millis() as u64,
        "batch processed"
    );
    let mut line = metrics_document(report, duration, now, function_name).to_string();
    line.push('\n');
    // One write(2) of the whole line: `writeln!` through stdout's 1 KiB line buffer splits a
    // longer document into several writes, which another writer on the same pipe can cut into
    // (seen in the 100,000-message soak under cargo lambda watch: one document lost of 12,888).
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

/// The EMF document: Written, Duplicates, Failed, one `Failed.<reason>` per reason seen,
/// BatchSize, OldestMessageAgeMs (now − earliest SentTimestamp) and DurationMs.
pub fn metrics_document(
    report: &BatchReport,
    duration: Duration,
    now: DateTime<Utc>,
    function_name: Option<&str>,
) -> Value {
    let mut values: Vec<(String, &str, Value)> = vec![
        ("BatchSize".into(), "Count", json!(report.received)),
        ("Written".into(), "Count", json!(report.written())),
        ("Duplicates".into(), "Count", json!(report.duplicates())),
        ("Failed".into(), "Count", json!(report.failures().count())),
    ];
    for (code, count) in report.failed_by_reason() {
        values.push((format!("Failed.{code}"), "Count", json!(count)));
    }
    if let Some(age) = oldest_age_ms(report, now) {
        values.push(("OldestMessageAgeMs".into(), "Milliseconds", json!(age)));
    }
    values.push((
        "DurationMs".into(),
        "Milliseconds",
        json!(duration.as_millis() as u64),
    ));

    let dimensions = match function_name {
        Some(_) => json!([["FunctionName"]]),
        None => json!([[]]),
    };
    let metrics: Vec<Value> = values
        .iter()
        .map(|(name, unit, _)| json!({"Name": name, "Unit": unit}))
        .collect();
    let mut document = Map::new();
    document.insert(
        "_aws".into(),
        json!({
            "Timestamp": now.timestamp_millis(),
            "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": dimensions, "Metrics": metrics}],
        }),
    );
    if let Some(name) = function_name {
        document.insert("FunctionName".into(), json!(name));
    }
    for (name, _, value) in values {
        document.insert(name, value);
    }
    Value::Object(document)
}

fn oldest_age_ms(report: &BatchReport, now: DateTime<Utc>) -> Option<u64> {
    report
        .oldest_sent_at
        .map(|sent| u64::try_from((now - sent).num_milliseconds()).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{Outcome, RecordOutcome};
    use crate::message::InvalidMessage;

    fn report() -> BatchReport {
        let record = |id: &str, outcome| RecordOutcome {
            sqs_message_id: id.into(),
            outcome,
        };
        BatchReport {
            received: 5,
            records: vec![
                record("a", Outcome::Written),
                record("b", Outcome::Duplicate),
                record("c", Outcome::Failed(Failure::Conflict)),
                record(
                    "d",
                    Outcome::Failed(Failure::Invalid(InvalidMessage::EmptyAuditText)),
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
        assert_eq!(doc["BatchSize"], 5);
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
    fn without_a_function_name_the_metrics_have_no_dimension() {
        let doc = metrics_document(&report(), Duration::ZERO, Utc::now(), None);
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([[]])
        );
        assert!(doc.get("FunctionName").is_none());
    }
}
