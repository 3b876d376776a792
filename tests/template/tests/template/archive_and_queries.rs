//! Owns the checks on the archive bucket (versioning, Object Lock, lifecycle, TLS, no deletes)
//! and on querying it (results bucket, Glue table, named queries). Must not know the archiver's code.

use std::collections::{BTreeMap, BTreeSet};

use crate::support::*;
use audit_model::keys::{AUDIT_BUCKET, PARTITION_KEY, SORT_KEY};
use serde_yaml::Value;

const ARCHIVE_OBJECTS: &str = "${AuditArchiveBucket.Arn}/*";

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
pub fn bucket_policy_statements(t: &Value, bucket: &str) -> Vec<Value> {
    resources_of_type(t, "AWS::S3::BucketPolicy")
        .iter()
        .filter(|(_, p)| at(p, &["Properties", "Bucket"]) == &reference(bucket))
        .flat_map(|(_, p)| one_or_many(at(p, &["Properties", "PolicyDocument", "Statement"])))
        .collect()
}

pub fn denies_plain_http_on_bucket_and_objects(t: &Value, bucket: &str) -> bool {
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
    // Versioned (the security scan's CKV_AWS_21): what expiration leaves behind goes too, the
    // noncurrent versions and then their delete markers.
    assert_eq!(
        at(results, &["VersioningConfiguration", "Status"]).as_str(),
        Some("Enabled")
    );
    let rules = one_or_many(at(results, &["LifecycleConfiguration", "Rules"]));
    let enabled = |r: &&Value| at(r, &["Status"]).as_str() == Some("Enabled");
    let noncurrent_days = rules
        .iter()
        .filter(enabled)
        .filter_map(|r| r.get("NoncurrentVersionExpiration"))
        .map(|e| number(at(e, &["NoncurrentDays"])))
        .min();
    assert!(
        noncurrent_days.is_some_and(|d| d <= 7),
        "an expired result's noncurrent version goes within days"
    );
    assert!(
        rules
            .iter()
            .filter(enabled)
            .any(|r| r.get("ExpiredObjectDeleteMarker") == Some(&Value::Bool(true)))
    );
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
        ("senderId", "string"),
        ("originalSenderId", "string"),
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
    sql_files_in("sql")
}

/// The `.sql` files of one directory of the repository, by their path there.
pub fn sql_files_in(under: &str) -> BTreeMap<String, String> {
    let dir = format!("{}/../../{under}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_dir(dir)
        .expect("sql/ is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .map(|p| {
            let name = format!("{under}/{}", p.file_name().unwrap().to_string_lossy());
            (name, std::fs::read_to_string(&p).expect("readable"))
        })
        .collect()
}

#[test]
fn named_queries_are_the_sql_files_make_sql_runs() {
    let t = template();
    let files = sql_files();
    // The OCSF copy's (sql/ocsf/) are ocsf.rs's.
    let queries: Vec<_> = resources_of_type(&t, "AWS::Athena::NamedQuery")
        .into_iter()
        .filter(|(name, _)| !name.starts_with("AuditOcsf"))
        .collect();
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
