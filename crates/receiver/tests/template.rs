//! Owns the checks on template.yaml: the deployment rules of the SPEC, for every parameter value
//! the template allows. Must not know how the function works inside, only the names it shares.

use std::collections::{BTreeMap, BTreeSet};

use audit_model::archive::{SEAL_DELAY, STATE_PREFIX, TAMPER_PREFIX, TRAIL_PREFIX};
use audit_model::digest::{DIGEST_PREFIX, SIGNING_ALGORITHM};
use audit_model::keys::{LOOKUP_INDEXES, LOOKUP_PROJECTION};
use audit_receiver::Reason;
use audit_receiver::config::{DEFAULT_TABLE_NAME, MAX_CONCURRENCY_LIMIT};
use audit_receiver::store::dynamodb::{AUDIT_BUCKET, PARTITION_KEY, SORT_KEY, TIME_INDEX};
use audit_receiver::telemetry::NAMESPACE;
use serde_yaml::{Mapping, Value};

/// SQS limits: the longest retention (14 days) and the longest visibility timeout (12 hours).
const SQS_MAX_RETENTION_SECONDS: u64 = 1_209_600;
const SQS_MAX_VISIBILITY_SECONDS: u64 = 43_200;
/// Lambda limits: the longest function timeout and the longest SQS batching window.
const LAMBDA_MAX_TIMEOUT_SECONDS: u64 = 900;
const LAMBDA_MAX_BATCHING_WINDOW_SECONDS: u64 = 300;
/// config.rs accepts RETENTION_DAYS up to 100 years.
const MAX_RETENTION_DAYS: u64 = 36_500;

// ---------------------------------------------------------------------------------------------
// Reading the template

/// template.yaml with every short-form tag (`!Ref X`) rewritten to its long form (`Ref: X`),
/// so that the checks below see one shape whichever form the template uses.
fn template() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../template.yaml");
    let text = std::fs::read_to_string(path).expect("template.yaml is readable");
    long_form(serde_yaml::from_str(&text).expect("template.yaml is valid YAML"))
}

fn long_form(value: Value) -> Value {
    match value {
        Value::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let name = tag.trim_start_matches('!');
            let inner = long_form(tagged.value);
            let (key, inner) = match (name, inner) {
                ("Ref", v) => ("Ref".to_string(), v),
                ("GetAtt", Value::String(s)) => {
                    let parts: Vec<Value> = s.splitn(2, '.').map(Value::from).collect();
                    ("Fn::GetAtt".to_string(), Value::Sequence(parts))
                }
                (other, v) => (format!("Fn::{other}"), v),
            };
            let mut map = Mapping::new();
            map.insert(Value::from(key), inner);
            Value::Mapping(map)
        }
        Value::Mapping(map) => {
            Value::Mapping(map.into_iter().map(|(k, v)| (k, long_form(v))).collect())
        }
        Value::Sequence(seq) => Value::Sequence(seq.into_iter().map(long_form).collect()),
        other => other,
    }
}

/// The value at `path` (mapping keys), or a panic naming the path.
fn at<'a>(value: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(value, |v, key| {
        v.get(*key)
            .unwrap_or_else(|| panic!("template.yaml has no {}", path.join(".")))
    })
}

fn resource<'a>(t: &'a Value, name: &str) -> &'a Value {
    at(t, &["Resources", name])
}

fn props<'a>(t: &'a Value, name: &str) -> &'a Value {
    at(t, &["Resources", name, "Properties"])
}

fn resources_of_type<'a>(t: &'a Value, kind: &str) -> Vec<(String, &'a Value)> {
    at(t, &["Resources"])
        .as_mapping()
        .expect("Resources is a mapping")
        .iter()
        .filter(|(_, r)| r.get("Type").and_then(Value::as_str) == Some(kind))
        .map(|(k, r)| (scalar(k), r))
        .collect()
}

/// A YAML scalar as CloudFormation sees it: a string (numbers and booleans included).
fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => panic!("expected a scalar, found {other:?}"),
    }
}

fn number(value: &Value) -> u64 {
    scalar(value)
        .parse()
        .unwrap_or_else(|_| panic!("expected a whole number, found {value:?}"))
}

fn reference(name: &str) -> Value {
    serde_yaml::from_str(&format!("{{Ref: {name}}}")).expect("literal YAML")
}

fn get_att(resource: &str, attribute: &str) -> Value {
    serde_yaml::from_str(&format!("{{Fn::GetAtt: [{resource}, {attribute}]}}"))
        .expect("literal YAML")
}

/// A single item or a list, as IAM and CloudFormation both accept, as a list.
fn one_or_many(value: &Value) -> Vec<Value> {
    match value {
        Value::Sequence(items) => items.clone(),
        item => vec![item.clone()],
    }
}

// ---------------------------------------------------------------------------------------------
// Parameters and the intrinsic functions the checks evaluate

fn parameter<'a>(t: &'a Value, name: &str) -> &'a Value {
    at(t, &["Parameters", name])
}

/// The name of the parameter a property refers to, if it is `Ref: <parameter>`.
fn parameter_ref(t: &Value, value: &Value) -> Option<String> {
    let name = value.get("Ref").map(scalar)?;
    at(t, &["Parameters"]).get(name.as_str()).map(|_| name)
}

/// Every value a parameter can take, for parameters restricted by AllowedValues.
fn allowed_values(t: &Value, name: &str) -> Vec<String> {
    at(parameter(t, name), &["AllowedValues"])
        .as_sequence()
        .unwrap_or_else(|| panic!("parameter {name} lists no AllowedValues"))
        .iter()
        .map(scalar)
        .collect()
}

/// The smallest and largest values a numeric parameter can take, and its default.
fn numeric_range(t: &Value, name: &str) -> (u64, u64, u64) {
    let p = parameter(t, name);
    let default = number(at(p, &["Default"]));
    match p.get("AllowedValues") {
        Some(_) => {
            let values: Vec<u64> = allowed_values(t, name)
                .iter()
                .map(|v| v.parse().unwrap())
                .collect();
            (
                *values.iter().min().unwrap(),
                *values.iter().max().unwrap(),
                default,
            )
        }
        None => (
            number(at(p, &["MinValue"])),
            number(at(p, &["MaxValue"])),
            default,
        ),
    }
}

/// A numeric property for every value of the parameter it may refer to (or its one literal value).
fn numeric_values(t: &Value, value: &Value) -> Vec<u64> {
    match parameter_ref(t, value) {
        Some(name) => {
            let (min, max, default) = numeric_range(t, &name);
            vec![min, default, max]
        }
        None => vec![number(value)],
    }
}

type Params = BTreeMap<String, String>;

/// Evaluates the few intrinsic functions the template's sizing and rules use.
fn eval(t: &Value, value: &Value, params: &Params) -> Value {
    let Some(map) = value.as_mapping().filter(|m| m.len() == 1) else {
        return value.clone();
    };
    let (key, arg) = map.iter().next().expect("one entry");
    let args = || arg.as_sequence().expect("function arguments are a list");
    match key.as_str() {
        Some("Ref") => {
            let name = scalar(arg);
            Value::from(
                params
                    .get(&name)
                    .unwrap_or_else(|| panic!("no value for {name}"))
                    .clone(),
            )
        }
        Some("Fn::FindInMap") => {
            let keys: Vec<String> = args().iter().map(|a| scalar(&eval(t, a, params))).collect();
            let path: Vec<&str> = std::iter::once("Mappings")
                .chain(keys.iter().map(String::as_str))
                .collect();
            at(t, &path).clone()
        }
        Some("Fn::Equals") => {
            let a = args();
            Value::Bool(scalar(&eval(t, &a[0], params)) == scalar(&eval(t, &a[1], params)))
        }
        Some("Fn::Contains") => {
            let a = args();
            let needle = scalar(&eval(t, &a[1], params));
            let hay = a[0].as_sequence().expect("Fn::Contains takes a list");
            Value::Bool(hay.iter().any(|v| scalar(&eval(t, v, params)) == needle))
        }
        Some("Fn::Not") => Value::Bool(!truth(t, &args()[0], params)),
        Some("Fn::And") => Value::Bool(args().iter().all(|a| truth(t, a, params))),
        Some("Fn::Or") => Value::Bool(args().iter().any(|a| truth(t, a, params))),
        _ => value.clone(),
    }
}

fn truth(t: &Value, value: &Value, params: &Params) -> bool {
    eval(t, value, params)
        .as_bool()
        .unwrap_or_else(|| panic!("{value:?} is not a condition"))
}

/// Every parameter at its default, then `overrides`.
fn params_with(t: &Value, overrides: &[(&str, String)]) -> Params {
    let mut params: Params = at(t, &["Parameters"])
        .as_mapping()
        .expect("Parameters is a mapping")
        .iter()
        .map(|(k, p)| (scalar(k), p.get("Default").map(scalar).unwrap_or_default()))
        .collect();
    for (name, value) in overrides {
        params.insert(name.to_string(), value.clone());
    }
    params
}

/// Whether CloudFormation would accept `params` under the template's Rules.
fn rules_accept(t: &Value, params: &Params) -> bool {
    let Some(rules) = t.get("Rules").and_then(Value::as_mapping) else {
        return true;
    };
    rules.values().all(|rule| {
        let applies = rule
            .get("RuleCondition")
            .is_none_or(|c| truth(t, c, params));
        !applies
            || at(rule, &["Assertions"])
                .as_sequence()
                .expect("Assertions is a list")
                .iter()
                .all(|a| truth(t, at(a, &["Assert"]), params))
    })
}

// ---------------------------------------------------------------------------------------------
// Function and event source

fn function(t: &Value) -> &Value {
    props(t, "AuditReceiverFunction")
}

fn sqs_event(t: &Value) -> &Value {
    let events = at(function(t), &["Events"])
        .as_mapping()
        .expect("Events is a mapping");
    let sqs: Vec<&Value> = events
        .values()
        .filter(|e| e.get("Type").and_then(Value::as_str) == Some("SQS"))
        .collect();
    assert_eq!(sqs.len(), 1, "the function has exactly one SQS event");
    at(sqs[0], &["Properties"])
}

#[test]
fn function_is_an_arm64_al2023_binary_built_by_cargo_lambda() {
    let t = template();
    let f = resource(&t, "AuditReceiverFunction");
    assert_eq!(at(f, &["Type"]).as_str(), Some("AWS::Serverless::Function"));
    assert_eq!(
        at(f, &["Metadata", "BuildMethod"]).as_str(),
        Some("rust-cargolambda")
    );
    assert_eq!(
        at(f, &["Metadata", "BuildProperties", "Binary"]).as_str(),
        Some(env!("CARGO_PKG_NAME")),
        "sam build must build the crate's binary"
    );
    let p = function(&t);
    assert_eq!(at(p, &["Runtime"]).as_str(), Some("provided.al2023"));
    assert_eq!(
        at(p, &["Architectures"]),
        &Value::Sequence(vec![Value::from("arm64")])
    );
    assert_eq!(at(p, &["CodeUri"]).as_str(), Some("."));
    assert_eq!(at(p, &["Handler"]).as_str(), Some("bootstrap"));
}

#[test]
fn sqs_event_reports_batch_item_failures_and_takes_its_sizing_from_parameters() {
    let t = template();
    let e = sqs_event(&t);
    assert_eq!(at(e, &["Queue"]), &get_att("AuditQueue", "Arn"));
    assert!(
        one_or_many(at(e, &["FunctionResponseTypes"]))
            .contains(&Value::from("ReportBatchItemFailures")),
        "without ReportBatchItemFailures one failed record would send the whole batch back"
    );
    for path in [
        &["BatchSize"][..],
        &["MaximumBatchingWindowInSeconds"],
        &["ScalingConfig", "MaximumConcurrency"],
    ] {
        assert!(
            parameter_ref(&t, at(e, path)).is_some(),
            "{} is a parameter",
            path.join(".")
        );
    }
    for path in ["Timeout", "MemorySize"] {
        assert!(
            parameter_ref(&t, at(function(&t), &[path])).is_some(),
            "function {path} is a parameter"
        );
    }

    let (batch_min, batch_max, _) =
        numeric_range(&t, &parameter_ref(&t, at(e, &["BatchSize"])).unwrap());
    assert!(
        batch_min >= 1 && batch_max <= 10_000,
        "SQS batch sizes are 1 to 10000"
    );
    let concurrency = parameter_ref(&t, at(e, &["ScalingConfig", "MaximumConcurrency"])).unwrap();
    let (min, max, _) = numeric_range(&t, &concurrency);
    assert!(
        min >= 2 && max <= 1000,
        "ScalingConfig.MaximumConcurrency is 2 to 1000"
    );
    let (min, max, _) = numeric_range(
        &t,
        &parameter_ref(&t, at(function(&t), &["MemorySize"])).unwrap(),
    );
    assert!(
        min >= 128 && max <= 10_240,
        "Lambda memory is 128 to 10240 MB"
    );
}

#[test]
fn batches_over_ten_are_only_accepted_with_a_batching_window() {
    // Lambda rejects an SQS event source with BatchSize > 10 and no batching window; the
    // template's Rules must refuse such parameters before any resource is touched.
    let t = template();
    let e = sqs_event(&t);
    let batch = parameter_ref(&t, at(e, &["BatchSize"])).unwrap();
    let window = parameter_ref(&t, at(e, &["MaximumBatchingWindowInSeconds"])).unwrap();
    let (_, batch_max, _) = numeric_range(&t, &batch);
    assert!(
        rules_accept(&t, &params_with(&t, &[])),
        "the defaults are accepted"
    );
    for w in allowed_values(&t, &window) {
        for b in [1, 2, 10, 11, 100, batch_max] {
            let params = params_with(&t, &[(&batch, b.to_string()), (&window, w.clone())]);
            let lambda_accepts = b <= 10 || w != "0";
            assert_eq!(
                rules_accept(&t, &params),
                lambda_accepts,
                "BatchSize {b} with window {w}"
            );
        }
    }
}

#[test]
fn visibility_timeout_covers_six_function_timeouts_plus_the_window_for_every_allowed_pair() {
    let t = template();
    let timeout =
        parameter_ref(&t, at(function(&t), &["Timeout"])).expect("Timeout is a parameter");
    let window = parameter_ref(&t, at(sqs_event(&t), &["MaximumBatchingWindowInSeconds"]))
        .expect("the batching window is a parameter");
    let visibility = at(props(&t, "AuditQueue"), &["VisibilityTimeout"]);

    let timeouts = allowed_values(&t, &timeout);
    let windows = allowed_values(&t, &window);
    assert!(timeouts.contains(&scalar(at(parameter(&t, &timeout), &["Default"]))));
    assert!(windows.contains(&scalar(at(parameter(&t, &window), &["Default"]))));
    for tv in &timeouts {
        for wv in &windows {
            let (ts, ws): (u64, u64) = (tv.parse().unwrap(), wv.parse().unwrap());
            assert!(ts <= LAMBDA_MAX_TIMEOUT_SECONDS && ws <= LAMBDA_MAX_BATCHING_WINDOW_SECONDS);
            let params = params_with(&t, &[(&timeout, tv.clone()), (&window, wv.clone())]);
            let vt = number(&eval(&t, visibility, &params));
            let needed = 6 * ts + ws;
            assert!(
                vt >= needed,
                "timeout {ts}s, window {ws}s: visibility {vt}s < {needed}s"
            );
            assert!(
                vt <= needed + 60,
                "timeout {ts}s, window {ws}s: visibility {vt}s delays every retry needlessly"
            );
            assert!(
                vt <= SQS_MAX_VISIBILITY_SECONDS,
                "SQS allows at most 12 hours"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Queues

#[test]
fn failed_messages_reach_the_dead_letter_queue_after_at_least_five_receives() {
    let t = template();
    let redrive = at(props(&t, "AuditQueue"), &["RedrivePolicy"]);
    assert_eq!(
        at(redrive, &["deadLetterTargetArn"]),
        &get_att("AuditDeadLetterQueue", "Arn")
    );
    for count in numeric_values(&t, at(redrive, &["maxReceiveCount"])) {
        assert!(count >= 5, "maxReceiveCount {count} < 5");
    }
}

#[test]
fn dead_letter_queue_keeps_messages_fourteen_days_longer_than_the_queue() {
    let t = template();
    let dlq = number(at(
        props(&t, "AuditDeadLetterQueue"),
        &["MessageRetentionPeriod"],
    ));
    let queue = number(at(props(&t, "AuditQueue"), &["MessageRetentionPeriod"]));
    assert_eq!(
        dlq, SQS_MAX_RETENTION_SECONDS,
        "the dead-letter queue keeps messages 14 days"
    );
    assert!(
        dlq > queue,
        "a moved message keeps its enqueue time: DLQ {dlq}s must exceed {queue}s"
    );
}

/// An `Fn::Sub` of pseudo parameters only (`${AWS::StackName}`, ...), evaluated for a sample
/// stack, partition, region and account.
fn sub_pseudo(value: &Value) -> String {
    let text = scalar(at(value, &["Fn::Sub"]));
    let evaluated = [
        ("${AWS::Partition}", "aws"),
        ("${AWS::Region}", "eu-west-1"),
        ("${AWS::AccountId}", "123456789012"),
        ("${AWS::StackName}", "audit-stack"),
    ]
    .iter()
    .fold(text, |text, (name, value)| text.replace(name, value));
    assert!(
        !evaluated.contains("${"),
        "only pseudo parameters: {evaluated}"
    );
    evaluated
}

/// AuditQueue's ARN as another resource may write it: `Fn::GetAtt`, or an `Fn::Sub` that names
/// the queue's own fixed name.
fn names_the_audit_queue(t: &Value, arn: &Value) -> bool {
    if arn == &get_att("AuditQueue", "Arn") {
        return true;
    }
    let Some(name) = props(t, "AuditQueue").get("QueueName") else {
        return false;
    };
    arn.get("Fn::Sub").is_some()
        && sub_pseudo(arn) == format!("arn:aws:sqs:eu-west-1:123456789012:{}", sub_pseudo(name))
}

#[test]
fn dead_letter_queue_takes_dead_letters_and_redrives_from_the_audit_queue_only() {
    let t = template();
    let policy = at(props(&t, "AuditDeadLetterQueue"), &["RedriveAllowPolicy"]);
    assert_eq!(
        at(policy, &["redrivePermission"]).as_str(),
        Some("byQueue"),
        "allowAll lets any queue of the account use the audit dead-letter queue"
    );
    let sources = one_or_many(at(policy, &["sourceQueueArns"]));
    assert_eq!(sources.len(), 1, "AuditQueue and no other: {sources:?}");
    assert!(
        names_the_audit_queue(&t, &sources[0]),
        "{:?} is not AuditQueue's ARN",
        sources[0]
    );
}

#[test]
fn names_the_audit_queue_tells_its_arn_from_another_queues() {
    let t = template();
    let arn = |text: &str| -> Value {
        serde_yaml::from_str(&format!("{{Fn::Sub: '{text}'}}")).expect("literal YAML")
    };
    let own =
        "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:${AWS::StackName}-AuditQueue";
    assert!(names_the_audit_queue(&t, &arn(own)));
    assert!(names_the_audit_queue(&t, &get_att("AuditQueue", "Arn")));
    assert!(!names_the_audit_queue(
        &t,
        &arn("arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:${AWS::StackName}-Other")
    ));
    assert!(!names_the_audit_queue(
        &t,
        &get_att("AuditDeadLetterQueue", "Arn")
    ));
}

/// The statements of the queue policies that apply to `queue`.
fn queue_policy_statements(t: &Value, queue: &str) -> Vec<Value> {
    resources_of_type(t, "AWS::SQS::QueuePolicy")
        .iter()
        .filter(|(_, p)| one_or_many(at(p, &["Properties", "Queues"])).contains(&reference(queue)))
        .flat_map(|(_, p)| one_or_many(at(p, &["Properties", "PolicyDocument", "Statement"])))
        .collect()
}

#[test]
fn nobody_may_start_a_message_move_task_from_the_dead_letter_queue() {
    // SQS's own redrive gives every message a new id and SentTimestamp; one SQS moved there by
    // itself has no failureContext and would become a second item. auditctl keeps the identity.
    let t = template();
    let denied = queue_policy_statements(&t, "AuditDeadLetterQueue")
        .iter()
        .any(|s| {
            at(s, &["Effect"]).as_str() == Some("Deny")
                && at(s, &["Principal"]).as_str() == Some("*")
                && one_or_many(at(s, &["Action"]))
                    .iter()
                    .any(|a| ["sqs:StartMessageMoveTask", "sqs:*"].contains(&scalar(a).as_str()))
                && one_or_many(at(s, &["Resource"]))
                    .contains(&get_att("AuditDeadLetterQueue", "Arn"))
                && s.get("Condition").is_none()
        });
    assert!(
        denied,
        "the dead-letter queue's policy denies sqs:StartMessageMoveTask to everyone, unconditionally"
    );
}

#[test]
fn every_queue_is_encrypted_and_refuses_requests_without_tls() {
    let t = template();
    let policies = resources_of_type(&t, "AWS::SQS::QueuePolicy");
    let queues: Vec<String> = resources_of_type(&t, "AWS::SQS::Queue")
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    for expected in [
        "AuditQueue",
        "AuditDeadLetterQueue",
        "AuditArchiveFailureQueue",
    ] {
        assert!(queues.iter().any(|q| q == expected), "{expected} exists");
    }
    for queue in queues.iter().map(String::as_str) {
        assert_eq!(
            at(props(&t, queue), &["SqsManagedSseEnabled"]),
            &Value::Bool(true),
            "{queue} has SSE"
        );
        let denies_plain_http = policies
            .iter()
            .filter(|(_, p)| {
                one_or_many(at(p, &["Properties", "Queues"])).contains(&reference(queue))
            })
            .flat_map(|(_, p)| one_or_many(at(p, &["Properties", "PolicyDocument", "Statement"])))
            .any(|s| {
                at(&s, &["Effect"]).as_str() == Some("Deny")
                    && at(&s, &["Principal"]).as_str() == Some("*")
                    && one_or_many(at(&s, &["Action"])).contains(&Value::from("sqs:*"))
                    && one_or_many(at(&s, &["Resource"])).contains(&get_att(queue, "Arn"))
                    && scalar(at(&s, &["Condition", "Bool", "aws:SecureTransport"])) == "false"
            });
        assert!(
            denies_plain_http,
            "{queue} has a policy denying aws:SecureTransport false"
        );
    }
}

fn alarms(t: &Value) -> Vec<(String, &Value)> {
    resources_of_type(t, "AWS::CloudWatch::Alarm")
        .into_iter()
        .map(|(name, a)| (name, at(a, &["Properties"])))
        .collect()
}

/// Whether a metric (an alarm's properties, or a `MetricStat.Metric`) is one of `queue`'s SQS
/// metrics.
fn of_queue(metric: &Value, queue: &str) -> bool {
    metric.get("Namespace").and_then(Value::as_str) == Some("AWS/SQS")
        && one_or_many(at(metric, &["Dimensions"])).iter().any(|d| {
            at(d, &["Name"]).as_str() == Some("QueueName")
                && at(d, &["Value"]) == &get_att(queue, "QueueName")
        })
}

fn of_the_dead_letter_queue(metric: &Value) -> bool {
    of_queue(metric, "AuditDeadLetterQueue")
}

/// Whether the alarm fires on a value of 1 or more and stays quiet at 0.
fn fires_on_any_message(alarm: &Value) -> bool {
    match at(alarm, &["ComparisonOperator"]).as_str() {
        Some("GreaterThanThreshold") => number(at(alarm, &["Threshold"])) == 0,
        Some("GreaterThanOrEqualToThreshold") => number(at(alarm, &["Threshold"])) == 1,
        _ => false,
    }
}

/// Whether an alarm of the template fires while `queue` holds any message, visible or in flight:
/// a metric-math sum of its two depth metrics (gaps filled with 0), at their Maximum, above 0.
fn alarms_while_the_queue_holds_anything(t: &Value, queue: &str) -> bool {
    alarms(t).iter().any(|(_, p)| {
        let Some(metrics) = p.get("Metrics") else {
            return false;
        };
        let metrics = one_or_many(metrics);
        // The dead-letter queue's depth metrics by id, at their Maximum.
        let depth: BTreeMap<String, String> = metrics
            .iter()
            .filter_map(|m| {
                let stat = m.get("MetricStat")?;
                let metric = at(stat, &["Metric"]);
                (of_queue(metric, queue) && at(stat, &["Stat"]).as_str() == Some("Maximum"))
                    .then(|| (scalar(at(m, &["Id"])), scalar(at(metric, &["MetricName"]))))
            })
            .collect();
        let returned: Vec<String> = metrics
            .iter()
            .filter(|m| m.get("ReturnData") != Some(&Value::Bool(false)))
            .filter_map(|m| m.get("Expression").map(scalar))
            .collect();
        let [expression] = returned.as_slice() else {
            return false;
        };
        // A sum of the depth metrics (gaps filled with 0), nothing else.
        let terms: Vec<&str> = expression
            .split(|c: char| c.is_whitespace() || "(),".contains(c))
            .filter(|w| !w.is_empty() && !["FILL", "0", "+"].contains(w))
            .collect();
        let summed: BTreeSet<&str> = terms
            .iter()
            .map(|id| depth.get(*id).map(String::as_str).unwrap_or("?"))
            .collect();
        expression.contains('+')
            && summed
                == BTreeSet::from([
                    "ApproximateNumberOfMessagesNotVisible",
                    "ApproximateNumberOfMessagesVisible",
                ])
            && fires_on_any_message(p)
    })
}

#[test]
fn an_alarm_fires_while_the_dead_letter_queue_holds_any_message_visible_or_in_flight() {
    // `auditctl dlq list` receives every message: an alarm on the visible ones alone would clear
    // while someone lists the queue.
    let t = template();
    assert!(
        alarms_while_the_queue_holds_anything(&t, "AuditDeadLetterQueue"),
        "no alarm on the dead-letter queue's ApproximateNumberOfMessagesVisible + \
         ApproximateNumberOfMessagesNotVisible > 0"
    );
}

#[test]
fn an_alarm_fires_days_before_the_oldest_dead_letter_expires() {
    // The dead-letter queue holds the only copy. A message SQS moved there keeps its enqueue
    // time from the audit queue, so it expires (DLQ retention - queue retention) after the move
    // at the earliest, while the dead-letter queue's age metric counts from the move.
    let t = template();
    let watching: Vec<&Value> = alarms(&t)
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| {
            of_the_dead_letter_queue(p)
                && p.get("MetricName").and_then(Value::as_str)
                    == Some("ApproximateAgeOfOldestMessage")
        })
        .collect();
    assert_eq!(
        watching.len(),
        1,
        "one alarm on the dead-letter queue's ApproximateAgeOfOldestMessage"
    );
    let alarm = watching[0];
    assert_eq!(at(alarm, &["Statistic"]).as_str(), Some("Maximum"));
    assert_eq!(
        at(alarm, &["ComparisonOperator"]).as_str(),
        Some("GreaterThanThreshold")
    );
    let threshold =
        parameter_ref(&t, at(alarm, &["Threshold"])).expect("the age threshold is a parameter");
    let (min, max, default) = numeric_range(&t, &threshold);
    assert_eq!(default, 7 * 86_400, "7 days by default");
    let dlq = number(at(
        props(&t, "AuditDeadLetterQueue"),
        &["MessageRetentionPeriod"],
    ));
    let queue = number(at(props(&t, "AuditQueue"), &["MessageRetentionPeriod"]));
    assert!(
        max + 86_400 <= dlq - queue,
        "at {max}s a moved message may have less than a day left (it expires {}s after the move)",
        dlq - queue
    );
    assert!(min >= 60, "SQS publishes the metric once a minute");
}

/// Every metric the template's alarms watch (an alarm's own, or each `MetricStat.Metric` of its
/// metric math), as a mapping with Namespace, MetricName and Dimensions.
fn every_alarm_metric(t: &Value) -> Vec<Value> {
    let mut metrics = Vec::new();
    for (_, p) in alarms(t) {
        match p.get("Metrics") {
            Some(math) => metrics.extend(
                one_or_many(math)
                    .iter()
                    .filter_map(|m| m.get("MetricStat"))
                    .map(|stat| at(stat, &["Metric"]).clone()),
            ),
            None => metrics.push(p.clone()),
        }
    }
    metrics
}

/// The metrics of `namespace` the template's alarms watch.
fn alarm_metrics(t: &Value, namespace: &str) -> Vec<Value> {
    every_alarm_metric(t)
        .into_iter()
        .filter(|m| scalar(at(m, &["Namespace"])) == namespace)
        .collect()
}

#[test]
fn alarms_watch_only_the_namespaces_of_aws_and_of_the_two_functions() {
    let t = template();
    for metric in every_alarm_metric(&t) {
        let namespace = scalar(at(&metric, &["Namespace"]));
        assert!(
            namespace.starts_with("AWS/")
                || namespace == NAMESPACE
                || namespace == ARCHIVER_NAMESPACE,
            "{namespace} is no namespace anything here emits"
        );
    }
}

#[test]
fn alarms_on_the_functions_metrics_use_its_namespace_and_dimension() {
    // src/telemetry.rs emits EMF under NAMESPACE with the single dimension FunctionName; an
    // alarm with another namespace or dimension set would watch a metric that never exists.
    let t = template();
    let own = alarm_metrics(&t, NAMESPACE);
    let emitted = ["Failed", "DeadLettered"];
    let mut watched = BTreeSet::new();
    for p in &own {
        let metric = scalar(at(p, &["MetricName"]));
        let (base, reason) = metric.split_once('.').unwrap_or((metric.as_str(), ""));
        assert!(emitted.contains(&base), "{metric} is not emitted");
        assert!(
            reason.is_empty() || Reason::from_code(reason).is_some(),
            "{metric}: {reason} is no reason code"
        );
        let dimensions = one_or_many(at(p, &["Dimensions"]));
        assert_eq!(
            dimensions.len(),
            1,
            "{metric}: exactly the FunctionName dimension"
        );
        assert_eq!(at(&dimensions[0], &["Name"]).as_str(), Some("FunctionName"));
        assert_eq!(
            at(&dimensions[0], &["Value"]),
            &reference("AuditReceiverFunction")
        );
        watched.insert(metric);
    }
    for metric in ["Failed", "DeadLettered.conflict", "Failed.conflict"] {
        assert!(watched.contains(metric), "no alarm watches {metric}");
    }
}

// ---------------------------------------------------------------------------------------------
// Table

#[test]
fn table_key_schema_is_the_one_the_code_writes() {
    let t = template();
    let table = props(&t, "AuditMessagesTable");
    let attributes: BTreeMap<String, String> = one_or_many(at(table, &["AttributeDefinitions"]))
        .iter()
        .map(|a| {
            (
                scalar(at(a, &["AttributeName"])),
                scalar(at(a, &["AttributeType"])),
            )
        })
        .collect();
    let expected: BTreeMap<String, String> = [PARTITION_KEY, SORT_KEY, AUDIT_BUCKET]
        .into_iter()
        .chain(LOOKUP_INDEXES.iter().map(|l| l.key))
        .map(|k| (k.to_string(), "S".to_string()))
        .collect();
    assert_eq!(
        attributes, expected,
        "only key attributes (of the table, the time index and the lookup indexes) are declared, all strings"
    );
    let keys: Vec<(String, String)> = one_or_many(at(table, &["KeySchema"]))
        .iter()
        .map(|k| {
            (
                scalar(at(k, &["AttributeName"])),
                scalar(at(k, &["KeyType"])),
            )
        })
        .collect();
    assert_eq!(
        keys,
        vec![
            (PARTITION_KEY.to_string(), "HASH".to_string()),
            (SORT_KEY.to_string(), "RANGE".to_string())
        ]
    );
    assert!(table.get("LocalSecondaryIndexes").is_none());

    let name = parameter_ref(&t, at(table, &["TableName"])).expect("the table name is a parameter");
    assert_eq!(
        scalar(at(parameter(&t, &name), &["Default"])),
        DEFAULT_TABLE_NAME
    );
    assert_eq!(
        at(function(&t), &["Environment", "Variables", "TABLE_NAME"]),
        &reference("AuditMessagesTable"),
        "the function writes to this table"
    );
}

/// The key schema of an index or table, as (attribute, key type) pairs.
fn key_schema(value: &Value) -> Vec<(String, String)> {
    one_or_many(at(value, &["KeySchema"]))
        .iter()
        .map(|k| {
            (
                scalar(at(k, &["AttributeName"])),
                scalar(at(k, &["KeyType"])),
            )
        })
        .collect()
}

#[test]
fn time_index_is_the_one_auditctl_queries() {
    let t = template();
    let table = props(&t, "AuditMessagesTable");
    let indexes = one_or_many(at(table, &["GlobalSecondaryIndexes"]));
    assert_eq!(
        indexes.len(),
        1 + LOOKUP_INDEXES.len(),
        "the time index and the lookup indexes"
    );
    let index = &indexes[0];
    assert_eq!(scalar(at(index, &["IndexName"])), TIME_INDEX);
    assert_eq!(
        key_schema(index),
        vec![
            (AUDIT_BUCKET.to_string(), "HASH".to_string()),
            (SORT_KEY.to_string(), "RANGE".to_string())
        ],
        "auditBucket (the day's shard) then auditTime, as the items are written"
    );
    assert_eq!(
        scalar(at(index, &["Projection", "ProjectionType"])),
        "ALL",
        "auditctl prints whole items from the index alone"
    );
    assert!(
        index.get("ProvisionedThroughput").is_none(),
        "the table is on demand"
    );
}

#[test]
fn lookup_indexes_are_the_ones_the_function_keys_and_auditctl_queries() {
    let t = template();
    let table = props(&t, "AuditMessagesTable");
    let indexes = one_or_many(at(table, &["GlobalSecondaryIndexes"]));
    let defined: Vec<(String, String)> = one_or_many(at(table, &["AttributeDefinitions"]))
        .iter()
        .map(|d| {
            (
                scalar(at(d, &["AttributeName"])),
                scalar(at(d, &["AttributeType"])),
            )
        })
        .collect();
    for lookup in LOOKUP_INDEXES {
        let index = indexes
            .iter()
            .find(|i| scalar(at(i, &["IndexName"])) == lookup.name)
            .unwrap_or_else(|| panic!("no index {}", lookup.name));
        assert_eq!(
            key_schema(index),
            vec![
                (lookup.key.to_string(), "HASH".to_string()),
                (SORT_KEY.to_string(), "RANGE".to_string())
            ],
            "{}: the value's shard, then auditTime",
            lookup.name
        );
        assert!(defined.contains(&(lookup.key.to_string(), "S".to_string())));
        // The smallest projection that serves the lookup: the keys (always projected) and the
        // fields its filters read; the full items come from the table by key.
        assert_eq!(
            scalar(at(index, &["Projection", "ProjectionType"])),
            "INCLUDE"
        );
        let projected: Vec<String> = one_or_many(at(index, &["Projection", "NonKeyAttributes"]))
            .iter()
            .map(scalar)
            .collect();
        assert_eq!(projected, LOOKUP_PROJECTION, "{}", lookup.name);
    }
}

#[test]
fn table_is_retained_on_demand_recoverable_encrypted_and_expires_items_by_expires_at() {
    let t = template();
    let r = resource(&t, "AuditMessagesTable");
    assert_eq!(at(r, &["DeletionPolicy"]).as_str(), Some("Retain"));
    assert_eq!(at(r, &["UpdateReplacePolicy"]).as_str(), Some("Retain"));
    let p = props(&t, "AuditMessagesTable");
    assert_eq!(at(p, &["BillingMode"]).as_str(), Some("PAY_PER_REQUEST"));
    assert_eq!(
        at(
            p,
            &[
                "PointInTimeRecoverySpecification",
                "PointInTimeRecoveryEnabled"
            ]
        ),
        &Value::Bool(true)
    );
    assert_eq!(
        at(p, &["SSESpecification", "SSEEnabled"]),
        &Value::Bool(true)
    );
    assert_eq!(
        at(p, &["TimeToLiveSpecification", "AttributeName"]).as_str(),
        Some("expiresAt")
    );
    assert_eq!(
        at(p, &["TimeToLiveSpecification", "Enabled"]),
        &Value::Bool(true)
    );
}

// ---------------------------------------------------------------------------------------------
// Least privilege

fn role_statements(t: &Value, role: &str) -> Vec<Value> {
    let role = props(t, role);
    assert!(
        role.get("ManagedPolicyArns").is_none(),
        "no managed policies: they grant on \"*\""
    );
    one_or_many(at(role, &["Policies"]))
        .iter()
        .flat_map(|p| one_or_many(at(p, &["PolicyDocument", "Statement"])))
        .collect()
}

#[test]
fn each_function_has_its_own_role_and_sam_adds_no_policies() {
    let t = template();
    for (function, role) in [
        ("AuditReceiverFunction", "AuditReceiverRole"),
        ("AuditArchiverFunction", "AuditArchiverRole"),
    ] {
        let f = props(&t, function);
        assert_eq!(at(f, &["Role"]), &get_att(role, "Arn"), "{function}");
        assert!(
            f.get("Policies").is_none(),
            "{function}: with Role set SAM would ignore Policies: keep them in the role"
        );
    }
    let iam: BTreeSet<String> = at(&t, &["Resources"])
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, r)| {
            r.get("Type")
                .and_then(Value::as_str)
                .is_some_and(|k| k.starts_with("AWS::IAM::"))
        })
        .map(|(k, _)| scalar(k))
        .collect();
    assert_eq!(
        iam,
        BTreeSet::from([
            "AuditArchiverRole".to_string(),
            "AuditArchiverSigningPolicy".to_string(),
            "AuditOperatorPolicy".to_string(),
            "AuditReaderPolicy".to_string(),
            "AuditReceiverRole".to_string()
        ]),
        "each function's role (the archiver's signing grant a policy of its own) and the two \
         operator policies, no other IAM resource"
    );
    for policy in ["AuditReaderPolicy", "AuditOperatorPolicy"] {
        for attachment in ["Roles", "Users", "Groups"] {
            assert!(
                props(&t, policy).get(attachment).is_none(),
                "{policy} is for people and tools to attach, never attached by the stack ({attachment})"
            );
        }
    }
}

#[test]
fn function_may_only_put_items_poll_its_own_queue_and_send_dead_letters() {
    let t = template();
    let mut granted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in role_statements(&t, "AuditReceiverRole") {
        assert_eq!(at(&s, &["Effect"]).as_str(), Some("Allow"));
        assert!(s.get("NotAction").is_none() && s.get("NotResource").is_none());
        let resources = one_or_many(at(&s, &["Resource"]));
        for action in one_or_many(at(&s, &["Action"])).iter().map(scalar) {
            assert!(!action.contains('*'), "wildcard action {action}");
            for r in &resources {
                assert_ne!(r.as_str(), Some("*"), "{action} on every resource");
                granted
                    .entry(action.clone())
                    .or_default()
                    .insert(serde_yaml::to_string(r).unwrap());
            }
        }
    }
    let on = |v: Value| BTreeSet::from([serde_yaml::to_string(&v).unwrap()]);
    let dynamodb: BTreeMap<_, _> = granted
        .iter()
        .filter(|(a, _)| a.starts_with("dynamodb:"))
        .collect();
    assert_eq!(
        dynamodb
            .into_iter()
            .map(|(a, r)| (a.clone(), r.clone()))
            .collect::<Vec<_>>(),
        vec![
            (
                "dynamodb:DescribeTable".to_string(),
                on(get_att("AuditMessagesTable", "Arn"))
            ),
            (
                "dynamodb:PutItem".to_string(),
                on(get_att("AuditMessagesTable", "Arn"))
            )
        ],
        "PutItem on the table, DescribeTable for the start-up check, nothing else in DynamoDB"
    );
    let poll = [
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "sqs:ReceiveMessage",
    ];
    assert_eq!(
        granted.get("sqs:SendMessage"),
        Some(&on(get_att("AuditDeadLetterQueue", "Arn"))),
        "SendMessage on the dead-letter queue only"
    );
    for (action, resources) in granted
        .iter()
        .filter(|(a, _)| a.starts_with("sqs:") && *a != "sqs:SendMessage")
    {
        assert!(
            poll.contains(&action.as_str()),
            "{action} is more than the event source mapping needs"
        );
        assert_eq!(
            resources,
            &on(get_att("AuditQueue", "Arn")),
            "{action} only on the audit queue"
        );
    }
    for (action, resources) in granted.iter().filter(|(a, _)| a.starts_with("logs:")) {
        assert_eq!(
            resources,
            &on(get_att("AuditReceiverLogGroup", "Arn")),
            "{action} only on own logs"
        );
    }
    let services: BTreeSet<&str> = granted.keys().filter_map(|a| a.split(':').next()).collect();
    assert_eq!(services, BTreeSet::from(["dynamodb", "logs", "sqs"]));
}

/// Every IAM policy document of the template: the function role's inline policies and each
/// managed policy's, by resource name.
fn policy_documents(t: &Value) -> Vec<(String, Value)> {
    let mut documents = Vec::new();
    for (name, r) in at(t, &["Resources"]).as_mapping().expect("Resources") {
        let p = r.get("Properties").cloned().unwrap_or(Value::Null);
        match r.get("Type").and_then(Value::as_str) {
            Some("AWS::IAM::Role") => documents.extend(
                one_or_many(p.get("Policies").unwrap_or(&Value::Sequence(vec![])))
                    .iter()
                    .map(|policy| (scalar(name), at(policy, &["PolicyDocument"]).clone())),
            ),
            Some("AWS::IAM::ManagedPolicy" | "AWS::IAM::Policy") => {
                documents.push((scalar(name), at(&p, &["PolicyDocument"]).clone()))
            }
            _ => {}
        }
    }
    documents
}

/// A policy resource as the template writes it: `${X.Arn}` for `Fn::GetAtt: [X, Arn]`, the text
/// of an `Fn::Sub`, or the literal.
fn resource_text(value: &Value) -> String {
    if let Some(args) = value.get("Fn::GetAtt") {
        let args = one_or_many(args);
        return format!("${{{}.{}}}", scalar(&args[0]), scalar(&args[1]));
    }
    if let Some(text) = value.get("Fn::Sub") {
        return scalar(text);
    }
    scalar(value)
}

type Grants = BTreeMap<String, BTreeSet<String>>;

/// What a managed policy allows: each action with the resources it is allowed on. Only plain
/// Allow statements (no NotAction, NotResource, Condition or wildcard action), so that the map is
/// all the policy grants.
fn managed_policy_grants(t: &Value, name: &str) -> Grants {
    let resource = resource(t, name);
    assert_eq!(
        at(resource, &["Type"]).as_str(),
        Some("AWS::IAM::ManagedPolicy")
    );
    let mut grants = Grants::new();
    for s in one_or_many(at(props(t, name), &["PolicyDocument", "Statement"])) {
        assert_eq!(at(&s, &["Effect"]).as_str(), Some("Allow"), "{name}: {s:?}");
        for key in ["NotAction", "NotResource", "Condition", "Principal"] {
            assert!(s.get(key).is_none(), "{name}: no {key} ({s:?})");
        }
        let resources: Vec<String> = one_or_many(at(&s, &["Resource"]))
            .iter()
            .map(resource_text)
            .collect();
        for action in one_or_many(at(&s, &["Action"])).iter().map(scalar) {
            assert!(!action.contains('*'), "{name}: wildcard action {action}");
            for r in &resources {
                assert_ne!(r, "*", "{name}: {action} on every resource");
                grants.entry(action.clone()).or_default().insert(r.clone());
            }
        }
    }
    grants
}

const TABLE: &str = "${AuditMessagesTable.Arn}";
const TABLE_INDEXES: &str = "${AuditMessagesTable.Arn}/index/*";
const QUEUE: &str = "${AuditQueue.Arn}";
const DEAD_LETTER_QUEUE: &str = "${AuditDeadLetterQueue.Arn}";

/// Verbs (the part after `service:`) that write, change, delete or reconfigure.
const WRITE_VERBS: &[&str] = &[
    "Put",
    "Update",
    "Delete",
    "BatchWrite",
    "Write",
    "Create",
    "Restore",
    "Import",
    "Transact",
    "PartiQL",
    "ExecuteStatement",
    "ExecuteTransaction",
    "Purge",
    "Set",
    "Tag",
    "Untag",
    "Change",
    "Receive",
    "StartMessageMoveTask",
    "AddPermission",
    "RemovePermission",
];

fn writes(action: &str) -> bool {
    let verb = action.split_once(':').map_or(action, |(_, verb)| verb);
    WRITE_VERBS.iter().any(|w| verb.starts_with(w))
}

#[test]
fn reader_policy_reads_the_table_and_its_indexes_and_records_its_own_access_only() {
    let t = template();
    let reader = managed_policy_grants(&t, "AuditReaderPolicy");
    for (action, resources) in &reader {
        // Sending to the audit queue is how the access itself is recorded (SPEC "Access to the
        // trail is itself recorded"): it adds an event, it changes none.
        if action == "sqs:SendMessage" {
            assert_eq!(resources, &BTreeSet::from([QUEUE.to_string()]));
            continue;
        }
        assert!(!writes(action), "the reader policy may {action}");
    }
    let one = |r: &str| vec![r.to_string()];
    assert_eq!(
        reader,
        owned_grants(&[
            ("dynamodb:BatchGetItem", one(TABLE)),
            ("dynamodb:DescribeTable", one(TABLE)),
            ("dynamodb:Query", vec![TABLE.into(), TABLE_INDEXES.into()]),
            ("sqs:SendMessage", one(QUEUE)),
            ("s3:GetObject", verified_prefixes()),
            ("s3:GetObjectVersion", verified_prefixes()),
            ("s3:ListBucket", one(ARCHIVE_BUCKET)),
            ("s3:ListBucketVersions", one(ARCHIVE_BUCKET)),
            ("kms:GetPublicKey", one(DIGEST_KEY)),
        ]),
        "auditctl query and get: DescribeTable, Query (table and indexes), BatchGetItem (a \
         lookup's full items); the access event on AuditQueue. No GetItem: no command calls it. \
         auditctl verify and the check by hand (docs/operations.md): the archive's objects and \
         digests, their listings, the digest key's public key; never the archiver's markers \
         (state/), never kms:Sign"
    );
}

#[test]
fn operator_policy_is_the_readers_plus_working_the_dead_letter_queue() {
    let t = template();
    let reader = managed_policy_grants(&t, "AuditReaderPolicy");
    let operator = managed_policy_grants(&t, "AuditOperatorPolicy");
    for (action, resources) in &reader {
        let held = operator.get(action).cloned().unwrap_or_default();
        assert!(
            held.is_superset(resources),
            "the operator may {action} on {resources:?} as the reader may (has {held:?})"
        );
    }
    let mut expected = reader.clone();
    // auditctl dlq list and dlq redrive (crates/auditctl/src/dlq.rs): receive, make visible
    // again (ChangeMessageVisibilityBatch is authorised as ChangeMessageVisibility), delete after
    // the redrive's send (DeleteMessageBatch would be DeleteMessage), and the queue's counts. The
    // send itself is the reader's SendMessage on AuditQueue.
    for action in [
        "sqs:ReceiveMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
    ] {
        expected
            .entry(action.to_string())
            .or_default()
            .insert(DEAD_LETTER_QUEUE.to_string());
    }
    assert_eq!(operator, expected);
    for action in operator.keys().filter(|a| a.starts_with("dynamodb:")) {
        assert!(!writes(action), "the operator policy may {action}");
    }
    assert!(
        !operator.contains_key("sqs:StartMessageMoveTask"),
        "SQS's own redrive loses the identity"
    );
}

#[test]
fn write_verbs_are_recognised() {
    for action in [
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:BatchWriteItem",
        "dynamodb:PartiQLUpdate",
        "dynamodb:UpdateTable",
        "sqs:DeleteMessage",
        "sqs:PurgeQueue",
        "sqs:SetQueueAttributes",
    ] {
        assert!(writes(action), "{action}");
    }
    for action in [
        "dynamodb:Query",
        "dynamodb:GetItem",
        "dynamodb:DescribeTable",
        "sqs:GetQueueAttributes",
    ] {
        assert!(!writes(action), "{action}");
    }
}

#[test]
fn nothing_in_the_template_may_update_or_delete_a_stored_item() {
    // The writer only ever inserts (a conditional PutItem that never overwrites); nobody the
    // template grants anything to may change or remove an item.
    let t = template();
    let mut put_item = Vec::new();
    for (owner, document) in policy_documents(&t) {
        for s in one_or_many(at(&document, &["Statement"])) {
            if at(&s, &["Effect"]).as_str() != Some("Allow") {
                continue;
            }
            assert!(s.get("NotAction").is_none(), "{owner}: NotAction");
            for action in one_or_many(at(&s, &["Action"])).iter().map(scalar) {
                let Some(verb) = action.strip_prefix("dynamodb:") else {
                    continue;
                };
                assert!(!verb.contains('*'), "{owner}: {action}");
                if verb == "PutItem" {
                    put_item.push(owner.clone());
                    continue;
                }
                assert!(!writes(&action), "{owner} may {action}");
            }
        }
    }
    assert_eq!(
        put_item,
        vec!["AuditReceiverRole".to_string()],
        "only the function may put items"
    );
}

// ---------------------------------------------------------------------------------------------
// Configuration and outputs

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
/// The level Lambda files an EMF document at: src/telemetry.rs prints it as a bare JSON object
/// with no "level" key, and Lambda files a JSON line without a level as INFO.
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

/// `key = value` lines of one table of Cargo.toml (enough for the flat deploy table).
fn cargo_table(table: &str) -> BTreeMap<String, String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
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

// ---------------------------------------------------------------------------------------------
// Dashboard

/// The metrics src/telemetry.rs emits under NAMESPACE (besides `Failed.<reason>` and
/// `DeadLettered.<reason>`, one per reason code of src/deadletter.rs).
const EMITTED: &[&str] = &[
    "Written",
    "Duplicates",
    "DeadLettered",
    "Failed",
    "BatchSize",
    "OldestMessageAgeMs",
    "DurationMs",
];

fn emitted(metric: &str) -> bool {
    let reason = |r: &str| Reason::from_code(r).is_some();
    EMITTED.contains(&metric)
        || metric.strip_prefix("Failed.").is_some_and(reason)
        || metric.strip_prefix("DeadLettered.").is_some_and(reason)
}

/// The dashboard body with `${...}` substitutions replaced by placeholders, as JSON.
fn dashboard_body(t: &Value) -> serde_json::Value {
    let sub = at(props(t, "AuditDashboard"), &["DashboardBody", "Fn::Sub"]);
    let template = at(sub, &[])
        .as_sequence()
        .expect("Fn::Sub long form: [text, variables]");
    let text = scalar(&template[0]);
    let variables = template[1].as_mapping().expect("variables");
    let mut body = text.replace("${AWS::Region}", "us-east-1");
    for name in variables.keys() {
        body = body.replace(&format!("${{{}}}", scalar(name)), "X");
    }
    assert!(
        !body.contains("${"),
        "every substitution is defined: {body}"
    );
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("the dashboard body is JSON: {e}"))
}

#[test]
fn dashboard_shows_only_metrics_the_function_emits_and_the_pipeline_around_it() {
    let t = template();
    let body = dashboard_body(&t);
    let mut own = BTreeSet::new();
    let mut other = BTreeSet::new();
    let mut searches = Vec::new();
    for widget in body["widgets"].as_array().expect("widgets") {
        for metric in widget["properties"]["metrics"].as_array().expect("metrics") {
            let metric = metric.as_array().expect("a metric is an array");
            if let Some(expression) = metric[0]["expression"].as_str() {
                searches.push(expression.to_owned());
                continue;
            }
            let namespace = metric[0].as_str().expect("namespace");
            let name = metric[1].as_str().expect("metric name").to_owned();
            if namespace == NAMESPACE {
                assert_eq!(
                    metric[2].as_str(),
                    Some("FunctionName"),
                    "{name}: the function's only dimension"
                );
                own.insert(name);
            } else {
                other.insert(format!("{namespace} {name}"));
            }
        }
    }
    for name in &own {
        assert!(emitted(name), "the function never emits {name}");
    }
    for name in [
        "Written",
        "Duplicates",
        "DeadLettered",
        "Failed",
        "OldestMessageAgeMs",
        "DurationMs",
    ] {
        assert!(own.contains(name), "the dashboard shows {name}");
    }
    for search in &searches {
        assert!(
            search.contains(&format!("{{{NAMESPACE},FunctionName}}")),
            "{search}"
        );
        let name = search
            .split("MetricName=")
            .nth(1)
            .and_then(|rest| rest.split(['\'', ' ']).next())
            .unwrap_or_else(|| panic!("a search by metric name: {search}"));
        assert!(
            emitted(name),
            "SEARCH for {name}, which the function never emits"
        );
    }
    assert!(searches.iter().any(|s| s.contains("MetricName=Failed")));
    assert!(
        searches
            .iter()
            .any(|s| s.contains("MetricName=DeadLettered"))
    );
    for metric in [
        "AWS/SQS ApproximateNumberOfMessagesVisible",
        "AWS/SQS ApproximateNumberOfMessagesNotVisible",
        "AWS/SQS ApproximateAgeOfOldestMessage",
        "AWS/Lambda Errors",
        "AWS/Lambda Throttles",
        "AWS/DynamoDB WriteThrottleEvents",
        "AWS/DynamoDB ThrottledRequests",
    ] {
        assert!(other.contains(metric), "the dashboard shows {metric}");
    }
    assert!(
        at(&t, &["Outputs", "AuditDashboardUrl", "Value", "Fn::Sub"])
            .as_str()
            .is_some_and(|url| url.contains("#dashboards:name=${AuditDashboard}")),
        "the dashboard's URL is an output"
    );
}

/// Every metric of the dashboard that is not a search, as its strings (namespace, name, then
/// dimension names and values); `${...}` substitutions read `X`.
fn dashboard_metrics(t: &Value) -> Vec<Vec<String>> {
    let body = dashboard_body(t);
    let mut metrics = Vec::new();
    for widget in body["widgets"].as_array().expect("widgets") {
        for metric in widget["properties"]["metrics"].as_array().expect("metrics") {
            let metric = metric.as_array().expect("a metric is an array");
            if metric[0].get("expression").is_none() {
                metrics.push(
                    metric
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect(),
                );
            }
        }
    }
    metrics
}

#[test]
fn dashboard_shows_the_write_throttles_of_the_table_and_of_every_index() {
    // An index that cannot keep up throttles the table's writes: on the write path, each index's
    // WriteThrottleEvents matter as much as the table's.
    let t = template();
    let metrics = dashboard_metrics(&t);
    let shown = |dimensions: &[&str]| {
        let expected: Vec<String> = ["AWS/DynamoDB", "WriteThrottleEvents"]
            .iter()
            .chain(dimensions)
            .map(|s| s.to_string())
            .collect();
        metrics.contains(&expected)
    };
    assert!(
        shown(&["TableName", "X"]),
        "the table's WriteThrottleEvents"
    );
    let indexes: Vec<String> = one_or_many(at(
        props(&t, "AuditMessagesTable"),
        &["GlobalSecondaryIndexes"],
    ))
    .iter()
    .map(|index| scalar(at(index, &["IndexName"])))
    .collect();
    assert!(!indexes.is_empty());
    for index in &indexes {
        assert!(
            shown(&["TableName", "X", "GlobalSecondaryIndexName", index]),
            "the dashboard shows {index}'s WriteThrottleEvents"
        );
    }
    let table_dimension = props(&t, "AuditDashboard");
    let variables = at(table_dimension, &["DashboardBody", "Fn::Sub"])
        .as_sequence()
        .expect("Fn::Sub long form")[1]
        .clone();
    assert_eq!(
        at(&variables, &["Table"]),
        &reference("AuditMessagesTable"),
        "${{Table}} is the audit table"
    );
}

// ---------------------------------------------------------------------------------------------
// The archive (SPEC "Keeping the trail")

/// The archiver's EMF namespace, with the single dimension FunctionName, and the metrics it
/// emits there (crates/archiver/src/telemetry.rs; the test below reads that file, so that the two
/// cannot drift apart without a failing test).
const ARCHIVER_NAMESPACE: &str = "AuditArchiver";
const ARCHIVER_EMITTED: &[&str] = &[
    "BatchSize",
    "Archived",
    "AlreadyArchived",
    "Expired",
    "TrailModified",
    "Failed",
    "ArchivedBytes",
    "ArchiveLagMs",
    "DurationMs",
    // On each scheduled run (crates/archiver: sealing the digests).
    "DigestsSealed",
    "SealLagSeconds",
    "SealFailed",
];

#[test]
fn the_archiver_emits_the_namespace_and_metrics_the_template_watches() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../archiver/src/telemetry.rs");
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

fn archiver(t: &Value) -> &Value {
    props(t, "AuditArchiverFunction")
}

/// The archiver's event of `kind` (its only one of that kind).
fn archiver_event<'a>(t: &'a Value, kind: &str) -> &'a Value {
    let events: Vec<&Value> = at(archiver(t), &["Events"])
        .as_mapping()
        .expect("Events is a mapping")
        .values()
        .filter(|e| at(e, &["Type"]).as_str() == Some(kind))
        .collect();
    assert_eq!(events.len(), 1, "the archiver has exactly one {kind} event");
    at(events[0], &["Properties"])
}

/// The archiver's stream event: the table's stream.
fn stream_event(t: &Value) -> &Value {
    archiver_event(t, "DynamoDB")
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
fn table_streams_new_and_old_images_and_takes_its_class_from_a_parameter() {
    let t = template();
    let table = props(&t, "AuditMessagesTable");
    assert_eq!(
        at(table, &["StreamSpecification", "StreamViewType"]).as_str(),
        Some("NEW_AND_OLD_IMAGES"),
        "a tamper record needs the item before and after"
    );
    let class = parameter_ref(&t, at(table, &["TableClass"])).expect("a parameter");
    assert_eq!(
        allowed_values(&t, &class),
        vec!["STANDARD", "STANDARD_INFREQUENT_ACCESS"]
    );
    assert_eq!(scalar(at(parameter(&t, &class), &["Default"])), "STANDARD");
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
    let batch = number(at(e, &["BatchSize"]));
    assert!((1..=10_000).contains(&batch), "Lambda's range: {batch}");
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
    let names: BTreeSet<String> = vars.as_mapping().unwrap().keys().map(scalar).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "ARCHIVE_BUCKET".into(),
            "DIGEST_KEY_ID".into(),
            "DIGEST_PERIOD_SECONDS".into()
        ])
    );
}

const ARCHIVE_OBJECTS: &str = "${AuditArchiveBucket.Arn}/*";
const ARCHIVE_BUCKET: &str = "${AuditArchiveBucket.Arn}";
const DIGEST_KEY: &str = "${AuditDigestKey.Arn}";

/// `${AuditArchiveBucket.Arn}/<prefix>*` for each prefix (audit_model's `trail/`, ...).
fn under(prefixes: &[&str]) -> Vec<String> {
    prefixes
        .iter()
        .map(|p| format!("{ARCHIVE_BUCKET}/{p}*"))
        .collect()
}

/// Everything the archiver writes: the archive's objects, its markers, the digests.
fn archiver_prefixes() -> Vec<String> {
    under(&[TRAIL_PREFIX, TAMPER_PREFIX, STATE_PREFIX, DIGEST_PREFIX])
}

/// What `auditctl verify` reads: the archive's objects and the digests (not the markers).
fn verified_prefixes() -> Vec<String> {
    under(&[TRAIL_PREFIX, TAMPER_PREFIX, DIGEST_PREFIX])
}
const TABLE_STREAM: &str = "${AuditMessagesTable.StreamArn}";
const TABLE_STREAMS: &str = "${AuditMessagesTable.Arn}/stream/*";

/// What plain Allow statements grant: each action with the resources it is allowed on (no
/// NotAction, NotResource, Condition, Principal or wildcard, so that the map is all they grant).
fn statement_grants(owner: &str, statements: &[Value], grants: &mut Grants) {
    for s in statements {
        assert_eq!(at(s, &["Effect"]).as_str(), Some("Allow"), "{owner}: {s:?}");
        for key in ["NotAction", "NotResource", "Condition", "Principal"] {
            assert!(s.get(key).is_none(), "{owner}: no {key} ({s:?})");
        }
        let resources: Vec<String> = one_or_many(at(s, &["Resource"]))
            .iter()
            .map(resource_text)
            .collect();
        for action in one_or_many(at(s, &["Action"])).iter().map(scalar) {
            assert!(!action.contains('*'), "{owner}: wildcard action {action}");
            for r in &resources {
                assert_ne!(r, "*", "{owner}: {action} on every resource");
                grants.entry(action.clone()).or_default().insert(r.clone());
            }
        }
    }
}

/// What a role's inline policies allow.
fn role_grants(t: &Value, role: &str) -> Grants {
    let mut grants = Grants::new();
    statement_grants(role, &role_statements(t, role), &mut grants);
    grants
}

/// The AWS::IAM::Policy resources attached to `role`, by name.
fn attached_policies(t: &Value, role: &str) -> Vec<String> {
    resources_of_type(t, "AWS::IAM::Policy")
        .into_iter()
        .filter(|(_, r)| one_or_many(at(r, &["Properties", "Roles"])).contains(&reference(role)))
        .map(|(name, _)| name)
        .collect()
}

/// What a role may do: its inline policies and the AWS::IAM::Policy resources attached to it.
fn all_role_grants(t: &Value, role: &str) -> Grants {
    let mut grants = role_grants(t, role);
    for policy in attached_policies(t, role) {
        let statements = one_or_many(at(props(t, &policy), &["PolicyDocument", "Statement"]));
        statement_grants(&policy, &statements, &mut grants);
    }
    grants
}

fn owned_grants(expected: &[(&str, Vec<String>)]) -> Grants {
    expected
        .iter()
        .map(|(action, resources)| (action.to_string(), resources.iter().cloned().collect()))
        .collect()
}

#[test]
fn archiver_may_only_read_the_stream_write_and_read_its_prefixes_seal_send_give_ups_and_log() {
    let t = template();
    let one = |r: &str| vec![r.to_string()];
    assert_eq!(
        all_role_grants(&t, "AuditArchiverRole"),
        owned_grants(&[
            // What the event source mapping polls the stream with (the AWS guide's four, on
            // this table's streams only).
            ("dynamodb:DescribeStream", one(TABLE_STREAM)),
            ("dynamodb:GetRecords", one(TABLE_STREAM)),
            ("dynamodb:GetShardIterator", one(TABLE_STREAM)),
            ("dynamodb:ListStreams", one(TABLE_STREAMS)),
            // New objects under its own prefixes (conditional puts never replace one), read
            // back (GetObject also authorises HEAD); ListBucket so that a missing key is a 404,
            // not a 403. No delete, no retention, no lock.
            ("s3:PutObject", archiver_prefixes()),
            ("s3:GetObject", archiver_prefixes()),
            ("s3:ListBucket", one(ARCHIVE_BUCKET)),
            // Sealing a period: its versions listed, the head of each listed version (a HEAD
            // with a versionId is authorised as GetObjectVersion) of the archive's objects, and
            // the previous digest read as it was sealed (its first version, by versionId); the
            // digest signed with the digest key and nothing else.
            ("s3:ListBucketVersions", one(ARCHIVE_BUCKET)),
            ("s3:GetObjectVersion", verified_prefixes()),
            ("kms:Sign", one(DIGEST_KEY)),
            // The on-failure destination is sent with the function's role.
            ("sqs:SendMessage", one("${AuditArchiveFailureQueue.Arn}")),
            ("logs:CreateLogStream", one("${AuditArchiverLogGroup.Arn}")),
            ("logs:PutLogEvents", one("${AuditArchiverLogGroup.Arn}")),
        ])
    );
    // The signing grant is a policy of its own (the key's policy names the role: inside the role
    // it would be a cycle), and the function waits for it.
    assert_eq!(
        attached_policies(&t, "AuditArchiverRole"),
        vec!["AuditArchiverSigningPolicy".to_string()]
    );
    assert!(
        !role_grants(&t, "AuditArchiverRole").contains_key("kms:Sign"),
        "kms:Sign inside the role would make the role depend on the key, which names the role"
    );
    assert_eq!(
        scalar(at(resource(&t, "AuditArchiverFunction"), &["DependsOn"])),
        "AuditArchiverSigningPolicy"
    );
    assert!(
        attached_policies(&t, "AuditReceiverRole").is_empty(),
        "the receiver signs nothing"
    );
}

/// S3 actions that remove an object or a version, or loosen what keeps it.
fn loosens_the_archive(action: &str) -> bool {
    let verb = action.strip_prefix("s3:").unwrap_or("");
    verb.starts_with("Delete")
        || verb.starts_with("PutObjectRetention")
        || verb.starts_with("PutObjectLegalHold")
        || verb.starts_with("BypassGovernanceRetention")
        || verb.starts_with("PutBucket")
        || verb.starts_with("PutLifecycle")
        || verb.starts_with("PutObjectAcl")
        || verb.starts_with("PutObjectVersionAcl")
        || verb.starts_with("PutEncryption")
        || verb.contains('*')
        || action == "*"
}

#[test]
fn loosens_the_archive_is_recognised() {
    for action in [
        "s3:DeleteObject",
        "s3:DeleteObjectVersion",
        "s3:PutObjectRetention",
        "s3:BypassGovernanceRetention",
        "s3:PutBucketObjectLockConfiguration",
        "s3:PutLifecycleConfiguration",
        "s3:PutBucketPolicy",
        "s3:*",
        "*",
    ] {
        assert!(loosens_the_archive(action), "{action}");
    }
    for action in [
        "s3:PutObject",
        "s3:GetObject",
        "s3:ListBucket",
        "dynamodb:PutItem",
    ] {
        assert!(!loosens_the_archive(action), "{action}");
    }
}

#[test]
fn nothing_in_the_template_may_delete_unlock_or_reconfigure_the_archive() {
    let t = template();
    for (owner, document) in policy_documents(&t) {
        for s in one_or_many(at(&document, &["Statement"])) {
            if at(&s, &["Effect"]).as_str() != Some("Allow") {
                continue;
            }
            assert!(s.get("NotAction").is_none(), "{owner}: NotAction");
            for action in one_or_many(at(&s, &["Action"])).iter().map(scalar) {
                assert!(!loosens_the_archive(&action), "{owner} may {action}");
            }
        }
    }
}

#[test]
fn archive_bucket_is_versioned_locked_in_compliance_mode_encrypted_private_and_retained() {
    let t = template();
    let r = resource(&t, "AuditArchiveBucket");
    assert_eq!(at(r, &["Type"]).as_str(), Some("AWS::S3::Bucket"));
    assert_eq!(at(r, &["DeletionPolicy"]).as_str(), Some("Retain"));
    assert_eq!(at(r, &["UpdateReplacePolicy"]).as_str(), Some("Retain"));
    let p = props(&t, "AuditArchiveBucket");
    assert_eq!(
        at(p, &["VersioningConfiguration", "Status"]).as_str(),
        Some("Enabled")
    );
    assert_eq!(at(p, &["ObjectLockEnabled"]), &Value::Bool(true));
    let lock = at(p, &["ObjectLockConfiguration"]);
    assert_eq!(at(lock, &["ObjectLockEnabled"]).as_str(), Some("Enabled"));
    let retention = at(lock, &["Rule", "DefaultRetention"]);
    assert_eq!(
        at(retention, &["Mode"]).as_str(),
        Some("COMPLIANCE"),
        "GOVERNANCE can be bypassed by a permission; COMPLIANCE by nobody"
    );
    assert!(retention.get("Years").is_none(), "Days, from the parameter");
    let days = parameter_ref(&t, at(retention, &["Days"])).expect("a parameter");
    assert_eq!(days, "ArchiveRetentionDays");
    let (min, _, default) = numeric_range(&t, &days);
    assert!(
        min >= 366,
        "PCI DSS 10.5.1: at least 12 months, at every allowed value"
    );
    assert_eq!(default, 400);
    let sse = one_or_many(at(
        p,
        &["BucketEncryption", "ServerSideEncryptionConfiguration"],
    ));
    assert_eq!(sse.len(), 1);
    assert_eq!(
        at(&sse[0], &["ServerSideEncryptionByDefault", "SSEAlgorithm"]).as_str(),
        Some("AES256"),
        "SSE-S3: no key anyone could disable to make the archive unreadable"
    );
    for setting in [
        "BlockPublicAcls",
        "BlockPublicPolicy",
        "IgnorePublicAcls",
        "RestrictPublicBuckets",
    ] {
        assert_eq!(
            at(p, &["PublicAccessBlockConfiguration", setting]),
            &Value::Bool(true),
            "{setting}"
        );
    }
}

#[test]
fn archive_objects_move_to_a_colder_class_after_a_parameter_and_never_expire() {
    let t = template();
    let lifecycle = at(props(&t, "AuditArchiveBucket"), &["LifecycleConfiguration"]);
    assert_eq!(
        at(lifecycle, &["TransitionDefaultMinimumObjectSize"]).as_str(),
        Some("all_storage_classes_128K"),
        "Glacier Instant Retrieval bills at least 128 KB an object: small ones stay"
    );
    let rules = one_or_many(at(lifecycle, &["Rules"]));
    let cold: Vec<&Value> = rules
        .iter()
        .flat_map(|r| {
            assert_eq!(at(r, &["Status"]).as_str(), Some("Enabled"));
            for expiry in [
                "ExpirationInDays",
                "ExpirationDate",
                "NoncurrentVersionExpiration",
            ] {
                assert!(
                    r.get(expiry).is_none(),
                    "the archive never expires ({expiry})"
                );
            }
            r.get("Transitions")
        })
        .collect();
    assert_eq!(cold.len(), 1, "one transition rule");
    let transitions = one_or_many(cold[0]);
    assert_eq!(transitions.len(), 1);
    assert_eq!(
        at(&transitions[0], &["StorageClass"]).as_str(),
        Some("GLACIER_IR"),
        "read in milliseconds, by Athena and auditctl verify"
    );
    assert_eq!(
        parameter_ref(&t, at(&transitions[0], &["TransitionInDays"])).as_deref(),
        Some("ArchiveColdAfterDays")
    );
    let (min, _, _) = numeric_range(&t, "ArchiveColdAfterDays");
    assert!(min >= 1);
}

/// The statements of the bucket policies of `bucket`.
fn bucket_policy_statements(t: &Value, bucket: &str) -> Vec<Value> {
    resources_of_type(t, "AWS::S3::BucketPolicy")
        .iter()
        .filter(|(_, p)| at(p, &["Properties", "Bucket"]) == &reference(bucket))
        .flat_map(|(_, p)| one_or_many(at(p, &["Properties", "PolicyDocument", "Statement"])))
        .collect()
}

fn denies_plain_http_on_bucket_and_objects(t: &Value, bucket: &str) -> bool {
    bucket_policy_statements(t, bucket).iter().any(|s| {
        let resources: BTreeSet<String> = one_or_many(at(s, &["Resource"]))
            .iter()
            .map(resource_text)
            .collect();
        at(s, &["Effect"]).as_str() == Some("Deny")
            && at(s, &["Principal"]).as_str() == Some("*")
            && one_or_many(at(s, &["Action"])).contains(&Value::from("s3:*"))
            && resources
                == BTreeSet::from([format!("${{{bucket}.Arn}}"), format!("${{{bucket}.Arn}}/*")])
            && scalar(at(s, &["Condition", "Bool", "aws:SecureTransport"])) == "false"
    })
}

#[test]
fn archive_bucket_refuses_requests_without_tls_and_deletes_from_anyone() {
    let t = template();
    assert!(denies_plain_http_on_bucket_and_objects(
        &t,
        "AuditArchiveBucket"
    ));
    let denied: BTreeSet<String> = bucket_policy_statements(&t, "AuditArchiveBucket")
        .iter()
        .filter(|s| {
            at(s, &["Effect"]).as_str() == Some("Deny")
                && at(s, &["Principal"]).as_str() == Some("*")
                && s.get("Condition").is_none()
                && one_or_many(at(s, &["Resource"]))
                    .iter()
                    .any(|r| resource_text(r) == ARCHIVE_OBJECTS)
        })
        .flat_map(|s| {
            one_or_many(at(s, &["Action"]))
                .iter()
                .map(scalar)
                .collect::<Vec<_>>()
        })
        .collect();
    for action in ["s3:DeleteObject", "s3:DeleteObjectVersion"] {
        assert!(
            denied.contains(action),
            "{action} denied to everyone, unconditionally (a delete marker hides a locked object)"
        );
    }
}

#[test]
fn query_results_live_in_their_own_expiring_bucket_never_in_the_locked_one() {
    // Object Lock is bucket-wide: results written into the archive bucket would be locked for
    // ArchiveRetentionDays.
    let t = template();
    let workgroup = at(
        props(&t, "AuditTrailWorkGroup"),
        &["WorkGroupConfiguration"],
    );
    assert_eq!(
        at(workgroup, &["EnforceWorkGroupConfiguration"]),
        &Value::Bool(true),
        "clients cannot send results elsewhere"
    );
    let output = resource_text(at(workgroup, &["ResultConfiguration", "OutputLocation"]));
    assert!(
        output.starts_with("s3://${AuditQueryResultsBucket}/"),
        "{output}"
    );
    assert_eq!(
        at(
            workgroup,
            &[
                "ResultConfiguration",
                "EncryptionConfiguration",
                "EncryptionOption"
            ]
        )
        .as_str(),
        Some("SSE_S3")
    );
    let results = props(&t, "AuditQueryResultsBucket");
    assert!(results.get("ObjectLockEnabled").is_none());
    let expires = one_or_many(at(results, &["LifecycleConfiguration", "Rules"]))
        .iter()
        .any(|r| {
            r.get("ExpirationInDays").is_some() && at(r, &["Status"]).as_str() == Some("Enabled")
        });
    assert!(expires, "query results (copies of audit data) expire");
    for setting in [
        "BlockPublicAcls",
        "BlockPublicPolicy",
        "IgnorePublicAcls",
        "RestrictPublicBuckets",
    ] {
        assert_eq!(
            at(results, &["PublicAccessBlockConfiguration", setting]),
            &Value::Bool(true),
            "{setting}"
        );
    }
    assert!(denies_plain_http_on_bucket_and_objects(
        &t,
        "AuditQueryResultsBucket"
    ));
}

#[test]
fn glue_table_reads_trail_objects_with_dt_and_hour_projected() {
    let t = template();
    let table = props(&t, "AuditTrailTable");
    assert_eq!(
        at(table, &["DatabaseName"]),
        &reference("AuditTrailDatabase")
    );
    let input = at(table, &["TableInput"]);
    assert_eq!(
        at(input, &["Name"]).as_str(),
        Some("trail"),
        "the name sql/*.sql reads"
    );
    let p = at(input, &["Parameters"]);
    let param = |name: &str| scalar(at(p, &[name]));
    assert_eq!(param("projection.enabled"), "true");
    assert_eq!(param("projection.dt.type"), "date");
    assert_eq!(param("projection.dt.format"), "yyyy-MM-dd");
    assert_eq!(param("projection.dt.interval"), "1");
    assert_eq!(param("projection.dt.interval.unit"), "DAYS");
    assert_eq!(
        resource_text(at(p, &["projection.dt.range"])),
        "${ArchiveStartDate},NOW",
        "from a start day to today"
    );
    assert_eq!(param("projection.hour.type"), "integer");
    assert_eq!(param("projection.hour.range"), "0,23");
    assert_eq!(param("projection.hour.digits"), "2");
    assert_eq!(
        resource_text(at(p, &["storage.location.template"])),
        "s3://${AuditArchiveBucket}/trail/dt=${!dt}/hour=${!hour}/",
        "the archiver's layout: trail/dt=YYYY-MM-DD/hour=HH/"
    );
    let partitions: Vec<(String, String)> = one_or_many(at(input, &["PartitionKeys"]))
        .iter()
        .map(|k| (scalar(at(k, &["Name"])), scalar(at(k, &["Type"]))))
        .collect();
    assert_eq!(
        partitions,
        vec![
            ("dt".into(), "string".into()),
            ("hour".into(), "string".into())
        ]
    );
    let storage = at(input, &["StorageDescriptor"]);
    assert_eq!(
        resource_text(at(storage, &["Location"])),
        "s3://${AuditArchiveBucket}/trail/"
    );
    assert_eq!(
        at(storage, &["SerdeInfo", "SerializationLibrary"]).as_str(),
        Some("org.openx.data.jsonserde.JsonSerDe"),
        "JSON lines; nested `extra` read as its JSON text"
    );
    let columns: BTreeMap<String, String> = one_or_many(at(storage, &["Columns"]))
        .iter()
        .map(|c| (scalar(at(c, &["Name"])), scalar(at(c, &["Type"]))))
        .collect();
    // Every attribute of the item (docs/events.md) but the index keys, which queries do not need.
    for (name, kind) in [
        (PARTITION_KEY, "string"),
        (SORT_KEY, "string"),
        ("auditText", "string"),
        ("actor", "string"),
        ("action", "string"),
        ("resource", "string"),
        ("outcome", "string"),
        ("sourceIp", "string"),
        ("sqsMessageId", "string"),
        ("sentAt", "string"),
        ("receivedAt", "string"),
        ("receiveCount", "bigint"),
        ("eventSource", "string"),
        (AUDIT_BUCKET, "string"),
        ("expiresAt", "bigint"),
        ("extra", "string"),
    ] {
        assert_eq!(
            columns.get(name).map(String::as_str),
            Some(kind),
            "column {name}"
        );
    }
}

/// The SQL files the named queries and `make sql` share.
fn sql_files() -> BTreeMap<String, String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../sql");
    std::fs::read_dir(dir)
        .expect("sql/ is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .map(|p| {
            let name = format!("sql/{}", p.file_name().unwrap().to_string_lossy());
            (name, std::fs::read_to_string(&p).expect("readable"))
        })
        .collect()
}

#[test]
fn named_queries_are_the_sql_files_make_sql_runs() {
    let t = template();
    let files = sql_files();
    let queries = resources_of_type(&t, "AWS::Athena::NamedQuery");
    assert_eq!(
        queries.len(),
        3,
        "one actor; per action per day; failures by source IP"
    );
    let mut used = BTreeSet::new();
    for (name, q) in &queries {
        let p = at(q, &["Properties"]);
        assert_eq!(
            at(p, &["Database"]),
            &reference("AuditTrailDatabase"),
            "{name}"
        );
        assert_eq!(
            at(p, &["WorkGroup"]),
            &reference("AuditTrailWorkGroup"),
            "{name}"
        );
        let text = scalar(at(p, &["QueryString"]));
        let file = files
            .iter()
            .find(|(_, sql)| **sql == text)
            .map(|(file, _)| file.clone())
            .unwrap_or_else(|| panic!("{name}'s QueryString is no sql/*.sql file as it stands"));
        let description = scalar(at(p, &["Description"]));
        assert!(
            description.contains(&file),
            "{name} names {file}: {description}"
        );
        assert!(used.insert(file), "{name}: two queries share a file");
    }
    assert_eq!(
        used,
        files.keys().cloned().collect(),
        "every sql/*.sql is a named query"
    );
    for (file, sql) in &files {
        assert!(sql.contains("FROM trail"), "{file} reads the Glue table");
        assert!(sql.contains("dt >= ?"), "{file} prunes partitions by day");
    }
}

/// Whether an alarm fires on a sum of 1 or more of `metric` in a single minute.
fn fires_within_a_minute_on_the_first(alarm: &Value) -> bool {
    fires_on_any_message(alarm)
        && number(at(alarm, &["Period"])) == 60
        && number(at(alarm, &["EvaluationPeriods"])) == 1
        && at(alarm, &["Statistic"]).as_str() == Some("Sum")
        && at(alarm, &["TreatMissingData"]).as_str() == Some("notBreaching")
}

#[test]
fn an_alarm_fires_on_the_first_change_to_the_trail_within_a_minute() {
    let t = template();
    let watching: Vec<&Value> = alarms(&t)
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| {
            p.get("Namespace").map(scalar).as_deref() == Some(ARCHIVER_NAMESPACE)
                && p.get("MetricName").map(scalar).as_deref() == Some("TrailModified")
        })
        .collect();
    assert_eq!(watching.len(), 1, "one alarm on TrailModified");
    assert!(fires_within_a_minute_on_the_first(watching[0]));
}

#[test]
fn alarms_on_the_archivers_metrics_use_its_namespace_and_dimension() {
    let t = template();
    for p in alarm_metrics(&t, ARCHIVER_NAMESPACE) {
        let metric = scalar(at(&p, &["MetricName"]));
        assert!(
            ARCHIVER_EMITTED.contains(&metric.as_str()),
            "{metric} is not emitted"
        );
        let dimensions = one_or_many(at(&p, &["Dimensions"]));
        assert_eq!(dimensions.len(), 1, "{metric}: exactly FunctionName");
        assert_eq!(at(&dimensions[0], &["Name"]).as_str(), Some("FunctionName"));
        assert_eq!(
            at(&dimensions[0], &["Value"]),
            &reference("AuditArchiverFunction")
        );
    }
}

#[test]
fn an_alarm_fires_when_the_archive_falls_behind_the_stream() {
    let t = template();
    let lagging: Vec<&Value> = alarms(&t)
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| {
            p.get("Metrics").is_some_and(|m| {
                one_or_many(m).iter().any(|m| {
                    m.get("MetricStat").is_some_and(|s| {
                        let metric = at(s, &["Metric"]);
                        scalar(at(metric, &["MetricName"])) == "IteratorAge"
                            && one_or_many(at(metric, &["Dimensions"]))
                                .iter()
                                .any(|d| at(d, &["Value"]) == &reference("AuditArchiverFunction"))
                    })
                })
            })
        })
        .collect();
    assert_eq!(lagging.len(), 1, "one alarm on the archiver's IteratorAge");
    let threshold = parameter_ref(&t, at(lagging[0], &["Threshold"])).expect("a parameter");
    let (min, max, _) = numeric_range(&t, &threshold);
    let window = numeric_values(
        &t,
        at(stream_event(&t), &["MaximumBatchingWindowInSeconds"]),
    );
    assert!(
        min >= window.iter().max().unwrap() + 60,
        "the alarm stays quiet while a batch is only gathering"
    );
    assert!(max <= 86_400, "the stream keeps records 24 hours");
    // IteratorAge is in milliseconds, the threshold in seconds.
    let expression: Vec<String> = one_or_many(at(lagging[0], &["Metrics"]))
        .iter()
        .filter_map(|m| m.get("Expression").map(scalar))
        .collect();
    assert_eq!(expression, vec!["iterator / 1000"]);
}

#[test]
fn dashboard_shows_the_archive_lag_and_trail_modifications() {
    let t = template();
    let metrics = dashboard_metrics(&t);
    let archiver_metrics: BTreeSet<String> = metrics
        .iter()
        .filter(|m| m[0] == ARCHIVER_NAMESPACE)
        .map(|m| {
            assert_eq!(m[2], "FunctionName", "{m:?}: the archiver's only dimension");
            m[1].clone()
        })
        .collect();
    for name in &archiver_metrics {
        assert!(
            ARCHIVER_EMITTED.contains(&name.as_str()),
            "the archiver never emits {name}"
        );
    }
    for name in [
        "TrailModified",
        "ArchiveLagMs",
        "DigestsSealed",
        "SealLagSeconds",
        "SealFailed",
    ] {
        assert!(
            archiver_metrics.contains(name),
            "the dashboard shows {name}"
        );
    }
    // The seal lag's widget marks the alarm's threshold.
    let body = dashboard_body(&t);
    let marked: Vec<u64> = body["widgets"]
        .as_array()
        .expect("widgets")
        .iter()
        .filter_map(|w| w["properties"]["annotations"]["horizontal"].as_array())
        .flatten()
        .filter(|a| a["label"] == "SealLagAlarm")
        .filter_map(|a| a["value"].as_u64())
        .collect();
    assert_eq!(
        marked,
        vec![number(at(props(&t, "SealLagAlarm"), &["Threshold"]))]
    );
    let variables = at(props(&t, "AuditDashboard"), &["DashboardBody", "Fn::Sub"])
        .as_sequence()
        .expect("Fn::Sub long form")[1]
        .clone();
    assert_eq!(
        at(&variables, &["Archiver"]),
        &reference("AuditArchiverFunction")
    );
}

// ---------------------------------------------------------------------------------------------
// Digests (SPEC "Digests"): the signing key, the schedule that seals, the alarms when it stops

fn key_policy_statements(t: &Value) -> Vec<Value> {
    one_or_many(at(props(t, "AuditDigestKey"), &["KeyPolicy", "Statement"]))
}

fn account_root() -> Value {
    let mut sub = Mapping::new();
    sub.insert(
        "Fn::Sub".into(),
        "arn:${AWS::Partition}:iam::${AWS::AccountId}:root".into(),
    );
    Value::Mapping(sub)
}

fn principal(statement: &Value) -> Value {
    let p = at(statement, &["Principal"]);
    p.get("AWS").cloned().unwrap_or_else(|| p.clone())
}

fn actions(statement: &Value) -> BTreeSet<String> {
    one_or_many(at(statement, &["Action"]))
        .iter()
        .map(scalar)
        .collect()
}

#[test]
fn digest_key_is_a_retained_p256_signing_key_whose_deletion_waits_thirty_days() {
    let t = template();
    let key = resource(&t, "AuditDigestKey");
    assert_eq!(at(key, &["Type"]).as_str(), Some("AWS::KMS::Key"));
    // The digests already signed need its public key: neither deleting the stack nor replacing
    // the key schedules its deletion.
    assert_eq!(at(key, &["DeletionPolicy"]).as_str(), Some("Retain"));
    assert_eq!(at(key, &["UpdateReplacePolicy"]).as_str(), Some("Retain"));
    let p = props(&t, "AuditDigestKey");
    assert_eq!(at(p, &["KeySpec"]).as_str(), Some("ECC_NIST_P256"));
    assert_eq!(at(p, &["KeyUsage"]).as_str(), Some("SIGN_VERIFY"));
    // The one algorithm KMS signs with on a P-256 key, which the digests name.
    assert_eq!(SIGNING_ALGORITHM, "ECDSA_SHA_256");
    assert_eq!(
        number(at(p, &["PendingWindowInDays"])),
        30,
        "KMS's longest wait"
    );
    assert!(
        p.get("Enabled").is_none_or(|e| e == &Value::Bool(true)),
        "enabled"
    );
    let alias = props(&t, "AuditDigestKeyAlias");
    assert_eq!(at(alias, &["TargetKeyId"]), &reference("AuditDigestKey"));
    assert!(
        scalar(at(alias, &["AliasName", "Fn::Sub"])).starts_with("alias/${AWS::StackName}-"),
        "one alias per stack"
    );
}

#[test]
fn digest_key_policy_lets_the_archiver_alone_sign_and_nobody_disable_or_delete_it_without_mfa() {
    let t = template();
    let role = get_att("AuditArchiverRole", "Arn");
    let statements = key_policy_statements(&t);
    let allows: Vec<&Value> = statements
        .iter()
        .filter(|s| at(s, &["Effect"]).as_str() == Some("Allow"))
        .collect();
    let denies: Vec<&Value> = statements
        .iter()
        .filter(|s| at(s, &["Effect"]).as_str() == Some("Deny"))
        .collect();
    assert_eq!(allows.len() + denies.len(), statements.len());
    for s in &statements {
        assert!(
            s.get("NotAction").is_none() && s.get("NotPrincipal").is_none(),
            "{s:?}"
        );
        assert_eq!(
            at(s, &["Resource"]).as_str(),
            Some("*"),
            "a key policy's own key"
        );
    }
    // The account administers it through IAM (so that AuditReaderPolicy's kms:GetPublicKey
    // works, and CloudFormation can update it); the archiver's role signs. Nobody else is named.
    let mut allowed: Vec<(Value, BTreeSet<String>)> = allows
        .iter()
        .map(|s| {
            assert!(s.get("Condition").is_none(), "{s:?}");
            (principal(s), actions(s))
        })
        .collect();
    allowed.sort_by_key(|(p, _)| serde_yaml::to_string(p).unwrap());
    let mut expected = vec![
        (account_root(), BTreeSet::from(["kms:*".to_string()])),
        (role.clone(), BTreeSet::from(["kms:Sign".to_string()])),
    ];
    expected.sort_by_key(|(p, _)| serde_yaml::to_string(p).unwrap());
    assert_eq!(allowed, expected);
    // Nobody but the archiver's role signs, whatever IAM or a grant allows.
    let sign_deny: Vec<&&Value> = denies
        .iter()
        .filter(|s| actions(s).contains("kms:Sign"))
        .collect();
    assert_eq!(sign_deny.len(), 1);
    assert_eq!(at(sign_deny[0], &["Principal"]).as_str(), Some("*"));
    assert_eq!(actions(sign_deny[0]), BTreeSet::from(["kms:Sign".into()]));
    assert_eq!(
        at(
            sign_deny[0],
            &["Condition", "ArnNotEquals", "aws:PrincipalArn"]
        ),
        &role
    );
    // Nobody disables it or schedules its deletion without MFA (a request without MFA
    // information, an assumed role's or an access key's, is refused too: BoolIfExists).
    let lifecycle: Vec<&&Value> = denies
        .iter()
        .filter(|s| !actions(s).contains("kms:Sign"))
        .collect();
    assert_eq!(lifecycle.len(), 1);
    assert_eq!(at(lifecycle[0], &["Principal"]).as_str(), Some("*"));
    assert_eq!(
        actions(lifecycle[0]),
        BTreeSet::from(["kms:DisableKey".into(), "kms:ScheduleKeyDeletion".into()])
    );
    assert_eq!(
        scalar(at(
            lifecycle[0],
            &["Condition", "BoolIfExists", "aws:MultiFactorAuthPresent"]
        )),
        "false"
    );
}

#[test]
fn only_the_archiver_may_sign_and_the_readers_fetch_the_public_key() {
    // IAM's side of the key: no policy of the template grants anything on KMS but the
    // archiver's kms:Sign and the operator policies' kms:GetPublicKey, each on the digest key.
    let t = template();
    let mut kms: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (owner, document) in policy_documents(&t) {
        for s in one_or_many(at(&document, &["Statement"])) {
            assert_eq!(at(&s, &["Effect"]).as_str(), Some("Allow"), "{owner}");
            for action in one_or_many(at(&s, &["Action"])).iter().map(scalar) {
                if action.starts_with("kms:") || action.contains('*') {
                    for r in one_or_many(at(&s, &["Resource"])) {
                        assert_eq!(resource_text(&r), DIGEST_KEY, "{owner}: {action}");
                    }
                    kms.entry(action).or_default().insert(owner.clone());
                }
            }
        }
    }
    assert_eq!(
        kms,
        BTreeMap::from([
            (
                "kms:GetPublicKey".to_string(),
                BTreeSet::from(["AuditOperatorPolicy".into(), "AuditReaderPolicy".into()])
            ),
            (
                "kms:Sign".to_string(),
                BTreeSet::from(["AuditArchiverSigningPolicy".into()])
            ),
        ])
    );
}

/// Seconds of an EventBridge `rate(N unit)` expression.
fn rate_seconds(expression: &str) -> u64 {
    let inner = expression
        .strip_prefix("rate(")
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("a rate expression: {expression}"));
    let (n, unit) = inner.split_once(' ').expect("rate(N unit)");
    let n: u64 = n.parse().expect("a number");
    let unit_seconds = match (n, unit) {
        (1, "minute") | (2.., "minutes") => 60,
        (1, "hour") | (2.., "hours") => 3600,
        (1, "day") | (2.., "days") => 86_400,
        _ => panic!("EventBridge refuses {expression} (1 takes the singular, more the plural)"),
    };
    n * unit_seconds
}

#[test]
fn rate_expressions_read_as_eventbridge_reads_them() {
    assert_eq!(rate_seconds("rate(5 minutes)"), 300);
    assert_eq!(rate_seconds("rate(1 hour)"), 3600);
    for bad in ["rate(1 minutes)", "rate(5 minute)", "cron(0/5 * * * ? *)"] {
        assert!(
            std::panic::catch_unwind(|| rate_seconds(bad)).is_err(),
            "{bad}"
        );
    }
}

/// The seal schedule's interval, in seconds.
fn seal_interval(t: &Value) -> u64 {
    rate_seconds(&scalar(at(archiver_event(t, "Schedule"), &["Schedule"])))
}

#[test]
fn a_schedule_seals_idle_periods_within_minutes_of_their_end() {
    let t = template();
    let schedule = archiver_event(&t, "Schedule");
    assert_eq!(at(schedule, &["Enabled"]), &Value::Bool(true));
    // An idle hour has no stream record to seal it; the schedule runs whether or not anything
    // was written, and seals a period at most SEAL_DELAY + one interval after its end.
    let interval = seal_interval(&t);
    assert_eq!(interval, 300);
    let period = number(at(
        archiver(&t),
        &["Environment", "Variables", "DIGEST_PERIOD_SECONDS"],
    ));
    assert!(
        interval < period,
        "at least one run in every period: {interval} s against {period} s"
    );
    assert!(
        SEAL_DELAY.as_secs() + interval <= 6 * 60,
        "sealed within 6 minutes"
    );
}

#[test]
fn an_alarm_fires_when_sealing_stops_or_falls_behind() {
    let t = template();
    let lag: Vec<&Value> = alarm_metrics_named(&t, "SealLagSeconds");
    assert_eq!(lag.len(), 1, "one alarm on SealLagSeconds");
    let alarm = lag[0];
    assert_eq!(at(alarm, &["Statistic"]).as_str(), Some("Maximum"));
    // A schedule that stopped (or a function that no longer starts) emits nothing: that fires.
    assert_eq!(at(alarm, &["TreatMissingData"]).as_str(), Some("breaching"));
    assert_eq!(
        at(alarm, &["ComparisonOperator"]).as_str(),
        Some("GreaterThanThreshold")
    );
    // On time, the lag stays below period + SEAL_DELAY (+ one run's duration); the threshold
    // leaves two more runs.
    let interval = seal_interval(&t);
    let period = number(at(
        archiver(&t),
        &["Environment", "Variables", "DIGEST_PERIOD_SECONDS"],
    ));
    assert_eq!(
        number(at(alarm, &["Threshold"])),
        period + SEAL_DELAY.as_secs() + 2 * interval
    );
    // Each evaluated window holds several runs: one late run never leaves a window empty (which
    // would be breaching).
    assert!(number(at(alarm, &["Period"])) >= 3 * interval);
    assert_eq!(number(at(alarm, &["EvaluationPeriods"])), 1);
}

#[test]
fn an_alarm_fires_on_the_first_failed_seal() {
    let t = template();
    let failed = alarm_metrics_named(&t, "SealFailed");
    assert_eq!(failed.len(), 1, "one alarm on SealFailed");
    let alarm = failed[0];
    assert_eq!(at(alarm, &["Statistic"]).as_str(), Some("Sum"));
    assert_eq!(number(at(alarm, &["Threshold"])), 1);
    assert_eq!(
        at(alarm, &["ComparisonOperator"]).as_str(),
        Some("GreaterThanOrEqualToThreshold")
    );
    assert_eq!(number(at(alarm, &["EvaluationPeriods"])), 1);
    // No run, no failure: SealLagAlarm is the one that fires on silence.
    assert_eq!(
        at(alarm, &["TreatMissingData"]).as_str(),
        Some("notBreaching")
    );
    assert!(number(at(alarm, &["Period"])) >= seal_interval(&t));
}

/// The alarms whose own metric (not metric math) is the archiver's `name`.
fn alarm_metrics_named<'a>(t: &'a Value, name: &str) -> Vec<&'a Value> {
    alarms(t)
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| {
            p.get("Namespace").map(scalar).as_deref() == Some(ARCHIVER_NAMESPACE)
                && p.get("MetricName").map(scalar).as_deref() == Some(name)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Documentation: the names README.md and docs/*.md give are the template's

/// README.md and every docs/*.md, with their text.
fn documents() -> Vec<(String, String)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut paths = vec![format!("{root}/README.md")];
    let mut docs: Vec<String> = std::fs::read_dir(format!("{root}/docs"))
        .expect("docs/ is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| p.display().to_string())
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
            let short = p
                .trim_start_matches(root)
                .trim_start_matches('/')
                .to_owned();
            (short, text)
        })
        .collect()
}

/// The identifiers a Markdown text names: inline code spans (`AuditQueue`) outside code blocks,
/// and placeholders (<AuditQueueUrl>) anywhere; only single CamelCase words of two parts or more
/// (`QueueName`, not `Arn`).
fn named_identifiers(text: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut names = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            prose.push_str(line);
            prose.push('\n');
        }
        names.extend(
            line.split('<')
                .skip(1)
                .filter_map(|rest| rest.split_once('>').map(|(name, _)| name.to_owned())),
        );
    }
    names.extend(prose.split('`').skip(1).step_by(2).map(str::to_owned));
    names.retain(|n| {
        n.len() > 1
            && n.starts_with(|c: char| c.is_ascii_uppercase())
            && n.chars().all(|c| c.is_ascii_alphanumeric())
            && n.chars().any(|c| c.is_ascii_lowercase())
            && n.chars().filter(char::is_ascii_uppercase).count() >= 2
    });
    names
}

fn section_names(t: &Value, section: &str) -> BTreeSet<String> {
    t.get(section)
        .and_then(Value::as_mapping)
        .map(|m| m.keys().map(scalar).collect())
        .unwrap_or_default()
}

/// Why a name that looks like one of the template's is not, or None when it is (or does not
/// look like one). Audit*: a resource, output or parameter (or the table's default name, or a
/// function's metric namespace); *Url and *Arn: an output or a parameter; *Alarm: an alarm.
fn unknown_template_name(t: &Value, name: &str) -> Option<&'static str> {
    let resources = section_names(t, "Resources");
    let outputs = section_names(t, "Outputs");
    let parameters = section_names(t, "Parameters");
    let table_default = scalar(at(parameter(t, "TableName"), &["Default"]));
    if name.ends_with("Url") || name.ends_with("Arn") {
        return (!outputs.contains(name) && !parameters.contains(name))
            .then_some("no output or parameter of that name");
    }
    if name.ends_with("Alarm") {
        let alarm = resources.contains(name)
            && at(resource(t, name), &["Type"]).as_str() == Some("AWS::CloudWatch::Alarm");
        return (!alarm).then_some("no alarm of that name");
    }
    if name.starts_with("Audit") && name[5..].starts_with(|c: char| c.is_ascii_uppercase()) {
        let known = resources.contains(name)
            || outputs.contains(name)
            || parameters.contains(name)
            || name == table_default
            || name == NAMESPACE
            || name == ARCHIVER_NAMESPACE;
        return (!known).then_some("no resource, output or parameter of that name");
    }
    None
}

#[test]
fn names_the_docs_give_are_resources_outputs_and_parameters_of_the_template() {
    let t = template();
    let mut wrong = Vec::new();
    for (path, text) in documents() {
        for name in named_identifiers(&text) {
            if let Some(why) = unknown_template_name(&t, &name) {
                wrong.push(format!("{path}: `{name}`: {why}"));
            }
        }
    }
    wrong.dedup();
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn a_misspelt_template_name_in_the_docs_is_found() {
    let t = template();
    let text = "The dashboard `AuditPipelineDashboard`, its URL the output `DashboardUrl`; \
                alarms `QueueBacklogAlarm` and `QueueBackLogAlarm`, parameter `AlarmTopicArn`.\n\
                ```sh\nauditctl --queue-url <AuditQueueUrl> --dlq-url <AuditDLQUrl>\n```\n\
                Not names: `auditctl`, `PutItem`, `AuditMessages`, `AuditReceiver`, `X`.";
    let found: Vec<String> = named_identifiers(text)
        .into_iter()
        .filter(|n| unknown_template_name(&t, n).is_some())
        .collect();
    assert_eq!(
        found,
        vec![
            "AuditDLQUrl",
            "AuditPipelineDashboard",
            "DashboardUrl",
            "QueueBackLogAlarm"
        ]
    );
}

/// The first column of the table that follows `heading` in `text`, without its backticks.
fn table_first_column(text: &str, heading: &str) -> BTreeSet<String> {
    text.lines()
        .skip_while(|l| l.trim() != heading)
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and its separator
        .filter_map(|l| l.split('|').nth(1))
        .map(|cell| cell.trim().trim_matches('`').to_owned())
        .collect()
}

#[test]
fn deploy_docs_list_every_parameter_and_operations_docs_every_alarm() {
    let t = template();
    let docs = documents();
    let text = |name: &str| {
        docs.iter()
            .find(|(p, _)| p == name)
            .map(|(_, text)| text.clone())
            .unwrap_or_else(|| panic!("{name} exists"))
    };
    assert_eq!(
        table_first_column(&text("docs/deploy.md"), "## Parameters"),
        section_names(&t, "Parameters"),
        "docs/deploy.md's parameter table lists exactly the template's parameters"
    );
    let operations = named_identifiers(&text("docs/operations.md"));
    for (alarm, _) in alarms(&t) {
        assert!(
            operations.contains(&alarm),
            "docs/operations.md's runbook says what {alarm} means"
        );
    }
    let everywhere: BTreeSet<String> = docs
        .iter()
        .flat_map(|(_, text)| named_identifiers(text))
        .collect();
    for output in section_names(&t, "Outputs") {
        assert!(
            everywhere.contains(&output),
            "the docs name output {output}"
        );
    }
}
