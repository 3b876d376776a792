//! Owns the repair event (`audit_model::repair`): `auditctl archive repair` names items of the
//! table that the archive lacks, by key only; each is read here from the table (ConsistentRead:
//! its content never comes from whoever asked) and archived as a run of its own through the
//! stream's markers and objects (`batch::archive_repair`), in the period open now, marked as a
//! repair. The answer says what became of each key. Must not know the SDK or the Lambda runtime.
//!
//! A repaired item's run is keyed by an identity made from its key, not by a stream record (it
//! has none any more): sequence number `9` followed by the 39 decimal digits of the first 16
//! bytes of SHA-256(auditTime, newline, messageId), and eventID `repair-` and the same bytes in
//! hex. DynamoDB's own sequence numbers are far shorter, so the two never meet, and a repair's
//! objects sort after the stream's of their period. So a second repair of an item finds the first
//! one's marker and writes nothing, as a retried stream batch does.

use audit_model::keys::{PARTITION_KEY, SORT_KEY};
use audit_model::repair::{
    ItemKey, NotRepaired, REPAIR_EVENT, RepairAnswer, RepairRequest, Repaired, RequestError,
    repair_identity,
};
use chrono::Utc;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::attest::AttestationCheck;
use crate::batch::{Ports, Settings, archive_repair};
use crate::budget::Budget;
use crate::clock::Clock;
use crate::event::{Change, Image, StreamRecord};
use crate::table::ItemTable;
use crate::words;
use audit_aws::dynamodb::batch_get::BatchGetError;
use audit_aws::s3::Bucket;

/// Items archived at once (each a marker and an object write).
const CONCURRENCY: usize = 8;

/// The request in a Lambda event, if the event is a repair (`{"auditArchiveRepair": …}`).
pub fn request_body(payload: &Value) -> Option<Value> {
    payload.get(REPAIR_EVENT).cloned()
}

/// Why a repair event was refused whole (the invocation fails with this message).
#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error(
        "TABLE_NAME is not set on the archiver: set it to the audit table (the stack's AuditMessagesTableName; template.yaml sets it) so that a repair can read the items"
    )]
    NoTable,
    #[error(
        "reading the items from table {table}: {}; the archiver's role needs dynamodb:BatchGetItem on the table (deploy the current template.yaml)",
        words::Table(error)
    )]
    TableRefused { table: String, error: BatchGetError },
    #[error(
        "reading the items from table {table}: {}; try again",
        words::Table(error)
    )]
    TableUnavailable { table: String, error: BatchGetError },
}

impl RepairError {
    pub fn error_type(&self) -> &'static str {
        match self {
            Self::Request(_) => "RepairRequestInvalid",
            Self::NoTable => "RepairNoTable",
            Self::TableRefused { .. } => "RepairTableRefused",
            Self::TableUnavailable { .. } => "RepairTableUnavailable",
        }
    }
}

impl From<RepairError> for lambda_runtime::Diagnostic {
    fn from(error: RepairError) -> Self {
        lambda_runtime::Diagnostic {
            error_type: error.error_type().into(),
            error_message: error.to_string(),
        }
    }
}

/// The record a repair archives: the item's image as an INSERT's new image, created now.
fn record(key: &ItemKey, item: Image) -> StreamRecord {
    let (sequence_number, event_id) = repair_identity(key);
    let mut keys = Image::new();
    keys.insert(PARTITION_KEY.into(), json!({"S": key.message_id}));
    keys.insert(SORT_KEY.into(), json!({"S": key.audit_time}));
    StreamRecord {
        sequence_number,
        event_id,
        created: Utc::now(),
        keys,
        change: Change::Insert { new_image: item },
    }
}

/// The key an item read from the table holds.
fn key_of(item: &Image) -> Option<ItemKey> {
    let text = |name: &str| {
        item.get(name)
            .and_then(|v| v.get("S"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    Some(ItemKey {
        message_id: text(PARTITION_KEY)?,
        audit_time: text(SORT_KEY)?,
    })
}

/// What a repair works with.
pub struct Repairer<'a, B, C, T> {
    pub bucket: &'a B,
    pub clock: &'a C,
    /// The audit table (`TABLE_NAME`) and its name; `None` when not configured.
    pub table: Option<(&'a T, &'a str)>,
    pub settings: &'a Settings,
    /// The receiver's attestation key (`ATTESTATION_KEY_ID`): an item it did not attest is
    /// archived with its line marked, as from the stream (`attest`); `None`: nothing checked.
    pub attestation: Option<&'a AttestationCheck>,
}

impl<B: Bucket, C: Clock, T: ItemTable> Repairer<'_, B, C, T> {
    /// Reads the request's items from the table and archives each that is there.
    pub async fn repair(&self, body: Value, budget: Budget) -> Result<RepairAnswer, RepairError> {
        let request = RepairRequest::from_body(body)?;
        let (table, name) = self.table.ok_or(RepairError::NoTable)?;
        let items = table.get_items(&request.keys).await.map_err(|error| {
            let table = name.to_owned();
            if matches!(&error, BatchGetError::Request(e) if words::refused(e)) {
                RepairError::TableRefused { table, error }
            } else {
                RepairError::TableUnavailable { table, error }
            }
        })?;
        let mut found: std::collections::HashMap<ItemKey, Image> = items
            .into_iter()
            .filter_map(|item| key_of(&item).map(|key| (key, item)))
            .collect();
        let mut answer = RepairAnswer::default();
        let mut records = Vec::new();
        for key in request.keys {
            match found.remove(&key) {
                Some(item) => {
                    let mut record = record(&key, item);
                    if let Some(foreign) = self.attestation.and_then(|c| c.mark_record(&mut record))
                    {
                        tracing::error!(keys = %foreign.keys, reason = %foreign.reason, "item not attested: an item the receiver did not write is in the audit table (repaired, marked notAttested)");
                    }
                    records.push((key.clone(), record))
                }
                None => answer.not_found.push(key),
            }
        }
        let (bucket, clock, settings) = (self.bucket, self.clock, self.settings);
        let mut outcomes = futures::stream::iter(records)
            .map(|(key, record)| async move {
                let ports = Ports { bucket, clock };
                let report = archive_repair(ports, settings, &record, budget).await;
                (key, report)
            })
            .buffered(CONCURRENCY);
        while let Some((key, report)) = outcomes.next().await {
            match (&report.failure, report.objects.first()) {
                (None, Some(object)) => answer.repaired.push(Repaired {
                    key,
                    object: object.key.clone(),
                }),
                (None, None) if report.already_archived > 0 => answer.already_repaired.push(key),
                (Some(failure), _) => answer.failed.push(NotRepaired {
                    key,
                    reason: failure.to_string(),
                }),
                (None, None) => answer.failed.push(NotRepaired {
                    key,
                    reason: "nothing was written and no earlier repair was found".into(),
                }),
            }
        }
        tracing::info!(
            repaired = answer.repaired.len(),
            already_repaired = answer.already_repaired.len(),
            not_found = answer.not_found.len(),
            failed = answer.failed.len(),
            objects = ?answer.repaired.iter().map(|r| r.object.as_str()).collect::<Vec<_>>(),
            "archive repaired"
        );
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use audit_model::archive::{ObjectKey, PeriodLength};
    use audit_model::digest::hex;
    use audit_model::line::item_line;
    use audit_model::repair::REPAIR_METADATA;
    use chrono::DateTime;
    use flate2::read::GzDecoder;

    use super::*;
    use crate::clock::ManualClock;
    use crate::marker::Marker;
    use crate::table::memory::MemoryTable;
    use audit_aws::s3::MemoryBucket;

    const NOW_MS: i64 = 1_795_341_600_000; // 2026-11-22T10:00:00Z

    fn item(id: &str) -> Image {
        serde_json::from_value(json!({
            "messageId": {"S": id},
            "auditTime": {"S": "2026-11-22T09:00:00.000Z"},
            "auditText": {"S": format!("text of {id}")},
            "amount": {"N": "12.50"},
            "receivedAt": {"S": "2026-11-22T09:00:00.100Z"}
        }))
        .unwrap()
    }

    fn key(id: &str) -> ItemKey {
        ItemKey {
            message_id: id.into(),
            audit_time: "2026-11-22T09:00:00.000Z".into(),
        }
    }

    fn body(ids: &[&str]) -> Value {
        RepairRequest::new(ids.iter().map(|id| key(id)).collect()).to_event()[REPAIR_EVENT].clone()
    }

    struct World {
        bucket: MemoryBucket,
        table: MemoryTable,
        clock: ManualClock,
        settings: Settings,
        attestation: Option<AttestationCheck>,
    }

    impl World {
        fn new(ids: &[&str]) -> Self {
            let table = MemoryTable::new();
            for id in ids {
                table.put(item(id));
            }
            Self {
                bucket: MemoryBucket::new(),
                table,
                clock: ManualClock::new(DateTime::from_timestamp_millis(NOW_MS).unwrap()),
                settings: Settings {
                    period: PeriodLength::new(60).unwrap(),
                    ..Settings::default()
                },
                attestation: None,
            }
        }

        async fn repair(&self, ids: &[&str]) -> Result<RepairAnswer, RepairError> {
            let repairer = Repairer {
                bucket: &self.bucket,
                clock: &self.clock,
                table: Some((&self.table, "AuditMessages")),
                settings: &self.settings,
                attestation: self.attestation.as_ref(),
            };
            repairer.repair(body(ids), Budget::unlimited()).await
        }

        fn lines(&self, key: &str) -> Vec<String> {
            let version = self.bucket.current(key).expect("object written");
            let mut text = String::new();
            GzDecoder::new(&version.body[..])
                .read_to_string(&mut text)
                .unwrap();
            text.lines().map(str::to_owned).collect()
        }
    }

    #[tokio::test]
    async fn an_item_the_receiver_did_not_attest_is_repaired_with_its_line_marked() {
        let kms = audit_aws::kms::MemoryKey::new("arn:aws:kms:us-east-1:000000000000:key/a");
        let mut world = World::new(&["m-1"]);
        world.attestation = Some(AttestationCheck::new(
            audit_model::attest::ReceiverKey::from_der(&kms.public_key().der),
        ));
        let answer = world.repair(&["m-1"]).await.unwrap();
        let mut expected: serde_json::Map<String, Value> =
            serde_json::from_str(&item_line(&item("m-1"))).unwrap();
        expected.insert(
            crate::attest::NOT_ATTESTED.into(),
            json!("it has no attestation"),
        );
        assert_eq!(
            world.lines(&answer.repaired[0].object),
            vec![Value::Object(expected).to_string()]
        );
    }

    #[tokio::test]
    async fn each_item_is_read_from_the_table_and_archived_as_its_line_in_an_object_marked_as_a_repair()
     {
        let world = World::new(&["m-1", "m-2"]);
        let answer = world.repair(&["m-1", "m-2"]).await.unwrap();
        assert_eq!(answer.repaired.len(), 2, "{answer:?}");
        assert!(answer.already_repaired.is_empty() && answer.not_found.is_empty());
        assert!(answer.failed.is_empty());
        for repaired in &answer.repaired {
            let object = &repaired.object;
            let parsed = ObjectKey::parse(object).expect("the archive's key grammar");
            assert_eq!(parsed.period_start, NOW_MS / 1000, "in the period open now");
            assert!(
                object.starts_with("trail/dt=2026-11-22/hour=10/"),
                "{object}"
            );
            let id = &repaired.key.message_id;
            assert_eq!(world.lines(object), vec![item_line(&item(id))]);
            let version = world.bucket.current(object).unwrap();
            assert!(
                version
                    .metadata
                    .contains(&(REPAIR_METADATA, "true".to_owned())),
                "{:?}",
                version.metadata
            );
            // Its marker, keyed by the item's repair identity, attests it and says repair.
            let (sequence, event_id) = repair_identity(&repaired.key);
            let marker_key =
                crate::marker::marker_key(&crate::marker::RunEntry(sequence, event_id), 0).unwrap();
            let marker =
                Marker::from_json(&world.bucket.current(&marker_key).unwrap().body).unwrap();
            assert!(marker.repair);
            assert!(marker.attests(object, &hex(&version.sha256)));
        }
    }

    #[tokio::test]
    async fn a_second_repair_of_the_same_items_writes_nothing() {
        let world = World::new(&["m-1", "m-2"]);
        world.repair(&["m-1"]).await.unwrap();
        let puts = world.bucket.puts();
        world.clock.advance(std::time::Duration::from_secs(3600));
        let answer = world.repair(&["m-2", "m-1"]).await.unwrap();
        assert_eq!(answer.already_repaired, vec![key("m-1")]);
        assert_eq!(answer.repaired.len(), 1);
        assert_eq!(answer.repaired[0].key, key("m-2"));
        assert_eq!(
            world.bucket.puts(),
            puts + 2,
            "m-2's marker and object only"
        );
        let again = world.repair(&["m-1", "m-2"]).await.unwrap();
        assert!(again.repaired.is_empty());
        assert_eq!(again.already_repaired.len(), 2);
        assert_eq!(world.bucket.puts(), puts + 2);
    }

    #[tokio::test]
    async fn keys_the_table_does_not_hold_are_named_and_nothing_is_written_for_them() {
        let world = World::new(&["m-1"]);
        let answer = world.repair(&["gone", "m-1"]).await.unwrap();
        assert_eq!(answer.not_found, vec![key("gone")]);
        assert_eq!(answer.repaired.len(), 1);
        assert_eq!(world.bucket.keys("trail/").len(), 1);
    }

    #[tokio::test]
    async fn the_content_archived_is_the_tables_whatever_the_request_carries() {
        let world = World::new(&["m-1"]);
        let mut forged = body(&["m-1"]);
        forged["keys"][0]["auditText"] = json!("forged text");
        let repairer = Repairer {
            bucket: &world.bucket,
            clock: &world.clock,
            table: Some((&world.table, "AuditMessages")),
            settings: &world.settings,
            attestation: None,
        };
        let answer = repairer.repair(forged, Budget::unlimited()).await.unwrap();
        let lines = world.lines(&answer.repaired[0].object);
        assert_eq!(lines, vec![item_line(&item("m-1"))]);
        assert!(!lines[0].contains("forged"));
        let mut with_items = body(&["m-1"]);
        with_items["items"] = json!([{"messageId": "m-1", "auditText": "forged"}]);
        let refused = repairer.repair(with_items, Budget::unlimited()).await;
        assert!(matches!(
            refused,
            Err(RepairError::Request(RequestError::Malformed(_)))
        ));
    }

    #[tokio::test]
    async fn a_table_that_refuses_fails_the_repair_naming_the_permission_and_writes_nothing() {
        let world = World::new(&["m-1"]);
        world.table.fail_with(Some(BatchGetError::Request(
            audit_aws::error::AwsError::from_answer(
                400,
                "AccessDeniedException",
                "not authorized to perform dynamodb:BatchGetItem",
            ),
        )));
        let error = world.repair(&["m-1"]).await.unwrap_err();
        assert_eq!(error.error_type(), "RepairTableRefused");
        assert!(
            error.to_string().contains("dynamodb:BatchGetItem"),
            "{error}"
        );
        assert!(world.bucket.keys("").is_empty());
        let unconfigured = Repairer::<_, _, MemoryTable> {
            bucket: &world.bucket,
            clock: &world.clock,
            table: None,
            settings: &world.settings,
            attestation: None,
        };
        let error = unconfigured
            .repair(body(&["m-1"]), Budget::unlimited())
            .await
            .unwrap_err();
        assert!(
            error.to_string().starts_with("TABLE_NAME is not set"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn an_object_write_that_fails_is_reported_failed_and_a_later_repair_archives_it() {
        use audit_aws::error::AwsError;
        use audit_aws::s3::memory::{Effect, Fault, Operation};
        let world = World::new(&["m-1"]);
        world.bucket.inject(Fault {
            operation: Operation::Put,
            prefix: "trail/".into(),
            times: Some(1),
            effect: Effect::Fail(AwsError::from_answer(503, "SlowDown", "slow down")),
        });
        let answer = world.repair(&["m-1"]).await.unwrap();
        assert_eq!(answer.failed.len(), 1, "{answer:?}");
        assert!(
            answer.failed[0].reason.contains("writing an object"),
            "{answer:?}"
        );
        // After the failed attempt's writeBy, the next repair writes attempt 1.
        world.clock.advance(std::time::Duration::from_secs(60));
        let answer = world.repair(&["m-1"]).await.unwrap();
        assert_eq!(answer.repaired.len(), 1, "{answer:?}");
        assert!(answer.repaired[0].object.ends_with("-a1.jsonl.gz"));
        assert_eq!(world.bucket.keys("trail/").len(), 1);
    }
}
