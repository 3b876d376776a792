//! Owns the Lambda adapter, once: `Invoke` of a function with a JSON payload, waiting for its
//! answer (`RequestResponse`), errors as `AwsError`. Must not know any function's events.

use aws_sdk_lambda::Client;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;

use crate::error::{AwsError, ErrorKind};

/// What a function answered: its payload, and `FunctionError` (`Unhandled` or `Handled`) when
/// the function failed (the payload is then Lambda's error document: `errorType`,
/// `errorMessage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invoked {
    pub payload: Vec<u8>,
    pub function_error: Option<String>,
}

/// A function, named as configured: its name, ARN or partial ARN.
#[derive(Debug, Clone)]
pub struct LambdaFunction {
    client: Client,
    name: String,
}

impl LambdaFunction {
    pub fn new(client: Client, name: impl Into<String>) -> Self {
        Self {
            client,
            name: name.into(),
        }
    }

    /// The function as configured.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Invokes the function with `payload` (JSON) and waits for its answer.
    pub async fn invoke(&self, payload: Vec<u8>) -> Result<Invoked, AwsError> {
        let output = self
            .client
            .invoke()
            .function_name(&self.name)
            .invocation_type(InvocationType::RequestResponse)
            .payload(Blob::new(payload))
            .send()
            .await
            .map_err(|error| AwsError::from_sdk(&error))?;
        if !(200..300).contains(&output.status_code) {
            return Err(AwsError::without_answer(
                ErrorKind::Unavailable,
                format!(
                    "Lambda answered the invocation with status {}",
                    output.status_code
                ),
            ));
        }
        Ok(Invoked {
            payload: output.payload.map(Blob::into_inner).unwrap_or_default(),
            function_error: output.function_error,
        })
    }
}
