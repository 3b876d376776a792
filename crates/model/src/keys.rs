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
