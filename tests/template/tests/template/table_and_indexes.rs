//! Owns the checks on the audit table: key schema, time and lookup indexes, retention, on-demand
//! billing, recovery, encryption, TTL and its stream. Must not know how items are written.

use std::collections::BTreeMap;

use crate::support::*;
use audit_model::keys::{
    AUDIT_BUCKET, DEFAULT_TABLE_NAME, LOOKUP_INDEXES, LOOKUP_PROJECTION, PARTITION_KEY, SORT_KEY,
    TIME_INDEX,
};
use serde_yaml::Value;

#[test]
fn table_key_schema_is_the_one_the_code_writes() {
    let t = template();
    let table = &default_props(&t, "AuditMessagesTable");
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
    let table = &default_props(&t, "AuditMessagesTable");
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
    let table = &default_props(&t, "AuditMessagesTable");
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
    assert_eq!(
        scalar(&eval(&t, at(p, &["BillingMode"]), &params_with(&t, &[]))),
        "PAY_PER_REQUEST",
        "on demand by default (TableBillingMode: capacity_options.rs)"
    );
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

#[test]
fn table_streams_new_and_old_images_and_takes_its_class_from_a_parameter() {
    let t = template();
    let table = &default_props(&t, "AuditMessagesTable");
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
fn table_tags_name_the_access_queue_the_receivers_role_and_the_hot_window() {
    // What auditctl checks (docs/deploy.md "The access queue"): the stack's access queue, so that a
    // wrong ACCESS_QUEUE_URL is refused, and the receiver's role id, the SenderId (before ':') of
    // what the function dead-letters; and the days TTL keeps an item, before which `auditctl
    // query` reads the archive (docs/auditctl.md "Past the table's hot window").
    let t = template();
    let tags: BTreeMap<String, Value> = one_or_many(at(props(&t, "AuditMessagesTable"), &["Tags"]))
        .iter()
        .map(|tag| (scalar(at(tag, &["Key"])), at(tag, &["Value"]).clone()))
        .collect();
    assert_eq!(
        tags,
        BTreeMap::from([
            (
                "audit:access-queue-arn".to_string(),
                get_att("AuditAccessQueue", "Arn")
            ),
            (
                "audit:receiver-role-id".to_string(),
                get_att("AuditReceiverRole", "RoleId")
            ),
            (
                "audit:retention-days".to_string(),
                serde_yaml::from_str("{Ref: RetentionDays}").expect("literal YAML")
            ),
        ])
    );
    assert_eq!(
        at(function(&t), &["Role"]),
        &get_att("AuditReceiverRole", "Arn"),
        "the role tagged is the one the function runs as"
    );
}
