//! Owns trusting the digest key: KMS's description of it checked (ECC_NIST_P256, signing with
//! ECDSA_SHA_256), its public key parsed once, and a signature checked with it (aws-lc-rs). Must
//! not know S3, the digest's layout or KMS's client.

use std::sync::Arc;

use audit_model::digest::SIGNING_ALGORITHM;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1, ParsedPublicKey};

use super::ports::PublicKeyInfo;
use crate::Error;
use crate::tlog::LogKey;

/// The key spec of the digest key (template.yaml's AuditDigestKey).
pub use audit_aws::kms::KEY_SPEC;

/// The digest key's public key, checked: what every digest's signature is verified with, and
/// (as the log's key, from the same DER) every checkpoint's.
#[derive(Clone)]
pub struct TrustedKey {
    arn: String,
    key: ParsedPublicKey,
    log: Arc<LogKey>,
}

impl std::fmt::Debug for TrustedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustedKey")
            .field("arn", &self.arn)
            .finish()
    }
}

impl TrustedKey {
    /// The key KMS described, if it is one the digests can be signed with. KMS gives the public
    /// key as a DER SubjectPublicKeyInfo, which aws-lc-rs parses as it is (and checks that it is
    /// a point of P-256).
    pub fn new(info: PublicKeyInfo) -> Result<Self, Error> {
        let unsuitable = |detail: String| Error::KeyUnsuitable {
            key: info.arn.clone(),
            detail,
        };
        if info.key_spec != KEY_SPEC {
            return Err(unsuitable(format!(
                "its key spec is {}, not {KEY_SPEC}",
                if info.key_spec.is_empty() {
                    "not given"
                } else {
                    &info.key_spec
                }
            )));
        }
        if !info
            .signing_algorithms
            .iter()
            .any(|a| a == SIGNING_ALGORITHM)
        {
            return Err(unsuitable(format!(
                "it does not sign with {SIGNING_ALGORITHM} (it signs with {})",
                info.signing_algorithms.join(", ")
            )));
        }
        let key = ParsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &info.der)
            .map_err(|e| unsuitable(format!("its public key is not a P-256 key ({e})")))?;
        let log = LogKey::from_der(&info.der).map_err(|e| unsuitable(e.to_string()))?;
        Ok(Self {
            arn: info.arn,
            key,
            log: Arc::new(log),
        })
    }

    /// The same public key as the transparency log's: checkpoints' signature lines (key id from
    /// the DER SubjectPublicKeyInfo KMS gave).
    pub fn log(&self) -> &LogKey {
        &self.log
    }

    /// The key's ARN: what a digest signed by it names as its `keyId`.
    pub fn arn(&self) -> &str {
        &self.arn
    }

    /// Whether `signature` (DER, as KMS gives it) is this key's ECDSA P-256 signature of the
    /// SHA-256 of `message` (KMS `Sign` with `MessageType` `RAW` and `ECDSA_SHA_256`).
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        self.key.verify_sig(message, signature).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use audit_aws::kms::MemoryKey as TestKey;

    #[test]
    fn a_kms_p256_key_verifies_its_own_signatures_and_no_other() {
        let signer = TestKey::new("arn:aws:kms:us-east-1:111122223333:key/k");
        let key = TrustedKey::new(signer.public_key()).unwrap();
        assert_eq!(key.arn(), "arn:aws:kms:us-east-1:111122223333:key/k");
        let signature = signer.sign(b"audit-receiver-digest/1\nmessage").unwrap();
        assert!(key.verifies(b"audit-receiver-digest/1\nmessage", &signature));
        assert!(!key.verifies(b"audit-receiver-digest/1\nmessagE", &signature));
        let other = TestKey::new("arn:aws:kms:us-east-1:111122223333:key/other");
        assert!(!key.verifies(
            b"audit-receiver-digest/1\nmessage",
            &other.sign(b"audit-receiver-digest/1\nmessage").unwrap()
        ));
        assert!(!key.verifies(b"m", b"not DER"));
    }

    #[test]
    fn a_key_of_another_kind_is_refused_saying_why() {
        let signer = TestKey::new("arn:k");
        let rsa = PublicKeyInfo {
            key_spec: "RSA_2048".into(),
            ..signer.public_key()
        };
        // The fix (DIGEST_KEY_ID) is auditctl's words (words.rs tests it on this error).
        let error = TrustedKey::new(rsa).unwrap_err();
        assert!(
            matches!(&error, Error::KeyUnsuitable { key, detail }
                if key == "arn:k" && detail.contains("RSA_2048, not ECC_NIST_P256")),
            "{error}"
        );
        let no_ecdsa = PublicKeyInfo {
            signing_algorithms: vec!["ECDSA_SHA_384".into()],
            ..signer.public_key()
        };
        assert!(TrustedKey::new(no_ecdsa).is_err());
        let garbled = PublicKeyInfo {
            der: b"not a key".to_vec(),
            ..signer.public_key()
        };
        assert!(
            TrustedKey::new(garbled)
                .unwrap_err()
                .to_string()
                .contains("not a P-256 key")
        );
    }
}
