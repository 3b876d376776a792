//! Owns the SQS adapter of the dead-letter port: one `SendMessage` per record, with the
//! attributes, group and deduplication id of a `DeadLetter`, and SDK errors mapped to `SendError`.
//! Must not know batching or DynamoDB.

use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::operation::send_message::SendMessageError;
use aws_sdk_sqs::primitives::Blob;
use aws_sdk_sqs::types::MessageAttributeValue;

use super::{DeadLetter, DeadLetterQueue, SendError};

/// Sends dead letters to one queue.
#[derive(Debug, Clone)]
pub struct SqsDeadLetterQueue {
    client: Client,
    queue_url: String,
}

impl SqsDeadLetterQueue {
    pub fn new(client: Client, queue_url: impl Into<String>) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
        }
    }
}

impl DeadLetterQueue for SqsDeadLetterQueue {
    async fn send(&self, letter: &DeadLetter) -> Result<(), SendError> {
        let mut request = self
            .client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(&letter.body)
            .set_message_group_id(letter.group_id.clone())
            .set_message_deduplication_id(letter.deduplication_id.clone());
        for (name, attribute) in &letter.attributes {
            let value = MessageAttributeValue::builder()
                .data_type(&attribute.data_type)
                .set_string_value(attribute.string_value.clone())
                .set_binary_value(attribute.binary_value.clone().map(Blob::new))
                .build()
                .map_err(|e| SendError::Refused(format!("attribute {name}: {e}")))?;
            request = request.message_attributes(name, value);
        }
        request.send().await.map(|_| ()).map_err(classify)
    }
}

fn classify(error: SdkError<SendMessageError>) -> SendError {
    let status = error.raw_response().map(|r| r.status().as_u16());
    match error {
        SdkError::ServiceError(context) => {
            let error = context.into_err();
            let code = error.code().unwrap_or_default().to_owned();
            let message = error.message().unwrap_or_default().to_owned();
            let text = if message.is_empty() {
                code.clone()
            } else {
                format!("{code}: {message}")
            };
            if code.contains("NonExistentQueue") || code.contains("QueueDoesNotExist") {
                SendError::QueueMissing(text)
            } else if status.is_some_and(|s| s >= 500) || code.contains("Throttl") {
                SendError::Unavailable(text)
            } else {
                SendError::Refused(text)
            }
        }
        SdkError::TimeoutError(_) => SendError::Unavailable("the request timed out".into()),
        SdkError::DispatchFailure(_) => SendError::Unavailable("connection failed".into()),
        SdkError::ResponseError(_) => {
            SendError::Unavailable("the response was lost or could not be read".into())
        }
        other => SendError::Refused(other.to_string()),
    }
}
