//! The SDK's configuration for a local endpoint (static test credentials, us-east-1, the account
//! and region moto keeps its resources in), the resources the tests create on it the way
//! template.yaml defines them, and the queues read back; knows no program's code.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, KeySchemaElement, KeyType, ScalarAttributeType,
};
use aws_sdk_s3::types::{
    DefaultRetention, ObjectLockConfiguration, ObjectLockEnabled, ObjectLockRetentionMode,
    ObjectLockRule,
};

/// The tests' region.
pub const REGION: &str = "us-east-1";

/// The tests' static credentials (moto checks no signature).
pub fn credentials() -> Credentials {
    Credentials::new("test", "test", None, None, "tests")
}

/// The same, as a provider.
pub fn credentials_provider() -> SharedCredentialsProvider {
    SharedCredentialsProvider::new(credentials())
}

/// Shared configuration for `endpoint`: test credentials, us-east-1, the SDK's defaults otherwise.
pub fn sdk_config(endpoint: &str) -> SdkConfig {
    SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new(REGION))
        .credentials_provider(credentials_provider())
        .build()
}

/// A DynamoDB key schema element.
pub fn key(name: &str, kind: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .expect("a key schema element")
}

/// A DynamoDB string attribute definition.
pub fn string_attribute(name: &str) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .expect("an attribute definition")
}

/// An archive bucket as the template defines it: versioning and Object Lock with a default
/// COMPLIANCE retention of one day.
pub async fn create_locked_bucket(s3: &aws_sdk_s3::Client, name: &str) {
    s3.create_bucket()
        .bucket(name)
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .expect("create bucket");
    s3.put_object_lock_configuration()
        .bucket(name)
        .object_lock_configuration(
            ObjectLockConfiguration::builder()
                .object_lock_enabled(ObjectLockEnabled::Enabled)
                .rule(
                    ObjectLockRule::builder()
                        .default_retention(
                            DefaultRetention::builder()
                                .mode(ObjectLockRetentionMode::Compliance)
                                .days(1)
                                .build(),
                        )
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .expect("object lock configuration");
}

/// One receive of up to 10 messages of the queue at `url`, with all their attributes, hidden for
/// `visibility_timeout` seconds (0: a receive that hides nothing).
pub async fn receive(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    visibility_timeout: i32,
) -> Vec<aws_sdk_sqs::types::Message> {
    sqs.receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .visibility_timeout(visibility_timeout)
        .message_attribute_names("All")
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
        .send()
        .await
        .expect("receive")
        .messages
        .unwrap_or_default()
}
