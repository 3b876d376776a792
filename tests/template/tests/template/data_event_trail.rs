//! Owns the checks on the optional CloudTrail trail of data events (docs/deploy.md "Reads outside
//! auditctl: the data-event trail"): its parameter and condition, what it selects, and its bucket.
//! Must not know what CloudTrail does with the events.

use std::collections::BTreeSet;

use crate::support::*;
use serde_yaml::Value;

const PARAMETER: &str = "EnableDataEventTrail";

/// The condition the trail's resources carry.
fn condition(t: &Value) -> String {
    scalar(at(resource(t, "AuditDataEventTrail"), &["Condition"]))
}

#[test]
fn the_trail_is_off_by_default_and_on_only_when_asked() {
    let t = template();
    assert_eq!(scalar(at(parameter(&t, PARAMETER), &["Default"])), "false");
    assert_eq!(
        allowed_values(&t, PARAMETER),
        vec!["true".to_string(), "false".to_string()]
    );
    let cond = at(&t, &["Conditions", &condition(&t)]);
    assert!(!truth(&t, cond, &params_with(&t, &[])), "off by default");
    assert!(truth(
        &t,
        cond,
        &params_with(&t, &[(PARAMETER, "true".into())])
    ));
    assert!(!truth(
        &t,
        cond,
        &params_with(&t, &[(PARAMETER, "false".into())])
    ));
}

/// The resources that exist only under `condition`, and those that refer to one of them.
fn conditional(t: &Value, condition: &str) -> BTreeSet<String> {
    at(t, &["Resources"])
        .as_mapping()
        .expect("Resources")
        .iter()
        .filter(|(_, r)| r.get("Condition").map(scalar).as_deref() == Some(condition))
        .map(|(k, _)| scalar(k))
        .collect()
}

/// Whether `value` names `name` (Ref, GetAtt, or in an Fn::Sub text).
fn mentions(value: &Value, name: &str) -> bool {
    match value {
        Value::Mapping(m) => m.iter().any(|(k, v)| match k.as_str() {
            Some("Ref") => v.as_str() == Some(name),
            Some("Fn::GetAtt") => one_or_many(v).first().map(scalar).as_deref() == Some(name),
            Some("Fn::Sub") => {
                let text = match v {
                    Value::Sequence(args) => scalar(&args[0]),
                    other => scalar(other),
                };
                text.contains(&format!("${{{name}}}"))
                    || text.contains(&format!("${{{name}."))
                    || mentions(v, name)
            }
            _ => mentions(v, name),
        }),
        Value::Sequence(items) => items.iter().any(|v| mentions(v, name)),
        _ => false,
    }
}

#[test]
fn the_trail_its_bucket_and_what_names_them_exist_only_under_the_condition() {
    let t = template();
    let cond = condition(&t);
    assert_eq!(
        conditional(&t, &cond),
        BTreeSet::from([
            "AuditDataEventBucket".to_string(),
            "AuditDataEventBucketPolicy".to_string(),
            "AuditDataEventTrail".to_string(),
        ])
    );
    // Anything that names one of them carries the same condition (CloudFormation refuses a
    // reference to a resource that may not exist).
    for section in ["Resources", "Outputs"] {
        for (name, value) in at(&t, &[section]).as_mapping().expect(section) {
            let named: Vec<String> = conditional(&t, &cond)
                .into_iter()
                .filter(|c| mentions(value, c))
                .collect();
            if !named.is_empty() {
                assert_eq!(
                    value.get("Condition").map(scalar).as_deref(),
                    Some(cond.as_str()),
                    "{section}.{} names {named:?}",
                    scalar(name)
                );
            }
        }
    }
}

/// The trail's advanced event selectors, each as (resources.type, operator, resources.ARN
/// values as the template writes them).
fn selected(t: &Value) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for selector in one_or_many(at(
        props(t, "AuditDataEventTrail"),
        &["AdvancedEventSelectors"],
    )) {
        let fields = one_or_many(at(&selector, &["FieldSelectors"]));
        let field = |name: &str| {
            fields
                .iter()
                .find(|f| at(f, &["Field"]).as_str() == Some(name))
                .cloned()
        };
        let category = field("eventCategory").expect("eventCategory is required");
        assert_eq!(
            one_or_many(at(&category, &["Equals"])),
            vec![Value::from("Data")],
            "data events only: management events are the organisation trail's"
        );
        assert!(
            field("readOnly").is_none(),
            "reads and writes both: a write behind the function's back is what TrailModifiedAlarm \
             asks about"
        );
        let kind = scalar(
            &one_or_many(at(
                &field("resources.type").expect("resources.type"),
                &["Equals"],
            ))[0],
        );
        let arn = field("resources.ARN").expect("scoped to this stack's resources");
        for operator in ["Equals", "StartsWith"] {
            for value in arn.get(operator).map(one_or_many).unwrap_or_default() {
                out.insert((kind.clone(), operator.to_string(), resource_text(&value)));
            }
        }
        for key in arn.as_mapping().expect("a field selector").keys() {
            assert!(
                ["Field", "Equals", "StartsWith"].contains(&scalar(key).as_str()),
                "resources.ARN {key:?}"
            );
        }
    }
    out
}

#[test]
fn the_trail_records_data_events_on_the_table_its_indexes_and_the_archive() {
    let t = template();
    let table = "AWS::DynamoDB::Table".to_string();
    assert_eq!(
        selected(&t),
        BTreeSet::from([
            (
                table.clone(),
                "Equals".into(),
                "${AuditMessagesTable.Arn}".into()
            ),
            // An index's reads, should CloudTrail name the index under the table's ARN.
            (
                table,
                "StartsWith".into(),
                "${AuditMessagesTable.Arn}/".into()
            ),
            (
                "AWS::S3::Object".into(),
                "StartsWith".into(),
                "${AuditArchiveBucket.Arn}/".into()
            ),
        ])
    );
    let p = props(&t, "AuditDataEventTrail");
    assert_eq!(at(p, &["IsLogging"]), &Value::Bool(true));
    assert_eq!(
        at(p, &["EnableLogFileValidation"]),
        &Value::Bool(true),
        "CloudTrail's own digests: a deleted or changed log file is found"
    );
    assert!(p.get("EventSelectors").is_none(), "advanced selectors only");
    assert_eq!(at(p, &["S3BucketName"]), &reference("AuditDataEventBucket"));
    assert_eq!(
        scalar(at(resource(&t, "AuditDataEventTrail"), &["DependsOn"])),
        "AuditDataEventBucketPolicy",
        "CloudTrail checks it may deliver when the trail is created"
    );
}

#[test]
fn the_trails_bucket_takes_this_trails_logs_keeps_them_and_refuses_plain_http() {
    let t = template();
    let r = resource(&t, "AuditDataEventBucket");
    assert_eq!(at(r, &["DeletionPolicy"]).as_str(), Some("Retain"));
    let p = at(r, &["Properties"]);
    assert_eq!(
        at(p, &["VersioningConfiguration", "Status"]).as_str(),
        Some("Enabled")
    );
    for (key, value) in at(p, &["PublicAccessBlockConfiguration"])
        .as_mapping()
        .expect("a mapping")
    {
        assert_eq!(value, &Value::Bool(true), "{key:?}");
    }
    assert!(
        at(p, &["LifecycleConfiguration", "Rules"])
            .as_sequence()
            .expect("rules")
            .iter()
            .all(|rule| rule.get("ExpirationInDays").is_none() && rule.get("Expiration").is_none()),
        "nothing expires"
    );
    let trail_name = scalar(at(
        props(&t, "AuditDataEventTrail"),
        &["TrailName", "Fn::Sub"],
    ));
    let trail_arn = format!(
        "arn:${{AWS::Partition}}:cloudtrail:${{AWS::Region}}:${{AWS::AccountId}}:trail/{trail_name}"
    );
    let statements = one_or_many(at(
        props(&t, "AuditDataEventBucketPolicy"),
        &["PolicyDocument", "Statement"],
    ));
    assert_eq!(
        at(props(&t, "AuditDataEventBucketPolicy"), &["Bucket"]),
        &reference("AuditDataEventBucket")
    );
    let mut allowed = BTreeSet::new();
    for s in &statements {
        if at(s, &["Effect"]).as_str() != Some("Allow") {
            continue;
        }
        assert_eq!(
            at(s, &["Principal", "Service"]).as_str(),
            Some("cloudtrail.amazonaws.com")
        );
        assert_eq!(
            scalar(at(
                s,
                &["Condition", "StringEquals", "aws:SourceArn", "Fn::Sub"]
            )),
            trail_arn,
            "this trail only"
        );
        for action in one_or_many(at(s, &["Action"])) {
            allowed.insert(scalar(&action));
        }
    }
    assert_eq!(
        allowed,
        BTreeSet::from(["s3:GetBucketAcl".to_string(), "s3:PutObject".to_string()])
    );
    let denied_http = statements.iter().any(|s| {
        at(s, &["Effect"]).as_str() == Some("Deny")
            && scalar(at(s, &["Condition", "Bool", "aws:SecureTransport"])) == "false"
    });
    assert!(denied_http, "TLS only");
    let denied_delete = statements.iter().any(|s| {
        at(s, &["Effect"]).as_str() == Some("Deny")
            && one_or_many(at(s, &["Action"])).contains(&Value::from("s3:DeleteObject"))
            && s.get("Condition").is_none()
    });
    assert!(denied_delete, "nobody deletes a log file");
}
