//! Owns the key port over `audit_aws::kms`: GetPublicKey of the digest key (what
//! AuditReaderPolicy allows) with the key's ARN, which every digest it signed names, and its
//! errors as typed `Error`s. Must not know digests.

use audit_aws::error::ErrorKind;

use super::ports::{KeySource, PublicKeyInfo};
use crate::Error;

/// The digest key in KMS.
#[derive(Debug, Clone)]
pub struct KmsKey {
    key: audit_aws::kms::KmsKey,
    location: String,
}

impl KmsKey {
    /// `key_id` as configured (`DIGEST_KEY_ID`): an ARN, a key id or an alias.
    pub fn new(
        sdk: &aws_config::SdkConfig,
        key_id: impl Into<String>,
        location: impl Into<String>,
    ) -> Self {
        let client = audit_aws::config::kms(sdk, audit_aws::config::ClientOptions::AS_CONFIGURED);
        Self {
            key: audit_aws::kms::KmsKey::new(client, key_id),
            location: location.into(),
        }
    }
}

impl KeySource for KmsKey {
    async fn public_key(&self) -> Result<PublicKeyInfo, Error> {
        let key_id = self.key.key_id();
        self.key
            .public_key()
            .await
            .map_err(|error| match error.kind {
                ErrorKind::NotFound => Error::KeyNotFound {
                    key: key_id.to_owned(),
                    at: self.location.clone(),
                },
                ErrorKind::Denied => Error::KeyDenied {
                    key: key_id.to_owned(),
                    error,
                },
                _ => Error::Key {
                    key: key_id.to_owned(),
                    error,
                },
            })
    }
}
