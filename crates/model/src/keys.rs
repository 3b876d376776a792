//! Owns the names the table is known by: its default name, key attributes and indexes. Must not
//! know any client.

/// The table's default name (SPEC).
pub const DEFAULT_TABLE_NAME: &str = "AuditMessages";
/// The table's partition key attribute.
pub const PARTITION_KEY: &str = "messageId";
/// The table's sort key attribute.
pub const SORT_KEY: &str = "auditTime";
/// The time index's partition key attribute (`YYYY-MM-DD#NN`).
pub const AUDIT_BUCKET: &str = "auditBucket";
/// The time index: `auditBucket` (HASH), `auditTime` (RANGE).
pub const TIME_INDEX: &str = "byAuditTime";
/// DynamoDB's item size limit.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

/// The lookup indexes (SPEC "Who did what, to what: lookups"): sparse global secondary indexes,
/// one per field, keyed by `<value>#<shard>` (HASH) and `auditTime` (RANGE), projecting the
/// structured fields (the filters) besides the keys. docs/operations.md has the arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupIndex {
    /// The index name.
    pub name: &'static str,
    /// The field it looks up.
    pub field: LookupField,
    /// The item attribute holding the index's partition key (only on items with the field).
    pub key: &'static str,
}

/// The fields a lookup can start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupField {
    Actor,
    Action,
    Resource,
}

impl LookupField {
    /// The item attribute of the field itself.
    pub const fn attribute(self) -> &'static str {
        match self {
            Self::Actor => "actor",
            Self::Action => "action",
            Self::Resource => "resource",
        }
    }
}

pub const LOOKUP_INDEXES: [LookupIndex; 3] = [
    LookupIndex {
        name: "byActor",
        field: LookupField::Actor,
        key: "actorKey",
    },
    LookupIndex {
        name: "byAction",
        field: LookupField::Action,
        key: "actionKey",
    },
    LookupIndex {
        name: "byResource",
        field: LookupField::Resource,
        key: "resourceKey",
    },
];

/// The lookup index of a field.
pub fn lookup_index(field: LookupField) -> &'static LookupIndex {
    match field {
        LookupField::Actor => &LOOKUP_INDEXES[0],
        LookupField::Action => &LOOKUP_INDEXES[1],
        LookupField::Resource => &LOOKUP_INDEXES[2],
    }
}

/// The attributes the lookup indexes project besides the keys: what the lookup filters on.
pub const LOOKUP_PROJECTION: [&str; 5] = ["actor", "action", "resource", "outcome", "sourceIp"];

/// Shards per value of a lookup index. DynamoDB gives one partition key value at most 1,000
/// write units per second; an index item is at most 4 KB (actor and resource 1,024 characters,
/// action 256, the keys and the projected fields), 4 write units, so one value at 1,000 events
/// per second spread over 4 shards needs at most 4 × 250 = 1,000 units per shard: the index
/// never throttles the table's writes, whatever the sizes. A lookup reads the 4 shards.
pub const LOOKUP_SHARDS: u32 = 4;

/// The lookup index key of a field's value for an item: `<value>#<shard>`, the shard (one digit,
/// `0`-`3`) = FNV-1a 32 of the item's `messageId` modulo `LOOKUP_SHARDS`.
pub fn lookup_key(value: &str, message_id: &str) -> String {
    lookup_key_of_shard(
        value,
        crate::message::fnv1a_32(message_id.as_bytes()) % LOOKUP_SHARDS,
    )
}

/// The key of one shard of a value, as the reader builds it.
pub fn lookup_key_of_shard(value: &str, shard: u32) -> String {
    format!("{value}#{shard}")
}
