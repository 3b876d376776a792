//! Owns the names the table is known by: its default name, key attributes and indexes. Must not
//! know any client.

/// The table's default name (docs/deploy.md "Parameters": `TableName`).
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

/// The lookup indexes (docs/auditctl.md "Who did what, to what: lookups"): sparse global secondary
/// indexes, one per field, keyed by `<value>#<shard>` (HASH) and `auditTime` (RANGE), projecting
/// the structured fields (the filters) besides the keys. docs/operations.md has the arithmetic.
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
/// write units per second; an index item of at most 4 KB (the keys, and the projected fields in
/// one-byte characters at their limits: actor and resource 1,024, action 256) costs at most 4
/// units, so one value at 1,000 events per second spread over 4 shards needs at most
/// 4 × 250 = 1,000 units per shard: the index does not throttle the table's writes. Fields in
/// multi-byte characters at their limits make index items of up to 9 KB (docs/operations.md has
/// what such a value sustains). A lookup reads the 4 shards.
pub const LOOKUP_SHARDS: u32 = 4;

/// The lookup index key of a field's value for an item: `<value>#<shard>`, the shard (one digit,
/// `0`-`3`) = FNV-1a 32 of the item's `messageId` modulo `LOOKUP_SHARDS`.
pub fn lookup_key(value: &str, message_id: &str) -> String {
    lookup_key_of_shard(
        value,
        crate::message::fnv1a_32(message_id.as_bytes()) % LOOKUP_SHARDS,
    )
}

/// The longest value, in UTF-8 bytes, that a lookup key holds as it is. DynamoDB limits a
/// partition key to 2,048 bytes, and an index refuses the whole write of an item whose index key
/// is longer: `actor` and `resource` may be 1,024 characters, up to 4,096 bytes. A longer value
/// is keyed by its SHA-256 (`sha256:<64 hex>`) instead, and the reader filters on the value
/// itself (a projected attribute), so a lookup stays exact.
pub const LOOKUP_VALUE_MAX_BYTES: usize = 1024;

/// Whether a value is keyed by its hash (`LOOKUP_VALUE_MAX_BYTES`).
pub fn lookup_value_is_hashed(value: &str) -> bool {
    value.len() > LOOKUP_VALUE_MAX_BYTES
}

/// The key of one shard of a value, as the reader builds it.
pub fn lookup_key_of_shard(value: &str, shard: u32) -> String {
    if lookup_value_is_hashed(value) {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(value.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}#{shard}")
    } else {
        format!("{value}#{shard}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_at_the_character_limit_in_multibyte_characters_still_makes_a_valid_key() {
        // 1,024 four-byte characters: 4,096 bytes, twice DynamoDB's key limit.
        let long = "😀".repeat(1024);
        let key = lookup_key_of_shard(&long, 3);
        assert!(key.len() <= 2048, "{} bytes", key.len());
        assert!(key.starts_with("sha256:") && key.ends_with("#3"));
        assert_eq!(
            key,
            lookup_key_of_shard(&long, 3),
            "the reader builds the same key"
        );
        assert_ne!(key, lookup_key_of_shard(&"😀".repeat(1023), 3));
        // Short values are kept as they are, whatever their characters.
        assert_eq!(lookup_key_of_shard("alice", 0), "alice#0");
        let edge = "a".repeat(LOOKUP_VALUE_MAX_BYTES);
        assert_eq!(lookup_key_of_shard(&edge, 1), format!("{edge}#1"));
    }
}
