//! Owns SQS message attributes, once: the letter's `Attribute`, its mapping to and from the
//! SDK's `MessageAttributeValue` and the Lambda event's `SqsMessageAttribute`, and SQS's limit of
//! attributes per message, from which each caller derives its room. Must not know which
//! attributes a caller adds or why.

use std::collections::{BTreeMap, HashMap};

use aws_lambda_events::sqs::SqsMessageAttribute;
use aws_sdk_sqs::error::BuildError;
use aws_sdk_sqs::primitives::Blob;
use aws_sdk_sqs::types::MessageAttributeValue;

/// SQS carries at most 10 message attributes per message.
pub const MAX_ATTRIBUTES: usize = 10;

/// How many attributes of the original a message may keep when the caller adds `added` of its
/// own: SQS's limit less those.
pub const fn room(added: usize) -> usize {
    MAX_ATTRIBUTES.saturating_sub(added)
}

/// One message attribute, as SQS carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// `String`, `Number`, `Binary`, or one of those with a custom suffix (`String.json`).
    pub data_type: String,
    pub string_value: Option<String>,
    pub binary_value: Option<Vec<u8>>,
}

impl Attribute {
    /// A `String` attribute.
    pub fn string(value: impl Into<String>) -> Self {
        Self {
            data_type: "String".into(),
            string_value: Some(value.into()),
            binary_value: None,
        }
    }

    /// The SDK's form of it, for `SendMessage`.
    pub fn to_sdk(&self) -> Result<MessageAttributeValue, BuildError> {
        MessageAttributeValue::builder()
            .data_type(&self.data_type)
            .set_string_value(self.string_value.clone())
            .set_binary_value(self.binary_value.clone().map(Blob::new))
            .build()
    }
}

impl From<&MessageAttributeValue> for Attribute {
    /// An attribute as `ReceiveMessage` returns it.
    fn from(attribute: &MessageAttributeValue) -> Self {
        Self {
            data_type: attribute.data_type().to_owned(),
            string_value: attribute.string_value().map(str::to_owned),
            binary_value: attribute.binary_value().map(|b| b.as_ref().to_vec()),
        }
    }
}

impl From<&SqsMessageAttribute> for Attribute {
    /// An attribute of a Lambda SQS event's record; one without a data type is a `String`.
    fn from(attribute: &SqsMessageAttribute) -> Self {
        Self {
            data_type: attribute
                .data_type
                .clone()
                .unwrap_or_else(|| "String".into()),
            string_value: attribute.string_value.clone(),
            binary_value: attribute.binary_value.as_ref().map(|b| b.0.clone()),
        }
    }
}

/// A Lambda SQS event record's attributes as a letter's, without those named in `except`.
pub fn from_event(
    attributes: &HashMap<String, SqsMessageAttribute>,
    except: &[&str],
) -> BTreeMap<String, Attribute> {
    attributes
        .iter()
        .filter(|(name, _)| !except.contains(&name.as_str()))
        .map(|(name, attribute)| (name.clone(), Attribute::from(attribute)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::encodings::Base64Data;

    #[test]
    fn each_caller_has_sqs_limit_less_what_it_adds() {
        assert_eq!(room(2), 8);
        assert_eq!(room(1), 9);
        assert_eq!(room(11), 0);
    }

    #[test]
    fn an_event_attribute_keeps_its_type_and_values_and_defaults_to_string() {
        let mut event = HashMap::new();
        let mut binary = SqsMessageAttribute::default();
        binary.data_type = Some("Binary.gz".into());
        // `Base64Data` is `#[non_exhaustive]`: built from its Default.
        let mut bytes = Base64Data::default();
        bytes.0 = vec![1, 2, 3];
        binary.binary_value = Some(bytes);
        event.insert("blob".to_owned(), binary);
        let mut untyped = SqsMessageAttribute::default();
        untyped.string_value = Some("t".into());
        event.insert("tenant".to_owned(), untyped);
        event.insert("skip".to_owned(), SqsMessageAttribute::default());

        let mapped = from_event(&event, &["skip"]);
        assert_eq!(mapped.len(), 2);
        assert_eq!(mapped["tenant"], Attribute::string("t"));
        assert_eq!(mapped["blob"].data_type, "Binary.gz");
        assert_eq!(mapped["blob"].binary_value.as_deref(), Some(&[1, 2, 3][..]));
        let sdk = mapped["blob"].to_sdk().unwrap();
        assert_eq!(sdk.data_type(), "Binary.gz");
        assert_eq!(sdk.binary_value().map(|b| b.as_ref()), Some(&[1, 2, 3][..]));
    }
}
