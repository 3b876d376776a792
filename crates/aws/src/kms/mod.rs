//! Owns the KMS adapter of the digest key, once: `Sign` (`ECDSA_SHA_256` over a `RAW` message) and
//! `GetPublicKey` with the key's ARN, errors as `AwsError`; its in-memory twin is `memory`. Must
//! not know digests, nor any program's port.
//!
//! `RAW` rather than `DIGEST`: KMS then hashes the message itself (at most 4,096 bytes; a signing
//! string is a few hundred), exactly what `openssl dgst -sha256 -verify` checks, and moto's KMS
//! agrees with AWS's on it.

pub mod memory;

use aws_sdk_kms::Client;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::{MessageType, SigningAlgorithmSpec};

pub use memory::MemoryKey;

use crate::error::{AwsError, ErrorKind};

/// The key spec of the digest key (template.yaml's AuditDigestKey).
pub const KEY_SPEC: &str = "ECC_NIST_P256";

/// A key as KMS's GetPublicKey describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKeyInfo {
    /// The key's ARN (what a digest's `keyId` names).
    pub arn: String,
    pub key_spec: String,
    pub signing_algorithms: Vec<String>,
    /// DER SubjectPublicKeyInfo.
    pub der: Vec<u8>,
}

/// A key in KMS, named as configured: an ARN, a key id or an alias.
#[derive(Debug, Clone)]
pub struct KmsKey {
    client: Client,
    key_id: String,
}

impl KmsKey {
    pub fn new(client: Client, key_id: impl Into<String>) -> Self {
        Self {
            client,
            key_id: key_id.into(),
        }
    }

    /// The key as configured.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The DER-encoded ECDSA P-256 signature of SHA-256(`message`).
    pub async fn sign(&self, message: &[u8]) -> Result<Vec<u8>, AwsError> {
        let output = self
            .client
            .sign()
            .key_id(&self.key_id)
            .message(Blob::new(message))
            .message_type(MessageType::Raw)
            .signing_algorithm(SigningAlgorithmSpec::EcdsaSha256)
            .send()
            .await
            .map_err(|error| AwsError::from_sdk(&error))?;
        output.signature.map(Blob::into_inner).ok_or_else(|| {
            AwsError::without_answer(ErrorKind::Unavailable, "KMS answered without a signature")
        })
    }

    /// The public key, its spec and algorithms, and the key's ARN.
    pub async fn public_key(&self) -> Result<PublicKeyInfo, AwsError> {
        let output = self
            .client
            .get_public_key()
            .key_id(&self.key_id)
            .send()
            .await
            .map_err(|error| AwsError::from_sdk(&error))?;
        // KMS answers with the key's ARN; a local endpoint (moto) with its bare id: then the ARN
        // configured, or DescribeKey's (which a reader's policy need not grant: only off AWS).
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
