//! The records and Parquet objects of the sample events (events/*.json), archived as the receiver
//! stores them: each body through `AuditMessage::parse`, `AuditItem::new` and the item's line.

use std::path::PathBuf;

use audit_model::message::{AuditItem, AuditMessage, Delivery, parse_sent_timestamp};
use audit_ocsf::{Class, Place, Record, record, write};
use chrono::{TimeZone, Utc};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The archived lines of a sample batch's valid bodies, as the archiver writes them.
fn lines(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("events").join(file)).unwrap();
    let batch: Value = serde_json::from_str(&text).unwrap();
    let received = Utc.with_ymd_and_hms(2026, 11, 22, 12, 30, 0).unwrap();
    batch["Records"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| {
            let sent_at = parse_sent_timestamp(r["attributes"]["SentTimestamp"].as_str());
            let message = AuditMessage::parse(r["body"].as_str(), sent_at).ok()?;
            let id = r["messageId"].as_str()?.to_owned();
            let delivery = Delivery {
                sqs_message_id: id.clone(),
                original_message_id: id,
                sent_at,
                receive_count: Some(1),
                event_source: r["eventSourceARN"].as_str().map(str::to_owned),
                sender_id: r["attributes"]["SenderId"].as_str().map(str::to_owned),
                original_sender_id: None,
            };
            let item = AuditItem::new(message, delivery, received, None);
            Some(Value::Object(audit_aws::dynamodb::item_line_map(&item)).to_string())
        })
        .collect()
}

const OBJECT: &str =
    "trail/dt=2026-11-22/hour=12/p1795348800-0000000000004421584500000000017450439091-a0.jsonl.gz";

fn records(file: &str) -> Vec<Record> {
    lines(file)
        .iter()
        .enumerate()
        .map(|(n, line)| {
            record(
                line,
                Place {
                    object: OBJECT,
                    line_number: n as u64,
                },
            )
            .unwrap()
        })
        .collect()
}

fn at<'a>(record: &'a Record, pointer: &str) -> &'a Value {
    let fields = record.fields.get(pointer.split('/').nth(1).unwrap());
    match pointer
        .split_once('/')
        .map(|(_, rest)| rest.split_once('/'))
    {
        Some(Some((_, rest))) => fields.and_then(|f| f.pointer(&format!("/{rest}"))),
        _ => fields,
    }
    .unwrap_or(&Value::Null)
}

#[test]
fn a_cloudtrail_api_call_maps_its_event_name_identity_address_and_error() {
    let all = records("cloudtrail-batch.json");
    let call = &all[0];
    assert_eq!(call.class, Class::ApiActivity);
    assert_eq!(
        (call.region.as_str(), call.account.as_str()),
        ("us-east-1", "123456789012")
    );
    let detail = |p| at(call, p).clone();
    assert_eq!(detail("/api/service/name"), json!("s3.amazonaws.com"));
    assert_eq!(
        detail("/actor/user/uid"),
        json!("arn:aws:sts::123456789012:assumed-role/Admin/mallory")
    );
    assert_eq!(
        detail("/actor/user/uid_alt"),
        json!("AROAEXAMPLEROLEID:mallory")
    );
    assert_eq!(
        detail("/actor/user/credential_uid"),
        json!("ASIAEXAMPLEKEYID")
    );
    assert_eq!(detail("/actor/app_uid"), json!("AROAEXAMPLE:eventbridge"));
    assert_eq!(detail("/cloud/account/uid"), json!("123456789012"));
    assert_eq!(detail("/unmapped/envelope"), json!("cloudtrail"));
    assert_eq!(
        detail("/unmapped/extra/detail/eventName"),
        Value::Null,
        "mapped, so not unmapped"
    );
    let operation = detail("/api/operation");
    assert_eq!(
        detail("/metadata/event_code"),
        json!(format!("s3:{}", operation.as_str().unwrap()))
    );
    assert!(detail("/src_endpoint/ip").is_string());
    // The sign-in: an Authentication of the user who signed in, failed without an errorCode.
    let login = all
        .iter()
        .find(|r| at(r, "/api/operation") == "ConsoleLogin")
        .unwrap();
    assert_eq!(
        (
            login.class,
            at(login, "/activity_id"),
            at(login, "/type_uid")
        ),
        (Class::Authentication, &json!(1), &json!(300_201))
    );
    assert_eq!(at(login, "/user/name"), "bob");
    assert_eq!(at(login, "/service/name"), "signin.amazonaws.com");
    assert_eq!(at(login, "/actor/user/name"), "bob");
    assert_eq!(
        (at(login, "/status_id"), at(login, "/status")),
        (&json!(2), &json!("Failure"))
    );
    assert_eq!(at(login, "/severity_id"), 2);
    assert_eq!(at(login, "/src_endpoint/ip"), "198.51.100.23");
    // A service's own event: invoked by it, called from it.
    let rotate = all
        .iter()
        .find(|r| at(r, "/api/operation") == "RotateKey")
        .unwrap();
    assert_eq!(
        (at(rotate, "/activity_id"), at(rotate, "/activity_name")),
        (&json!(99), &json!("Other"))
    );
    assert_eq!(at(rotate, "/actor/invoked_by"), "kms.amazonaws.com");
    assert_eq!(at(rotate, "/src_endpoint/svc_name"), "kms.amazonaws.com");
    assert_eq!(at(rotate, "/src_endpoint/ip"), &Value::Null);
}

#[test]
fn a_failed_cloudtrail_call_carries_its_error_code_and_message() {
    let failed: Vec<Record> = records("cloudtrail-batch.json")
        .into_iter()
        .filter(|r| at(r, "/status_code").is_string())
        .collect();
    assert!(
        !failed.is_empty(),
        "the sample batch has a call with an errorCode"
    );
    for r in failed {
        assert_eq!(
            (at(&r, "/status_id"), at(&r, "/status")),
            (&json!(2), &json!("Failure"))
        );
        assert_eq!(at(&r, "/unmapped/extra/detail/errorCode"), &Value::Null);
    }
}

#[test]
fn a_cloudevent_maps_source_id_type_and_subject() {
    let all = records("cloudevents-batch.json");
    let deleted = all
        .iter()
        .find(|r| at(r, "/api/operation") == "com.example.invoice.deleted")
        .unwrap();
    assert_eq!(
        (
            deleted.class,
            at(deleted, "/activity_id"),
            at(deleted, "/type_uid")
        ),
        (Class::ApiActivity, &json!(4), &json!(600_304))
    );
    assert_eq!(
        at(deleted, "/api/service/name"),
        "https://billing.example.com/invoices"
    );
    assert_eq!(at(deleted, "/api/request/uid"), "inv-4711-deleted");
    assert_eq!(
        at(deleted, "/resources"),
        &json!([{"name": "invoice/4711"}])
    );
    assert_eq!(at(deleted, "/actor/user/name"), "alice@example.com");
    assert_eq!(at(deleted, "/src_endpoint/ip"), "2001:db8::7");
    // 12:00:00.250+02:00
    assert_eq!(at(deleted, "/time"), 1_795_341_600_250_i64);
    assert_eq!(at(deleted, "/unmapped/extra/tenant"), "acme");
    assert_eq!(
        at(deleted, "/unmapped/extra/source"),
        &Value::Null,
        "mapped, so not unmapped"
    );
    assert_eq!(at(deleted, "/unmapped/envelope"), "cloudevents");
    let login = all
        .iter()
        .find(|r| at(r, "/api/operation") == "user.login")
        .unwrap();
    assert_eq!(
        (
            login.class,
            at(login, "/status_id"),
            at(login, "/user/name")
        ),
        (Class::Authentication, &json!(2), &json!("bob"))
    );
}

#[test]
fn every_record_carries_the_trails_identity_for_auditctl_prove() {
    let lines = lines("clean-batch.json");
    let line = &lines[1];
    let item: Value = serde_json::from_str(line).unwrap();
    let r = record(
        line,
        Place {
            object: OBJECT,
            line_number: 1,
        },
    )
    .unwrap();
    assert_eq!(
        at(&r, "/unmapped/trail"),
        &json!({"messageId": item["messageId"], "auditTime": item["auditTime"], "object": OBJECT, "lineNumber": 1})
    );
    assert_eq!(at(&r, "/metadata/uid"), &item["messageId"]);
    assert_eq!(at(&r, "/metadata/original_time"), &item["auditTime"]);
    assert_eq!(at(&r, "/metadata/version"), "1.3.0");
    assert_eq!(at(&r, "/metadata/product/name"), "audit-receiver");
    assert_eq!(at(&r, "/unmapped/delivery/senderId"), &item["senderId"]);
    assert_eq!(at(&r, "/unmapped/envelope"), "native");
    assert_eq!(
        (r.region.as_str(), r.account.as_str()),
        ("us-east-1", "123456789012")
    );
}

#[test]
fn native_fields_map_and_each_outcome_gives_its_status() {
    let place = Place {
        object: OBJECT,
        line_number: 0,
    };
    let line = |outcome: &str| {
        json!({"messageId": "m-1", "auditTime": "2026-11-22T10:00:00.000Z", "action": "invoice.update",
               "actor": "alice", "resource": "invoice/1", "sourceIp": "203.0.113.7", "outcome": outcome,
               "auditText": "changed", "extra": {"ticket": "T-1"}, "auditBucket": "2026-11-22#01",
               "actorKey": "alice#1", "attestation": "v1.x"})
        .to_string()
    };
    for (outcome, id, status, severity) in [
        ("success", 1, "Success", 1),
        ("failure", 2, "Failure", 2),
        ("unknown", 0, "Unknown", 1),
    ] {
        let r = record(&line(outcome), place).unwrap();
        assert_eq!(
            (
                at(&r, "/status_id"),
                at(&r, "/status"),
                at(&r, "/severity_id")
            ),
            (&json!(id), &json!(status), &json!(severity)),
            "{outcome}"
        );
        assert_eq!(
            (at(&r, "/activity_id"), at(&r, "/type_uid")),
            (&json!(3), &json!(600_303))
        );
        assert_eq!(at(&r, "/actor/user/name"), "alice");
        assert_eq!(at(&r, "/api/operation"), "invoice.update");
        assert_eq!(at(&r, "/src_endpoint/ip"), "203.0.113.7");
        assert_eq!(at(&r, "/message"), "changed");
        assert_eq!(at(&r, "/time"), 1_795_341_600_000_i64);
        assert_eq!(at(&r, "/unmapped/extra"), &json!({"ticket": "T-1"}));
        for derived in ["auditBucket", "actorKey", "attestation"] {
            assert_eq!(at(&r, &format!("/unmapped/{derived}")), &Value::Null);
        }
        // No queue ARN: the partitions say so.
        assert_eq!(
            (r.region.as_str(), r.account.as_str()),
            ("unknown", "unknown")
        );
    }
}

#[test]
fn a_line_the_archiver_marked_not_attested_is_high_severity_and_says_why() {
    let line =
        json!({"messageId": "m-2", "auditTime": "2026-11-22T10:00:00.000Z", "auditText": "hi",
                      "notAttested": "it has no attestation"})
        .to_string();
    let r = record(
        &line,
        Place {
            object: OBJECT,
            line_number: 7,
        },
    )
    .unwrap();
    assert_eq!(
        (at(&r, "/severity_id"), at(&r, "/severity")),
        (&json!(4), &json!("High"))
    );
    assert_eq!(
        at(&r, "/unmapped/trail/notAttested"),
        "it has no attestation"
    );
    // No action: activity unknown, and what API Activity requires says unknown.
    assert_eq!(
        (
            at(&r, "/activity_id"),
            at(&r, "/api/operation"),
            at(&r, "/actor/app_name")
        ),
        (&json!(0), &json!("unknown"), &json!("unknown"))
    );
    assert_eq!(at(&r, "/src_endpoint/name"), "unknown");
}

#[test]
fn a_tamper_line_or_a_broken_line_gives_no_record() {
    let place = Place {
        object: OBJECT,
        line_number: 0,
    };
    let tamper = r#"{"eventName":"MODIFY","keys":{"auditTime":"2026-11-22T10:00:00.000Z","messageId":"m"},"newImage":{},"oldImage":{}}"#;
    assert_eq!(record(tamper, place), Err(audit_ocsf::MapError::NotAnItem));
    assert_eq!(record("[1]", place), Err(audit_ocsf::MapError::NotAnObject));
    let bad_time = r#"{"messageId":"m","auditTime":"yesterday"}"#;
    assert_eq!(
        record(bad_time, place),
        Err(audit_ocsf::MapError::BadAuditTime)
    );
}

/// A Parquet row as the JSON record it holds, absent attributes left out.
fn row_json(row: &parquet::record::Row) -> serde_json::Map<String, Value> {
    row.get_column_iter()
        .filter_map(|(name, field)| Some((name.clone(), field_json(field)?)))
        .collect()
}

fn field_json(field: &Field) -> Option<Value> {
    Some(match field {
        Field::Null => return None,
        Field::Long(n) => Value::from(*n),
        Field::Str(text) => Value::from(text.as_str()),
        Field::Group(row) => Value::Object(row_json(row)),
        Field::ListInternal(list) => Value::Array(
            list.elements()
                .iter()
                .map(|e| field_json(e).unwrap_or(Value::Null))
                .collect(),
        ),
        other => panic!("a column of another type: {other:?}"),
    })
}

#[test]
fn a_parquet_object_holds_one_class_in_time_order_and_reads_back() {
    let mut api: Vec<Record> = [
        "cloudtrail-batch.json",
        "cloudevents-batch.json",
        "clean-batch.json",
    ]
    .iter()
    .flat_map(|f| records(f))
    .filter(|r| r.class == Class::ApiActivity)
    .collect();
    api.reverse();
    let mut bytes = Vec::new();
    assert_eq!(
        write(&mut api, &mut bytes).unwrap(),
        Some(Class::ApiActivity)
    );
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes.clone())).unwrap();
    let meta = reader.metadata();
    assert_eq!(meta.file_metadata().num_rows() as usize, api.len());
    let column = meta.row_group(0).column(0);
    assert!(column.compression().to_string().starts_with("ZSTD"));
    let mut times = Vec::new();
    let mut sorted = api.clone();
    sorted.sort_by_key(|r| r.time);
    for (row, expected) in reader.get_row_iter(None).unwrap().zip(&sorted) {
        let row = row.unwrap();
        let read = row_json(&row);
        let Some(Value::Number(time)) = read.get("time") else {
            panic!("time is a number")
        };
        times.push(time.as_i64().unwrap());
        assert_eq!(read["class_uid"], 6003);
        assert!(read.get("user").is_none(), "API Activity has no user");
        // Every attribute reads back as mapped: objects as groups, arrays as lists, `unmapped`
        // as its JSON text.
        let mut read = read;
        let unmapped = read.remove("unmapped").unwrap();
        let unmapped: Value = serde_json::from_str(unmapped.as_str().unwrap()).unwrap();
        read.insert("unmapped".into(), unmapped);
        assert_eq!(Value::Object(read), Value::Object(expected.fields.clone()));
    }
    // A reader that names one nested field reads that column alone.
    let leaves: Vec<String> = meta
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.path().string())
        .collect();
    for path in [
        "actor.user.name",
        "api.operation",
        "src_endpoint.ip",
        "metadata.original_time",
        "resources.list.element.name",
        "unmapped",
    ] {
        assert!(leaves.iter().any(|l| l == path), "{path} in {leaves:?}");
    }
    assert!(times.windows(2).all(|w| w[0] <= w[1]) && times.len() == api.len());
    // The same records give the same bytes: writing an object again changes nothing.
    let (mut again, mut twice) = (Vec::new(), Vec::new());
    write(&mut api.clone(), &mut again).unwrap();
    write(&mut api, &mut twice).unwrap();
    assert_eq!((&again, &twice), (&bytes, &bytes));
    let mut mixed: Vec<Record> = records("cloudevents-batch.json");
    assert!(matches!(
        write(&mut mixed, Vec::new()),
        Err(audit_ocsf::WriteError::MixedClasses(..))
    ));
}

/// tests/e2e/data/ocsf-trail-lines.jsonl, which tests/e2e/test_ocsf.py maps with `audit-ocsf`:
/// the sample batches' events as archived (a copy of the first marked as the archiver marks a
/// foreign item). This test keeps it so; `OCSF_WRITE_FIXTURE=1` rewrites it.
#[test]
fn the_python_tests_lines_are_the_sample_events_as_archived() {
    let mut lines: Vec<String> = [
        "clean-batch.json",
        "cloudevents-batch.json",
        "cloudtrail-batch.json",
        "eventbridge-batch.json",
    ]
    .iter()
    .flat_map(|f| lines(f))
    .collect();
    let mut foreign: serde_json::Map<String, Value> = serde_json::from_str(&lines[0]).unwrap();
    foreign.insert("messageId".into(), json!("copied-item"));
    foreign.insert("notAttested".into(), json!("it has no attestation"));
    lines.push(Value::Object(foreign).to_string());
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let path = repo().join("tests/e2e/data/ocsf-trail-lines.jsonl");
    if std::env::var_os("OCSF_WRITE_FIXTURE").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn another_eventbridge_event_maps_its_detail_type_region_and_account() {
    let all = records("eventbridge-batch.json");
    let deleted = all
        .iter()
        .find(|r| at(r, "/unmapped/envelope") == "eventbridge")
        .unwrap();
    assert_eq!(at(deleted, "/api/operation"), "Invoice Deleted");
    assert_eq!(
        (at(deleted, "/activity_id"), at(deleted, "/class_uid")),
        (&json!(4), &json!(6003))
    );
    assert_eq!(
        (deleted.region.as_str(), deleted.account.as_str()),
        ("us-east-1", "123456789012")
    );
    assert_eq!(
        at(deleted, "/resources"),
        &json!([{"uid": "arn:aws:example:us-east-1:123456789012:invoice/4711"}])
    );
    assert_eq!(at(deleted, "/unmapped/extra/source"), "com.example.billing");
    assert_eq!(
        at(deleted, "/unmapped/extra/detail/deletedBy"),
        "alice@example.com"
    );
    assert_eq!(
        at(deleted, "/unmapped/extra/region"),
        &Value::Null,
        "mapped to cloud"
    );
    // The batch's CloudTrail event is told from it.
    assert!(
        all.iter()
            .any(|r| at(r, "/unmapped/envelope") == "cloudtrail")
    );
}

/// The records of a Parquet object as JSON, `unmapped` parsed from its text.
fn read_back(bytes: Vec<u8>) -> Vec<Value> {
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes)).unwrap();
    reader
        .get_row_iter(None)
        .unwrap()
        .map(|row| {
            let mut read = row_json(&row.unwrap());
            if let Some(Value::String(text)) = read.remove("unmapped") {
                read.insert("unmapped".into(), serde_json::from_str(&text).unwrap());
            }
            Value::Object(read)
        })
        .collect()
}

#[test]
fn every_sample_record_of_either_class_reads_back_from_parquet_as_mapped() {
    let all: Vec<Record> = [
        "clean-batch.json",
        "cloudevents-batch.json",
        "cloudtrail-batch.json",
        "eventbridge-batch.json",
        "extra-fields.json",
        "mixed-batch.json",
    ]
    .iter()
    .flat_map(|f| records(f))
    .collect();
    let mut classes = 0;
    for class in [Class::ApiActivity, Class::Authentication] {
        let mut of: Vec<Record> = all.iter().filter(|r| r.class == class).cloned().collect();
        assert!(!of.is_empty(), "the samples have {class:?} records");
        let mut bytes = Vec::new();
        write(&mut of, &mut bytes).unwrap();
        let expected: Vec<Value> = of.iter().map(|r| Value::Object(r.fields.clone())).collect();
        assert_eq!(read_back(bytes), expected);
        classes += 1;
    }
    assert_eq!(classes, 2);
}

#[test]
fn a_record_with_an_attribute_the_schema_lacks_is_refused_not_written_short() {
    let mut one = records("clean-batch.json");
    one.truncate(1);
    let mut extended = one.clone();
    extended[0].fields["metadata"]["tenant_uid"] = json!("t-1");
    let error = write(&mut extended, Vec::new()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "record attribute metadata.tenant_uid has no column: the schema (columns.rs) must name it"
    );
    let mut mistyped = one.clone();
    mistyped[0].fields["api"]["operation"] = json!(7);
    let error = write(&mut mistyped, Vec::new()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "record attribute api.operation does not fit its column"
    );
    assert!(write(&mut one, Vec::new()).unwrap().is_some());
}
