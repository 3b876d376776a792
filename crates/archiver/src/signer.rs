//! Owns the digest signing key port: sign a short message with the key (KMS `Sign`,
//! `ECDSA_SHA_256`, `MessageType` `RAW`: the key hashes the message with SHA-256 and signs the
//! hash; the signature is DER), give its public key (KMS `GetPublicKey`); its errors are `audit_aws::error`'s. Must not know
//! digests or the SDK (adapters: `kms`, and the in-memory twin `memory`, a P-256 key of its own that signs exactly as KMS does).

pub mod kms;
pub mod memory;

use std::future::Future;

use audit_aws::error::AwsError;

/// The digest signing key.
pub trait DigestSigner: Send + Sync {
    /// The key's ARN, as digests name it.
    fn key_arn(&self) -> &str;

    /// The DER-encoded ECDSA P-256 signature of SHA-256(`message`).
    fn sign(&self, message: &[u8]) -> impl Future<Output = Result<Vec<u8>, AwsError>> + Send;

    /// The key's public key as KMS's GetPublicKey gives it (DER SubjectPublicKeyInfo): what the
    /// sealer checks the signature of a digest it chains on with.
    fn public_key(&self) -> impl Future<Output = Result<Vec<u8>, AwsError>> + Send;
}

impl<S: DigestSigner> DigestSigner for &S {
    fn key_arn(&self) -> &str {
        (**self).key_arn()
    }

    fn sign(&self, message: &[u8]) -> impl Future<Output = Result<Vec<u8>, AwsError>> + Send {
        (**self).sign(message)
    }

    fn public_key(&self) -> impl Future<Output = Result<Vec<u8>, AwsError>> + Send {
        (**self).public_key()
    }
}
