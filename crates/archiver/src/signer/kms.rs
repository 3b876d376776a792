//! Owns the signing key port over `audit_aws::kms`: its KMS adapter (`KmsSigner`) and its
//! in-memory twin (`memory`) sign the archiver's digests, their errors mapped to `SignError` by
//! `audit_aws::error`'s classification. Must not know digests or the SDK.

use audit_aws::error::AwsError;

use super::{DigestSigner, SignError};

/// The digest key in KMS (`Sign`, `ECDSA_SHA_256`, `RAW`; `GetPublicKey`), named by its ARN.
pub use audit_aws::kms::KmsKey as KmsSigner;

/// A KMS error as the port's: what may pass (throttling, KMS's own failures, the network, a
/// time-out) is unavailable; the rest (access denied, a disabled or missing key, wrong key usage)
/// is refused until someone changes the key or the policy.
pub fn sign_error(error: AwsError) -> SignError {
    if error.kind.is_transient() {
        return SignError::Unavailable(error.text);
    }
    SignError::Refused {
        code: if error.code.is_empty() {
            "Unknown".to_owned()
        } else {
            error.code
        },
        message: error.message,
    }
}

impl DigestSigner for KmsSigner {
    fn key_arn(&self) -> &str {
        self.key_id()
    }

    async fn sign(&self, message: &[u8]) -> Result<Vec<u8>, SignError> {
        KmsSigner::sign(self, message).await.map_err(sign_error)
    }

    async fn public_key(&self) -> Result<Vec<u8>, SignError> {
        KmsSigner::public_key(self)
            .await
            .map(|info| info.der)
            .map_err(sign_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kms_errors_are_unavailable_when_they_may_pass_and_refused_otherwise() {
        for code in [
            "ThrottlingException",
            "KMSInternalException",
            "DependencyTimeoutException",
            "KeyUnavailableException",
            "LimitExceededException",
        ] {
            assert_eq!(
                sign_error(AwsError::from_answer(400, code, "m")),
                SignError::Unavailable(format!("{code}: m")),
                "{code}"
            );
        }
        assert_eq!(
            sign_error(AwsError::from_answer(400, "DisabledException", "off")),
            SignError::Refused {
                code: "DisabledException".into(),
                message: "off".into()
            }
        );
        assert!(matches!(
            sign_error(AwsError::from_answer(400, "AccessDeniedException", "no")),
            SignError::Refused { .. }
        ));
    }
}
