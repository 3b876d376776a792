//! Owns the digest signing key port: sign a short message with the key (KMS `Sign`,
//! `ECDSA_SHA_256`, `MessageType` `RAW`: the key hashes the message with SHA-256 and signs the
//! hash; the signature is DER), give its public key (KMS `GetPublicKey`) and its errors. Must not know digests or the SDK (adapters: `kms`,
//! and the in-memory twin `memory`, a P-256 key of its own that signs exactly as KMS does).

pub mod kms;
pub mod memory;

use std::future::Future;

/// A failed signing request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    /// The request may succeed later (throttling, 5xx, network).
    #[error("the signing key is unavailable: {0}")]
    Unavailable(String),
    /// KMS refused (access denied, key disabled or pending deletion, wrong key usage): it fails
    /// again until someone changes the key or the policy.
    #[error("the signing key refused: {code}: {message}")]
    Refused { code: String, message: String },
}

impl SignError {
    /// A short code for logs.
    pub fn code(&self) -> &str {
        match self {
            Self::Unavailable(_) => "unavailable",
            Self::Refused { code, .. } => code,
        }
    }
}

/// The digest signing key.
pub trait DigestSigner: Send + Sync {
    /// The key's ARN, as digests name it.
    fn key_arn(&self) -> &str;

    /// The DER-encoded ECDSA P-256 signature of SHA-256(`message`).
    fn sign(&self, message: &[u8]) -> impl Future<Output = Result<Vec<u8>, SignError>> + Send;

    /// The key's public key as KMS's GetPublicKey gives it (DER SubjectPublicKeyInfo): what the
    /// sealer checks the signature of a digest it chains on with.
    fn public_key(&self) -> impl Future<Output = Result<Vec<u8>, SignError>> + Send;
}

impl<S: DigestSigner> DigestSigner for &S {
    fn key_arn(&self) -> &str {
        (**self).key_arn()
    }

    fn sign(&self, message: &[u8]) -> impl Future<Output = Result<Vec<u8>, SignError>> + Send {
        (**self).sign(message)
    }

    fn public_key(&self) -> impl Future<Output = Result<Vec<u8>, SignError>> + Send {
        (**self).public_key()
    }
}
