//! Owns the checks on digests (docs/deploy.md "Digests: the signing key and the schedule"): the
//! signing key and its policy, the schedule that seals, the alarms when sealing stops or fails.
//! Must not know how a digest is built.

use std::collections::BTreeSet;

use crate::support::*;
use audit_model::archive::SEAL_DELAY;
use audit_model::digest::SIGNING_ALGORITHM;
use serde_yaml::{Mapping, Value};

fn key_policy_statements(t: &Value, key: &str) -> Vec<Value> {
    one_or_many(at(props(t, key), &["KeyPolicy", "Statement"]))
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
    key_policy_lets_one_role_alone_sign(&template(), "AuditDigestKey", "AuditArchiverRole");
}

#[test]
fn attestation_key_is_a_retained_p256_key_that_the_receiver_alone_signs_with() {
    // docs/archive.md "Items attested at birth": the key that certifies each run's key.
    let t = template();
    let key = resource(&t, "AuditAttestationKey");
    assert_eq!(at(key, &["DeletionPolicy"]).as_str(), Some("Retain"));
    assert_eq!(at(key, &["UpdateReplacePolicy"]).as_str(), Some("Retain"));
    let p = props(&t, "AuditAttestationKey");
    assert_eq!(at(p, &["KeySpec"]).as_str(), Some("ECC_NIST_P256"));
    assert_eq!(at(p, &["KeyUsage"]).as_str(), Some("SIGN_VERIFY"));
    assert_eq!(number(at(p, &["PendingWindowInDays"])), 30);
    key_policy_lets_one_role_alone_sign(&t, "AuditAttestationKey", "AuditReceiverRole");
    assert_eq!(
        at(
            props(&t, "AuditReceiverFunction"),
            &["Environment", "Variables", "ATTESTATION_KEY_ID"]
        ),
        &get_att("AuditAttestationKey", "Arn")
    );
}

/// `key`'s policy: the account administers it through IAM, `signer` alone signs, and nobody
/// changes the policy, grants, disables or deletes it without MFA.
fn key_policy_lets_one_role_alone_sign(t: &Value, key: &str, signer: &str) {
    let role = get_att(signer, "Arn");
    let statements = key_policy_statements(t, key);
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
    // Nobody changes the policy (the root statement's kms:* cannot take these denies out),
    // creates a grant, disables the key or schedules its deletion without MFA (a request without
    // MFA information, an assumed role's or an access key's, is refused too: BoolIfExists).
    let lifecycle: Vec<&&Value> = denies
        .iter()
        .filter(|s| !actions(s).contains("kms:Sign"))
        .collect();
    assert_eq!(lifecycle.len(), 1);
    assert_eq!(at(lifecycle[0], &["Principal"]).as_str(), Some("*"));
    assert_eq!(
        actions(lifecycle[0]),
        BTreeSet::from([
            "kms:PutKeyPolicy".into(),
            "kms:CreateGrant".into(),
            "kms:DisableKey".into(),
            "kms:ScheduleKeyDeletion".into()
        ])
    );
    assert_eq!(
        scalar(at(
            lifecycle[0],
            &["Condition", "BoolIfExists", "aws:MultiFactorAuthPresent"]
        )),
        "false"
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

#[test]
fn an_alarm_fires_on_the_first_object_found_after_its_period_was_sealed() {
    let t = template();
    let late = alarm_metrics_named(&t, "LateObject");
    assert_eq!(late.len(), 1, "one alarm on LateObject");
    let alarm = late[0];
    assert_eq!(at(alarm, &["Statistic"]).as_str(), Some("Sum"));
    assert_eq!(number(at(alarm, &["Threshold"])), 1);
    assert_eq!(
        at(alarm, &["ComparisonOperator"]).as_str(),
        Some("GreaterThanOrEqualToThreshold")
    );
    assert_eq!(number(at(alarm, &["EvaluationPeriods"])), 1);
    assert_eq!(
        at(alarm, &["TreatMissingData"]).as_str(),
        Some("notBreaching")
    );
    assert!(number(at(alarm, &["Period"])) >= seal_interval(&t));
    assert_eq!(
        at(alarm, &["Dimensions"]),
        &serde_yaml::from_str::<Value>(
            "[{Name: FunctionName, Value: {Ref: AuditArchiverFunction}}]"
        )
        .unwrap()
    );
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
