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
    for (row, expected) in reader.get_row_iter(None).unwrap().zip(&api) {
        let row = row.unwrap();
        let field = |name: &str| {
            row.get_column_iter()
                .find(|(n, _)| n.as_str() == name)
                .map(|(_, f)| f.clone())
        };
        let Some(Field::Long(time)) = field("time") else {
            panic!("time is a long")
        };
        times.push(time);
        assert_eq!(field("class_uid"), Some(Field::Long(6003)));
        let Some(Field::Str(metadata)) = field("metadata") else {
            panic!("metadata is text")
        };
        assert_eq!(
            serde_json::from_str::<Value>(&metadata).unwrap(),
            expected.fields["metadata"]
        );
        let user = field("user");
        assert_eq!(user, Some(Field::Null), "API Activity has no user");
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
