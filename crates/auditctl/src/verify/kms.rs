//! Owns the KMS adapter of the key port: GetPublicKey of the digest key (what AuditReaderPolicy
//! allows), and the key's ARN, which every digest it signed names. Must not know digests.

use aws_sdk_kms::Client;
use aws_sdk_kms::error::ProvideErrorMetadata;

use super::ports::{KeySource, PublicKeyInfo};
use crate::TrailError;
use audit_aws::error::describe as sdk_error;

/// The digest key in KMS.
#[derive(Debug, Clone)]
pub struct KmsKey {
    client: Client,
    /// As configured (`DIGEST_KEY_ID`): an ARN, a key id or an alias.
    key_id: String,
    location: String,
}

impl KmsKey {
    pub fn new(
        sdk: &aws_config::SdkConfig,
        key_id: impl Into<String>,
        location: impl Into<String>,
    ) -> Self {
        Self {
            client: Client::new(sdk),
            key_id: key_id.into(),
            location: location.into(),
        }
    }
}

impl KeySource for KmsKey {
    async fn public_key(&self) -> Result<PublicKeyInfo, TrailError> {
        let output = self
            .client
            .get_public_key()
            .key_id(&self.key_id)
            .send()
            .await
            .map_err(|error| match error.code() {
                Some("NotFoundException") => TrailError::KeyNotFound {
                    key: self.key_id.clone(),
                    at: self.location.clone(),
                },
                Some("AccessDeniedException") => TrailError::Aws(format!(
                    "not allowed to read the public key of the digest key {}: {}; attach AuditReaderPolicy (kms:GetPublicKey on it)",
                    self.key_id,
                    sdk_error(&error)
                )),
                _ => TrailError::Aws(format!(
                    "reading the public key of the digest key {}: {}",
                    self.key_id,
                    sdk_error(&error)
                )),
            })?;
        // KMS answers with the key's ARN; a local endpoint (moto) with its bare id: then the ARN
        // configured, or DescribeKey's (which the reader policy does not grant: only off AWS).
        let named = output.key_id().unwrap_or_default();
        let arn = if named.starts_with("arn:") {
            named.to_owned()
        } else if self.key_id.starts_with("arn:") && self.key_id.contains(":key/") {
            self.key_id.clone()
        } else {
            self.client
                .describe_key()
                .key_id(&self.key_id)
                .send()
                .await
                .ok()
                .and_then(|d| d.key_metadata().and_then(|m| m.arn()).map(str::to_owned))
                .unwrap_or_else(|| named.to_owned())
        };
        let key_spec = output
            .key_spec()
            .map(|s| s.as_str().to_owned())
            .or_else(|| {
                #[allow(deprecated)] // the only one a local endpoint (moto) sends
                output
                    .customer_master_key_spec()
                    .map(|s| s.as_str().to_owned())
            })
            .unwrap_or_default();
        Ok(PublicKeyInfo {
            arn,
            key_spec,
            signing_algorithms: output
                .signing_algorithms()
                .iter()
                .map(|a| a.as_str().to_owned())
                .collect(),
            der: output
                .public_key()
                .map(|k| k.as_ref().to_vec())
                .unwrap_or_default(),
        })
    }
}
