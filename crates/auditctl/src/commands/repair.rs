//! Owns `auditctl archive repair`'s logic: the items of a range that the archive lacks, found by
//! verify's own comparison of the table with the archive (`verify::walk`, its `item not archived`
//! problems), sent by key only to the archiver, which reads and archives them itself (the only
//! writer of the archive; `audit_model::repair`), a request of at most `MAX_REPAIR_KEYS` keys at a
//! time; and the port to the archiver with its Lambda adapter. Must not know how the archive is
//! written, nor the command line.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;

use audit_aws::lambda::LambdaFunction;
use audit_aws::{AwsError, ErrorKind};
use audit_model::digest::ProblemKind;
use audit_model::repair::{ItemKey, MAX_REPAIR_KEYS, RepairAnswer, RepairRequest};
use futures::TryStreamExt;

use crate::commands::words::{RepairFailure, TrailError};
use audit_proof::verify::Settings;
use audit_proof::verify::key::TrustedKey;
use audit_proof::verify::ports::{Archive, Table};
use audit_proof::verify::report::{Observer, Problem};
use audit_proof::verify::walk;

/// The archiver, asked to repair.
pub trait Archiver: Send + Sync {
    /// Sends `request`; the archiver's answer.
    fn repair(
        &self,
        request: &RepairRequest,
    ) -> impl Future<Output = Result<RepairAnswer, TrailError>> + Send;
}

/// The archiver as a Lambda function.
#[derive(Debug, Clone)]
pub struct LambdaArchiver {
    function: LambdaFunction,
    at: String,
}

impl LambdaArchiver {
    /// `at`: where requests go, for errors.
    pub fn new(function: LambdaFunction, at: impl Into<String>) -> Self {
        Self {
            function,
            at: at.into(),
        }
    }
}

impl Archiver for LambdaArchiver {
    async fn repair(&self, request: &RepairRequest) -> Result<RepairAnswer, TrailError> {
        let function = self.function.name().to_owned();
        let payload = serde_json::to_vec(&request.to_event()).unwrap_or_default();
        let invoked = self
            .function
            .invoke(payload)
            .await
            .map_err(|error: AwsError| match error.kind {
                ErrorKind::NotFound => RepairFailure::NotFound {
                    function: function.clone(),
                    at: self.at.clone(),
                },
                ErrorKind::Denied => RepairFailure::Denied {
                    function: function.clone(),
                    detail: error.text,
                },
                _ => RepairFailure::Invoke {
                    function: function.clone(),
                    detail: error.text,
                },
            })?;
        answer(
            &function,
            invoked.function_error.as_deref(),
            &invoked.payload,
        )
        .map_err(TrailError::Repair)
    }
}

/// The archiver's answer: a repair's, or Lambda's error document when the function failed.
pub fn answer(
    function: &str,
    function_error: Option<&str>,
    payload: &[u8],
) -> Result<RepairAnswer, RepairFailure> {
    if function_error.is_some() {
        let document: serde_json::Value = serde_json::from_slice(payload).unwrap_or_default();
        let text = |name: &str| {
            document
                .get(name)
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        return Err(RepairFailure::Refused {
            function: function.to_owned(),
            error_type: Some(text("errorType"))
                .filter(|t| !t.is_empty())
                .or(function_error.map(str::to_owned))
                .unwrap_or_default(),
            message: text("errorMessage"),
        });
    }
    serde_json::from_slice(payload).map_err(|e| RepairFailure::Unreadable {
        function: function.to_owned(),
        detail: e.to_string(),
    })
}

/// What verify's comparison found for a repair.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Missing {
    /// The items of the range that are in no archive object (verify's `item not archived`).
    pub keys: Vec<ItemKey>,
    /// verify's other problems in the range (a repair does not mend them).
    pub other_problems: u64,
}

/// Collects verify's problems: the `messageId`s of items not archived (and their `auditTime`,
/// which the detail starts with), and a count of the rest.
#[derive(Default)]
struct Collect {
    not_archived: HashMap<String, BTreeSet<String>>,
    other: u64,
}

impl Observer for Collect {
    fn problem(&mut self, problem: &Problem) -> Result<(), audit_proof::Error> {
        if problem.kind == ProblemKind::ItemNotArchived {
            let times = self
                .not_archived
                .entry(problem.subject.clone())
                .or_default();
            // "auditTime <time>: …"; without it, every item of that messageId in the range.
            if let Some((time, _)) = problem
                .detail
                .strip_prefix("auditTime ")
                .and_then(|rest| rest.split_once(": "))
            {
                times.insert(time.to_owned());
            }
        } else {
            self.other += 1;
        }
        Ok(())
    }
}

/// The items of `settings.range` in the table that are in no archive object, by verify's walk
/// (the same periods, the same look-ahead, the same "not archived yet" for items written within
/// `settings.lag_seconds` of now, which the stream may still deliver).
pub async fn missing<A: Archive, T: Table>(
    archive: &A,
    key: &TrustedKey,
    table: &T,
    settings: &Settings,
) -> Result<Missing, TrailError> {
    let mut collect = Collect::default();
    walk::verify(archive, key, Some(table), settings, &mut collect).await?;
    if collect.not_archived.is_empty() {
        return Ok(Missing {
            keys: Vec::new(),
            other_problems: collect.other,
        });
    }
    // The keys: the table's items of the range with those messageIds (and auditTimes).
    let mut keys = BTreeSet::new();
    let mut items = table.items(&settings.range);
    while let Some(item) = items.try_next().await? {
        if let Some(times) = collect.not_archived.get(&item.message_id)
            && (times.is_empty() || times.contains(&item.audit_time))
        {
            keys.insert(ItemKey {
                message_id: item.message_id,
                audit_time: item.audit_time,
            });
        }
    }
    Ok(Missing {
        keys: keys.into_iter().collect(),
        other_problems: collect.other,
    })
}

/// Sends `keys` to the archiver, `MAX_REPAIR_KEYS` at a time, telling `each` every answer as it
/// comes; the answers together. Stops at the first request the archiver refuses or cannot be
/// sent (what was repaired before it stands).
pub async fn repair<R: Archiver>(
    archiver: &R,
    keys: &[ItemKey],
    each: &mut dyn FnMut(&RepairAnswer) -> Result<(), TrailError>,
) -> Result<RepairAnswer, TrailError> {
    let mut all = RepairAnswer::default();
    for chunk in keys.chunks(MAX_REPAIR_KEYS) {
        let answer = archiver.repair(&RepairRequest::new(chunk.to_vec())).await?;
        each(&answer)?;
        all.repaired.extend(answer.repaired);
        all.already_repaired.extend(answer.already_repaired);
        all.not_found.extend(answer.not_found);
        all.failed.extend(answer.failed);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use audit_model::archive::{ObjectKey, ObjectKind, Period, PeriodLength};
    use audit_model::line::item_line;
    use audit_model::message::canonical_time;
    use audit_model::repair::Repaired;
    use audit_model::repair::{REPAIR_METADATA, repair_identity};
    use bytes::Bytes;
    use chrono::{DateTime, Duration, Utc};
    use serde_json::{Map, Value, json};

    use super::*;
    use audit_archiver::marker::{Confirmed, Marker, RunEntry, marker_key};
    use audit_aws::kms::MemoryKey as TestKey;
    use audit_aws::s3::MemoryBucket;
    use audit_model::range::TimeRange;
    use audit_proof::archive::S3Archive;
    use audit_proof::verify::ports::{MemoryTable, TableItem};

    type MemoryArchive = S3Archive<MemoryBucket>;

    /// Writes `lines` at `key` as the archiver does: first the marker that attests the object
    /// (the run's first record `first`, the key and SHA-256), then the object naming the marker,
    /// with `metadata`.
    fn write_attested(
        bucket: &MemoryBucket,
        key: &str,
        first: RunEntry,
        lines: &[String],
        at: DateTime<Utc>,
        mut metadata: Vec<(&'static str, String)>,
    ) {
        let body = Bytes::from(
            audit_archiver::encode::gzip_lines(lines.iter().map(String::as_str)).unwrap(),
        );
        let marker = marker_key(&first, 0).unwrap();
        let confirmed = Confirmed {
            key: key.to_owned(),
            event_ids: vec![first.event_id().to_owned()],
            sha256: audit_model::digest::hex(&audit_model::digest::sha256(&body)),
        };
        let json = Marker::new(vec![first], &[confirmed], at.timestamp_millis() + 30_000);
        bucket.overwrite_with(&marker, Bytes::from(json.to_json()), Vec::new());
        metadata.push(("events", lines.len().to_string()));
        metadata.push((audit_model::archive::MARKER_METADATA, marker));
        bucket.overwrite_with(key, body, metadata);
    }

    const BUCKET: &str = "audit-archive";
    const START: &str = "2026-11-22T10:00:00Z";

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    fn length() -> PeriodLength {
        PeriodLength::new(60).unwrap()
    }

    /// The archiver's twin: it archives each key it is sent from the table (never from the
    /// request) in one object of the period open `now`, once per item (a second request for an
    /// item finds the first repair), as audit-archiver's repair does.
    struct MemoryArchiver<'a> {
        archive: &'a MemoryArchive,
        table: &'a MemoryTable,
        now: Mutex<DateTime<Utc>>,
        repaired: Mutex<BTreeMap<ItemKey, String>>,
        requests: Mutex<Vec<usize>>,
    }

    impl Archiver for MemoryArchiver<'_> {
        async fn repair(&self, request: &RepairRequest) -> Result<RepairAnswer, TrailError> {
            assert!(request.keys.len() <= MAX_REPAIR_KEYS);
            self.requests.lock().unwrap().push(request.keys.len());
            let mut answer = RepairAnswer::default();
            let now = *self.now.lock().unwrap();
            for key in &request.keys {
                if self.repaired.lock().unwrap().contains_key(key) {
                    answer.already_repaired.push(key.clone());
                    continue;
                }
                let Some(item) = self.table.get_item(&key.message_id, &key.audit_time) else {
                    answer.not_found.push(key.clone());
                    continue;
                };
                // Keyed by the item's repair identity, marked as a repair, as the archiver does.
                let object =
                    ObjectKey::new(ObjectKind::Trail, now, length(), &repair_identity(key).0, 0)
                        .unwrap()
                        .to_string();
                let (sequence, event_id) = repair_identity(key);
                write_attested(
                    self.archive,
                    &object,
                    RunEntry(sequence, event_id),
                    &[item.line],
                    now,
                    vec![(REPAIR_METADATA, "true".into())],
                );
                self.repaired
                    .lock()
                    .unwrap()
                    .insert(key.clone(), object.clone());
                answer.repaired.push(Repaired {
                    key: key.clone(),
                    object,
                });
            }
            Ok(answer)
        }
    }

    struct World {
        archive: MemoryArchive,
        key: TestKey,
        table: MemoryTable,
        sealed: Option<Period>,
    }

    impl World {
        fn new() -> Self {
            Self {
                archive: S3Archive::over(MemoryBucket::new(), BUCKET, "memory"),
                key: TestKey::new("arn:aws:kms:us-east-1:111122223333:key/digest"),
                table: MemoryTable::default(),
                sealed: None,
            }
        }

        fn item(&self, id: &str, received: DateTime<Utc>) -> TableItem {
            let item: Map<String, Value> = json!({
                "messageId": {"S": id},
                "auditTime": {"S": canonical_time(received)},
                "auditText": {"S": format!("text of {id}")},
                "receivedAt": {"S": canonical_time(received)},
            })
            .as_object()
            .unwrap()
            .clone();
            TableItem {
                message_id: id.to_owned(),
                audit_time: canonical_time(received),
                line: item_line(&item),
                received_at: Some(canonical_time(received)),
            }
        }

        /// Items written at `received`; archived 2 s later unless `lost`.
        fn write(&self, ids: &[&str], received: DateTime<Utc>, lost: bool, sequence: u64) {
            let items: Vec<TableItem> = ids.iter().map(|id| self.item(id, received)).collect();
            if !lost {
                let lines: Vec<String> = items.iter().map(|i| i.line.clone()).collect();
                let archived = received + Duration::seconds(2);
                let key = ObjectKey::new(
                    ObjectKind::Trail,
                    archived,
                    length(),
                    &sequence.to_string(),
                    0,
                )
                .unwrap()
                .to_string();
                let first = RunEntry(sequence.to_string(), format!("event-{sequence}"));
                write_attested(&self.archive, &key, first, &lines, archived, Vec::new());
            }
            for item in items {
                self.table.put(item);
            }
        }

        /// The archiver's own sealer, run once per period as its schedule runs it, from `START`'s
        /// period to `until`'s.
        async fn seal_through(&mut self, until: DateTime<Utc>) {
            let mut next = match self.sealed {
                Some(p) => p.next(),
                None => length().period_of(at(START)),
            };
            while next.start <= length().period_of(until).start {
                let report = audit_archiver::seal::Sealer {
                    bucket: &*self.archive,
                    signer: &self.key,
                    bucket_name: BUCKET,
                    period: length(),
                }
                .run(
                    DateTime::from_timestamp(next.sealable_at(), 0).unwrap(),
                    audit_archiver::budget::Budget::unlimited(),
                )
                .await;
                assert!(report.failure.is_none(), "{report:?}");
                self.sealed = Some(next);
                next = next.next();
            }
        }

        fn settings(&self, now: DateTime<Utc>) -> Settings {
            Settings {
                bucket: BUCKET.to_owned(),
                length: length(),
                range: TimeRange::parse(START, "2026-11-22T10:09:59.999Z").unwrap(),
                now,
                grace_seconds: Settings::default_grace(length()),
                lag_seconds: 300,
                concurrency: 2,
                attestations: None,
            }
        }

        async fn missing(&self, now: DateTime<Utc>) -> Missing {
            let key = TrustedKey::new(self.key.public_key()).unwrap();
            missing(&self.archive, &key, &self.table, &self.settings(now))
                .await
                .unwrap()
        }

        async fn problems(&self, now: DateTime<Utc>) -> Vec<Problem> {
            let key = TrustedKey::new(self.key.public_key()).unwrap();
            let mut problems = Vec::new();
            walk::verify(
                &self.archive,
                &key,
                Some(&self.table),
                &self.settings(now),
                &mut problems,
            )
            .await
            .unwrap();
            problems
        }
    }

    fn key(id: &str, time: &str) -> ItemKey {
        ItemKey {
            message_id: id.into(),
            audit_time: canonical_time(at(time)),
        }
    }

    #[tokio::test]
    async fn the_items_verify_finds_not_archived_are_sent_by_key_archived_and_then_verify_holds() {
        let mut world = World::new();
        world.write(&["a-1", "a-2"], at("2026-11-22T10:01:10Z"), false, 100);
        // Given up by the stream: in the table, in no object.
        world.write(&["lost-1", "lost-2"], at("2026-11-22T10:03:10Z"), true, 0);
        world.write(&["b-1"], at("2026-11-22T10:05:10Z"), false, 200);
        let now = at("2026-11-22T10:30:00Z");
        world.seal_through(now - Duration::minutes(2)).await;
        let before = world.problems(now).await;
        assert_eq!(
            before
                .iter()
                .map(|p| (p.kind, p.subject.as_str()))
                .collect::<Vec<_>>(),
            [
                (ProblemKind::ItemNotArchived, "lost-1"),
                (ProblemKind::ItemNotArchived, "lost-2")
            ]
        );

        let found = world.missing(now).await;
        let lost = vec![
            key("lost-1", "2026-11-22T10:03:10Z"),
            key("lost-2", "2026-11-22T10:03:10Z"),
        ];
        assert_eq!(
            found,
            Missing {
                keys: lost.clone(),
                other_problems: 0
            }
        );

        let archiver = MemoryArchiver {
            archive: &world.archive,
            table: &world.table,
            now: Mutex::new(now),
            repaired: Mutex::default(),
            requests: Mutex::default(),
        };
        let mut told = Vec::new();
        let answer = repair(&archiver, &found.keys, &mut |a| {
            told.push(a.clone());
            Ok(())
        })
        .await
        .unwrap();
        assert_eq!(
            answer
                .repaired
                .iter()
                .map(|r| r.key.clone())
                .collect::<Vec<_>>(),
            lost
        );
        assert_eq!(told, vec![answer.clone()]);

        // The repair's period sealed (read ahead of each item as far as the repair came).
        let later = now + Duration::minutes(5);
        world.seal_through(later - Duration::minutes(2)).await;
        let mut settings = world.settings(later);
        settings.lag_seconds = 3600;
        let key_ = TrustedKey::new(world.key.public_key()).unwrap();
        let mut problems = Vec::new();
        let summary = walk::verify(
            &world.archive,
            &key_,
            Some(&world.table),
            &settings,
            &mut problems,
        )
        .await
        .unwrap();
        assert_eq!(problems, Vec::new());
        // verify counts the items a repair archived.
        assert_eq!(summary.table.as_ref().map(|t| t.items_repaired), Some(2));
        assert!(
            summary.lines().iter().any(|l| l.starts_with(
                "repairs   2 of the archived items archived by auditctl archive repair"
            )),
            "{:?}",
            summary.lines()
        );
        // A second repair of the range finds nothing to send.
        let key_ = TrustedKey::new(world.key.public_key()).unwrap();
        let again = missing(&world.archive, &key_, &world.table, &settings)
            .await
            .unwrap();
        assert_eq!(again, Missing::default());
    }

    #[tokio::test]
    async fn items_written_within_the_lag_of_now_are_left_to_the_stream() {
        let mut world = World::new();
        world.write(&["fresh"], at("2026-11-22T10:09:00Z"), true, 0);
        let now = at("2026-11-22T10:10:00Z");
        world.seal_through(now - Duration::minutes(2)).await;
        assert_eq!(world.missing(now).await.keys, Vec::<ItemKey>::new());
    }

    #[tokio::test]
    async fn more_keys_than_one_request_takes_are_sent_in_parts_and_a_key_sent_again_is_archived_once()
     {
        let world = World::new();
        let time = at("2026-11-22T10:01:00Z");
        let ids: Vec<String> = (0..250).map(|i| format!("m-{i:03}")).collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        world.write(&refs, time, true, 0);
        let keys: Vec<ItemKey> = ids
            .iter()
            .map(|id| key(id, "2026-11-22T10:01:00Z"))
            .collect();
        let archiver = MemoryArchiver {
            archive: &world.archive,
            table: &world.table,
            now: Mutex::new(at("2026-11-22T11:00:00Z")),
            repaired: Mutex::default(),
            requests: Mutex::default(),
        };
        let answer = repair(&archiver, &keys, &mut |_| Ok(())).await.unwrap();
        assert_eq!(*archiver.requests.lock().unwrap(), vec![100, 100, 50]);
        assert_eq!(answer.repaired.len(), 250);
        let again = repair(&archiver, &keys[..3], &mut |_| Ok(()))
            .await
            .unwrap();
        assert!(again.repaired.is_empty());
        assert_eq!(again.already_repaired, keys[..3].to_vec());
    }

    #[test]
    fn a_refusal_by_the_archiver_is_told_in_its_own_words_and_a_foreign_answer_names_the_fix() {
        let refused = answer(
            "audit-archiver",
            Some("Unhandled"),
            br#"{"errorType":"RepairTableRefused","errorMessage":"reading the items from table T: AccessDenied"}"#,
        )
        .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "the archiver function audit-archiver refused the repair (RepairTableRefused): reading the items from table T: AccessDenied"
        );
        let old = answer("audit-archiver", None, br#"{"batchItemFailures":[]}"#);
        assert!(
            matches!(&old, Err(RepairFailure::Unreadable { .. })),
            "an archiver that does not repair answers a stream batch's response: {old:?}"
        );
        let garbage = answer("audit-archiver", None, b"not json").unwrap_err();
        assert!(
            garbage
                .to_string()
                .contains("deploy the current audit-archiver"),
            "{garbage}"
        );
    }
}
