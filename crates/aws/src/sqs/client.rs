//! Owns the SQS SDK adapter of the queue port: each call of `Sqs` as one SDK request, the
//! answer mapped to the port's shapes, errors classified by `crate::error`. Must not know why a
//! queue is read or what its messages mean.

use std::collections::HashMap;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, Message, MessageSystemAttributeName,
    QueueAttributeName,
};

use super::attributes::Attribute;
use super::deadletter::{DeadLetter, send_message};
use super::port::{Depth, MAX_BATCH, Receive, Received, Sqs, System, Visibility};
use crate::error::{AwsError, ErrorKind};

/// The queue port over the SDK's client.
#[derive(Debug, Clone)]
pub struct SqsClient {
    client: Client,
}

impl SqsClient {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl Sqs for SqsClient {
    async fn receive(&self, queue_url: &str, request: Receive) -> Result<Vec<Received>, AwsError> {
        let output = self
            .client
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(i32::try_from(request.max.min(MAX_BATCH)).unwrap_or(10))
            .visibility_timeout(request.visibility_seconds)
            .wait_time_seconds(request.wait_seconds)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk(&e))?;
        Ok(output
            .messages
            .unwrap_or_default()
            .into_iter()
            .filter_map(received)
            .collect())
    }

    async fn send(&self, queue_url: &str, message: &DeadLetter) -> Result<(), AwsError> {
        send_message(&self.client, queue_url, message)
            .map_err(|e| AwsError::without_answer(ErrorKind::Rejected, e))?
            .send()
            .await
            .map(|_| ())
            .map_err(|e| AwsError::from_sdk(&e))
    }

    async fn delete(&self, queue_url: &str, receipt_handle: &str) -> Result<(), AwsError> {
        self.client
            .delete_message()
            .queue_url(queue_url)
            .receipt_handle(receipt_handle)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| AwsError::from_sdk(&e))
    }

    async fn change_visibility(
        &self,
        queue_url: &str,
        entries: &[Visibility],
    ) -> Result<usize, AwsError> {
        let entries: Vec<ChangeMessageVisibilityBatchRequestEntry> = entries
            .iter()
            .enumerate()
            .filter_map(|(i, entry)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(&entry.receipt_handle)
                    .visibility_timeout(entry.seconds)
                    .build()
                    .ok()
            })
            .collect();
        let output = self
            .client
            .change_message_visibility_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| AwsError::from_sdk(&e))?;
        Ok(output.failed.len())
    }

    async fn depth(&self, queue_url: &str) -> Result<Depth, AwsError> {
        let output = self
            .client
            .get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk(&e))?;
        let attributes = output.attributes.unwrap_or_default();
        let number = |name: QueueAttributeName| {
            attributes
                .get(&name)
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        Ok(Depth {
            visible: number(QueueAttributeName::ApproximateNumberOfMessages),
            in_flight: number(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
            delayed: number(QueueAttributeName::ApproximateNumberOfMessagesDelayed),
        })
    }
}

/// The SDK's message in the port's shape; one without an id or a receipt handle is not one SQS
/// sends, and is skipped.
fn received(message: Message) -> Option<Received> {
    let mut system: HashMap<MessageSystemAttributeName, String> =
        message.attributes.unwrap_or_default();
    let mut take = |name: MessageSystemAttributeName| system.remove(&name);
    Some(Received {
        message_id: message.message_id?,
        receipt_handle: message.receipt_handle?,
        body: message.body.unwrap_or_default(),
        attributes: message
            .message_attributes
            .unwrap_or_default()
            .iter()
            .map(|(name, value)| (name.clone(), Attribute::from(value)))
            .collect(),
        system: System {
            sender_id: take(MessageSystemAttributeName::SenderId),
            sent_timestamp: take(MessageSystemAttributeName::SentTimestamp),
            approximate_receive_count: take(MessageSystemAttributeName::ApproximateReceiveCount)
                .and_then(|n| n.parse().ok()),
            dead_letter_queue_source_arn: take(
                MessageSystemAttributeName::DeadLetterQueueSourceArn,
            ),
            message_group_id: take(MessageSystemAttributeName::MessageGroupId),
        },
    })
}
