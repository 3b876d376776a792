//! Owns reading full items by key (BatchGetItem), for a lookup whose index holds only the keys
//! and the filtered fields: at most `BATCH_GET_KEYS` keys a request, unprocessed keys retried
//! with backoff (bounded), the items given back in the order asked, and those the table lacks
//! named (docs/architecture.md "The crates", trail). Must not know indexes or output.

use std::collections::HashMap;
use std::sync::atomic::Ordering as Atomic;
use std::time::Duration;

use audit_aws::dynamodb::batch_get::{BatchGetError, Retries, batch_get};
use aws_sdk_dynamodb::types::AttributeValue;

use crate::Error as TrailError;
use crate::item::TrailItem;
use crate::reader::Reader;
use audit_model::keys::{PARTITION_KEY, SORT_KEY};

/// DynamoDB's most keys in one BatchGetItem.
pub const BATCH_GET_KEYS: usize = 100;
/// Retries of the keys DynamoDB left unprocessed (its answer when the table's read capacity is
/// exhausted), each after a longer wait: 50 ms doubling to 2 s, about 11 s in all.
const UNPROCESSED_RETRIES: u32 = 10;
const FIRST_WAIT: Duration = Duration::from_millis(50);
const LONGEST_WAIT: Duration = Duration::from_secs(2);

/// What a fetch read: the items found, in the order asked, and the ones asked for that the table
/// does not hold.
#[derive(Debug, Default)]
pub struct Fetched {
    pub items: Vec<TrailItem>,
    /// The items asked for (as given) that the table no longer holds (expired by TTL, or deleted,
    /// after the index listed them), in the order asked.
    pub missing: Vec<TrailItem>,
}

impl Reader {
    /// The items of `wanted` (index items: their `messageId` and `auditTime` are the table's
    /// key), read from the table in at most `BATCH_GET_KEYS` keys a request, in `wanted`'s
    /// order. An item the table no longer holds is left out, given back in `missing` and counted
    /// in `stats.missing`.
    pub async fn fetch(&self, wanted: Vec<TrailItem>) -> Result<Fetched, TrailError> {
        let mut found: HashMap<(String, String), HashMap<String, AttributeValue>> =
            HashMap::with_capacity(wanted.len());
        for chunk in wanted.chunks(BATCH_GET_KEYS) {
            let keys = chunk
                .iter()
                .map(|item| key(&item.message_id, &item.audit_time));
            self.batch_get(keys.collect(), &mut found).await?;
        }
        let mut fetched = Fetched {
            items: Vec::with_capacity(wanted.len()),
            missing: Vec::new(),
        };
        for item in wanted {
            match found.remove(&(item.message_id.clone(), item.audit_time.clone())) {
                Some(attributes) => fetched.items.push(TrailItem::from(attributes)),
                None => {
                    self.stats.missing.fetch_add(1, Atomic::Relaxed);
                    fetched.missing.push(item);
                }
            }
        }
        Ok(fetched)
    }

    /// One BatchGetItem of `keys` (at most `BATCH_GET_KEYS`), and again for what it leaves
    /// unprocessed, until none is left or the retries are spent (`audit_aws`'s BatchGetItem).
    async fn batch_get(
        &self,
        keys: Vec<HashMap<String, AttributeValue>>,
        found: &mut HashMap<(String, String), HashMap<String, AttributeValue>>,
    ) -> Result<(), TrailError> {
        let retries = Retries {
            times: UNPROCESSED_RETRIES,
            wait: backoff,
        };
        let count = || {
            self.stats.batch_get_item.fetch_add(1, Atomic::Relaxed);
        };
        let items = batch_get(&self.client, &self.table, keys, false, retries, count)
            .await
            .map_err(|error| match error {
                BatchGetError::Request(error) => self.failed_aws(error),
                BatchGetError::Unprocessed {
                    table,
                    left,
                    asked,
                    tries,
                } => TrailError::Unprocessed {
                    table,
                    left,
                    asked,
                    tries,
                },
            })?;
        for item in items {
            let text = |name: &str| match item.get(name) {
                Some(AttributeValue::S(text)) => text.clone(),
                _ => String::new(),
            };
            found.insert((text(PARTITION_KEY), text(SORT_KEY)), item);
        }
        Ok(())
    }
}

/// The table key of an item.
fn key(message_id: &str, audit_time: &str) -> HashMap<String, AttributeValue> {
    HashMap::from([
        (
            PARTITION_KEY.to_owned(),
            AttributeValue::S(message_id.to_owned()),
        ),
        (
            SORT_KEY.to_owned(),
            AttributeValue::S(audit_time.to_owned()),
        ),
    ])
}

/// The wait before retry `n` (from 0): exponential from `FIRST_WAIT`, at most `LONGEST_WAIT`,
/// jittered between half and all of it (so that readers throttled together do not retry
/// together).
fn backoff(n: u32) -> Duration {
    let ceiling = FIRST_WAIT.saturating_mul(1 << n.min(16)).min(LONGEST_WAIT);
    ceiling.mul_f64(0.5 + fastrand::f64() / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_ceiling_with_jitter() {
        for n in 0..20 {
            let ceiling = FIRST_WAIT.saturating_mul(1 << n.min(16)).min(LONGEST_WAIT);
            let wait = backoff(n);
            assert!(wait <= ceiling && wait >= ceiling / 2, "{n}: {wait:?}");
        }
        assert!(backoff(0) <= Duration::from_millis(50));
        assert!(backoff(10) >= Duration::from_secs(1));
        let total: Duration = (0..UNPROCESSED_RETRIES)
            .map(|n| FIRST_WAIT.saturating_mul(1 << n).min(LONGEST_WAIT))
            .sum();
        assert!(total < Duration::from_secs(12), "{total:?}");
    }
}
