//! Owns the DynamoDB store's in-memory twin for tests of the batch logic: the same key, size and
//! payload rules as the adapter, plus scripted failures, delays and panics. Must not know batching.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::item::check_size;
use super::outcome::{PutOutcome, StoreError};
use audit_model::message::AuditItem;

/// Items keyed like the table: (`messageId`, `auditTime`).
#[derive(Debug, Default)]
pub struct MemoryStore {
    items: Mutex<HashMap<(String, String), AuditItem>>,
    /// Errors returned, in order, by the next writes of a given `messageId`.
    scripted: Mutex<HashMap<String, VecDeque<StoreError>>>,
    /// `messageId`s whose write panics.
    panics_on: Mutex<Vec<String>>,
    delay: Mutex<Duration>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    calls: AtomicUsize,
    order: Mutex<Vec<String>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every write sleeps this long before answering.
    pub fn with_delay(self, delay: Duration) -> Self {
        *lock(&self.delay) = delay;
        self
    }

    /// The next writes of `message_id` fail with these errors, in order.
    pub fn fail_next(&self, message_id: &str, errors: impl IntoIterator<Item = StoreError>) {
        lock(&self.scripted)
            .entry(message_id.to_owned())
            .or_default()
            .extend(errors);
    }

    /// Writing `message_id` panics (a bug stand-in for panic isolation tests).
    pub fn panic_on(&self, message_id: &str) {
        lock(&self.panics_on).push(message_id.to_owned());
    }

    pub fn insert(&self, item: AuditItem) {
        lock(&self.items).insert((item.message_id.clone(), item.audit_time.clone()), item);
    }

    pub fn items(&self) -> Vec<AuditItem> {
        let mut items: Vec<AuditItem> = lock(&self.items).values().cloned().collect();
        items.sort_by(|a, b| (&a.message_id, &a.audit_time).cmp(&(&b.message_id, &b.audit_time)));
        items
    }

    /// The most writes that were ever in flight at once.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    /// Every write attempt, including failed ones.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// `messageId`s in the order their writes started.
    pub fn write_order(&self) -> Vec<String> {
        lock(&self.order).clone()
    }
}

impl MemoryStore {
    /// As `DynamoDbStore::put_if_absent`: the size rule before any write, never overwriting, and
    /// an existing item a duplicate or a conflict by the same rule (`PutOutcome::existing`).
    pub async fn put_if_absent(&self, item: &AuditItem) -> Result<PutOutcome, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        lock(&self.order).push(item.message_id.clone());
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let _guard = InFlight(&self.in_flight);

        let delay = *lock(&self.delay);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if lock(&self.panics_on).contains(&item.message_id) {
            panic!("scripted panic for {}", item.message_id);
        }
        let scripted = lock(&self.scripted)
            .get_mut(&item.message_id)
            .and_then(VecDeque::pop_front);
        if let Some(error) = scripted {
            return Err(error);
        }

        // The same size rule as the DynamoDB adapter, applied before any write.
        check_size(item)?;
        let mut items = lock(&self.items);
        let key = (item.message_id.clone(), item.audit_time.clone());
        match items.get(&key) {
            None => {
                items.insert(key, item.clone());
                Ok(PutOutcome::Written)
            }
            Some(old) => Ok(PutOutcome::existing(old, item)),
        }
    }
}

struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A poisoned lock only means another test write panicked on purpose; the data is still usable.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
