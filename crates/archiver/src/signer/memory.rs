//! Owns the in-memory twin of the signing key: a P-256 key pair of its own that signs as KMS does
//! (ECDSA over SHA-256 of the message, DER), for unit tests and benchmarks; its public key checks
//! the signatures.

use std::sync::atomic::{AtomicUsize, Ordering};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair,
    UnparsedPublicKey,
};

use super::{DigestSigner, SignError};

/// A signing key in memory.
pub struct MemorySigner {
    pair: EcdsaKeyPair,
    key_arn: String,
    refuse: AtomicUsize,
    signed: AtomicUsize,
}

impl std::fmt::Debug for MemorySigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemorySigner")
            .field("key_arn", &self.key_arn)
            .finish_non_exhaustive()
    }
}

impl MemorySigner {
    /// A new key named `key_arn`.
    pub fn new(key_arn: &str) -> Self {
        Self {
            pair: EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING)
                .expect("a P-256 key pair"),
            key_arn: key_arn.to_owned(),
            refuse: AtomicUsize::new(0),
            signed: AtomicUsize::new(0),
        }
    }

    /// The next `times` requests are refused (a disabled key).
    pub fn refuse(&self, times: usize) {
        self.refuse.store(times, Ordering::SeqCst);
    }

    /// Signatures made.
    pub fn signed(&self) -> usize {
        self.signed.load(Ordering::SeqCst)
    }

    /// The public key as an uncompressed point.
    pub fn public_key(&self) -> Vec<u8> {
        self.pair.public_key().as_ref().to_vec()
    }

    /// Whether `signature` is this key's signature of `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, self.public_key())
            .verify(message, signature)
            .is_ok()
    }
}

impl DigestSigner for MemorySigner {
    fn key_arn(&self) -> &str {
        &self.key_arn
    }

    async fn sign(&self, message: &[u8]) -> Result<Vec<u8>, SignError> {
        let refused = self
            .refuse
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if refused {
            return Err(SignError::Refused {
                code: "DisabledException".into(),
                message: "the key is disabled".into(),
            });
        }
        self.signed.fetch_add(1, Ordering::SeqCst);
        self.pair
            .sign(&SystemRandom::new(), message)
            .map(|signature| signature.as_ref().to_vec())
            .map_err(|_| SignError::Unavailable("signing failed".into()))
    }
}
