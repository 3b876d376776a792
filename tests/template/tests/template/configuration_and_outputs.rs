//! Owns the checks on the function's environment and log levels, the stack's outputs, the
//! cargo lambda deploy settings and the template's YAML form. Must not know the function's code.

use std::collections::{BTreeMap, BTreeSet};

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
fn outputs_name_the_queues_the_table_the_functions_the_archive_and_the_policies() {
    let t = template();
    let expected = [
        ("AuditQueueUrl", reference("AuditQueue")),
        ("AuditQueueArn", get_att("AuditQueue", "Arn")),
        ("AuditAccessQueueUrl", reference("AuditAccessQueue")),
        ("AuditAccessQueueArn", get_att("AuditAccessQueue", "Arn")),
        ("AuditProducerPolicyArn", reference("AuditProducerPolicy")),
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
        ("AuditWitnessPolicyArn", reference("AuditWitnessPolicy")),
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

/// The resources a value refers to: `Ref`, `Fn::GetAtt` and the `${X}` / `${X.Attr}` of an
/// `Fn::Sub` (its own variables excluded), among `resources`.
fn references(value: &Value, resources: &BTreeSet<String>, out: &mut BTreeSet<String>) {
    match value {
        Value::Mapping(map) => {
            for (key, inner) in map {
                match key.as_str() {
                    Some("Ref") => {
                        if let Some(name) = inner.as_str().filter(|n| resources.contains(*n)) {
                            out.insert(name.to_string());
                        }
                    }
                    Some("Fn::GetAtt") => {
                        let name = match inner {
                            Value::String(s) => s.split('.').next().unwrap_or_default().to_string(),
                            other => one_or_many(other).first().map(scalar).unwrap_or_default(),
                        };
                        if resources.contains(&name) {
                            out.insert(name);
                        }
                    }
                    Some("Fn::Sub") => {
                        let (text, variables) = match inner {
                            Value::Sequence(args) => (scalar(&args[0]), args.get(1).cloned()),
                            other => (scalar(other), None),
                        };
                        let own: BTreeSet<String> = variables
                            .as_ref()
                            .and_then(Value::as_mapping)
                            .map(|m| m.keys().map(scalar).collect())
                            .unwrap_or_default();
                        for piece in text.split("${").skip(1) {
                            let name = piece
                                .split(['}', '.'])
                                .next()
                                .unwrap_or_default()
                                .to_string();
                            if resources.contains(&name) && !own.contains(&name) {
                                out.insert(name);
                            }
                        }
                        if let Some(variables) = &variables {
                            references(variables, resources, out);
                        }
                    }
                    _ => references(inner, resources, out),
                }
            }
        }
        Value::Sequence(items) => items.iter().for_each(|v| references(v, resources, out)),
        _ => {}
    }
}

/// A dependency cycle among the template's resources (references and DependsOn), as the names
/// around it, or None.
fn dependency_cycle(t: &Value) -> Option<Vec<String>> {
    let all = at(t, &["Resources"]).as_mapping().expect("Resources");
    let names: BTreeSet<String> = all.keys().map(scalar).collect();
    let edges: BTreeMap<String, BTreeSet<String>> = all
        .iter()
        .map(|(name, r)| {
            let mut out = BTreeSet::new();
            references(
                r.get("Properties").unwrap_or(&Value::Null),
                &names,
                &mut out,
            );
            if let Some(depends) = r.get("DependsOn") {
                out.extend(one_or_many(depends).iter().map(scalar));
            }
            (scalar(name), out)
        })
        .collect();
    // Depth-first, with the path on the stack: a name met again on the path closes a cycle.
    fn visit(
        name: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|p| p == name) {
            let mut cycle = path[start..].to_vec();
            cycle.push(name.to_string());
            return Some(cycle);
        }
        if done.contains(name) {
            return None;
        }
        path.push(name.to_string());
        for next in edges.get(name).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(name.to_string());
        None
    }
    let mut done = BTreeSet::new();
    names
        .iter()
        .find_map(|name| visit(name, &edges, &mut Vec::new(), &mut done))
}

#[test]
fn resources_refer_to_each_other_without_a_cycle() {
    // CloudFormation refuses a template whose resources depend on each other in a circle: the
    // table's tags name the receiver's role, so the role may not name the table (its table
    // statements are AuditReceiverTablePolicy), and the dead-letter queue names its source
    // queues by their fixed names, since their redrive policies name it.
    let t = template();
    assert_eq!(dependency_cycle(&t), None);
}

#[test]
fn a_dependency_cycle_is_found() {
    let t: Value = serde_yaml::from_str(
        "Resources:\n\
         \x20 Table: {Properties: {Tags: [{Value: {Fn::GetAtt: [Role, RoleId]}}]}}\n\
         \x20 Role: {Properties: {Policies: [{Resource: {Fn::Sub: '${Table.Arn}/index/*'}}]}}\n\
         \x20 Queue: {Properties: {Dlq: {Ref: Dlq}}}\n\
         \x20 Dlq: {DependsOn: Other}\n\
         \x20 Other: {Properties: {Name: {Fn::Sub: ['${Queue}', {Queue: x}]}}}\n",
    )
    .expect("literal YAML");
    assert_eq!(
        dependency_cycle(&t),
        Some(vec!["Role".into(), "Table".into(), "Role".into()])
    );
}
