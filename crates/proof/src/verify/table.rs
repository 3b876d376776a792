//! Owns `verify --table`: each archived trail event looked up in the table (still there and
//! unchanged, unless expired by TTL), and each item of the table in the range looked up among the
//! archived events, in the periods it can have been archived in (from its `receivedAt`). Must not
//! know S3, digests or how objects are read.
//!
//! Memory: the archived events are remembered as 16-byte keys (the first half of the SHA-256 of
//! `auditTime`, a newline and `messageId`) in a set, about 40 bytes per event with the set's
//! overhead (40 MB for a million events); events are looked up in the table 100 at a time
//! (BatchGetItem); items not found where they should be are kept (their key and period span)
//! until the periods they could be in are read.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use audit_model::archive::{Period, PeriodLength};
use audit_model::digest::{ProblemKind, digest_key, sha256};
use audit_model::keys::{PARTITION_KEY, SORT_KEY};
use audit_model::line::NOT_ATTESTED;
use audit_model::repair::is_repair_object;
use chrono::DateTime;
use futures::TryStreamExt;
use serde_json::{Map, Value};

use super::CLOCK_SKEW_SECONDS;
use super::attest::Attestations;
use super::ports::{Table, TableItem};
use super::report::{Problem, TableSummary};
use crate::Error;
use audit_model::range::TimeRange;

/// DynamoDB's most keys in one BatchGetItem.
pub const BATCH: usize = 100;

/// One trail event as the archive holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedEvent {
    pub message_id: String,
    pub audit_time: String,
    /// The line as archived (`item_line` of the item when it was written).
    pub line: String,
    /// `expiresAt` (epoch seconds), when the item has one.
    pub expires_at: Option<i64>,
    /// The object it was read from.
    pub object: Arc<str>,
}

impl ArchivedEvent {
    /// The event of one archived line; `None` for a line that is not an item.
    pub fn parse(line: String, object: &Arc<str>) -> Option<Self> {
        let fields: Map<String, Value> = serde_json::from_str(&line).ok()?;
        let text = |name: &str| fields.get(name).and_then(Value::as_str).map(str::to_owned);
        let expires_at = fields.get("expiresAt").and_then(|v| match v {
            Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
            Value::String(s) => s.parse().ok(),
            _ => None,
        });
        Some(Self {
            message_id: text(PARTITION_KEY)?,
            audit_time: text(SORT_KEY)?,
            expires_at,
            line,
            object: object.clone(),
        })
    }

    pub fn key(&self) -> u128 {
        key_hash(&self.message_id, &self.audit_time)
    }
}

/// The 16-byte key an event is remembered by. `auditTime` is canonical (fixed length, no
/// newline), so time, newline and id are never ambiguous.
pub fn key_hash(message_id: &str, audit_time: &str) -> u128 {
    let mut text = Vec::with_capacity(audit_time.len() + 1 + message_id.len());
    text.extend_from_slice(audit_time.as_bytes());
    text.push(b'\n');
    text.extend_from_slice(message_id.as_bytes());
    let hash = sha256(&text);
    let mut half = [0u8; 16];
    half.copy_from_slice(&hash[..16]);
    u128::from_be_bytes(half)
}

/// An item not found among the events read so far, and the periods it can have been archived in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub message_id: String,
    pub audit_time: String,
    pub received_at: String,
    /// The first and last period starts it is archived in, as a rule (`--archive-lag`).
    pub first: i64,
    pub last: i64,
    /// The last period start it can be archived in at all (`LATE_ARCHIVE_SECONDS`).
    pub late_last: i64,
}

impl Pending {
    pub fn key(&self) -> u128 {
        key_hash(&self.message_id, &self.audit_time)
    }

    /// It was found in none of the periods it can be in.
    pub fn problem(&self) -> Problem {
        Problem::new(
            ProblemKind::ItemNotArchived,
            &self.message_id,
            format!(
                "auditTime {}: written at {}, but in no archive object of the periods it can have been archived in, however late ({} to {})",
                self.audit_time,
                self.received_at,
                time(self.first),
                time(self.late_last)
            ),
        )
    }
}

fn time(seconds: i64) -> String {
    DateTime::from_timestamp(seconds, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| seconds.to_string())
}

/// Items of the table written where no digest chain proves the archive (before the chain's
/// first digest, or with no chain at all), by the period they would be archived in: each such
/// period is `trail not sealed`.
#[derive(Debug, Default)]
pub struct Unsealed {
    /// Period start: the items, and the first one's `messageId` and `auditTime`.
    periods: BTreeMap<i64, (u64, String, String)>,
    length: Option<PeriodLength>,
}

impl Unsealed {
    /// One `trail not sealed` per period, saying `why` no chain proves it.
    pub fn problems(&self, why: &str) -> Vec<Problem> {
        let Some(length) = self.length else {
            return Vec::new();
        };
        self.periods
            .iter()
            .map(|(start, (n, id, audit_time))| {
                let period = Period {
                    start: *start,
                    length,
                };
                Problem::new(
                    ProblemKind::TrailNotSealed,
                    digest_key(period),
                    format!(
                        "{n} item(s) of the table in the range were written in the period {} to {} (the first: messageId {id}, auditTime {audit_time}), but {why}",
                        time(period.start),
                        time(period.end())
                    ),
                )
            })
            .collect()
    }
}

/// Where the archive was read: the range's periods and the look-ahead (period starts, both
/// included), and where the chain starts.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub first: i64,
    pub last: i64,
    pub genesis: Option<Period>,
    pub length: PeriodLength,
}

/// The comparison of the table with the archive, fed by the walk.
pub struct TableCheck<'a, T> {
    table: &'a T,
    now: i64,
    archived: HashSet<u128>,
    /// Of those, the events of objects a repair wrote (`auditctl archive repair`).
    repaired: HashSet<u128>,
    batch: Vec<ArchivedEvent>,
    pub summary: TableSummary,
    /// The key the items' attestations are checked with, when given.
    attestations: Option<Arc<Attestations>>,
    /// The `item not attested` of the table's items (not reported from the archive already).
    pub unattested: Vec<Problem>,
}

impl<'a, T: Table> TableCheck<'a, T> {
    /// `now`: epoch seconds (for TTL).
    pub fn new(table: &'a T, now: i64) -> Self {
        Self {
            table,
            now,
            archived: HashSet::new(),
            repaired: HashSet::new(),
            batch: Vec::with_capacity(BATCH),
            summary: TableSummary::default(),
            attestations: None,
            unattested: Vec::new(),
        }
    }

    /// Also checks each item of the range's attestation (`unattested`).
    pub fn with_attestations(mut self, attestations: Option<Arc<Attestations>>) -> Self {
        self.attestations = attestations;
        self
    }

    /// Archived trail events of the range's periods: remembered, and looked up in the table a
    /// batch at a time. The problems of each full batch are returned.
    pub async fn archived(&mut self, events: Vec<ArchivedEvent>) -> Result<Vec<Problem>, Error> {
        let mut problems = Vec::new();
        for event in events {
            self.note(&event);
            self.batch.push(event);
            if self.batch.len() == BATCH {
                problems.extend(self.flush().await?);
            }
        }
        Ok(problems)
    }

    /// Archived events outside the range (look-ahead): only remembered.
    pub fn remember(&mut self, events: &[ArchivedEvent]) {
        events.iter().for_each(|event| self.note(event));
    }

    fn note(&mut self, event: &ArchivedEvent) {
        self.archived.insert(event.key());
        if is_repair_object(&event.object) {
            self.repaired.insert(event.key());
        }
    }

    /// An item found among the archived events: counted, and as repaired when a repair's object
    /// holds it.
    fn count_found(&mut self, key: u128) {
        self.summary.items_archived += 1;
        if self.repaired.contains(&key) {
            self.summary.items_repaired += 1;
        }
    }

    /// Looks up the batch of events waiting.
    pub async fn flush(&mut self) -> Result<Vec<Problem>, Error> {
        if self.batch.is_empty() {
            return Ok(Vec::new());
        }
        let batch = std::mem::take(&mut self.batch);
        // BatchGetItem refuses a key twice in one request (an event archived twice).
        let keys: Vec<(String, String)> = batch
            .iter()
            .map(|e| (e.message_id.clone(), e.audit_time.clone()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let found: HashMap<(String, String), TableItem> = self
            .table
            .get(keys)
            .await?
            .into_iter()
            .map(|item| ((item.message_id.clone(), item.audit_time.clone()), item))
            .collect();
        let mut problems = Vec::new();
        for event in batch {
            self.summary.archived_compared += 1;
            match found.get(&(event.message_id.clone(), event.audit_time.clone())) {
                Some(item) if same_item(&event.line, &item.line) => {}
                Some(item) => {
                    self.summary.changed += 1;
                    problems.push(Problem::new(
                        ProblemKind::ItemChanged,
                        &event.message_id,
                        format!(
                            "auditTime {}: {} in the table, not as archived in {}",
                            event.audit_time,
                            differences(&event.line, &item.line),
                            event.object
                        ),
                    ))
                }
                None if event.expires_at.is_some_and(|at| at <= self.now) => {
                    self.summary.expired += 1;
                }
                None => {
                    self.summary.missing += 1;
                    problems.push(Problem::new(
                        ProblemKind::ItemMissing,
                        &event.message_id,
                        format!(
                            "auditTime {}: not in the table, archived in {}",
                            event.audit_time, event.object
                        ),
                    ))
                }
            }
        }
        self.batch = Vec::with_capacity(BATCH);
        Ok(problems)
    }

    /// Every item of the table in `range`, looked up among the events read (`window`): found;
    /// written within `lag` seconds of now (not archived yet); written before the trail (kept by
    /// period, each a `trail not sealed`); else returned, to be looked for in the periods it can
    /// be archived in (`lag` after its `receivedAt` as a rule, `late` at most).
    pub async fn items(
        &mut self,
        range: &TimeRange,
        window: Window,
        lag: i64,
        late: i64,
    ) -> Result<(Vec<Pending>, Unsealed), Error> {
        let mut pending = Vec::new();
        let mut unsealed = Unsealed {
            periods: BTreeMap::new(),
            length: Some(window.length),
        };
        let mut items = self.table.items(range);
        let length = i64::from(window.length.seconds());
        let start_of = |t: i64| t.div_euclid(length) * length;
        while let Some(item) = items.try_next().await? {
            self.summary.items += 1;
            if let Some(attestations) = &self.attestations
                && let Some(unattested) = attestations.check_line(item.line.as_bytes())
                && let Some(problem) = attestations.problem(&unattested, "in the table")
            {
                self.unattested.push(problem);
            }
            let key = key_hash(&item.message_id, &item.audit_time);
            if self.archived.contains(&key) {
                self.count_found(key);
                continue;
            }
            let received_at = item.received_at.clone().unwrap_or_default();
            let anchor = [received_at.as_str(), item.audit_time.as_str()]
                .iter()
                .find_map(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp())
                .unwrap_or(i64::MIN);
            let Some(genesis) = window.genesis.filter(|g| anchor >= g.start) else {
                self.summary.before_trail += 1;
                let entry = unsealed
                    .periods
                    .entry(start_of(anchor.max(0)))
                    .or_insert_with(|| (0, item.message_id.clone(), item.audit_time.clone()));
                entry.0 += 1;
                continue;
            };
            if (self.now - lag..=self.now + CLOCK_SKEW_SECONDS).contains(&anchor) {
                self.summary.not_archived_yet += 1;
                continue;
            }
            pending.push(Pending {
                message_id: item.message_id,
                audit_time: item.audit_time,
                received_at: if received_at.is_empty() {
                    "an unknown time (no receivedAt)".to_owned()
                } else {
                    received_at
                },
                first: start_of(anchor.saturating_sub(CLOCK_SKEW_SECONDS)).max(genesis.start),
                last: start_of(anchor.saturating_add(lag)),
                late_last: start_of(anchor.saturating_add(lag.max(late))),
            });
        }
        Ok((pending, unsealed))
    }

    /// The pending items after more periods were read: those found are archived (`late`: found
    /// only beyond `--archive-lag`, archived late); the rest are returned.
    pub fn found(&mut self, pending: Vec<Pending>, late: bool) -> Vec<Pending> {
        let mut rest = Vec::new();
        for item in pending {
            if self.archived.contains(&item.key()) {
                self.count_found(item.key());
                if late {
                    self.summary.archived_late += 1;
                }
            } else {
                rest.push(item);
            }
        }
        rest
    }
}

/// Whether an archived line is the table's item line: the same text, or the same but for the
/// archiver's `notAttested` mark (docs/archive.md "Items attested at birth"), which says that the
/// receiver did not write the item, not that it changed.
fn same_item(archived: &str, table: &str) -> bool {
    if archived == table {
        return true;
    }
    if !archived.contains(NOT_ATTESTED) {
        return false;
    }
    match serde_json::from_str::<Map<String, Value>>(archived) {
        Ok(mut line) => {
            line.remove(NOT_ATTESTED)
                .is_some_and(|mark| mark.is_string())
                && serde_json::to_string(&line).is_ok_and(|text| text == table)
        }
        Err(_) => false,
    }
}

/// The attributes in which two item lines differ, in words.
fn differences(archived: &str, table: &str) -> String {
    let parse = |line: &str| serde_json::from_str::<Map<String, Value>>(line).ok();
    let (Some(archived), Some(table)) = (parse(archived), parse(table)) else {
        return "the item differs".to_owned();
    };
    let names: BTreeSet<&String> = archived.keys().chain(table.keys()).collect();
    let mut changed = Vec::new();
    let mut added = Vec::new();
    let mut removed = Vec::new();
    for name in names {
        match (archived.get(name), table.get(name)) {
            (Some(a), Some(t)) if a != t => changed.push(name.as_str()),
            (None, Some(_)) => added.push(name.as_str()),
            (Some(_), None) => removed.push(name.as_str()),
            _ => {}
        }
    }
    let mut parts = Vec::new();
    if !changed.is_empty() {
        parts.push(format!("{} changed", changed.join(", ")));
    }
    if !added.is_empty() {
        parts.push(format!("{} added", added.join(", ")));
    }
    if !removed.is_empty() {
        parts.push(format!("{} removed", removed.join(", ")));
    }
    if parts.is_empty() {
        "the item is written differently".to_owned()
    } else {
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archived_line_gives_its_key_and_expiry() {
        let object: Arc<str> = Arc::from("trail/x");
        let event = ArchivedEvent::parse(
            r#"{"auditTime":"2026-11-22T10:00:00.000Z","expiresAt":1795341600,"messageId":"m-1"}"#
                .into(),
            &object,
        )
        .unwrap();
        assert_eq!(event.message_id, "m-1");
        assert_eq!(event.expires_at, Some(1_795_341_600));
        assert_eq!(event.key(), key_hash("m-1", "2026-11-22T10:00:00.000Z"));
        assert_ne!(event.key(), key_hash("m-2", "2026-11-22T10:00:00.000Z"));
        assert!(ArchivedEvent::parse("not json".into(), &object).is_none());
        assert!(ArchivedEvent::parse(r#"{"messageId":"m"}"#.into(), &object).is_none());
    }

    #[test]
    fn an_item_archived_with_the_not_attested_mark_is_the_same_item_and_nothing_else_is() {
        let table = r#"{"amount":12.50,"auditTime":"t","messageId":"m-1"}"#;
        let marked = r#"{"amount":12.50,"auditTime":"t","messageId":"m-1","notAttested":"it has no attestation"}"#;
        assert!(same_item(table, table));
        assert!(same_item(marked, table));
        let changed = r#"{"amount":12.5,"auditTime":"t","messageId":"m-1","notAttested":"it has no attestation"}"#;
        assert!(!same_item(changed, table));
        assert!(
            !same_item(table, marked),
            "the table's item does not carry the mark"
        );
    }

    #[test]
    fn differences_name_the_attributes() {
        assert_eq!(
            differences(
                r#"{"a":1,"auditText":"x","gone":true}"#,
                r#"{"a":1,"auditText":"y","new":2}"#
            ),
            "auditText changed; new added; gone removed"
        );
        assert_eq!(differences("{", "{}"), "the item differs");
    }
}
