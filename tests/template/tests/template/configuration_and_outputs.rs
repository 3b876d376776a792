//! Owns the checks on the function's environment and log levels, the stack's outputs, the
//! cargo lambda deploy settings and the template's YAML form. Must not know the function's code.

use std::collections::BTreeMap;

use crate::support::*;
use audit_model::keys::DEFAULT_TABLE_NAME;
use audit_receiver::config::MAX_CONCURRENCY_LIMIT;
use serde_yaml::Value;

/// crates/receiver/src/config.rs accepts RETENTION_DAYS up to 100 years.
const MAX_RETENTION_DAYS: u64 = 36_500;

#[test]
fn environment_values_stay_within_what_the_function_accepts() {
    let t = template();
    let vars = at(function(&t), &["Environment", "Variables"]);
    let concurrency = parameter_ref(&t, at(vars, &["MAX_CONCURRENCY"])).expect("a parameter");
    let (min, max, _) = numeric_range(&t, &concurrency);
    assert!(min >= 1 && max as usize <= MAX_CONCURRENCY_LIMIT);

    // RETENTION_DAYS is set only when the parameter is not 0 ("keep forever").
    let retention = at(vars, &["RETENTION_DAYS", "Fn::If"])
        .as_sequence()
        .expect("Fn::If");
    let name = parameter_ref(&t, &retention[1]).expect("the retention is a parameter");
    let (min, max, default) = numeric_range(&t, &name);
    assert!(min == 0 && max <= MAX_RETENTION_DAYS && default == 0);
    let condition = at(
        &t,
        &[
            "Conditions",
            retention[0].as_str().expect("a condition name"),
        ],
    );
    assert!(!truth(
        &t,
        condition,
        &params_with(&t, &[(&name, "0".into())])
    ));
    assert!(truth(
        &t,
        condition,
        &params_with(&t, &[(&name, "30".into())])
    ));
    assert_eq!(retention[2], reference("AWS::NoValue"));

    // Dead-lettering by the function: to the template's dead-letter queue, with the very
    // maxReceiveCount the queue's redrive policy uses.
    assert_eq!(
        at(vars, &["DEAD_LETTER_QUEUE_URL"]),
        &reference("AuditDeadLetterQueue")
    );
    let redrive = at(props(&t, "AuditQueue"), &["RedrivePolicy"]);
    assert_eq!(
        at(vars, &["MAX_RECEIVE_COUNT"]),
        at(redrive, &["maxReceiveCount"]),
        "MAX_RECEIVE_COUNT and the redrive policy's maxReceiveCount come from one parameter"
    );
    assert_eq!(
        at(redrive, &["deadLetterTargetArn"]),
        &get_att("AuditDeadLetterQueue", "Arn")
    );
    let name = parameter_ref(&t, at(vars, &["MAX_RECEIVE_COUNT"])).expect("a parameter");
    let (min, max, _) = numeric_range(&t, &name);
    assert!(
        min >= 1 && max <= 1000,
        "within what MAX_RECEIVE_COUNT accepts"
    );
}

/// Lambda's log levels, most detailed first: a setting keeps its own level and those after it.
const LOG_LEVELS: &[&str] = &["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"];

/// The level Lambda files an EMF document at: crates/receiver/src/telemetry.rs prints it as a bare
/// JSON object with no "level" key, and Lambda files a JSON line without a level as INFO.
const EMF_DOCUMENT_LEVEL: &str = "INFO";

/// Lambda's START and REPORT lines (duration, memory, init, timeouts) are INFO system logs.
const START_REPORT_LEVEL: &str = "INFO";

fn log_rank(level: &str) -> usize {
    LOG_LEVELS
        .iter()
        .position(|l| *l == level)
        .unwrap_or_else(|| panic!("{level} is not a Lambda log level"))
}

/// Every value a property can take: the AllowedValues of the parameter it refers to, or its one
/// literal value. A parameter without AllowedValues fails (any text could be passed).
fn possible_values(t: &Value, value: &Value) -> Vec<String> {
    match parameter_ref(t, value) {
        Some(name) => allowed_values(t, &name),
        None => vec![scalar(value)],
    }
}

#[test]
fn no_allowed_log_level_drops_the_metrics_or_start_and_report() {
    let t = template();
    let logging = at(function(&t), &["LoggingConfig"]);
    assert_eq!(
        at(logging, &["LogFormat"]).as_str(),
        Some("JSON"),
        "levels filter JSON logs"
    );
    for level in possible_values(&t, at(logging, &["ApplicationLogLevel"])) {
        assert!(
            log_rank(&level) <= log_rank(EMF_DOCUMENT_LEVEL),
            "ApplicationLogLevel {level} drops every EMF document (filed as {EMF_DOCUMENT_LEVEL}), \
             and with them the alarms' data"
        );
    }
    for level in possible_values(&t, at(logging, &["SystemLogLevel"])) {
        assert!(
            log_rank(&level) <= log_rank(START_REPORT_LEVEL),
            "SystemLogLevel {level} drops START and REPORT"
        );
        assert!(
            ["DEBUG", "INFO", "WARN"].contains(&level.as_str()),
            "{level} is no system log level"
        );
    }
}

#[test]
fn outputs_name_the_queues_the_table_the_functions_the_archive_and_the_operator_policies() {
    let t = template();
    let expected = [
        ("AuditQueueUrl", reference("AuditQueue")),
        ("AuditQueueArn", get_att("AuditQueue", "Arn")),
        ("AuditDeadLetterQueueUrl", reference("AuditDeadLetterQueue")),
        (
            "AuditDeadLetterQueueArn",
            get_att("AuditDeadLetterQueue", "Arn"),
        ),
        ("AuditMessagesTableName", reference("AuditMessagesTable")),
        (
            "AuditReceiverFunctionArn",
            get_att("AuditReceiverFunction", "Arn"),
        ),
        ("AuditReaderPolicyArn", reference("AuditReaderPolicy")),
        ("AuditOperatorPolicyArn", reference("AuditOperatorPolicy")),
        ("AuditArchiveBucketName", reference("AuditArchiveBucket")),
        (
            "AuditArchiverFunctionArn",
            get_att("AuditArchiverFunction", "Arn"),
        ),
        (
            "AuditArchiveFailureQueueUrl",
            reference("AuditArchiveFailureQueue"),
        ),
        ("AuditTrailWorkGroupName", reference("AuditTrailWorkGroup")),
        ("AuditDigestKeyArn", get_att("AuditDigestKey", "Arn")),
        ("AuditDigestKeyId", reference("AuditDigestKey")),
    ];
    for (name, value) in expected {
        assert_eq!(at(&t, &["Outputs", name, "Value"]), &value, "output {name}");
    }
}

/// `key = value` lines of one table of the receiver's Cargo.toml (enough for the flat deploy table).
fn cargo_table(table: &str) -> BTreeMap<String, String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../crates/receiver/Cargo.toml"
    );
    let text = std::fs::read_to_string(path).expect("Cargo.toml is readable");
    text.lines()
        .skip_while(|l| l.trim() != format!("[{table}]"))
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[test]
fn cargo_lambda_deploy_settings_match_the_template_defaults() {
    let t = template();
    let deploy = cargo_table("package.metadata.lambda.deploy");
    let default = |property: &str| {
        let name = parameter_ref(&t, at(function(&t), &[property])).expect("a parameter");
        scalar(at(parameter(&t, &name), &["Default"]))
    };
    assert_eq!(deploy.get("memory"), Some(&default("MemorySize")));
    assert_eq!(deploy.get("timeout"), Some(&default("Timeout")));
    assert_eq!(
        deploy.get("runtime").map(|r| r.trim_matches('"')),
        Some("provided.al2023")
    );
    let env = deploy
        .get("env")
        .expect("cargo lambda deploy sets the environment");
    assert!(
        env.contains(&format!("TABLE_NAME = \"{DEFAULT_TABLE_NAME}\"")),
        "TABLE_NAME in {env}"
    );
    let writes = scalar(at(parameter(&t, "WriteConcurrency"), &["Default"]));
    assert!(
        env.contains(&format!("MAX_CONCURRENCY = \"{writes}\"")),
        "MAX_CONCURRENCY as the template's WriteConcurrency default: {env}"
    );
    let receives = scalar(at(parameter(&t, "MaxReceiveCount"), &["Default"]));
    assert!(
        env.contains(&format!("MAX_RECEIVE_COUNT = \"{receives}\"")),
        "MAX_RECEIVE_COUNT in step with the queue's maxReceiveCount: {env}"
    );
}

#[test]
fn template_uses_no_yaml_tags_so_any_yaml_reader_can_load_it() {
    // The local stack (Python, PyYAML's safe loader) creates its table and queues from this file.
    fn has_tag(v: &Value) -> bool {
        match v {
            Value::Tagged(_) => true,
            Value::Mapping(m) => m.iter().any(|(k, v)| has_tag(k) || has_tag(v)),
            Value::Sequence(s) => s.iter().any(has_tag),
            _ => false,
        }
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../template.yaml");
    let raw: Value = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(
        !has_tag(&raw),
        "write intrinsics in long form (Ref:, Fn::GetAtt:), not !Ref"
    );
}

#[test]
fn short_form_tags_read_as_their_long_form() {
    let short = long_form(serde_yaml::from_str("[!Ref A, !GetAtt B.Arn, !Sub 'x-${A}']").unwrap());
    let long: Value =
        serde_yaml::from_str("[{Ref: A}, {Fn::GetAtt: [B, Arn]}, {Fn::Sub: 'x-${A}'}]").unwrap();
    assert_eq!(short, long);
}
