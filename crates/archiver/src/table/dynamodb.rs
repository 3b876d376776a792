//! Owns the DynamoDB adapter of the table port: BatchGetItem with ConsistentRead (the item as the
//! table holds it now, not a replica's older copy), the keys DynamoDB leaves unprocessed asked
//! again a few times, the items as DynamoDB's JSON. Must not know the repair.

use std::collections::HashMap;
use std::time::Duration;

use audit_aws::error::{AwsError, ErrorKind};
use audit_model::keys::{PARTITION_KEY, SORT_KEY};
use audit_model::repair::ItemKey;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};

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

impl ItemTable for DynamoTable {
    async fn get_items(&self, keys: &[ItemKey]) -> Result<Vec<Image>, AwsError> {
        let mut items = Vec::with_capacity(keys.len());
        let mut wanted: Vec<HashMap<String, AttributeValue>> = keys.iter().map(key).collect();
        let mut wait = Duration::from_millis(100);
        for attempt in 0..=UNPROCESSED_RETRIES {
            if wanted.is_empty() {
                break;
            }
            if attempt > 0 {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            let request = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut wanted)))
                .consistent_read(true)
                .build()
                .map_err(|e| AwsError {
                    kind: ErrorKind::Rejected,
                    code: "BuildRequest".into(),
                    message: e.to_string(),
                    status: None,
                    text: e.to_string(),
                })?;
            let output = self
                .client
                .batch_get_item()
                .request_items(&self.table, request)
                .send()
                .await
                .map_err(|error| AwsError::from_sdk(&error))?;
            if let Some(mut responses) = output.responses
                && let Some(found) = responses.remove(&self.table)
            {
                items.extend(found.iter().map(audit_aws::dynamodb::json::item_json));
            }
            wanted = output
                .unprocessed_keys
                .and_then(|mut left| left.remove(&self.table))
                .map(|left| left.keys)
                .unwrap_or_default();
        }
        if !wanted.is_empty() {
            return Err(AwsError::without_answer(
                ErrorKind::Unavailable,
                format!(
                    "DynamoDB left {} key(s) unprocessed after {UNPROCESSED_RETRIES} retries (read capacity)",
                    wanted.len()
                ),
            ));
        }
        Ok(items)
    }
}
