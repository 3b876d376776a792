//! Owns the checks on the alarms and the dashboard: what they watch, in which namespaces and
//! dimensions, and that the functions emit it. Must not know how the metrics are computed.

use std::collections::BTreeSet;

use crate::support::*;
use audit_model::Reason;
use audit_receiver::telemetry::NAMESPACE;
use serde_yaml::Value;

fn of_the_dead_letter_queue(metric: &Value) -> bool {
    of_queue(metric, "AuditDeadLetterQueue")
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
    // crates/receiver/src/telemetry.rs emits EMF under NAMESPACE with the single dimension
    // FunctionName; an alarm with another namespace or dimension set would watch a metric that
    // never exists.
    let t = template();
    let own = alarm_metrics(&t, NAMESPACE);
    // Written: ArchiveStalledAlarm (insider.rs), the receiver wrote and the archiver did not.
    let emitted = ["Failed", "DeadLettered", "Written"];
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

/// The metrics crates/receiver/src/telemetry.rs emits under NAMESPACE (besides `Failed.<reason>`
/// and `DeadLettered.<reason>`, one per reason code of crates/receiver/src/deadletter.rs).
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

/// The dashboard body with every parameter at its default, `${...}` substitutions of names
/// replaced by placeholders, as JSON.
fn dashboard_body(t: &Value) -> serde_json::Value {
    dashboard_body_with(t, &params_with(t, &[]))
}

/// The dashboard body under `params`: a variable that is a text (a lookup index's line, or
/// nothing, by its condition) is put in, its own `${...}` read `X`; any other reads `X`.
fn dashboard_body_with(t: &Value, params: &Params) -> serde_json::Value {
    let sub = at(props(t, "AuditDashboard"), &["DashboardBody", "Fn::Sub"]);
    let template = at(sub, &[])
        .as_sequence()
        .expect("Fn::Sub long form: [text, variables]");
    let text = scalar(&template[0]);
    let variables = template[1].as_mapping().expect("variables");
    let mut body = text.replace("${AWS::Region}", "us-east-1");
    let names = placeholders();
    for (name, value) in variables {
        let value = under(t, value, params).expect("a variable's value");
        let put = match (value.as_str(), value.get("Fn::Sub").and_then(Value::as_str)) {
            (Some(text), _) | (None, Some(text)) => names(text),
            _ => "X".to_owned(),
        };
        body = body.replace(&format!("${{{}}}", scalar(name)), &put);
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
    metrics_of(&dashboard_body(t))
}

/// Every metric of a dashboard body that is not a search, as its strings.
fn metrics_of(body: &serde_json::Value) -> Vec<Vec<String>> {
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
        &default_props(&t, "AuditMessagesTable"),
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

/// `${Name}` substitutions in a text replaced by `X`.
fn placeholders() -> impl Fn(&str) -> String {
    |text: &str| {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let end = rest[start..].find('}').expect("a closed ${...}") + start;
            out.push('X');
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        out
    }
}

#[test]
fn dashboard_shows_the_write_throttles_of_exactly_the_lookup_indexes_the_table_has() {
    // LookupIndexes: an index left out has no line (CloudWatch would draw an empty one), and the
    // body stays JSON whichever are there.
    let t = template();
    for value in allowed_values(&t, "LookupIndexes") {
        let params = params_with(&t, &[("LookupIndexes", value.clone())]);
        let table = under(&t, props(&t, "AuditMessagesTable"), &params).expect("table");
        let indexes: Vec<String> = one_or_many(at(&table, &["GlobalSecondaryIndexes"]))
            .iter()
            .map(|index| scalar(at(index, &["IndexName"])))
            .collect();
        let shown: Vec<String> = metrics_of(&dashboard_body_with(&t, &params))
            .into_iter()
            .filter(|m| m.len() > 5 && m[4] == "GlobalSecondaryIndexName")
            .map(|m| m[5].clone())
            .collect();
        assert_eq!(shown, indexes, "LookupIndexes={value}");
        let expected: Vec<&str> = std::iter::once("byAuditTime")
            .chain(
                [
                    ("actor", "byActor"),
                    ("action", "byAction"),
                    ("resource", "byResource"),
                ]
                .into_iter()
                .filter(|(field, _)| value.split(',').any(|v| v == *field))
                .map(|(_, index)| index),
            )
            .collect();
        assert_eq!(indexes, expected, "LookupIndexes={value}");
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
fn an_alarm_fires_on_the_first_archive_conflict_within_a_minute() {
    // crates/archiver emits ArchiveConflict when a name it meant to write holds other bytes or
    // a marker or object it read is not what it claims: someone else writes to the bucket.
    let t = template();
    let watching: Vec<(String, &Value)> = alarms(&t)
        .into_iter()
        .filter(|(_, p)| {
            p.get("Namespace").map(scalar).as_deref() == Some(ARCHIVER_NAMESPACE)
                && p.get("MetricName").map(scalar).as_deref() == Some("ArchiveConflict")
        })
        .collect();
    assert_eq!(watching.len(), 1, "one alarm on ArchiveConflict");
    assert_eq!(watching[0].0, "ArchiveConflictAlarm");
    assert!(fires_within_a_minute_on_the_first(watching[0].1));
}

#[test]
fn an_alarm_fires_on_the_first_foreign_item_within_a_minute() {
    // crates/archiver emits ForeignItem for each INSERT of an item the receiver did not attest
    // (docs/archive.md "Items attested at birth"): someone else writes to the table.
    let t = template();
    let watching: Vec<(String, &Value)> = alarms(&t)
        .into_iter()
        .filter(|(_, p)| {
            p.get("Namespace").map(scalar).as_deref() == Some(ARCHIVER_NAMESPACE)
                && p.get("MetricName").map(scalar).as_deref() == Some("ForeignItem")
        })
        .collect();
    assert_eq!(watching.len(), 1, "one alarm on ForeignItem");
    assert_eq!(watching[0].0, "ForeignItemAlarm");
    assert!(fires_within_a_minute_on_the_first(watching[0].1));
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
fn dashboard_shows_the_archive_lag_trail_modifications_and_foreign_items() {
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
        "ForeignItem",
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

#[test]
fn the_access_queue_is_watched_as_the_audit_queue_is() {
    // auditctl's access events wait in AuditAccessQueue: its backlog alarms with the same
    // threshold as AuditQueue's, and the dashboard shows its depth and age beside AuditQueue's.
    let t = template();
    let age_alarm = |queue: &str| -> Vec<Value> {
        alarms(&t)
            .into_iter()
            .filter(|(_, p)| {
                of_queue(p, queue)
                    && p.get("MetricName").and_then(Value::as_str)
                        == Some("ApproximateAgeOfOldestMessage")
            })
            .map(|(_, p)| {
                let mut p = p.as_mapping().expect("alarm properties").clone();
                for varying in ["AlarmDescription", "Dimensions"] {
                    p.remove(varying);
                }
                Value::Mapping(p)
            })
            .collect()
    };
    let (queue, access) = (age_alarm("AuditQueue"), age_alarm("AuditAccessQueue"));
    assert_eq!(queue.len(), 1, "one backlog alarm on AuditQueue");
    assert_eq!(
        access, queue,
        "the access queue's backlog alarm is AuditQueue's"
    );

    let sub = at(props(&t, "AuditDashboard"), &["DashboardBody", "Fn::Sub"])
        .as_sequence()
        .expect("Fn::Sub long form");
    let text = scalar(&sub[0]);
    let variable = |queue: &str| {
        sub[1]
            .as_mapping()
            .expect("variables")
            .iter()
            .find(|(_, v)| *v == &get_att(queue, "QueueName"))
            .map(|(k, _)| scalar(k))
            .unwrap_or_else(|| panic!("the dashboard has no variable for {queue}"))
    };
    // The SQS metrics shown for a queue, by the queue's variable in the body's text.
    let shown = |queue: &str| -> BTreeSet<&str> {
        let dimension = format!("\"QueueName\",\"${{{}}}\"", variable(queue));
        [
            "ApproximateNumberOfMessagesVisible",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateAgeOfOldestMessage",
        ]
        .into_iter()
        .filter(|m| text.contains(&format!("[\"AWS/SQS\",\"{m}\",{dimension}")))
        .collect()
    };
    assert!(shown("AuditQueue").contains("ApproximateAgeOfOldestMessage"));
    assert_eq!(shown("AuditAccessQueue"), shown("AuditQueue"));
}
