//! Owns the signing key port over `audit_aws::kms`: its KMS adapter (`KmsSigner`) and its
//! in-memory twin (`memory`) sign the archiver's digests, their errors mapped to `AwsError` by
//! `audit_aws::error`'s classification. Must not know digests or the SDK.

use audit_aws::error::AwsError;

use super::DigestSigner;

/// The digest key in KMS (`Sign`, `ECDSA_SHA_256`, `RAW`; `GetPublicKey`), named by its ARN.
pub use audit_aws::kms::KmsKey as KmsSigner;

impl DigestSigner for KmsSigner {
    fn key_arn(&self) -> &str {
        self.key_id()
    }

    async fn sign(&self, message: &[u8]) -> Result<Vec<u8>, AwsError> {
        KmsSigner::sign(self, message).await
    }

    async fn public_key(&self) -> Result<Vec<u8>, AwsError> {
        KmsSigner::public_key(self).await.map(|info| info.der)
    }
}
