//! Owns the signing key port over `audit_aws::kms`'s in-memory twin: a P-256 key pair of its own
//! that signs as KMS does (ECDSA over SHA-256 of the message, DER), for unit tests and benchmarks,
//! with the same errors as KMS's.

use audit_aws::error::AwsError;

use super::DigestSigner;

/// A signing key in memory.
pub use audit_aws::kms::MemoryKey as MemorySigner;

impl DigestSigner for MemorySigner {
    fn key_arn(&self) -> &str {
        self.arn()
    }

    async fn sign(&self, message: &[u8]) -> Result<Vec<u8>, AwsError> {
        MemorySigner::sign(self, message)
    }

    async fn public_key(&self) -> Result<Vec<u8>, AwsError> {
        Ok(MemorySigner::public_key(self).der)
    }
}
