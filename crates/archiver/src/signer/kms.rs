//! Owns the KMS adapter of the signing key: `Sign` with `ECDSA_SHA_256` over a `RAW` message (at
//! most 4,096 bytes; the signing string is a few hundred) and the mapping of its errors. `RAW`
//! rather than `DIGEST`: KMS then hashes the message itself, exactly what `openssl dgst -sha256
//! -verify` checks, and moto's KMS agrees with AWS's on it.

use aws_sdk_kms::Client;
use aws_sdk_kms::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::{MessageType, SigningAlgorithmSpec};

use super::{DigestSigner, SignError};

/// The digest key in KMS.
#[derive(Debug, Clone)]
pub struct KmsSigner {
    client: Client,
    key_arn: String,
}

impl KmsSigner {
    pub fn new(client: Client, key_arn: impl Into<String>) -> Self {
        Self {
            client,
            key_arn: key_arn.into(),
        }
    }
}

impl DigestSigner for KmsSigner {
    fn key_arn(&self) -> &str {
        &self.key_arn
    }

    async fn sign(&self, message: &[u8]) -> Result<Vec<u8>, SignError> {
        let output = self
            .client
            .sign()
            .key_id(&self.key_arn)
            .message(Blob::new(message))
            .message_type(MessageType::Raw)
            .signing_algorithm(SigningAlgorithmSpec::EcdsaSha256)
            .send()
            .await
            .map_err(|error| sign_error(&error))?;
        output
            .signature
            .map(Blob::into_inner)
            .ok_or_else(|| SignError::Unavailable("KMS answered without a signature".into()))
    }
}

fn sign_error<E, R>(error: &SdkError<E, R>) -> SignError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match error {
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or("Unknown").to_owned();
            let message = service.err().message().unwrap_or_default().to_owned();
            match code.as_str() {
                "ThrottlingException"
                | "KMSInternalException"
                | "DependencyTimeoutException"
                | "KeyUnavailableException"
                | "LimitExceededException" => SignError::Unavailable(format!("{code}: {message}")),
                _ => SignError::Refused { code, message },
            }
        }
        other => SignError::Unavailable(DisplayErrorContext(other).to_string()),
    }
}
