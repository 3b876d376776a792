//! Owns the signing key port over `audit_aws::kms`'s in-memory twin: a P-256 key pair of its own
//! that signs as KMS does (ECDSA over SHA-256 of the message, DER), for unit tests and benchmarks,
//! through the same error mapping as KMS's.

use super::kms::sign_error;
use super::{DigestSigner, SignError};

/// A signing key in memory.
pub use audit_aws::kms::MemoryKey as MemorySigner;

impl DigestSigner for MemorySigner {
    fn key_arn(&self) -> &str {
        self.arn()
    }

    async fn sign(&self, message: &[u8]) -> Result<Vec<u8>, SignError> {
        MemorySigner::sign(self, message).map_err(sign_error)
    }

    async fn public_key(&self) -> Result<Vec<u8>, SignError> {
        Ok(MemorySigner::public_key(self).der)
    }
}
