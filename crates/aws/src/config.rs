//! Owns how the programs load the SDK's configuration and build their clients, once: the
//! function preset (no SDK retries: the caller retries within its deadline; a short connect
//! timeout), the CLI preset (the standard chain with the flags over it, standard retries), and
//! each client's builder. Must not know what any program does with a client.

use std::time::Duration;

/// How long a connection may take to open before the request fails (and is retried by whoever
/// retries it): a dead endpoint must fail fast inside a Lambda deadline.
pub const FUNCTION_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// The Lambda functions' configuration: credentials, region and `AWS_ENDPOINT_URL` from the SDK's
/// standard sources; no SDK retries, since each function retries within its invocation's deadline
/// (a client that wants the SDK's retries sets them itself); a short connect timeout.
pub async fn function() -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .retry_config(aws_config::retry::RetryConfig::disabled())
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .connect_timeout(FUNCTION_CONNECT_TIMEOUT)
                .build(),
        )
        .load()
        .await
}

/// What a person gives on the command line, over the standard chain.
#[derive(Debug, Clone, Default)]
pub struct CliOptions {
    pub profile: Option<String>,
    pub region: Option<String>,
    pub endpoint_url: Option<String>,
}

/// The command line's configuration: the standard chain, with the flags over it. SDK retries
/// stay on (standard mode): a command line can wait for a throttled request.
pub async fn cli(options: &CliOptions) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    if let Some(profile) = &options.profile {
        loader = loader.profile_name(profile);
    }
    if let Some(region) = &options.region {
        loader = loader.region(aws_config::Region::new(region.clone()));
    }
    if let Some(endpoint) = &options.endpoint_url {
        loader = loader.endpoint_url(endpoint);
    }
    loader.load().await
}

/// Where requests go, for error messages: the endpoint, else the region, else what to set.
pub fn location(sdk: &aws_config::SdkConfig) -> String {
    match (sdk.endpoint_url(), sdk.region()) {
        (Some(endpoint), _) => endpoint.to_owned(),
        (None, Some(region)) => format!("region {region}"),
        (None, None) => "no region (set AWS_REGION or --region)".to_owned(),
    }
}

/// How one client differs from the configuration it is built from: `connect` to open a
/// connection, `operation` for a whole request (retries included, so that none outlives the
/// caller's bound), and `standard_retries`: the SDK's standard retries (3 attempts) even where
/// the configuration has none (the function preset).
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientOptions {
    pub connect: Option<Duration>,
    pub operation: Option<Duration>,
    pub standard_retries: bool,
}

impl ClientOptions {
    /// The configuration as it is.
    pub const AS_CONFIGURED: Self = Self {
        connect: None,
        operation: None,
        standard_retries: false,
    };

    /// A Lambda function's client that may wait: standard retries, a connection in 2 s, the
    /// whole request within `operation`.
    pub fn bounded(operation: Duration) -> Self {
        Self {
            connect: Some(Duration::from_secs(2)),
            operation: Some(operation),
            standard_retries: true,
        }
    }

    #[cfg(any(feature = "s3", feature = "kms", feature = "sqs", feature = "dynamodb"))]
    fn timeouts(self) -> Option<aws_config::timeout::TimeoutConfig> {
        if self.connect.is_none() && self.operation.is_none() {
            return None;
        }
        let mut builder = aws_config::timeout::TimeoutConfig::builder();
        builder.set_connect_timeout(self.connect);
        builder.set_operation_timeout(self.operation);
        Some(builder.build())
    }
}

/// Applies `ClientOptions` to any service's configuration builder.
#[cfg(any(feature = "s3", feature = "kms", feature = "sqs", feature = "dynamodb"))]
macro_rules! apply {
    ($builder:expr, $options:expr, $service:ident) => {{
        let mut builder = $builder;
        if $options.standard_retries {
            builder = builder.retry_config($service::config::retry::RetryConfig::standard());
        }
        if let Some(timeouts) = $options.timeouts() {
            builder = builder.timeout_config(timeouts);
        }
        builder.build()
    }};
}

/// An S3 client: path-style addressing when an endpoint is set (`AWS_ENDPOINT_URL`: a local S3
/// on loopback has no per-bucket host names).
#[cfg(feature = "s3")]
pub fn s3(sdk: &aws_config::SdkConfig, options: ClientOptions) -> aws_sdk_s3::Client {
    let builder =
        aws_sdk_s3::config::Builder::from(sdk).force_path_style(sdk.endpoint_url().is_some());
    aws_sdk_s3::Client::from_conf(apply!(builder, options, aws_sdk_s3))
}

/// A KMS client.
#[cfg(feature = "kms")]
pub fn kms(sdk: &aws_config::SdkConfig, options: ClientOptions) -> aws_sdk_kms::Client {
    let builder = aws_sdk_kms::config::Builder::from(sdk);
    aws_sdk_kms::Client::from_conf(apply!(builder, options, aws_sdk_kms))
}

/// An SQS client.
#[cfg(feature = "sqs")]
pub fn sqs(sdk: &aws_config::SdkConfig, options: ClientOptions) -> aws_sdk_sqs::Client {
    let builder = aws_sdk_sqs::config::Builder::from(sdk);
    aws_sdk_sqs::Client::from_conf(apply!(builder, options, aws_sdk_sqs))
}

/// A DynamoDB client (the command line's reads; the function writes through its own wire).
#[cfg(feature = "dynamodb")]
pub fn dynamodb(sdk: &aws_config::SdkConfig) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(sdk)
}

/// A DynamoDB client with `options` (the archiver's repair reads items through the SDK).
#[cfg(feature = "dynamodb")]
pub fn dynamodb_with(
    sdk: &aws_config::SdkConfig,
    options: ClientOptions,
) -> aws_sdk_dynamodb::Client {
    let builder = aws_sdk_dynamodb::config::Builder::from(sdk);
    aws_sdk_dynamodb::Client::from_conf(apply!(builder, options, aws_sdk_dynamodb))
}

/// An STS client (who is calling: `GetCallerIdentity`).
#[cfg(feature = "sts")]
pub fn sts(sdk: &aws_config::SdkConfig) -> aws_sdk_sts::Client {
    aws_sdk_sts::Client::new(sdk)
}

/// A Lambda client (auditctl invokes the archiver). `AWS_ENDPOINT_URL_LAMBDA`, the SDK's own
/// variable for Lambda's endpoint, wins over the configuration's endpoint: locally the functions
/// answer at `cargo lambda watch`'s address, not at the other services' (moto).
#[cfg(feature = "lambda")]
pub fn lambda(sdk: &aws_config::SdkConfig) -> aws_sdk_lambda::Client {
    let mut builder = aws_sdk_lambda::config::Builder::from(sdk);
    if let Some(endpoint) = std::env::var("AWS_ENDPOINT_URL_LAMBDA")
        .ok()
        .filter(|e| !e.trim().is_empty())
    {
        builder = builder.endpoint_url(endpoint);
    }
    aws_sdk_lambda::Client::from_conf(builder.build())
}
