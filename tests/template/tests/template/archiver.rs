//! Owns the checks on the archiver function: its build, its two events (the table's stream, the
//! seal schedule), its environment and the metrics it emits. Must not know how it archives.

use std::collections::BTreeSet;

use crate::support::*;
use serde_yaml::Value;

#[test]
fn the_archiver_emits_the_namespace_and_metrics_the_template_watches() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../crates/archiver/src/telemetry.rs"
    );
    let telemetry = std::fs::read_to_string(path).expect("crates/archiver/src/telemetry.rs");
    assert!(
        telemetry.contains(&format!(
            "pub const NAMESPACE: &str = \"{ARCHIVER_NAMESPACE}\";"
        )),
        "crates/archiver/src/telemetry.rs names another namespace"
    );
    assert!(telemetry.contains(r#"json!([["FunctionName"]])"#));
    for metric in ARCHIVER_EMITTED {
        assert!(
            telemetry.contains(&format!("\"{metric}\"")),
            "crates/archiver/src/telemetry.rs emits no {metric}"
        );
    }
}

#[test]
fn the_archiver_has_two_events_the_tables_stream_and_the_seal_schedule() {
    let t = template();
    let mut kinds: Vec<String> = at(archiver(&t), &["Events"])
        .as_mapping()
        .expect("Events is a mapping")
        .values()
        .map(|e| scalar(at(e, &["Type"])))
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["DynamoDB", "Schedule"]);
}

#[test]
fn the_archivers_memory_is_a_parameter_whose_default_gives_the_sealer_one_vcpu() {
    // docs/scaling.md: sealing is CPU-bound, and at the defaults it must keep up with 10,000
    // events/s (`make bench-seal` runs at this default). Lambda gives one vCPU at 1,769 MB.
    let t = template();
    let name = parameter_ref(&t, at(archiver(&t), &["MemorySize"]))
        .expect("the archiver's MemorySize is a parameter");
    assert_eq!(name, "ArchiverMemorySize");
    let (min, max, default) = numeric_range(&t, &name);
    assert!(
        min >= 128 && max <= 10_240,
        "Lambda memory is 128 to 10240 MB"
    );
    assert!(
        default >= 1769,
        "ArchiverMemorySize's default {default} MB is less than one vCPU"
    );
}

#[test]
fn archiver_is_an_arm64_al2023_binary_built_by_cargo_lambda_from_the_workspace() {
    let t = template();
    let receiver = resource(&t, "AuditReceiverFunction");
    let f = resource(&t, "AuditArchiverFunction");
    assert_eq!(at(f, &["Type"]).as_str(), Some("AWS::Serverless::Function"));
    assert_eq!(
        at(f, &["Metadata", "BuildMethod"]),
        at(receiver, &["Metadata", "BuildMethod"])
    );
    assert_eq!(
        at(f, &["Metadata", "BuildProperties", "Binary"]).as_str(),
        Some("audit-archiver")
    );
    let p = archiver(&t);
    for property in ["CodeUri", "Handler", "Runtime", "Architectures"] {
        assert_eq!(
            at(p, &[property]),
            at(function(&t), &[property]),
            "{property} as the receiver's (the workspace root, its bootstrap)"
        );
    }
    let logging = at(p, &["LoggingConfig"]);
    assert_eq!(
        at(logging, &["LogGroup"]),
        &reference("AuditArchiverLogGroup")
    );
    assert_eq!(at(logging, &["LogFormat"]).as_str(), Some("JSON"));
    // The same levels as the receiver's: no allowed value drops the EMF documents.
    assert_eq!(
        at(logging, &["ApplicationLogLevel"]),
        &reference("LogLevel")
    );
    assert_eq!(
        at(logging, &["SystemLogLevel"]),
        &reference("SystemLogLevel")
    );
}

#[test]
fn archiver_reads_the_stream_with_partial_batch_responses_and_gives_up_only_to_its_queue() {
    let t = template();
    let e = stream_event(&t);
    assert_eq!(
        at(e, &["Stream"]),
        &get_att("AuditMessagesTable", "StreamArn")
    );
    assert_eq!(
        at(e, &["StartingPosition"]).as_str(),
        Some("TRIM_HORIZON"),
        "nothing the stream holds is skipped"
    );
    assert_eq!(
        at(e, &["FunctionResponseTypes"]),
        &Value::Sequence(vec![Value::from("ReportBatchItemFailures")])
    );
    assert_eq!(at(e, &["BisectBatchOnFunctionError"]), &Value::Bool(true));
    assert_eq!(
        number(at(e, &["ParallelizationFactor"])),
        1,
        "one batch per shard at a time: stream order"
    );
    // A parameter (docs/scaling.md: what an object holds at each load), within Lambda's range.
    let batch = parameter_ref(&t, at(e, &["BatchSize"])).expect("a parameter");
    let (min, max, default) = numeric_range(&t, &batch);
    assert!(
        min >= 1 && max <= 10_000 && (min..=max).contains(&default),
        "Lambda's range: {min}..={max}, {default}"
    );
    // A finite number of retries, within Lambda's range (-1, infinite, would hold a shard up to
    // the stream's 24 hours and then lose the records without a word).
    let retries = parameter_ref(&t, at(e, &["MaximumRetryAttempts"])).expect("a parameter");
    let (min, max, default) = numeric_range(&t, &retries);
    assert!(min >= 1 && max <= 10_000 && (min..=max).contains(&default));
    let window = numeric_values(&t, at(e, &["MaximumBatchingWindowInSeconds"]));
    assert!(
        window.iter().all(|w| *w <= 300),
        "Lambda's range: {window:?}"
    );
    let destination = at(e, &["DestinationConfig", "OnFailure"]);
    assert_eq!(at(destination, &["Type"]).as_str(), Some("SQS"));
    assert_eq!(
        at(destination, &["Destination"]),
        &get_att("AuditArchiveFailureQueue", "Arn")
    );
    assert!(
        alarms_while_the_queue_holds_anything(&t, "AuditArchiveFailureQueue"),
        "an alarm fires while the failure queue holds anything, visible or in flight"
    );
    let queue = props(&t, "AuditArchiveFailureQueue");
    assert_eq!(
        number(at(queue, &["MessageRetentionPeriod"])),
        SQS_MAX_RETENTION_SECONDS
    );
}

#[test]
fn archiver_environment_names_the_archive_bucket_and_an_hourly_digest_period() {
    let t = template();
    let vars = at(archiver(&t), &["Environment", "Variables"]);
    assert_eq!(
        at(vars, &["ARCHIVE_BUCKET"]),
        &reference("AuditArchiveBucket")
    );
    assert_eq!(number(at(vars, &["DIGEST_PERIOD_SECONDS"])), 3600);
    // By its ARN: what KMS answers a Sign with, and so what each digest names as its keyId.
    assert_eq!(
        at(vars, &["DIGEST_KEY_ID"]),
        &get_att("AuditDigestKey", "Arn")
    );
    // The table a repair reads the items it archives from (auditctl archive repair).
    assert_eq!(at(vars, &["TABLE_NAME"]), &reference("AuditMessagesTable"));
    // The receiver's attestation key: each INSERT is checked with its public half.
    assert_eq!(
        at(vars, &["ATTESTATION_KEY_ID"]),
        &get_att("AuditAttestationKey", "Arn")
    );
    let names: BTreeSet<String> = vars.as_mapping().unwrap().keys().map(scalar).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "ARCHIVE_BUCKET".into(),
            "ATTESTATION_KEY_ID".into(),
            "DIGEST_KEY_ID".into(),
            "DIGEST_PERIOD_SECONDS".into(),
            "TABLE_NAME".into()
        ])
    );
}
