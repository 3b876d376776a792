//! Owns the order of work in a batch: one unit per FIFO message group (run one record at a time),
//! one per record on a standard queue, and the message ids failures are reported by. Must not
//! know what a record holds beyond its id and its delivery's group.

use std::collections::HashMap;

use aws_lambda_events::sqs::SqsMessage;

use super::BatchError;
use super::delivery::Received;

pub(super) fn message_ids(records: &[SqsMessage]) -> Result<Vec<&str>, BatchError> {
    records
        .iter()
        .enumerate()
        .map(|(position, record)| match record.message_id.as_deref() {
            Some(id) if !id.is_empty() => Ok(id),
            _ => Err(BatchError::MissingMessageId { position }),
        })
        .collect()
}

/// Units of work over `deliveries` (by position), each run one record at a time: one per FIFO
/// message group (in batch order), one per record on a standard queue.
pub(super) fn units(deliveries: &[Received<'_>]) -> Vec<Vec<usize>> {
    let mut units: Vec<Vec<usize>> = Vec::new();
    let mut groups: HashMap<&str, usize> = HashMap::new();
    for (position, delivery) in deliveries.iter().enumerate() {
        match delivery.fifo_group {
            Some(group) => match groups.get(group) {
                Some(&unit) => units[unit].push(position),
                None => {
                    groups.insert(group, units.len());
                    units.push(vec![position]);
                }
            },
            None => units.push(vec![position]),
        }
    }
    units
}
