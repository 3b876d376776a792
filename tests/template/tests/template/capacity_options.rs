//! Owns the checks on the options that trade capacity and views for cost (docs/operations.md
//! "Cost of keeping the trail"): which lookup indexes exist (LookupIndexes), on-demand or
//! provisioned capacity with auto scaling of the table and each index it has (TableBillingMode),
//! and the dashboard (Dashboard), for every value each takes. Must not know the prices.

use std::collections::BTreeSet;

use crate::support::*;
use serde_yaml::Value;

const TABLE: &str = "AuditMessagesTable";

/// The names of the indexes the table has under `params`.
fn indexes(t: &Value, params: &Params) -> Vec<String> {
    let table = under(t, props(t, TABLE), params).expect("the table");
    one_or_many(at(&table, &["GlobalSecondaryIndexes"]))
        .iter()
        .map(|index| scalar(at(index, &["IndexName"])))
        .collect()
}

/// Every `LookupIndexes` value with every `TableBillingMode`.
fn combinations(t: &Value) -> Vec<(String, String, Params)> {
    let mut out = Vec::new();
    for lookups in allowed_values(t, "LookupIndexes") {
        for billing in allowed_values(t, "TableBillingMode") {
            let params = params_with(
                t,
                &[
                    ("LookupIndexes", lookups.clone()),
                    ("TableBillingMode", billing.clone()),
                ],
            );
            out.push((lookups.clone(), billing, params));
        }
    }
    out
}

#[test]
fn lookup_indexes_are_the_ones_named_and_the_time_index_always() {
    let t = template();
    assert_eq!(
        scalar(at(parameter(&t, "LookupIndexes"), &["Default"])),
        "actor,action,resource",
        "every lookup index by default"
    );
    for (lookups, billing, params) in combinations(&t) {
        let named: Vec<&str> = if lookups == "none" {
            Vec::new()
        } else {
            lookups.split(',').collect()
        };
        let expected: Vec<String> = std::iter::once("byAuditTime".to_owned())
            .chain(
                [
                    ("actor", "byActor"),
                    ("action", "byAction"),
                    ("resource", "byResource"),
                ]
                .into_iter()
                .filter(|(field, _)| named.contains(field))
                .map(|(_, index)| index.to_owned()),
            )
            .collect();
        assert_eq!(indexes(&t, &params), expected, "{lookups} {billing}");
        // Each key attribute is declared only with its index (CloudFormation refuses any other).
        let table = under(&t, props(&t, TABLE), &params).expect("the table");
        let declared: BTreeSet<String> = one_or_many(at(&table, &["AttributeDefinitions"]))
            .iter()
            .map(|a| scalar(at(a, &["AttributeName"])))
            .collect();
        let keys: BTreeSet<String> = std::iter::once(&table)
            .chain(one_or_many(at(&table, &["GlobalSecondaryIndexes"])).iter())
            .flat_map(|i| one_or_many(at(i, &["KeySchema"])))
            .map(|k| scalar(at(&k, &["AttributeName"])))
            .collect();
        assert_eq!(declared, keys, "{lookups} {billing}");
    }
}

#[test]
fn on_demand_by_default_and_provisioned_capacity_scales_the_table_and_each_index_it_has() {
    let t = template();
    assert_eq!(
        scalar(at(parameter(&t, "TableBillingMode"), &["Default"])),
        "PAY_PER_REQUEST"
    );
    for (lookups, billing, params) in combinations(&t) {
        let here = format!("{lookups} {billing}");
        let provisioned = billing == "PROVISIONED";
        let table = under(&t, props(&t, TABLE), &params).expect("the table");
        assert_eq!(
            scalar(&eval(&t, at(&table, &["BillingMode"]), &params)),
            billing,
            "{here}"
        );
        // Capacity: the minimum, on the table and on every index, only when provisioned.
        let capacity = Value::from(serde_yaml::Mapping::from_iter([
            (
                Value::from("ReadCapacityUnits"),
                reference("ProvisionedReadMin"),
            ),
            (
                Value::from("WriteCapacityUnits"),
                reference("ProvisionedWriteMin"),
            ),
        ]));
        for holder in std::iter::once(table.clone())
            .chain(one_or_many(at(&table, &["GlobalSecondaryIndexes"])))
        {
            assert_eq!(
                holder.get("ProvisionedThroughput"),
                provisioned.then_some(&capacity),
                "{here}: {:?}",
                holder.get("IndexName")
            );
        }
        // Auto scaling: a read and a write target for the table and for each index, each with
        // its target-tracking policy; nothing of it on demand.
        let targets: BTreeSet<(String, String)> =
            resources_of_type(&t, "AWS::ApplicationAutoScaling::ScalableTarget")
                .into_iter()
                .filter(|(name, _)| created(&t, name, &params))
                .map(|(_, r)| {
                    let p = at(r, &["Properties"]);
                    assert_eq!(scalar(at(p, &["ServiceNamespace"])), "dynamodb");
                    assert_eq!(at(p, &["MinCapacity"]), &reference(&min_of(p)));
                    (
                        scalar(at(p, &["ResourceId", "Fn::Sub"])),
                        scalar(at(p, &["ScalableDimension"])),
                    )
                })
                .collect();
        let mut expected = BTreeSet::new();
        if provisioned {
            for dimension in ["Read", "Write"] {
                expected.insert((
                    "table/${AuditMessagesTable}".to_owned(),
                    format!("dynamodb:table:{dimension}CapacityUnits"),
                ));
                for index in indexes(&t, &params) {
                    expected.insert((
                        format!("table/${{AuditMessagesTable}}/index/{index}"),
                        format!("dynamodb:index:{dimension}CapacityUnits"),
                    ));
                }
            }
        }
        assert_eq!(targets, expected, "{here}");
        let policies: Vec<(String, &Value)> =
            resources_of_type(&t, "AWS::ApplicationAutoScaling::ScalingPolicy")
                .into_iter()
                .filter(|(name, _)| created(&t, name, &params))
                .collect();
        assert_eq!(
            policies.len(),
            expected.len(),
            "{here}: a policy per target"
        );
        for (name, policy) in policies {
            let p = at(policy, &["Properties"]);
            assert_eq!(scalar(at(p, &["PolicyType"])), "TargetTrackingScaling");
            let target = scalar(at(p, &["ScalingTargetId", "Ref"]));
            assert!(
                created(&t, &target, &params),
                "{here}: {name} scales {target}"
            );
            let dimension = scalar(at(props(&t, &target), &["ScalableDimension"]));
            let kind = if dimension.ends_with("ReadCapacityUnits") {
                "Read"
            } else {
                "Write"
            };
            let tracking = at(p, &["TargetTrackingScalingPolicyConfiguration"]);
            assert_eq!(
                scalar(at(
                    tracking,
                    &["PredefinedMetricSpecification", "PredefinedMetricType"]
                )),
                format!("DynamoDB{kind}CapacityUtilization"),
                "{here}: {name}"
            );
            assert_eq!(
                at(tracking, &["TargetValue"]),
                &reference("ProvisionedTargetUtilization")
            );
        }
    }
}

/// The minimum parameter of a scalable target's dimension.
fn min_of(target: &Value) -> String {
    if scalar(at(target, &["ScalableDimension"])).ends_with("ReadCapacityUnits") {
        "ProvisionedReadMin".to_owned()
    } else {
        "ProvisionedWriteMin".to_owned()
    }
}

#[test]
fn capacity_bounds_are_parameters_with_the_minimum_below_the_maximum_by_default() {
    let t = template();
    for dimension in ["Read", "Write"] {
        let (_, _, min) = numeric_range(&t, &format!("Provisioned{dimension}Min"));
        let (_, _, max) = numeric_range(&t, &format!("Provisioned{dimension}Max"));
        assert!(1 <= min && min < max, "{dimension}: {min}..{max}");
    }
    let (low, high, target) = numeric_range(&t, "ProvisionedTargetUtilization");
    assert!(low >= 20 && high <= 90 && (low..=high).contains(&target));
}

#[test]
fn the_dashboard_and_its_url_exist_only_with_dashboard_true() {
    let t = template();
    assert_eq!(scalar(at(parameter(&t, "Dashboard"), &["Default"])), "true");
    for value in allowed_values(&t, "Dashboard") {
        let params = params_with(&t, &[("Dashboard", value.clone())]);
        let on = value == "true";
        assert_eq!(
            created(&t, "AuditDashboard", &params),
            on,
            "Dashboard={value}"
        );
        let output = at(&t, &["Outputs", "AuditDashboardUrl"]);
        assert_eq!(
            output
                .get("Condition")
                .is_none_or(|c| condition(&t, &scalar(c), &params)),
            on,
            "the output names the dashboard: only with it"
        );
    }
    // Nothing else refers to the dashboard: without it, the stack still deploys.
    for (name, r) in at(&t, &["Resources"]).as_mapping().expect("resources") {
        if scalar(name) != "AuditDashboard" {
            assert!(
                !serde_yaml::to_string(r)
                    .expect("YAML")
                    .contains("AuditDashboard"),
                "{} refers to AuditDashboard",
                scalar(name)
            );
        }
    }
}
