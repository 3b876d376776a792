//! Owns reading items by key with BatchGetItem, once: one request of the keys, then again for the
//! keys DynamoDB leaves unprocessed (its answer when read capacity runs out), waiting as the
//! caller's policy says, until none is left or the tries are spent. Must not know which program
//! reads, nor word its errors for people (docs/architecture.md: a library owns its errors as
//! types, the program words them).

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};

use crate::error::{AwsError, ErrorKind};

/// An item's key or the item itself, as the SDK gives it.
pub type Item = HashMap<String, AttributeValue>;

/// How often the keys left unprocessed are asked again, and how long before each.
#[derive(Debug, Clone, Copy)]
pub struct Retries {
    /// Requests after the first.
    pub times: u32,
    /// The wait before retry `n` (from 0).
    pub wait: fn(u32) -> Duration,
}

/// Why the items were not all read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchGetError {
    /// A request failed: what AWS answered, classified.
    #[error(transparent)]
    Request(#[from] AwsError),
    /// Keys were still left unprocessed when the tries were spent.
    #[error(
        "BatchGetItem on table {table} left {left} of {asked} keys unprocessed after {tries} tries"
    )]
    Unprocessed {
        table: String,
        /// The keys left unread.
        left: usize,
        /// The keys asked for.
        asked: usize,
        /// The requests sent.
        tries: u32,
    },
}

/// The items of `keys` (at most 100) in `table`, in any order; a key the table does not hold is
/// left out. `consistent_read` asks for the item as the table holds it now (`ConsistentRead`);
/// `on_request` is called before each request is sent (a caller's count of requests).
pub async fn batch_get(
    client: &Client,
    table: &str,
    keys: Vec<Item>,
    consistent_read: bool,
    retries: Retries,
    mut on_request: impl FnMut(),
) -> Result<Vec<Item>, BatchGetError> {
    read_all(table, keys, retries, |pending| {
        let request = KeysAndAttributes::builder()
            .set_keys(Some(pending))
            .set_consistent_read(consistent_read.then_some(true))
            .build();
        if request.is_ok() {
            on_request();
        }
        async move {
            let request = request.map_err(|e| AwsError {
                kind: ErrorKind::Rejected,
                code: "BuildRequest".into(),
                message: e.to_string(),
                status: None,
                text: e.to_string(),
            })?;
            let output = client
                .batch_get_item()
                .request_items(table, request)
                .send()
                .await
                .map_err(|error| AwsError::from_sdk(&error))?;
            let found = output
                .responses
                .and_then(|mut tables| tables.remove(table))
                .unwrap_or_default();
            let left = output
                .unprocessed_keys
                .and_then(|mut tables| tables.remove(table))
                .map(|left| left.keys)
                .unwrap_or_default();
            Ok((found, left))
        }
    })
    .await
}

/// The retry loop over one request (`send`: the keys -> the items found and the keys left).
async fn read_all<F, Fut>(
    table: &str,
    keys: Vec<Item>,
    retries: Retries,
    mut send: F,
) -> Result<Vec<Item>, BatchGetError>
where
    F: FnMut(Vec<Item>) -> Fut,
    Fut: Future<Output = Result<(Vec<Item>, Vec<Item>), AwsError>>,
{
    let asked = keys.len();
    let mut items = Vec::with_capacity(asked);
    let mut pending = keys;
    let mut retried = 0;
    loop {
        let (found, left) = send(pending).await?;
        items.extend(found);
        pending = left;
        if pending.is_empty() {
            return Ok(items);
        }
        if retried == retries.times {
            return Err(BatchGetError::Unprocessed {
                table: table.to_owned(),
                left: pending.len(),
                asked,
                tries: retried + 1,
            });
        }
        tokio::time::sleep((retries.wait)(retried)).await;
        retried += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn key(n: usize) -> Item {
        HashMap::from([("k".to_owned(), AttributeValue::N(n.to_string()))])
    }

    fn no_wait(_: u32) -> Duration {
        Duration::ZERO
    }

    const TWICE: Retries = Retries {
        times: 2,
        wait: no_wait,
    };

    #[tokio::test]
    async fn unprocessed_keys_are_asked_again_until_none_is_left() {
        let asked = Mutex::new(Vec::new());
        let items = read_all("t", (0..3).map(key).collect(), TWICE, |pending| {
            asked.lock().unwrap().push(pending.len());
            // Each request reads one key and leaves the rest.
            let mut pending = pending.into_iter();
            let found: Vec<Item> = pending.next().into_iter().collect();
            async move { Ok((found, pending.collect())) }
        })
        .await
        .unwrap();
        assert_eq!(items, (0..3).map(key).collect::<Vec<_>>());
        assert_eq!(*asked.lock().unwrap(), [3, 2, 1]);
    }

    #[tokio::test]
    async fn keys_left_when_the_tries_are_spent_are_named() {
        let mut sent = 0;
        let error = read_all("t", (0..4).map(key).collect(), TWICE, |pending| {
            sent += 1;
            let mut pending = pending.into_iter();
            let found: Vec<Item> = pending.next().into_iter().collect();
            async move { Ok((found, pending.collect())) }
        })
        .await
        .unwrap_err();
        assert_eq!(
            error,
            BatchGetError::Unprocessed {
                table: "t".into(),
                left: 1,
                asked: 4,
                tries: 3
            }
        );
        assert_eq!(sent, 3);
    }

    #[tokio::test]
    async fn a_failed_request_is_its_classified_error() {
        let error = read_all("t", vec![key(0)], TWICE, |_| async {
            Err(AwsError::from_answer(
                400,
                "ResourceNotFoundException",
                "no table",
            ))
        })
        .await
        .unwrap_err();
        assert!(matches!(
            error,
            BatchGetError::Request(AwsError {
                kind: ErrorKind::NotFound,
                ..
            })
        ));
    }
}
