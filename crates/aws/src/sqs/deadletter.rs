//! Owns the SQS dead-letter adapter: a `DeadLetter` (body, attributes, group and deduplication
//! id) sent with one `SendMessage`, and what SQS answered classified into a `SendError` by
//! `crate::error`. Must not know why a message is dead-lettered, batching or DynamoDB.

use std::collections::BTreeMap;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::SdkError;
use aws_sdk_sqs::operation::send_message::SendMessageError;
use aws_sdk_sqs::operation::send_message::builders::SendMessageFluentBuilder;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;

use super::attributes::Attribute;
use crate::error::{AwsError, ErrorKind};

/// What is sent to a dead-letter queue for one message (or, by a redrive, back from one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeadLetter {
    /// The original body, byte for byte.
    pub body: String,
    /// Its message attributes, those of the original and those the sender adds.
    pub attributes: BTreeMap<String, Attribute>,
    /// FIFO only: the message group.
    pub group_id: Option<String>,
    /// FIFO only: the deduplication id.
    pub deduplication_id: Option<String>,
}

impl DeadLetter {
    /// Its size as SQS counts it against a queue's `MaximumMessageSize`: the body and, for every
    /// message attribute, its name, its data type and its value, in bytes (UTF-8 text; a binary
    /// value's own bytes, not their base64). The group and deduplication ids do not count.
    pub fn size(&self) -> usize {
        self.body.len()
            + self
                .attributes
                .iter()
                .map(|(name, attribute)| {
                    name.len()
                        + attribute.data_type.len()
                        + attribute.string_value.as_ref().map_or(0, String::len)
                        + attribute.binary_value.as_ref().map_or(0, Vec::len)
                })
                .sum::<usize>()
    }

    /// The string value of the attribute `name`, when it has one.
    pub fn string_attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .get(name)
            .and_then(|a| a.string_value.as_deref())
    }
}

/// Why a dead-letter send did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("the dead-letter queue does not exist: {0}")]
    QueueMissing(String),
    #[error("the dead-letter queue refused the message: {0}")]
    Refused(String),
    #[error("the dead-letter queue could not be reached: {0}")]
    Unavailable(String),
    #[error("no time left before the deadline to send to the dead-letter queue")]
    Deadline,
    /// Sent, and not answered in the time the deadline left: the message may be in the queue.
    #[error("the dead-letter queue did not answer before the deadline: the message may be in it")]
    Unanswered,
    #[error(
        "the record has {0} message attributes; with failureReason and failureContext that is over SQS's 10"
    )]
    TooManyAttributes(usize),
    #[error("the record has no body, which SQS cannot carry")]
    NoBody,
    /// The queue refused the message as over its `MaximumMessageSize` (body and attributes, as
    /// `DeadLetter::size` counts them); `limit` is that size when SQS named it.
    #[error("the dead-letter queue refused the message as too large: {text}")]
    TooLarge { limit: Option<usize>, text: String },
}

impl SendError {
    /// An SDK error of `SendMessage`, by `AwsError`'s kind: a missing queue; throttled, failed
    /// or timed out (unavailable); denied or rejected (refused).
    pub fn from_sdk(error: &SdkError<SendMessageError, HttpResponse>) -> Self {
        let aws = AwsError::from_sdk(error);
        let text = match error {
            SdkError::ServiceError(_) if aws.message.is_empty() => aws.code,
            SdkError::ServiceError(_) => format!("{}: {}", aws.code, aws.message),
            SdkError::TimeoutError(_) => "the request timed out".into(),
            SdkError::DispatchFailure(_) => "connection failed".into(),
            SdkError::ResponseError(_) => "the response was lost or could not be read".into(),
            other => other.to_string(),
        };
        // SQS: `InvalidParameterValue`, "One or more parameters are invalid. Reason: Message
        // must be shorter than 262144 bytes." (the queue's MaximumMessageSize).
        if let Some(at) = aws.message.find(TOO_LARGE) {
            let digits: String = aws.message[at + TOO_LARGE.len()..]
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            return Self::TooLarge {
                limit: digits.parse().ok(),
                text,
            };
        }
        match aws.kind {
            ErrorKind::NotFound => Self::QueueMissing(text),
            ErrorKind::Throttled | ErrorKind::Unavailable | ErrorKind::TimedOut => {
                Self::Unavailable(text)
            }
            ErrorKind::Denied | ErrorKind::Rejected => Self::Refused(text),
        }
    }
}

/// The words of SQS's refusal of a message over the queue's size, before the size in bytes.
pub const TOO_LARGE: &str = "must be shorter than";

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

    /// One `SendMessage` with the letter's body, attributes, group and deduplication id.
    pub async fn send(&self, letter: &DeadLetter) -> Result<(), SendError> {
        send_message(&self.client, &self.queue_url, letter)
            .map_err(SendError::Refused)?
            .send()
            .await
            .map(|_| ())
            .map_err(|e| SendError::from_sdk(&e))
    }
}

/// The `SendMessage` request of a letter to `queue_url`, once for the dead-letter adapter and
/// the queue port's; an attribute the SDK cannot build is named in the error.
pub(super) fn send_message(
    client: &Client,
    queue_url: &str,
    letter: &DeadLetter,
) -> Result<SendMessageFluentBuilder, String> {
    let mut request = client
        .send_message()
        .queue_url(queue_url)
        .message_body(&letter.body)
        .set_message_group_id(letter.group_id.clone())
        .set_message_deduplication_id(letter.deduplication_id.clone());
    for (name, attribute) in &letter.attributes {
        let value = attribute
            .to_sdk()
            .map_err(|e| format!("attribute {name}: {e}"))?;
        request = request.message_attributes(name, value);
    }
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_types::body::SdkBody;

    fn answered(
        status: u16,
        code: &str,
        message: &str,
    ) -> SdkError<SendMessageError, HttpResponse> {
        let meta = aws_sdk_sqs::error::ErrorMetadata::builder()
            .code(code)
            .message(message)
            .build();
        let response = HttpResponse::new(
            aws_smithy_runtime_api::http::StatusCode::try_from(status).unwrap(),
            SdkBody::empty(),
        );
        SdkError::service_error(SendMessageError::generic(meta), response)
    }

    #[test]
    fn answers_are_classified_by_their_kind_and_keep_their_words() {
        assert_eq!(
            SendError::from_sdk(&answered(
                400,
                "AWS.SimpleQueueService.NonExistentQueue",
                "gone"
            )),
            SendError::QueueMissing("AWS.SimpleQueueService.NonExistentQueue: gone".into())
        );
        assert_eq!(
            SendError::from_sdk(&answered(400, "QueueDoesNotExist", "")),
            SendError::QueueMissing("QueueDoesNotExist".into())
        );
        assert_eq!(
            SendError::from_sdk(&answered(400, "RequestThrottled", "slow")),
            SendError::Unavailable("RequestThrottled: slow".into())
        );
        assert_eq!(
            SendError::from_sdk(&answered(500, "InternalFailure", "")),
            SendError::Unavailable("InternalFailure".into())
        );
        assert_eq!(
            SendError::from_sdk(&answered(400, "AccessDenied", "no")),
            SendError::Refused("AccessDenied: no".into())
        );
        assert_eq!(
            SendError::from_sdk(&answered(400, "InvalidMessageContents", "bad")),
            SendError::Refused("InvalidMessageContents: bad".into())
        );
        // Over the queue's size: the limit SQS names is kept.
        let message = "One or more parameters are invalid. Reason: Message must be shorter than 262144 bytes.";
        assert_eq!(
            SendError::from_sdk(&answered(400, "InvalidParameterValue", message)),
            SendError::TooLarge {
                limit: Some(262_144),
                text: format!("InvalidParameterValue: {message}")
            }
        );
    }

    #[test]
    fn the_size_is_the_body_and_every_attributes_name_type_and_value() {
        let mut letter = DeadLetter {
            body: "héllo".into(),
            attributes: BTreeMap::new(),
            group_id: Some("g".into()),
            deduplication_id: Some("d".into()),
        };
        assert_eq!(letter.size(), 6, "UTF-8 bytes; the ids do not count");
        letter
            .attributes
            .insert("failureReason".into(), Attribute::string("conflict"));
        letter.attributes.insert(
            "blob".into(),
            Attribute {
                data_type: "Binary".into(),
                string_value: None,
                binary_value: Some(vec![0, 1, 2]),
            },
        );
        assert_eq!(letter.size(), 6 + (13 + 6 + 8) + (4 + 6 + 3));
    }
}
