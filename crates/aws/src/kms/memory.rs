//! Owns the in-memory twin of a KMS signing key: a P-256 key pair of its own that signs as KMS's
//! `Sign` with `ECDSA_SHA_256` and `RAW` does (ECDSA over SHA-256 of the message, DER) and describes
//! itself as GetPublicKey does; refusals that tests inject. Must not know digests.

use std::sync::atomic::{AtomicUsize, Ordering};

use audit_model::digest::SIGNING_ALGORITHM;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair,
    UnparsedPublicKey,
};

use super::{KEY_SPEC, PublicKeyInfo};
use crate::error::{AwsError, ErrorKind};

/// A signing key in memory.
pub struct MemoryKey {
    pair: EcdsaKeyPair,
    arn: String,
    refuse: AtomicUsize,
    signed: AtomicUsize,
}

impl std::fmt::Debug for MemoryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryKey")
            .field("arn", &self.arn)
            .finish_non_exhaustive()
    }
}

impl MemoryKey {
    /// A new key named `arn`.
    pub fn new(arn: &str) -> Self {
        Self {
            // Generating a P-256 pair fails only without a working random source: no test or
            // benchmark can run then.
            pair: EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING)
                .expect("a P-256 key pair"),
            arn: arn.to_owned(),
            refuse: AtomicUsize::new(0),
            signed: AtomicUsize::new(0),
        }
    }

    /// The key's ARN.
    pub fn arn(&self) -> &str {
        &self.arn
    }

    /// The next `times` requests are refused as KMS refuses a disabled key.
    pub fn refuse(&self, times: usize) {
        self.refuse.store(times, Ordering::SeqCst);
    }

    /// Signatures made.
    pub fn signed(&self) -> usize {
        self.signed.load(Ordering::SeqCst)
    }

    /// The DER signature of SHA-256(`message`), as KMS's `Sign` answers.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, AwsError> {
        let refused = self
            .refuse
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if refused {
            return Err(AwsError::from_answer(
                400,
                "DisabledException",
                "the key is disabled",
            ));
        }
        self.signed.fetch_add(1, Ordering::SeqCst);
        self.pair
            .sign(&SystemRandom::new(), message)
            .map(|signature| signature.as_ref().to_vec())
            .map_err(|_| AwsError::without_answer(ErrorKind::Unavailable, "signing failed"))
    }

    /// What KMS's GetPublicKey says of it.
    pub fn public_key(&self) -> PublicKeyInfo {
        PublicKeyInfo {
            arn: self.arn.clone(),
            key_spec: KEY_SPEC.to_owned(),
            signing_algorithms: vec![SIGNING_ALGORITHM.to_owned()],
            der: self
                .pair
                .public_key()
                .as_der()
                .map(|der| der.as_ref().to_vec())
                .unwrap_or_default(),
        }
    }

    /// Whether `signature` is this key's signature of `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, self.pair.public_key().as_ref())
            .verify(message, signature)
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_signs_as_kms_does_and_refuses_when_told() {
        let key = MemoryKey::new("arn:aws:kms:us-east-1:111122223333:key/k");
        let signature = key.sign(b"message").unwrap();
        assert!(key.verifies(b"message", &signature));
        assert!(!key.verifies(b"messagE", &signature));
        assert_eq!(key.public_key().key_spec, KEY_SPEC);
        key.refuse(1);
        let refused = key.sign(b"message").unwrap_err();
        assert_eq!(refused.code, "DisabledException");
        assert_eq!(refused.kind, ErrorKind::Rejected);
        assert!(key.sign(b"message").is_ok());
        assert_eq!(key.signed(), 2);
    }
}
