//! Owns the checks on what the security scan asks of the template (docs/deploy.md "The security
//! scan" and "Customer managed keys"): the two key parameters, off by default and reaching the
//! table and every log group when set, and the scan's skips, each one naming a check and giving
//! its reason. Must not know checkov's rules beyond the ids the skips name.

use crate::support::*;
use serde_yaml::{Mapping, Value};

const TABLE_KEY: &str = "TableKmsKeyArn";
const LOGS_KEY: &str = "LogsKmsKeyArn";
const A_KEY: &str = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";

/// `value` as CloudFormation would deploy it under `params`: Fn::If and its condition taken,
/// AWS::NoValue dropped (None at the top), a parameter's Ref replaced by its value, everything else
/// as written.
fn resolve(t: &Value, value: &Value, params: &Params) -> Option<Value> {
    if let Some(map) = value.as_mapping() {
        if map.len() == 1 {
            let (key, arg) = map.iter().next().expect("one entry");
            match key.as_str() {
                Some("Fn::If") => {
                    let a = arg.as_sequence().expect("Fn::If takes a list");
                    let name = scalar(&a[0]);
                    let condition = at(t, &["Conditions", &name]);
                    let branch = if truth(t, condition, params) {
                        &a[1]
                    } else {
                        &a[2]
                    };
                    return resolve(t, branch, params);
                }
                Some("Ref") if scalar(arg) == "AWS::NoValue" => return None,
                Some("Ref") if params.contains_key(&scalar(arg)) => {
                    return Some(Value::from(params[&scalar(arg)].clone()));
                }
                _ => {}
            }
        }
        let mut out = Mapping::new();
        for (k, v) in map {
            if let Some(v) = resolve(t, v, params) {
                out.insert(k.clone(), v);
            }
        }
        return Some(Value::Mapping(out));
    }
    if let Some(items) = value.as_sequence() {
        return Some(Value::Sequence(
            items.iter().filter_map(|v| resolve(t, v, params)).collect(),
        ));
    }
    Some(value.clone())
}

fn deployed(t: &Value, name: &str, params: &Params) -> Value {
    resolve(t, props(t, name), params).expect("a resource's properties")
}

fn table_encryption(t: &Value, params: &Params) -> Value {
    at(
        &deployed(t, "AuditMessagesTable", params),
        &["SSESpecification"],
    )
    .clone()
}

/// Each log group's KmsKeyId as deployed (None: CloudWatch Logs' own encryption).
fn log_group_keys(t: &Value, params: &Params) -> Vec<(String, Option<Value>)> {
    let groups = resources_of_type(t, "AWS::Logs::LogGroup");
    assert!(
        groups.len() >= 3,
        "the receiver's, the archiver's, ForeignSign's"
    );
    groups
        .into_iter()
        .map(|(name, _)| {
            let key = deployed(t, &name, params).get("KmsKeyId").cloned();
            (name, key)
        })
        .collect()
}

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).expect("YAML")
}

#[test]
fn customer_managed_keys_are_off_by_default_and_the_template_is_as_without_them() {
    let t = template();
    for name in [TABLE_KEY, LOGS_KEY] {
        assert_eq!(scalar(at(parameter(&t, name), &["Default"])), "", "{name}");
    }
    let defaults = params_with(&t, &[]);
    assert_eq!(
        table_encryption(&t, &defaults),
        yaml("SSEEnabled: true"),
        "DynamoDB's AWS owned key"
    );
    for (group, key) in log_group_keys(&t, &defaults) {
        assert_eq!(key, None, "{group}: CloudWatch Logs' own encryption");
    }
}

#[test]
fn table_key_encrypts_the_table_and_nothing_else() {
    let t = template();
    let params = params_with(&t, &[(TABLE_KEY, A_KEY.into())]);
    assert_eq!(
        table_encryption(&t, &params),
        yaml(&format!(
            "{{SSEEnabled: true, SSEType: KMS, KMSMasterKeyId: \"{A_KEY}\"}}"
        ))
    );
    for (group, key) in log_group_keys(&t, &params) {
        assert_eq!(key, None, "{group}");
    }
}

#[test]
fn logs_key_encrypts_every_log_group_and_not_the_table() {
    let t = template();
    let params = params_with(&t, &[(LOGS_KEY, A_KEY.into())]);
    for (group, key) in log_group_keys(&t, &params) {
        assert_eq!(key, Some(Value::from(A_KEY)), "{group}");
    }
    assert_eq!(table_encryption(&t, &params), yaml("SSEEnabled: true"));
}

/// Every (resource, check id, reason) the template skips in the scan.
fn skips(t: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (name, r) in at(t, &["Resources"]).as_mapping().expect("Resources") {
        let Some(list) = r.get("Metadata").and_then(|m| m.get("checkov")) else {
            continue;
        };
        for skip in at(list, &["skip"]).as_sequence().expect("skip is a list") {
            out.push((
                scalar(name),
                scalar(at(skip, &["id"])),
                skip.get("comment").map(scalar).unwrap_or_default(),
            ));
        }
    }
    out
}

#[test]
fn every_scan_skip_names_one_check_and_says_why() {
    let t = template();
    let skips = skips(&t);
    assert!(!skips.is_empty());
    for (resource, id, reason) in &skips {
        let number = id.strip_prefix("CKV_AWS_").unwrap_or("");
        assert!(
            !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()),
            "{resource}: {id} is not a checkov check id"
        );
        assert!(
            reason.split_whitespace().count() >= 12,
            "{resource}: the skip of {id} gives no reason"
        );
    }
    // A key the scan asks for, off by default, is skipped only where its parameter sets it, and the
    // skip says which parameter that is.
    for (resource, id, reason) in &skips {
        let parameter = match id.as_str() {
            "CKV_AWS_119" => TABLE_KEY,
            "CKV_AWS_158" => LOGS_KEY,
            _ => continue,
        };
        assert!(
            reason.contains(parameter),
            "{resource}: {id} names {parameter}"
        );
        let set = params_with(&t, &[(parameter, A_KEY.into())]);
        let with_key = serde_yaml::to_string(&deployed(&t, resource, &set)).expect("YAML");
        assert!(
            with_key.contains(A_KEY),
            "{resource}: {parameter} reaches it"
        );
    }
}
