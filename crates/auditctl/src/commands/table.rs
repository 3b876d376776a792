//! Owns the adapter of verify's table port (`audit_proof::verify::ports::Table`) over
//! `audit_trail::Reader`: the items of a time range as `auditctl query` reads them (the
//! byAuditTime index, its 32 shards a day merged), and items by key (BatchGetItem), each as its
//! JSON line; the trail's errors kept whole for `words.rs`. Must not know the archive.

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use audit_model::range::TimeRange;
use audit_proof::Error;
use audit_proof::verify::ports::{Table, TableItem};
use audit_trail::Reader;
use audit_trail::item::TrailItem;
use audit_trail::merge::Order;
use audit_trail::query::QueryOptions;

/// How the range is read: as `auditctl query`'s defaults.
const OPTIONS: QueryOptions = QueryOptions {
    order: Order::Ascending,
    page_size: 500,
    concurrency: 8,
    limit: None,
};

/// The audit table.
#[derive(Debug, Clone)]
pub struct DynamoTable {
    reader: Reader,
}

impl DynamoTable {
    /// `reader` has checked that the table and its byAuditTime index are there.
    pub fn new(reader: Reader) -> Self {
        Self { reader }
    }
}

/// The trail's error, kept whole: `words.rs` words it as `auditctl query` does.
fn trail_error(error: audit_trail::Error) -> Error {
    Error::Table(Box::new(error))
}

fn table_item(item: TrailItem) -> TableItem {
    let received_at = Some(item.text("receivedAt")).filter(|t| !t.is_empty());
    TableItem {
        line: item.line(),
        message_id: item.message_id,
        audit_time: item.audit_time,
        received_at,
    }
}

impl Table for DynamoTable {
    fn items(&self, range: &TimeRange) -> BoxStream<'static, Result<TableItem, Error>> {
        self.reader
            .query(range.clone(), OPTIONS, None)
            .map_ok(table_item)
            .map_err(trail_error)
            .boxed()
    }

    async fn get(&self, keys: Vec<(String, String)>) -> Result<Vec<TableItem>, Error> {
        let wanted = keys
            .into_iter()
            .map(|(message_id, audit_time)| TrailItem {
                message_id,
                audit_time,
                attributes: Default::default(),
            })
            .collect();
        Ok(self
            .reader
            .fetch(wanted)
            .await
            .map_err(trail_error)?
            .items
            .into_iter()
            .map(table_item)
            .collect())
    }
}
