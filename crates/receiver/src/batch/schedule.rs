//! Owns the order of work in a batch: one unit per FIFO message group (run one record at a time),
//! one per record on a standard queue, and the message ids failures are reported by. Must not
//! know what a record holds.

use std::collections::HashMap;

use aws_lambda_events::sqs::SqsMessage;

use super::BatchError;

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

/// Units of work, each run one record at a time: one per FIFO message group (in batch order),
/// one per record on a standard queue.
pub(super) fn units(records: &[SqsMessage], unique: &[usize]) -> Vec<Vec<usize>> {
    let mut units: Vec<Vec<usize>> = Vec::new();
    let mut groups: HashMap<&str, usize> = HashMap::new();
    for &index in unique {
        let record = &records[index];
        match fifo_group(record) {
            Some(group) => match groups.get(group) {
                Some(&unit) => units[unit].push(index),
                None => {
                    groups.insert(group, units.len());
                    units.push(vec![index]);
                }
            },
            None => units.push(vec![index]),
        }
    }
    units
}

/// The record's `MessageGroupId` when it comes from a FIFO queue.
pub(super) fn fifo_group(record: &SqsMessage) -> Option<&str> {
    let fifo = record
        .event_source_arn
        .as_deref()
        .is_some_and(|arn| arn.ends_with(".fifo"));
    record
        .attributes
        .get("MessageGroupId")
        .filter(|_| fifo)
        .map(String::as_str)
}
