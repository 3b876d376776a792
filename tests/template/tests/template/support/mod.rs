//! Owns reading template.yaml (long-form intrinsics, paths, scalars) and evaluating it for any
//! parameter values; shared by every check. Must not know what any one check asserts.

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml::{Mapping, Value};

/// SQS limits: the longest retention (14 days).
pub const SQS_MAX_RETENTION_SECONDS: u64 = 1_209_600;

/// template.yaml with every short-form tag (`!Ref X`) rewritten to its long form (`Ref: X`),
/// so that the checks below see one shape whichever form the template uses.
pub fn template() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../template.yaml");
    let text = std::fs::read_to_string(path).expect("template.yaml is readable");
    long_form(serde_yaml::from_str(&text).expect("template.yaml is valid YAML"))
}

pub fn long_form(value: Value) -> Value {
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
pub fn at<'a>(value: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(value, |v, key| {
        v.get(*key)
            .unwrap_or_else(|| panic!("template.yaml has no {}", path.join(".")))
    })
}

pub fn resource<'a>(t: &'a Value, name: &str) -> &'a Value {
    at(t, &["Resources", name])
}

pub fn props<'a>(t: &'a Value, name: &str) -> &'a Value {
    at(t, &["Resources", name, "Properties"])
}

pub fn resources_of_type<'a>(t: &'a Value, kind: &str) -> Vec<(String, &'a Value)> {
    at(t, &["Resources"])
        .as_mapping()
        .expect("Resources is a mapping")
        .iter()
        .filter(|(_, r)| r.get("Type").and_then(Value::as_str) == Some(kind))
        .map(|(k, r)| (scalar(k), r))
        .collect()
}

/// A YAML scalar as CloudFormation sees it: a string (numbers and booleans included).
pub fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => panic!("expected a scalar, found {other:?}"),
    }
}

pub fn number(value: &Value) -> u64 {
    scalar(value)
        .parse()
        .unwrap_or_else(|_| panic!("expected a whole number, found {value:?}"))
}

pub fn reference(name: &str) -> Value {
    serde_yaml::from_str(&format!("{{Ref: {name}}}")).expect("literal YAML")
}

pub fn get_att(resource: &str, attribute: &str) -> Value {
    serde_yaml::from_str(&format!("{{Fn::GetAtt: [{resource}, {attribute}]}}"))
        .expect("literal YAML")
}

/// A single item or a list, as IAM and CloudFormation both accept, as a list.
pub fn one_or_many(value: &Value) -> Vec<Value> {
    match value {
        Value::Sequence(items) => items.clone(),
        item => vec![item.clone()],
    }
}

pub fn parameter<'a>(t: &'a Value, name: &str) -> &'a Value {
    at(t, &["Parameters", name])
}

/// The name of the parameter a property refers to, if it is `Ref: <parameter>`.
pub fn parameter_ref(t: &Value, value: &Value) -> Option<String> {
    let name = value.get("Ref").map(scalar)?;
    at(t, &["Parameters"]).get(name.as_str()).map(|_| name)
}

/// Every value a parameter can take, for parameters restricted by AllowedValues.
pub fn allowed_values(t: &Value, name: &str) -> Vec<String> {
    at(parameter(t, name), &["AllowedValues"])
        .as_sequence()
        .unwrap_or_else(|| panic!("parameter {name} lists no AllowedValues"))
        .iter()
        .map(scalar)
        .collect()
}

/// The smallest and largest values a numeric parameter can take, and its default.
pub fn numeric_range(t: &Value, name: &str) -> (u64, u64, u64) {
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
pub fn numeric_values(t: &Value, value: &Value) -> Vec<u64> {
    match parameter_ref(t, value) {
        Some(name) => {
            let (min, max, default) = numeric_range(t, &name);
            vec![min, default, max]
        }
        None => vec![number(value)],
    }
}

pub type Params = BTreeMap<String, String>;

/// Evaluates the few intrinsic functions the template's sizing and rules use.
pub fn eval(t: &Value, value: &Value, params: &Params) -> Value {
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
        Some("Condition") => Value::Bool(condition(t, &scalar(arg), params)),
        Some("Fn::Not") => Value::Bool(!truth(t, &args()[0], params)),
        Some("Fn::And") => Value::Bool(args().iter().all(|a| truth(t, a, params))),
        Some("Fn::Or") => Value::Bool(args().iter().any(|a| truth(t, a, params))),
        _ => value.clone(),
    }
}

pub fn truth(t: &Value, value: &Value, params: &Params) -> bool {
    eval(t, value, params)
        .as_bool()
        .unwrap_or_else(|| panic!("{value:?} is not a condition"))
}

/// Whether the template's condition `name` holds under `params`.
pub fn condition(t: &Value, name: &str, params: &Params) -> bool {
    truth(t, at(t, &["Conditions", name]), params)
}

/// Whether resource `name` is created under `params` (its `Condition`, if any, holds).
pub fn created(t: &Value, name: &str, params: &Params) -> bool {
    resource(t, name)
        .get("Condition")
        .is_none_or(|c| condition(t, &scalar(c), params))
}

/// `value` as CloudFormation deploys it under `params`, as far as conditions go: each `Fn::If`
/// replaced by the branch its condition picks, `Ref: AWS::NoValue` left out of lists and
/// mappings (None for the value itself); other functions kept as written.
pub fn under(t: &Value, value: &Value, params: &Params) -> Option<Value> {
    match value {
        Value::Mapping(map) if map.len() == 1 => {
            let (key, arg) = map.iter().next().expect("one entry");
            match key.as_str() {
                Some("Fn::If") => {
                    let arg = arg.as_sequence().expect("Fn::If takes a list");
                    let branch = if condition(t, &scalar(&arg[0]), params) {
                        &arg[1]
                    } else {
                        &arg[2]
                    };
                    under(t, branch, params)
                }
                Some("Ref") if arg.as_str() == Some("AWS::NoValue") => None,
                _ => Some(Value::Mapping(
                    map.iter()
                        .filter_map(|(k, v)| under(t, v, params).map(|v| (k.clone(), v)))
                        .collect(),
                )),
            }
        }
        Value::Mapping(map) => Some(Value::Mapping(
            map.iter()
                .filter_map(|(k, v)| under(t, v, params).map(|v| (k.clone(), v)))
                .collect(),
        )),
        Value::Sequence(items) => Some(Value::Sequence(
            items.iter().filter_map(|v| under(t, v, params)).collect(),
        )),
        other => Some(other.clone()),
    }
}

/// A resource's properties as deployed with every parameter at its default.
pub fn default_props(t: &Value, name: &str) -> Value {
    under(t, props(t, name), &params_with(t, &[])).expect("properties")
}

/// Every parameter at its default, then `overrides`.
pub fn params_with(t: &Value, overrides: &[(&str, String)]) -> Params {
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
pub fn rules_accept(t: &Value, params: &Params) -> bool {
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

pub fn function(t: &Value) -> &Value {
    props(t, "AuditReceiverFunction")
}

pub fn alarms(t: &Value) -> Vec<(String, &Value)> {
    resources_of_type(t, "AWS::CloudWatch::Alarm")
        .into_iter()
        .map(|(name, a)| (name, at(a, &["Properties"])))
        .collect()
}

/// Whether a metric (an alarm's properties, or a `MetricStat.Metric`) is one of `queue`'s SQS
/// metrics.
pub fn of_queue(metric: &Value, queue: &str) -> bool {
    metric.get("Namespace").and_then(Value::as_str) == Some("AWS/SQS")
        && one_or_many(at(metric, &["Dimensions"])).iter().any(|d| {
            at(d, &["Name"]).as_str() == Some("QueueName")
                && at(d, &["Value"]) == &get_att(queue, "QueueName")
        })
}

/// Whether the alarm fires on a value of 1 or more and stays quiet at 0.
pub fn fires_on_any_message(alarm: &Value) -> bool {
    match at(alarm, &["ComparisonOperator"]).as_str() {
        Some("GreaterThanThreshold") => number(at(alarm, &["Threshold"])) == 0,
        Some("GreaterThanOrEqualToThreshold") => number(at(alarm, &["Threshold"])) == 1,
        _ => false,
    }
}

/// Whether an alarm of the template fires while `queue` holds any message, visible or in flight:
/// a metric-math sum of its two depth metrics (gaps filled with 0), at their Maximum, above 0.
pub fn alarms_while_the_queue_holds_anything(t: &Value, queue: &str) -> bool {
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

/// A policy resource as the template writes it: `${X.Arn}` for `Fn::GetAtt: [X, Arn]`, the text
/// of an `Fn::Sub`, or the literal.
pub fn resource_text(value: &Value) -> String {
    if let Some(args) = value.get("Fn::GetAtt") {
        let args = one_or_many(args);
        return format!("${{{}.{}}}", scalar(&args[0]), scalar(&args[1]));
    }
    if let Some(text) = value.get("Fn::Sub") {
        return scalar(text);
    }
    scalar(value)
}

/// The archiver's EMF namespace, with the single dimension FunctionName, and the metrics it
/// emits there (crates/archiver/src/telemetry.rs; a test in archiver.rs reads that file, so that the
/// two cannot drift apart without a failing test).
pub const ARCHIVER_NAMESPACE: &str = "AuditArchiver";

pub const ARCHIVER_EMITTED: &[&str] = &[
    "BatchSize",
    "Archived",
    "AlreadyArchived",
    "Expired",
    "TrailModified",
    "Failed",
    "ArchiveConflict",
    "ForeignItem",
    "ArchivedBytes",
    "ArchiveLagMs",
    "DurationMs",
    // On each scheduled run (crates/archiver: sealing the digests).
    "DigestsSealed",
    "SealLagSeconds",
    "SealFailed",
    "LateObject",
    "Unattested",
];

pub fn archiver(t: &Value) -> &Value {
    props(t, "AuditArchiverFunction")
}

/// The archiver's event of `kind` (its only one of that kind).
pub fn archiver_event<'a>(t: &'a Value, kind: &str) -> &'a Value {
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
pub fn stream_event(t: &Value) -> &Value {
    archiver_event(t, "DynamoDB")
}
