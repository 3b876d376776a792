//! Owns the checks of docs/operations.md "Threat model" that live in the template: only the
//! archiver's role writes the archive (the bucket policy), a signature with the digest key by
//! anyone else alarms (ForeignSignRule, ForeignSignAlarm), and archiving that stops alarms
//! (ArchiveStalledAlarm). The key policy's MFA statement is checked in digests.rs.

use std::collections::BTreeSet;

use crate::support::*;
use audit_receiver::telemetry::NAMESPACE;
use serde_json::{Value as Json, json};
use serde_yaml::Value;

/// Where witnesses add their cosignatures: the one prefix the archiver does not write.
const COSIGNATURES: &str = "${AuditArchiveBucket.Arn}/log/cosignatures/*";

/// Every IAM action that writes an archive object, a version's lock, or what is attached to a
/// version (the Service Authorization Reference's object-level Write and Tagging actions of S3,
/// deletes aside: DenyObjectDeletion refuses those to everyone).
const OBJECT_WRITES: &[&str] = &[
    "s3:PutObject",
    "s3:PutObjectRetention",
    "s3:PutObjectLegalHold",
    "s3:BypassGovernanceRetention",
    "s3:PutObjectAcl",
    "s3:PutObjectVersionAcl",
    "s3:PutObjectTagging",
    "s3:PutObjectVersionTagging",
    "s3:DeleteObjectTagging",
    "s3:DeleteObjectVersionTagging",
    "s3:ReplicateObject",
    "s3:ReplicateDelete",
    "s3:ReplicateTags",
    "s3:RestoreObject",
];

fn archive_policy_statements(t: &Value) -> Vec<Value> {
    resources_of_type(t, "AWS::S3::BucketPolicy")
        .iter()
        .filter(|(_, p)| at(p, &["Properties", "Bucket"]) == &reference("AuditArchiveBucket"))
        .flat_map(|(_, p)| one_or_many(at(p, &["Properties", "PolicyDocument", "Statement"])))
        .collect()
}

#[test]
fn archive_bucket_refuses_every_object_write_to_everyone_but_the_archivers_role() {
    let t = template();
    let role = get_att("AuditArchiverRole", "Arn");
    let writes: Vec<Value> = archive_policy_statements(&t)
        .into_iter()
        .filter(|s| {
            one_or_many(at(s, &["Action"]))
                .iter()
                .any(|a| scalar(a) == "s3:PutObject")
                && s.get("NotResource").is_some()
        })
        .collect();
    assert_eq!(writes.len(), 1, "one statement refuses writes: {writes:?}");
    let s = &writes[0];
    assert_eq!(at(s, &["Effect"]).as_str(), Some("Deny"));
    assert_eq!(at(s, &["Principal"]).as_str(), Some("*"), "every principal");
    assert!(s.get("NotAction").is_none() && s.get("NotPrincipal").is_none());
    assert!(s.get("Resource").is_none());
    let resources: Vec<String> = one_or_many(at(s, &["NotResource"]))
        .iter()
        .map(resource_text)
        .collect();
    assert_eq!(
        resources,
        [COSIGNATURES],
        "every object of the bucket but the witnesses' cosignatures"
    );
    let actions: BTreeSet<String> = one_or_many(at(s, &["Action"])).iter().map(scalar).collect();
    let expected: BTreeSet<String> = OBJECT_WRITES.iter().map(|a| a.to_string()).collect();
    assert_eq!(actions, expected);
    // Exactly one exception, the archiver's role, by the ARN IAM evaluates for its sessions (a
    // role session's aws:PrincipalArn is its role's ARN).
    let condition = at(s, &["Condition"]).as_mapping().expect("a condition");
    assert_eq!(condition.len(), 1, "{condition:?}");
    let arn_not_equals = at(s, &["Condition", "ArnNotEquals"])
        .as_mapping()
        .expect("ArnNotEquals");
    assert_eq!(arn_not_equals.len(), 1);
    assert_eq!(
        at(s, &["Condition", "ArnNotEquals", "aws:PrincipalArn"]),
        &role
    );
}

/// The archive policy's statement `sid`.
fn archive_statement(t: &Value, sid: &str) -> Value {
    archive_policy_statements(t)
        .into_iter()
        .find(|s| at(s, &["Sid"]).as_str() == Some(sid))
        .unwrap_or_else(|| panic!("no statement {sid}"))
}

#[test]
fn a_cosignature_is_only_ever_added_never_replaced_or_unlocked() {
    // Whoever holds s3:PutObject on log/cosignatures/* (AuditWitnessPolicy, a witness in another
    // account) adds a cosignature with If-None-Match: *; nobody writes one without it (a newer
    // version would hide it), nor changes a cosignature's lock, tags or ACL.
    let t = template();
    let added = archive_statement(&t, "CosignaturesAreOnlyAdded");
    assert_eq!(at(&added, &["Effect"]).as_str(), Some("Deny"));
    assert_eq!(at(&added, &["Principal"]).as_str(), Some("*"));
    assert_eq!(
        one_or_many(at(&added, &["Action"])),
        [Value::from("s3:PutObject")]
    );
    assert_eq!(resource_text(at(&added, &["Resource"])), COSIGNATURES);
    let condition = at(&added, &["Condition"])
        .as_mapping()
        .expect("a condition");
    assert_eq!(condition.len(), 1, "{condition:?}");
    assert_eq!(
        at(&added, &["Condition", "Null", "s3:if-none-match"]).as_str(),
        Some("true"),
        "refused when the request has no If-None-Match"
    );
    let changed = archive_statement(&t, "CosignaturesAreNeverChanged");
    assert_eq!(at(&changed, &["Effect"]).as_str(), Some("Deny"));
    assert_eq!(at(&changed, &["Principal"]).as_str(), Some("*"));
    assert!(changed.get("Condition").is_none(), "to everyone");
    assert_eq!(resource_text(at(&changed, &["Resource"])), COSIGNATURES);
    let actions: BTreeSet<String> = one_or_many(at(&changed, &["Action"]))
        .iter()
        .map(scalar)
        .collect();
    let expected: BTreeSet<String> = OBJECT_WRITES
        .iter()
        .filter(|a| **a != "s3:PutObject")
        .map(|a| a.to_string())
        .collect();
    assert_eq!(actions, expected);
}

#[test]
fn the_archivers_role_needs_no_object_write_but_put_object() {
    // The role is the one exception above; what it may do there is what its own policies allow:
    // s3:PutObject (with If-None-Match), never a retention, a legal hold, tags or an ACL.
    let t = template();
    let policies = at(props(&t, "AuditArchiverRole"), &["Policies"]);
    let granted: BTreeSet<String> = one_or_many(policies)
        .iter()
        .flat_map(|p| one_or_many(at(p, &["PolicyDocument", "Statement"])))
        .flat_map(|s| one_or_many(at(&s, &["Action"])))
        .map(|a| scalar(&a))
        .collect();
    let writes: BTreeSet<&str> = OBJECT_WRITES
        .iter()
        .copied()
        .filter(|a| granted.contains(*a))
        .collect();
    assert_eq!(writes, BTreeSet::from(["s3:PutObject"]));
}

// ---- ForeignSignRule: EventBridge's pattern matching, for the operators the rule uses --------

const KEY_ARN: &str = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";
const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/audit-AuditArchiverRole-ABC";

/// The template value as JSON, each `Fn::GetAtt` resolved to a deployed ARN (the digest key's,
/// the archiver role's); any other intrinsic function fails the test.
fn resolved(value: &Value) -> Json {
    match value {
        Value::Mapping(m) => {
            if let Some(args) = m.get("Fn::GetAtt") {
                let args = one_or_many(args);
                return match (scalar(&args[0]).as_str(), scalar(&args[1]).as_str()) {
                    ("AuditDigestKey", "Arn") => json!(KEY_ARN),
                    ("AuditArchiverRole", "Arn") => json!(ROLE_ARN),
                    other => panic!("the pattern names {other:?}"),
                };
            }
            assert!(
                !m.keys()
                    .any(|k| scalar(k).starts_with("Fn::") || scalar(k) == "Ref"),
                "{m:?}"
            );
            Json::Object(m.iter().map(|(k, v)| (scalar(k), resolved(v))).collect())
        }
        Value::Sequence(s) => Json::Array(s.iter().map(resolved).collect()),
        Value::String(s) => json!(s),
        Value::Bool(b) => json!(b),
        Value::Number(n) => serde_json::to_value(n).expect("a number"),
        Value::Null => Json::Null,
        Value::Tagged(t) => panic!("a short-form intrinsic in the pattern: {t:?}"),
    }
}

/// Whether one pattern value (a list of matchers) matches the event's field (absent: None).
fn matches_values(matchers: &Json, field: Option<&Json>) -> bool {
    let values: Vec<&Json> = match field {
        Some(Json::Array(items)) => items.iter().collect(),
        Some(v) => vec![v],
        None => vec![],
    };
    matchers
        .as_array()
        .expect("a pattern's leaf is a list")
        .iter()
        .any(|m| match m {
            Json::Object(op) if op.contains_key("exists") => {
                op["exists"].as_bool().expect("exists: bool") == field.is_some()
            }
            Json::Object(op) if op.contains_key("anything-but") => {
                let excluded = match &op["anything-but"] {
                    Json::Array(a) => a.clone(),
                    v => vec![v.clone()],
                };
                // EventBridge: anything-but matches a present field whose value is none of them.
                !values.is_empty() && values.iter().all(|v| !excluded.contains(v))
            }
            Json::Object(op) => panic!("an operator this check does not know: {op:?}"),
            exact => values.contains(&exact),
        })
}

/// EventBridge's matching of `pattern` against `event` (fields AND, `$or` any of its patterns, a
/// nested object against an object or against every object of an array).
fn matches(pattern: &Json, event: Option<&Json>) -> bool {
    let pattern = pattern.as_object().expect("a pattern is an object");
    pattern.iter().all(|(key, sub)| {
        if key == "$or" {
            return sub
                .as_array()
                .expect("$or lists patterns")
                .iter()
                .any(|p| matches(p, event));
        }
        let field = event.and_then(|e| e.get(key));
        match sub {
            Json::Object(_) => match field {
                Some(Json::Array(items)) => items.iter().any(|i| matches(sub, Some(i))),
                other => matches(sub, other),
            },
            _ => matches_values(sub, field),
        }
    })
}

/// CloudTrail's record of a kms:Sign call as EventBridge delivers it.
fn sign_event(event_name: &str, key: &str, identity: Json) -> Json {
    json!({
        "version": "0",
        "source": "aws.kms",
        "detail-type": "AWS API Call via CloudTrail",
        "detail": {
            "eventVersion": "1.09",
            "userIdentity": identity,
            "eventSource": "kms.amazonaws.com",
            "eventName": event_name,
            "readOnly": true,
            "managementEvent": true,
            "eventCategory": "Management",
            "requestParameters": {"keyId": "alias/whatever", "messageType": "DIGEST",
                                  "signingAlgorithm": "ECDSA_SHA_256"},
            "resources": [{"accountId": "123456789012", "type": "AWS::KMS::Key", "ARN": key}]
        }
    })
}

fn role_session(role_arn: &str, role_name: &str) -> Json {
    json!({
        "type": "AssumedRole",
        "principalId": "AROAEXAMPLE:audit-archiver",
        "arn": format!("arn:aws:sts::123456789012:assumed-role/{role_name}/audit-archiver"),
        "accountId": "123456789012",
        "sessionContext": {
            "sessionIssuer": {"type": "Role", "principalId": "AROAEXAMPLE", "arn": role_arn,
                              "accountId": "123456789012", "userName": role_name},
            "attributes": {"creationDate": "2026-11-24T19:00:00Z", "mfaAuthenticated": "false"}
        }
    })
}

#[test]
fn foreign_sign_rule_matches_a_sign_with_the_digest_key_by_anyone_but_the_archivers_role() {
    let t = template();
    let rule = props(&t, "ForeignSignRule");
    assert_eq!(
        at(resource(&t, "ForeignSignRule"), &["Type"]).as_str(),
        Some("AWS::Events::Rule")
    );
    // Sign is a read-only management event: a rule merely ENABLED is never matched against one.
    assert_eq!(
        at(rule, &["State"]).as_str(),
        Some("ENABLED_WITH_ALL_CLOUDTRAIL_MANAGEMENT_EVENTS")
    );
    assert!(
        rule.get("EventBusName").is_none(),
        "CloudTrail delivers to the default bus"
    );
    let pattern = resolved(at(rule, &["EventPattern"]));
    let hit = |event: &Json| matches(&pattern, Some(event));

    let archiver = role_session(ROLE_ARN, "audit-AuditArchiverRole-ABC");
    assert!(
        !hit(&sign_event("Sign", KEY_ARN, archiver.clone())),
        "the archiver signs"
    );
    // Another role, even one whose name starts with the archiver's.
    let other_role = "arn:aws:iam::123456789012:role/audit-AuditArchiverRole-ABC-copy";
    for identity in [
        role_session(other_role, "audit-AuditArchiverRole-ABC-copy"),
        role_session("arn:aws:iam::123456789012:role/admin", "admin"),
        role_session(
            "arn:aws:iam::210987654321:role/audit-AuditArchiverRole-ABC",
            "audit-AuditArchiverRole-ABC",
        ),
        json!({"type": "IAMUser", "principalId": "AIDAEXAMPLE", "userName": "mallory",
               "arn": "arn:aws:iam::123456789012:user/mallory", "accountId": "123456789012"}),
        json!({"type": "Root", "principalId": "123456789012",
               "arn": "arn:aws:iam::123456789012:root", "accountId": "123456789012"}),
    ] {
        assert!(
            hit(&sign_event("Sign", KEY_ARN, identity.clone())),
            "{identity}"
        );
        // Only this key, only Sign.
        let other_key = KEY_ARN.replace("1234abcd", "99999999");
        assert!(
            !hit(&sign_event("Sign", &other_key, identity.clone())),
            "{identity}"
        );
        assert!(
            !hit(&sign_event("Verify", KEY_ARN, identity.clone())),
            "{identity}"
        );
        assert!(
            !hit(&sign_event("GetPublicKey", KEY_ARN, identity.clone())),
            "{identity}"
        );
    }
    // The archiver's own Sign on another key is none of this rule's business either.
    assert!(!hit(&sign_event(
        "Sign",
        &KEY_ARN.replace("1234abcd", "99999999"),
        archiver
    )));
}

#[test]
fn foreign_sign_rule_keeps_what_it_matched_in_a_retained_log_group() {
    let t = template();
    let targets = one_or_many(at(props(&t, "ForeignSignRule"), &["Targets"]));
    assert_eq!(targets.len(), 1);
    assert_eq!(
        at(&targets[0], &["Arn"]),
        &get_att("ForeignSignLogGroup", "Arn")
    );
    let group = resource(&t, "ForeignSignLogGroup");
    assert_eq!(at(group, &["DeletionPolicy"]).as_str(), Some("Retain"));
    assert!(number(at(props(&t, "ForeignSignLogGroup"), &["RetentionInDays"])) >= 365);
    let policy = scalar(at(
        props(&t, "ForeignSignLogPolicy"),
        &["PolicyDocument", "Fn::Sub"],
    ));
    let policy: Json = serde_json::from_str(&policy).expect("the log group's policy is JSON");
    let statement = &policy["Statement"][0];
    assert_eq!(
        statement["Resource"], "${ForeignSignLogGroup.Arn}",
        "this log group only"
    );
    assert!(
        statement["Principal"]["Service"]
            .as_array()
            .expect("services")
            .contains(&json!("events.amazonaws.com"))
    );
}

#[test]
fn foreign_sign_alarm_fires_on_the_first_match_within_a_minute() {
    let t = template();
    let alarm = props(&t, "ForeignSignAlarm");
    assert_eq!(at(alarm, &["Namespace"]).as_str(), Some("AWS/Events"));
    assert_eq!(at(alarm, &["MetricName"]).as_str(), Some("TriggeredRules"));
    let dimensions = one_or_many(at(alarm, &["Dimensions"]));
    assert_eq!(dimensions.len(), 1, "the default bus: RuleName alone");
    assert_eq!(at(&dimensions[0], &["Name"]).as_str(), Some("RuleName"));
    assert_eq!(
        at(&dimensions[0], &["Value"]),
        &reference("ForeignSignRule")
    );
    // A sum of 1 or more in a single minute.
    assert!(fires_on_any_message(alarm));
    assert_eq!(number(at(alarm, &["Period"])), 60);
    assert_eq!(number(at(alarm, &["EvaluationPeriods"])), 1);
    assert_eq!(at(alarm, &["Statistic"]).as_str(), Some("Sum"));
    assert_eq!(
        at(alarm, &["TreatMissingData"]).as_str(),
        Some("notBreaching")
    );
}

// ---- ArchiveStalledAlarm: the expression, evaluated as CloudWatch evaluates it ---------------

/// The alarm's metric math for one quarter-hour: `None` is a metric with no datapoint there.
fn stalled(written: Option<f64>, archived: Option<f64>, already: Option<f64>) -> Option<f64> {
    if written.is_none() && archived.is_none() && already.is_none() {
        return None; // no metric has a datapoint: the expression has none either
    }
    let fill = |v: Option<f64>| v.unwrap_or(0.0);
    let condition = fill(written) > 0.0 && fill(archived) + fill(already) == 0.0;
    Some(if condition { 1.0 } else { 0.0 })
}

#[test]
fn archive_stalled_alarm_fires_when_the_receiver_wrote_and_the_archiver_archived_nothing() {
    let t = template();
    let alarm = props(&t, "ArchiveStalledAlarm");
    let metrics = one_or_many(at(alarm, &["Metrics"]));
    let expression: Vec<&Value> = metrics
        .iter()
        .filter(|m| m.get("Expression").is_some())
        .collect();
    assert_eq!(expression.len(), 1);
    assert_eq!(
        scalar(at(expression[0], &["Expression"])),
        "IF(FILL(written, 0) > 0 AND FILL(archived, 0) + FILL(already, 0) == 0, 1, 0)",
        "the expression `stalled` above evaluates"
    );
    let stat = |id: &str| {
        let m = metrics
            .iter()
            .find(|m| at(m, &["Id"]).as_str() == Some(id))
            .unwrap_or_else(|| panic!("no metric {id}"));
        assert_eq!(at(m, &["ReturnData"]), &Value::Bool(false), "{id}");
        at(m, &["MetricStat"]).clone()
    };
    for (id, namespace, name, function) in [
        ("written", NAMESPACE, "Written", "AuditReceiverFunction"),
        (
            "archived",
            ARCHIVER_NAMESPACE,
            "Archived",
            "AuditArchiverFunction",
        ),
        (
            "already",
            ARCHIVER_NAMESPACE,
            "AlreadyArchived",
            "AuditArchiverFunction",
        ),
    ] {
        let s = stat(id);
        assert_eq!(scalar(at(&s, &["Metric", "Namespace"])), namespace, "{id}");
        assert_eq!(scalar(at(&s, &["Metric", "MetricName"])), name, "{id}");
        let dimensions = one_or_many(at(&s, &["Metric", "Dimensions"]));
        assert_eq!(dimensions.len(), 1);
        assert_eq!(at(&dimensions[0], &["Name"]).as_str(), Some("FunctionName"));
        assert_eq!(at(&dimensions[0], &["Value"]), &reference(function));
        assert_eq!(at(&s, &["Stat"]).as_str(), Some("Sum"), "{id}");
        // Fifteen minutes (docs/deploy.md "The digest key: stack updates and ForeignSignAlarm":
        // "15-minute sums").
        assert_eq!(number(at(&s, &["Period"])), 900, "{id}");
    }
    assert_eq!(number(at(alarm, &["EvaluationPeriods"])), 1);
    assert_eq!(number(at(alarm, &["Threshold"])), 1);
    assert_eq!(
        at(alarm, &["ComparisonOperator"]).as_str(),
        Some("GreaterThanOrEqualToThreshold")
    );
    // No datapoint at all (an idle stack) is not an alarm.
    assert_eq!(
        at(alarm, &["TreatMissingData"]).as_str(),
        Some("notBreaching")
    );

    // What it reports, quarter-hour by quarter-hour.
    let breaching = |v: Option<f64>| v.is_some_and(|v| v >= 1.0);
    assert!(
        breaching(stalled(Some(12.0), None, None)),
        "wrote, archiver silent"
    );
    assert!(
        breaching(stalled(Some(12.0), Some(0.0), Some(0.0))),
        "wrote, sealing runs only"
    );
    assert!(
        !breaching(stalled(Some(12.0), Some(12.0), None)),
        "archived"
    );
    assert!(
        !breaching(stalled(Some(12.0), None, Some(3.0))),
        "a retry found them written"
    );
    assert!(
        !breaching(stalled(Some(0.0), None, None)),
        "invoked, wrote nothing"
    );
    assert!(
        !breaching(stalled(None, Some(0.0), None)),
        "nothing written, sealing runs"
    );
    assert!(!breaching(stalled(None, None, None)), "idle");
    assert!(
        !breaching(stalled(None, Some(5.0), None)),
        "archiving what came earlier"
    );
}

#[test]
fn the_dashboard_shows_what_the_insider_alarms_watch() {
    let t = template();
    let body = scalar(
        &one_or_many(at(
            props(&t, "AuditDashboard"),
            &["DashboardBody", "Fn::Sub"],
        ))[0],
    );
    for line in [
        r#"["AuditReceiver","Written","FunctionName","${Function}""#,
        r#"["AuditArchiver","Archived","FunctionName","${Archiver}""#,
        r#"["AuditArchiver","AlreadyArchived","FunctionName","${Archiver}""#,
        r#"["AWS/Events","TriggeredRules","RuleName","${ForeignSignRule}""#,
    ] {
        assert!(body.contains(line), "the dashboard has no {line}");
    }
}
