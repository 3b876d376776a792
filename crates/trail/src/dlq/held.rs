//! Owns what a command holds of the queue: the messages it received and has not deleted, by id,
//! with their latest receipt handle, and which receive saw each first. Must not know SQS.

use std::collections::{BTreeMap, HashMap};

use super::message::DlqMessage;

/// A number of messages as the queue's counts are.
pub(super) fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Messages received and not yet deleted, by id, with their latest receipt handle (the one
/// SQS honours); and which batch saw each first.
#[derive(Debug, Default)]
pub(super) struct Held {
    pub(super) handles: BTreeMap<String, String>,
    first_seen: HashMap<String, String>,
}

impl Held {
    /// Records a batch; returns how many of its messages were not seen before.
    pub(super) fn add(&mut self, batch: &[DlqMessage]) -> usize {
        let mut fresh = 0;
        for message in batch {
            if !self.first_seen.contains_key(&message.message_id) {
                fresh += 1;
                self.first_seen
                    .insert(message.message_id.clone(), message.receipt_handle.clone());
            }
            self.handles
                .insert(message.message_id.clone(), message.receipt_handle.clone());
        }
        fresh
    }

    /// Whether this is the receive that first saw the message (a message seen again after its
    /// hold expired is not listed twice).
    pub(super) fn is_first(&self, message: &DlqMessage) -> bool {
        self.first_seen.get(&message.message_id) == Some(&message.receipt_handle)
    }

    pub(super) fn forget(&mut self, message_id: &str) {
        self.handles.remove(message_id);
    }

    pub(super) fn len(&self) -> usize {
        self.first_seen.len()
    }
}
