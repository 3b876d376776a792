//! Owns the repair of the archive as the two programs exchange it: `auditctl archive repair`
//! names the items the archive lacks (their keys only), the archiver reads them from the table
//! itself and archives them (docs/archive.md "Repairing the archive"), and answers what it did with
//! each. Must not know how either program finds, reads or writes anything.

use serde::{Deserialize, Serialize};

/// The name of the Lambda event that asks the archiver to repair: `{"auditArchiveRepair": …}`.
pub const REPAIR_EVENT: &str = "auditArchiveRepair";

/// The request's format version.
pub const REPAIR_VERSION: u32 = 1;

/// The most keys one request may name: what one BatchGetItem reads, and what one invocation
/// archives well inside the function's time-out.
pub const MAX_REPAIR_KEYS: usize = 100;

/// The user metadata (`x-amz-meta-repair`) of an archive object written by a repair: `true`.
pub const REPAIR_METADATA: &str = "repair";

/// The first digit of a repair's sequence numbers (`repair_identity`): DynamoDB's own are far
/// shorter than 40 digits, so a padded stream sequence number starts with `0`.
pub const REPAIR_SEQUENCE_PREFIX: char = '9';

/// The sequence number and eventID a repair archives `key` under, in place of the stream record
/// it no longer has: `9` and the 39 decimal digits of the first 16 bytes of SHA-256(auditTime,
/// newline, messageId); `repair-` and the same bytes in hex. Fixed by the key, so that a second
/// repair of an item finds the first one's marker; never a stream's.
pub fn repair_identity(key: &ItemKey) -> (String, String) {
    let mut text = Vec::with_capacity(key.audit_time.len() + 1 + key.message_id.len());
    text.extend_from_slice(key.audit_time.as_bytes());
    text.push(b'\n');
    text.extend_from_slice(key.message_id.as_bytes());
    let hash = crate::digest::sha256(&text);
    let mut half = [0u8; 16];
    half.copy_from_slice(&hash[..16]);
    (
        format!("{REPAIR_SEQUENCE_PREFIX}{:039}", u128::from_be_bytes(half)),
        format!("repair-{}", crate::digest::hex(&half)),
    )
}

/// Whether an archive object's key names a repair's run (its first sequence number is a
/// repair's). Its metadata `repair` says so too; this reads the key alone.
pub fn is_repair_object(key: &str) -> bool {
    crate::archive::ObjectKey::parse(key).is_some_and(|k| {
        k.first_sequence.len() == crate::archive::SEQUENCE_DIGITS
            && k.first_sequence.starts_with(REPAIR_SEQUENCE_PREFIX)
    })
}

/// An item of the table, by its key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemKey {
    pub message_id: String,
    pub audit_time: String,
}

/// What `auditctl archive repair` sends: the keys only, never an item's content (the archiver
/// reads each item from the table itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RepairRequest {
    pub version: u32,
    pub keys: Vec<ItemKey>,
}

/// Why a request cannot be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error(
        "the repair request is not {{\"auditArchiveRepair\": {{\"version\": 1, \"keys\": [{{\"messageId\", \"auditTime\"}}, …]}}}}: {0}"
    )]
    Malformed(String),
    #[error(
        "repair request version {0} is not {REPAIR_VERSION}: update auditctl or the archiver so that both are of one release"
    )]
    Version(u32),
    #[error("the repair request names no key")]
    Empty,
    #[error("the repair request names {0} keys, more than {MAX_REPAIR_KEYS}: send them in parts")]
    TooMany(usize),
    #[error("key {0}: messageId and auditTime must be non-empty")]
    EmptyKey(usize),
}

impl RepairRequest {
    pub fn new(keys: Vec<ItemKey>) -> Self {
        Self {
            version: REPAIR_VERSION,
            keys,
        }
    }

    /// The Lambda event: `{"auditArchiveRepair": <request>}`.
    pub fn to_event(&self) -> serde_json::Value {
        let mut event = serde_json::Map::new();
        event.insert(
            REPAIR_EVENT.into(),
            serde_json::to_value(self).unwrap_or_default(),
        );
        serde_json::Value::Object(event)
    }

    /// The request in an event whose `auditArchiveRepair` member is `body`, checked: version,
    /// between 1 and `MAX_REPAIR_KEYS` keys, none empty; a key named twice is taken once.
    pub fn from_body(body: serde_json::Value) -> Result<Self, RequestError> {
        let mut request: Self =
            serde_json::from_value(body).map_err(|e| RequestError::Malformed(e.to_string()))?;
        if request.version != REPAIR_VERSION {
            return Err(RequestError::Version(request.version));
        }
        if request.keys.is_empty() {
            return Err(RequestError::Empty);
        }
        if request.keys.len() > MAX_REPAIR_KEYS {
            return Err(RequestError::TooMany(request.keys.len()));
        }
        if let Some(i) = request
            .keys
            .iter()
            .position(|k| k.message_id.is_empty() || k.audit_time.is_empty())
        {
            return Err(RequestError::EmptyKey(i));
        }
        let mut seen = std::collections::HashSet::new();
        request.keys.retain(|k| seen.insert(k.clone()));
        Ok(request)
    }
}

/// What the archiver answers: each key of the request in exactly one list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairAnswer {
    /// Archived now, in the object named.
    pub repaired: Vec<Repaired>,
    /// Archived by an earlier repair of the same item: nothing written.
    pub already_repaired: Vec<ItemKey>,
    /// Not in the table (expired by TTL, deleted, or never written): nothing to archive.
    pub not_found: Vec<ItemKey>,
    /// Not archived, and why; a new request may succeed.
    pub failed: Vec<NotRepaired>,
}

/// An item archived by a repair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Repaired {
    #[serde(flatten)]
    pub key: ItemKey,
    /// The archive object that holds it.
    pub object: String,
}

/// An item a repair could not archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotRepaired {
    #[serde(flatten)]
    pub key: ItemKey,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(id: &str) -> ItemKey {
        ItemKey {
            message_id: id.into(),
            audit_time: "2026-11-22T10:00:00.000Z".into(),
        }
    }

    #[test]
    fn a_repair_identity_is_fixed_by_the_key_and_its_objects_are_told_by_their_key() {
        let (sequence, event_id) = repair_identity(&key("m-1"));
        assert_eq!(sequence.len(), 40);
        assert!(sequence.starts_with('9') && sequence.bytes().all(|b| b.is_ascii_digit()));
        assert!(event_id.starts_with("repair-") && event_id.len() == 39);
        assert_eq!(repair_identity(&key("m-1")), (sequence.clone(), event_id));
        assert_ne!(repair_identity(&key("m-2")).0, sequence);
        let at = chrono::DateTime::from_timestamp(1_795_341_600, 0).unwrap();
        let period = crate::archive::PeriodLength::new(3600).unwrap();
        let kind = crate::archive::ObjectKind::Trail;
        let repaired = crate::archive::ObjectKey::new(kind, at, period, &sequence, 0).unwrap();
        assert!(is_repair_object(&repaired.to_string()));
        let streamed =
            crate::archive::ObjectKey::new(kind, at, period, "4421584500000000017450439091", 0)
                .unwrap();
        assert!(!is_repair_object(&streamed.to_string()));
        assert!(!is_repair_object("trail/not-a-key"));
    }

    #[test]
    fn a_request_travels_as_its_event_and_back_with_each_key_once() {
        let request = RepairRequest::new(vec![key("a"), key("b"), key("a")]);
        let event = request.to_event();
        assert_eq!(
            event,
            json!({"auditArchiveRepair": {"version": 1, "keys": [
                {"messageId": "a", "auditTime": "2026-11-22T10:00:00.000Z"},
                {"messageId": "b", "auditTime": "2026-11-22T10:00:00.000Z"},
                {"messageId": "a", "auditTime": "2026-11-22T10:00:00.000Z"}]}})
        );
        let read = RepairRequest::from_body(event[REPAIR_EVENT].clone()).unwrap();
        assert_eq!(read.keys, vec![key("a"), key("b")]);
    }

    #[test]
    fn a_request_that_names_content_or_no_keys_or_too_many_is_refused() {
        let content = json!({"version": 1, "keys": [key("a")], "items": [{"auditText": "x"}]});
        assert!(matches!(
            RepairRequest::from_body(content),
            Err(RequestError::Malformed(_))
        ));
        let with_text =
            json!({"version": 1, "keys": [{"messageId": "a", "auditTime": "t", "auditText": "x"}]});
        assert!(
            RepairRequest::from_body(with_text).is_ok(),
            "extra fields of a key are ignored, never read"
        );
        assert_eq!(
            RepairRequest::from_body(json!({"version": 2, "keys": [key("a")]})),
            Err(RequestError::Version(2))
        );
        assert_eq!(
            RepairRequest::from_body(json!({"version": 1, "keys": []})),
            Err(RequestError::Empty)
        );
        let many: Vec<ItemKey> = (0..=MAX_REPAIR_KEYS).map(|i| key(&i.to_string())).collect();
        assert_eq!(
            RepairRequest::from_body(json!({"version": 1, "keys": many})),
            Err(RequestError::TooMany(MAX_REPAIR_KEYS + 1))
        );
        assert_eq!(
            RepairRequest::from_body(
                json!({"version": 1, "keys": [{"messageId": "", "auditTime": "t"}]})
            ),
            Err(RequestError::EmptyKey(0))
        );
    }
}
