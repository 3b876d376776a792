//! Owns the checks on the OCSF copy (docs/ocsf.md "In the template"): the writer's function, its
//! least-privilege role, its stream mapping and failure queue, the bucket, the Glue table as the
//! writer lays objects out, the named queries. Must not know the writer's code.

use std::collections::BTreeSet;

use crate::archive_and_queries::{
    bucket_policy_statements, denies_plain_http_on_bucket_and_objects, sql_files_in,
};
use crate::support::*;
use audit_ocsf::columns::COLUMNS;
use serde_yaml::Value;

/// Every Allow statement of the role's inline policies, as (action, resource) pairs.
fn role_grants(t: &Value, role: &str) -> BTreeSet<(String, String)> {
    let p = props(t, role);
    assert!(
        p.get("ManagedPolicyArns").is_none(),
        "{role}: inline policies only"
    );
    one_or_many(at(p, &["Policies"]))
        .iter()
        .flat_map(|policy| one_or_many(at(policy, &["PolicyDocument", "Statement"])))
        .flat_map(|s| {
            assert_eq!(at(&s, &["Effect"]).as_str(), Some("Allow"));
            let actions: Vec<String> = one_or_many(at(&s, &["Action"]))
                .iter()
                .map(scalar)
                .collect();
            let resources: Vec<String> = one_or_many(at(&s, &["Resource"]))
                .iter()
                .map(resource_text)
                .collect();
            actions
                .into_iter()
                .flat_map(move |a| resources.clone().into_iter().map(move |r| (a.clone(), r)))
        })
        .collect()
}

#[test]
fn the_writers_role_reads_the_stream_and_only_creates_and_reads_objects_under_ext() {
    let t = template();
    let grants = role_grants(&t, "AuditOcsfWriterRole");
    let pairs = |list: &[(&str, &str)]| -> BTreeSet<(String, String)> {
        list.iter()
            .map(|(a, r)| ((*a).to_owned(), (*r).to_owned()))
            .collect()
    };
    assert_eq!(
        grants,
        pairs(&[
            ("dynamodb:DescribeStream", "${AuditMessagesTable.StreamArn}"),
            ("dynamodb:GetRecords", "${AuditMessagesTable.StreamArn}"),
            (
                "dynamodb:GetShardIterator",
                "${AuditMessagesTable.StreamArn}"
            ),
            ("dynamodb:ListStreams", "${AuditMessagesTable.Arn}/stream/*"),
            ("s3:PutObject", "${AuditOcsfBucket.Arn}/ext/*"),
            ("s3:GetObject", "${AuditOcsfBucket.Arn}/ext/*"),
            ("s3:ListBucket", "${AuditOcsfBucket.Arn}"),
            ("sqs:SendMessage", "${AuditOcsfWriterFailureQueue.Arn}"),
            ("logs:CreateLogStream", "${AuditOcsfWriterLogGroup.Arn}"),
            ("logs:PutLogEvents", "${AuditOcsfWriterLogGroup.Arn}"),
        ]),
        "nothing on the archive bucket, the table's items or any key; no delete"
    );
    let f = props(&t, "AuditOcsfWriterFunction");
    assert_eq!(
        at(f, &["Environment", "Variables", "OCSF_BUCKET"]),
        &reference("AuditOcsfBucket")
    );
}

#[test]
fn only_the_writer_writes_the_ocsf_bucket_over_tls() {
    let t = template();
    assert!(denies_plain_http_on_bucket_and_objects(
        &t,
        "AuditOcsfBucket"
    ));
    let statements = bucket_policy_statements(&t, "AuditOcsfBucket");
    let only_writer = statements.iter().any(|s| {
        at(s, &["Effect"]).as_str() == Some("Deny")
            && one_or_many(at(s, &["Action"])).contains(&Value::from("s3:PutObject"))
            && resource_text(at(s, &["Resource"])) == "${AuditOcsfBucket.Arn}/*"
            && at(s, &["Condition", "ArnNotEquals", "aws:PrincipalArn"])
                == &get_att("AuditOcsfWriterRole", "Arn")
    });
    assert!(only_writer, "{statements:?}");
    let bucket = props(&t, "AuditOcsfBucket");
    assert_eq!(
        at(bucket, &["VersioningConfiguration", "Status"]).as_str(),
        Some("Enabled")
    );
    assert!(
        bucket.get("ObjectLockEnabled").is_none(),
        "no Object Lock: a compaction deletes what it merged"
    );
}

#[test]
fn the_writer_reads_the_tables_stream_beside_the_archiver_and_retries_whole_batches() {
    let t = template();
    let events: Vec<&Value> = at(props(&t, "AuditOcsfWriterFunction"), &["Events"])
        .as_mapping()
        .expect("Events")
        .values()
        .collect();
    assert_eq!(events.len(), 1, "its stream event only");
    assert_eq!(at(events[0], &["Type"]).as_str(), Some("DynamoDB"));
    let e = at(events[0], &["Properties"]);
    assert_eq!(
        at(e, &["Stream"]),
        &get_att("AuditMessagesTable", "StreamArn")
    );
    assert_eq!(
        one_or_many(at(e, &["FunctionResponseTypes"])),
        vec![Value::from("ReportBatchItemFailures")]
    );
    assert_eq!(
        at(e, &["BisectBatchOnFunctionError"]),
        &Value::Bool(false),
        "a split batch would start elsewhere and name its objects otherwise"
    );
    assert_eq!(number(at(e, &["ParallelizationFactor"])), 1);
    assert_eq!(
        scalar(
            at(e, &["FilterCriteria", "Filters"])
                .as_sequence()
                .and_then(|f| f.first())
                .map(|f| at(f, &["Pattern"]))
                .expect("a filter")
        ),
        r#"{"eventName": ["INSERT"]}"#
    );
    // An object at least every 5 minutes under load, whatever the parameter says.
    assert_eq!(
        parameter_ref(&t, at(e, &["MaximumBatchingWindowInSeconds"])).as_deref(),
        Some("OcsfBatchingWindow")
    );
    let (low, _, high) = numeric_range(&t, "OcsfBatchingWindow");
    assert!(low == 0 && high <= 300, "{low}..{high}");
    assert_eq!(
        at(e, &["DestinationConfig", "OnFailure", "Destination"]),
        &get_att("AuditOcsfWriterFailureQueue", "Arn")
    );
    assert!(alarms_while_the_queue_holds_anything(
        &t,
        "AuditOcsfWriterFailureQueue"
    ));
}

#[test]
fn the_glue_table_reads_the_objects_as_the_writer_lays_them_out() {
    let t = template();
    let input = at(props(&t, "AuditOcsfTable"), &["TableInput"]);
    assert_eq!(
        at(input, &["Name"]).as_str(),
        Some("ocsf"),
        "what sql/ocsf/ reads"
    );
    let p = at(input, &["Parameters"]);
    assert_eq!(scalar(at(p, &["projection.enabled"])), "true");
    assert_eq!(scalar(at(p, &["projection.eventDay.format"])), "yyyyMMdd");
    // The key the writer gives an object, its partitions turned into the template's placeholders.
    let key = audit_ocsf::object_key("audit-receiver", "R", "A", 0, "x");
    let prefix = key
        .rsplit_once('/')
        .map(|(dir, _)| dir)
        .unwrap()
        .replace("region=R", "region=${!region}")
        .replace("accountId=A", "accountId=${!accountId}")
        .replace("eventDay=19700101", "eventDay=${!eventDay}");
    assert_eq!(
        resource_text(at(p, &["storage.location.template"])),
        format!("s3://${{AuditOcsfBucket}}/{prefix}/")
    );
    let partitions: Vec<String> = one_or_many(at(input, &["PartitionKeys"]))
        .iter()
        .map(|k| scalar(at(k, &["Name"])))
        .collect();
    assert_eq!(partitions, ["region", "accountId", "eventDay"]);
    let storage = at(input, &["StorageDescriptor"]);
    assert!(
        scalar(at(storage, &["SerdeInfo", "SerializationLibrary"])).ends_with("ParquetHiveSerDe")
    );
    let columns: Vec<(String, String)> = one_or_many(at(storage, &["Columns"]))
        .iter()
        .map(|c| (scalar(at(c, &["Name"])), scalar(at(c, &["Type"]))))
        .collect();
    let written: Vec<(String, String)> = COLUMNS
        .iter()
        .map(|node| (node.name().to_owned(), node.hive_type()))
        .collect();
    assert_eq!(columns, written, "the writer's columns, in order");
}

#[test]
fn the_ocsf_named_queries_are_the_sql_ocsf_files() {
    let t = template();
    let files = sql_files_in("sql/ocsf");
    let queries: Vec<_> = resources_of_type(&t, "AWS::Athena::NamedQuery")
        .into_iter()
        .filter(|(name, _)| name.starts_with("AuditOcsf"))
        .collect();
    let mut used = BTreeSet::new();
    for (name, q) in &queries {
        let p = at(q, &["Properties"]);
        let text = scalar(at(p, &["QueryString"]));
        let file = files
            .iter()
            .find(|(_, sql)| **sql == text)
            .map(|(file, _)| file.clone())
            .unwrap_or_else(|| panic!("{name}'s QueryString is no sql/ocsf/*.sql file"));
        assert!(scalar(at(p, &["Description"])).contains(&file), "{name}");
        assert!(used.insert(file));
    }
    assert_eq!(used, files.keys().cloned().collect::<BTreeSet<_>>());
    assert_eq!(used.len(), 3, "the trail's three questions");
    for (file, sql) in &files {
        assert!(sql.contains("FROM ocsf"), "{file}");
        assert!(
            sql.contains("eventDay >= replace(?, '-', '')"),
            "{file} prunes days"
        );
    }
}
