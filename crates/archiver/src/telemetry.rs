//! Owns what operators see of the archiver: an ERROR line per tamper event (its key, never an
//! image or the audit text), a line when records fail, the per-invocation summary, and the
//! CloudWatch EMF metrics document. Must not know the bucket or the stream's shape.

use std::time::Duration;

use audit_aws::telemetry::{self as lambda, Metrics, millis_since, whole_millis};
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::report::{BatchReport, Failure};
use crate::seal::{SealError, SealReport};

/// The EMF namespace of the archiver's metrics (the receiver's is `AuditReceiver`).
pub const NAMESPACE: &str = "AuditArchiver";

/// Logs the batch and prints the metrics document on stdout.
pub fn publish(
    report: &BatchReport,
    duration: Duration,
    now: DateTime<Utc>,
    function_name: Option<&str>,
) {
    for event in &report.tampered {
        tracing::error!(
            sequence_number = %event.sequence_number,
            event_name = event.event_name,
            keys = %event.keys,
            "trail modified: an item of the audit table was changed or deleted"
        );
    }
    for item in &report.foreign {
        tracing::error!(
            sequence_number = %item.sequence_number,
            keys = %item.keys,
            reason = %item.reason,
            "item not attested: an item the receiver did not write was put in the audit table (archived, marked notAttested)"
        );
    }
    if let (Some(failure), Some(first)) = (&report.failure, report.failed().first()) {
        let failed = report.failed().len();
        let reason = failure.code();
        match failure {
            // Someone has to look: the record or the bucket's state is not what the archiver writes.
            Failure::Unarchivable { .. }
            | Failure::MarkerConflict(_)
            | Failure::ArchiveConflict(_)
            | Failure::BadMarker { .. } => {
                tracing::error!(first_sequence_number = %first, failed, reason, error = %failure, "records failed")
            }
            _ => {
                tracing::warn!(first_sequence_number = %first, failed, reason, error = %failure, "records failed")
            }
        }
    }
    let keys: Vec<&str> = report.objects.iter().map(|o| o.key.as_str()).collect();
    tracing::info!(
        batch_size = report.sequence_numbers.len(),
        archived = report.archived,
        already_archived = report.already_archived,
        expired = report.expired,
        trail_modified = report.tampered.len(),
        foreign_items = report.foreign.len(),
        archive_conflicts = report.conflicts.len(),
        voided = ?report.voided,
        failed = report.failed().len(),
        objects = ?keys,
        bytes = report.bytes_written(),
        archive_lag_ms = lag_ms(report, now),
        duration_ms = whole_millis(duration),
        "batch archived"
    );
    lambda::emit(&metrics_document(report, duration, now, function_name));
}

/// The EMF document: BatchSize, Archived (events written), AlreadyArchived (found written by an
/// earlier attempt), Expired (TTL deletions), TrailModified (tamper events), Failed (records to
/// be delivered again), ArchiveConflict (keys found not to be what they claim: a name taken by
/// other bytes, a foreign marker, a listed object that is not what its marker lists; each also an
/// ERROR line naming the key when found), ArchivedBytes, ArchiveLagMs (now − the oldest record's
/// ApproximateCreationDateTime), ForeignItem (INSERTs of items the receiver did not write: no
/// attestation that checks with its key; each also an ERROR line "item not attested") and
/// DurationMs. AlreadyArchived, Expired, TrailModified, Failed, ArchiveConflict and ForeignItem
/// only when not zero (`Metrics::trouble`: a metric that stays zero costs nothing).
pub fn metrics_document(
    report: &BatchReport,
    duration: Duration,
    now: DateTime<Utc>,
    function_name: Option<&str>,
) -> Value {
    let mut metrics = Metrics::new();
    metrics.count("BatchSize", report.sequence_numbers.len());
    metrics.count("Archived", report.archived);
    metrics.trouble("AlreadyArchived", report.already_archived);
    metrics.trouble("Expired", report.expired);
    metrics.trouble("TrailModified", report.tampered.len());
    metrics.trouble("Failed", report.failed().len());
    metrics.trouble("ArchiveConflict", report.conflicts.len());
    metrics.trouble("ForeignItem", report.foreign.len());
    metrics.add("ArchivedBytes", "Bytes", report.bytes_written());
    if let Some(lag) = lag_ms(report, now) {
        metrics.millis("ArchiveLagMs", lag);
    }
    metrics.millis("DurationMs", whole_millis(duration));
    metrics.document(NAMESPACE, now.timestamp_millis(), function_name)
}

/// Logs a sealing run (each digest written, a failure as an ERROR: sealing stopped is what its
/// alarm is for) and prints its metrics document.
pub fn publish_seal(
    report: &SealReport,
    duration: Duration,
    now: DateTime<Utc>,
    function_name: Option<&str>,
) {
    for sealed in &report.sealed {
        tracing::info!(digest = %sealed.key, objects = sealed.objects, events = sealed.events, unattested = sealed.unattested, late = sealed.late, leaves = sealed.leaves, log_puts = sealed.log_puts, log_bytes = sealed.log_bytes, "period sealed");
        if sealed.late > 0 {
            tracing::error!(digest = %sealed.key, late = sealed.late, "objects landed after their period was sealed");
        }
    }
    if let Some(failure) = &report.failure {
        tracing::error!(reason = failure.code(), error = %failure, left = report.left, "sealing stopped short");
    }
    tracing::info!(
        sealed = report.sealed.len(),
        found_sealed = report.found.len(),
        head = report.head.as_ref().map(|(key, _)| key.as_str()),
        tree_size = report.tree_size,
        left = report.left,
        seal_lag_seconds = report.lag_seconds(now),
        duration_ms = whole_millis(duration),
        "sealing run"
    );
    lambda::emit(&seal_metrics_document(report, duration, now, function_name));
}

/// The sealing run's EMF document: DigestsSealed, SealLagSeconds (now − the end of the newest
/// sealed period: what the alarm watches), SealFailed (1 when due periods were left unsealed by a
/// failure), LateObject (objects found after their period was sealed, listed in `late`),
/// Unattested (objects listed as unattested) and DurationMs; SealFailed, LateObject and Unattested
/// only when not zero (`Metrics::trouble`).
pub fn seal_metrics_document(
    report: &SealReport,
    duration: Duration,
    now: DateTime<Utc>,
    function_name: Option<&str>,
) -> Value {
    let mut metrics = Metrics::new();
    metrics.count("DigestsSealed", report.sealed.len());
    metrics.add("SealLagSeconds", "Seconds", report.lag_seconds(now));
    // The deadline stopping a long catch-up is not a failure: the next run goes on.
    metrics.trouble(
        "SealFailed",
        usize::from(
            report
                .failure
                .as_ref()
                .is_some_and(|f| !matches!(f, SealError::Deadline)),
        ),
    );
    metrics.trouble("LateObject", report.late());
    metrics.trouble("Unattested", report.unattested());
    metrics.millis("DurationMs", whole_millis(duration));
    metrics.document(NAMESPACE, now.timestamp_millis(), function_name)
}

fn lag_ms(report: &BatchReport, now: DateTime<Utc>) -> Option<u64> {
    report
        .oldest_created
        .map(|created| millis_since(created, now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Conflict, TamperEvent, WrittenObject};
    use serde_json::json;

    /// The metrics a document declares, in order.
    fn declared(doc: &Value) -> Vec<String> {
        doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn the_metrics_document_is_valid_emf_with_the_archive_metrics() {
        let report = BatchReport {
            sequence_numbers: vec!["1".into(), "2".into(), "3".into(), "4".into()],
            failed_from: Some(3),
            failure: Some(Failure::Unwritten),
            archived: 1,
            already_archived: 0,
            expired: 1,
            tampered: vec![TamperEvent {
                sequence_number: "2".into(),
                event_name: "MODIFY",
                keys: "{}".into(),
            }],
            objects: vec![WrittenObject {
                key: "trail/x".into(),
                events: 1,
                bytes: 120,
            }],
            conflicts: vec![Conflict {
                key: "trail/y".into(),
                reason: "other bytes".into(),
            }],
            voided: Vec::new(),
            oldest_created: DateTime::from_timestamp_millis(1_795_341_600_000),
            foreign: vec![crate::attest::Foreign {
                sequence_number: "3".into(),
                keys: "{}".into(),
                reason: audit_model::attest::NotAttested::Missing,
            }],
        };
        let now = DateTime::from_timestamp_millis(1_795_341_602_500).unwrap();
        let doc = metrics_document(
            &report,
            Duration::from_millis(7),
            now,
            Some("audit-archiver"),
        );
        let directive = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "AuditArchiver");
        assert_eq!(directive["Dimensions"], json!([["FunctionName"]]));
        assert_eq!(doc["BatchSize"], 4);
        assert_eq!(doc["Archived"], 1);
        assert_eq!(doc["Expired"], 1);
        assert_eq!(doc["TrailModified"], 1);
        assert_eq!(doc["Failed"], 1);
        assert_eq!(doc["ArchiveConflict"], 1);
        assert_eq!(doc["ForeignItem"], 1);
        assert_eq!(doc["ArchivedBytes"], 120);
        assert_eq!(doc["ArchiveLagMs"], 2500);
        assert_eq!(doc["DurationMs"], 7);
        // None was found archived already: that count of trouble is not published.
        assert_eq!(doc["AlreadyArchived"], Value::Null);
        assert!(!declared(&doc).contains(&"AlreadyArchived".to_owned()));
        for metric in directive["Metrics"].as_array().unwrap() {
            let name = metric["Name"].as_str().unwrap();
            assert!(doc.get(name).is_some(), "{name} declared without a value");
        }
    }

    #[test]
    fn a_sealing_run_reports_its_lag_and_fails_only_on_a_failure_not_the_deadline() {
        use crate::seal::{SealError, SealReport, SealedPeriod};
        use audit_aws::error::AwsError;
        let now = DateTime::from_timestamp(1_795_345_290, 0).unwrap();
        let mut report = SealReport {
            sealed: vec![SealedPeriod {
                key: "digest/dt=2026-11-22/hour=10/p1795341600.json".into(),
                objects: 2,
                events: 9,
                unattested: 3,
                late: 1,
                ..SealedPeriod::default()
            }],
            head: Some((
                "digest/dt=2026-11-22/hour=10/p1795341600.json".into(),
                1_795_345_200,
            )),
            ..SealReport::default()
        };
        let doc = seal_metrics_document(&report, Duration::from_millis(3), now, Some("f"));
        assert_eq!(doc["DigestsSealed"], 1);
        assert_eq!(doc["SealLagSeconds"], 90);
        // A count of trouble that is zero is not published (no hour of it billed); its alarm
        // reads missing data as zero.
        assert_eq!(doc["SealFailed"], Value::Null);
        assert!(!declared(&doc).contains(&"SealFailed".to_owned()));
        assert_eq!(doc["LateObject"], 1);
        assert_eq!(doc["Unattested"], 3);
        report.failure = Some(SealError::Deadline);
        let doc = seal_metrics_document(&report, Duration::from_millis(3), now, Some("f"));
        assert_eq!(doc["SealFailed"], Value::Null);
        // An idle run publishes its lag, its digests (none) and its time only.
        let idle = SealReport {
            head: report.head.clone(),
            ..SealReport::default()
        };
        let doc = seal_metrics_document(&idle, Duration::from_millis(3), now, Some("f"));
        assert_eq!(
            declared(&doc),
            ["DigestsSealed", "SealLagSeconds", "DurationMs"]
        );
        report.failure = Some(SealError::Sign(AwsError::from_answer(
            400,
            "DisabledException",
            "disabled",
        )));
        let doc = seal_metrics_document(&report, Duration::from_millis(3), now, Some("f"));
        assert_eq!(doc["SealFailed"], 1);
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Namespace"],
            "AuditArchiver"
        );
    }
}
