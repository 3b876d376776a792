//! Owns the DynamoDB adapter of the table port: `audit_aws`'s BatchGetItem with ConsistentRead
//! (the item as the table holds it now, not a replica's older copy), the keys DynamoDB leaves
//! unprocessed asked again a few times, the items as DynamoDB's JSON. Must not know the repair.

use std::collections::HashMap;
use std::time::Duration;

use audit_aws::dynamodb::batch_get::{BatchGetError, Retries, batch_get};
use audit_model::keys::{PARTITION_KEY, SORT_KEY};
use audit_model::repair::ItemKey;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;

use super::ItemTable;
use crate::event::Image;

/// Asks for the keys DynamoDB left unprocessed (its answer when read capacity runs out) this many
/// times more, 100 ms apart and doubling.
const UNPROCESSED_RETRIES: u32 = 5;

/// The audit table through the SDK.
#[derive(Debug, Clone)]
pub struct DynamoTable {
    client: Client,
    table: String,
}

impl DynamoTable {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }
}

fn key(item: &ItemKey) -> HashMap<String, AttributeValue> {
    HashMap::from([
        (
            PARTITION_KEY.to_owned(),
            AttributeValue::S(item.message_id.clone()),
        ),
        (
            SORT_KEY.to_owned(),
            AttributeValue::S(item.audit_time.clone()),
        ),
    ])
}

/// 100 ms before the first retry, doubling.
fn doubling(retry: u32) -> Duration {
    Duration::from_millis(100).saturating_mul(1 << retry.min(16))
}

impl ItemTable for DynamoTable {
    async fn get_items(&self, keys: &[ItemKey]) -> Result<Vec<Image>, BatchGetError> {
        let retries = Retries {
            times: UNPROCESSED_RETRIES,
            wait: doubling,
        };
        let items = batch_get(
            &self.client,
            &self.table,
            keys.iter().map(key).collect(),
            true,
            retries,
            || {},
        )
        .await?;
        Ok(items
            .iter()
            .map(audit_aws::dynamodb::json::item_json)
            .collect())
    }
}
