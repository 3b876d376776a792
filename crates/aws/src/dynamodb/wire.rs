//! Owns DynamoDB's wire for the function's calls: the endpoint, a pooled HTTP/1.1 client over
//! rustls (the SDK's TLS stack and roots), one signed JSON 1.0 POST per call (sent again once on a
//! fresh connection when a pooled one turns out closed), and the service's clock as its answers
//! show it. Must not know audit items, error meanings or batching.
//!
//! Why not the SDK's client: `aws-sdk-dynamodb` runs an orchestrator for every call (interceptors,
//! endpoint rules, identity resolution, per-operation configuration, serialisation through its
//! own types) that took about half of a record's CPU in the profile in BENCHMARKS.md; at 128 MB,
//! 7.2 % of a core, CPU bounds throughput. A `PutItem` is one POST with a JSON body. The endpoint
//! and the credentials still come from the SDK's configuration (`aws-config`): the same
//! environment variables, profiles and endpoint rules as every SDK client.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::SharedCredentialsProvider;
use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, DATE, HOST, HeaderValue, USER_AGENT};
use http::{Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::port::{Reply, Transport, WireError};
use super::sigv4::{self, Signer};

/// How long a connection may take to open; a dead endpoint then fails fast and is retried (the
/// function's preset, as its SDK clients have it).
const CONNECT_TIMEOUT: Duration = crate::config::FUNCTION_CONNECT_TIMEOUT;
/// Idle connections are closed after this (DynamoDB's own idle limit is longer).
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The API version prefix of every DynamoDB target (`X-Amz-Target`).
pub const TARGET_PREFIX: &str = "DynamoDB_20120810.";
/// Who is calling, in every request's `User-Agent` (as the SDK names itself in its own).
pub const USER_AGENT_VALUE: &str = concat!("audit-receiver/", env!("CARGO_PKG_VERSION"));

type Https = ConnectTimeout<hyper_rustls::HttpsConnector<HttpConnector>>;

/// DynamoDB at one endpoint, with one region's credentials.
#[derive(Clone)]
pub struct Wire {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client<Https, Full<Bytes>>,
    uri: Uri,
    /// The `host` header as signed: the endpoint's host, with its port unless the scheme's default.
    host: String,
    host_header: HeaderValue,
    signer: Signer,
}

impl std::fmt::Debug for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wire")
            .field("uri", &self.inner.uri)
            .finish()
    }
}

/// Why a wire could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("DynamoDB endpoint: {0}")]
pub struct SetupError(String);

impl Wire {
    /// DynamoDB as the SDK would reach it from `config`: `AWS_ENDPOINT_URL_DYNAMODB`, then
    /// `AWS_ENDPOINT_URL` (or their profile settings), else the region's endpoint by the SDK's
    /// own endpoint rules (FIPS and dual-stack included); the SDK's credentials chain.
    pub async fn from_sdk_config(config: &aws_config::SdkConfig) -> Result<Self, SetupError> {
        use aws_sdk_dynamodb::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
        let region = config
            .region()
            .map(ToString::to_string)
            .ok_or_else(|| SetupError("no AWS region: set AWS_REGION".into()))?;
        let credentials = config
            .credentials_provider()
            .ok_or_else(|| SetupError("no AWS credentials provider".into()))?;
        let configured = config
            .service_config()
            .and_then(|service| {
                let key = aws_types::service_config::ServiceConfigKey::builder()
                    .service_id("DynamoDB")
                    .env("AWS_ENDPOINT_URL")
                    .profile("endpoint_url")
                    .build()
                    .ok()?;
                service.load_config(key)
            })
            .or_else(|| config.endpoint_url().map(str::to_owned));
        let params = Params::builder()
            .region(region.clone())
            .set_use_fips(config.use_fips())
            .set_use_dual_stack(config.use_dual_stack())
            .set_endpoint(configured)
            .build()
            .map_err(|e| SetupError(e.to_string()))?;
        let endpoint = DefaultResolver::new()
            .resolve_endpoint(&params)
            .await
            .map_err(|e| SetupError(e.to_string()))?;
        // The rules may name another signing region than the client's (`local` signs as
        // us-east-1, as the SDK does).
        let signing_region = endpoint
            .auth_schemes()
            .iter()
            .find_map(|scheme| scheme.get("signingRegion")?.as_string())
            .map_or(region, str::to_owned);
        Self::new(endpoint.url(), &signing_region, credentials)
    }

    /// DynamoDB at `endpoint` (`https://…` or `http://…`), signing for `region`.
    pub fn new(
        endpoint: &str,
        region: &str,
        credentials: SharedCredentialsProvider,
    ) -> Result<Self, SetupError> {
        let uri: Uri = endpoint
            .parse()
            .map_err(|e| SetupError(format!("{endpoint:?} is not a URL: {e}")))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(SetupError(format!(
                    "{endpoint:?} must start with https:// or http://"
                )));
            }
        };
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return Err(SetupError(format!(
                "{endpoint:?} has a path; DynamoDB's endpoint is a host (and port) only"
            )));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| SetupError(format!("{endpoint:?} has no host")))?;
        let host = match authority.port_u16() {
            Some(443) if https => authority.host().to_owned(),
            Some(80) if !https => authority.host().to_owned(),
            Some(port) => format!("{}:{port}", authority.host()),
            None => authority.host().to_owned(),
        };
        let host_header =
            HeaderValue::from_str(&host).map_err(|e| SetupError(format!("{host:?}: {e}")))?;
        let uri = Uri::builder()
            .scheme(uri.scheme_str().unwrap_or("https"))
            .authority(authority.as_str())
            .path_and_query("/")
            .build()
            .map_err(|e| SetupError(e.to_string()))?;

        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        let connector = ConnectTimeout(
            hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls_config(https)?)
                .https_or_http()
                .enable_http1()
                .wrap_connector(tcp),
        );
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .build(connector);
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                uri,
                host,
                host_header,
                signer: Signer::new(region, credentials),
            }),
        })
    }

    /// The POST with its signature's headers. The secrets' header values are marked sensitive
    /// (the `http` crate's `Debug` then hides them); the copies in a request belong to the HTTP
    /// stack that writes them, as with the SDK's client.
    fn signed(
        &self,
        target: &str,
        signature: &sigv4::Signature,
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>, WireError> {
        let inner = &self.inner;
        let sensitive = |value: &str| {
            let mut value = HeaderValue::from_str(value).map_err(|_| WireError::Send)?;
            value.set_sensitive(true);
            Ok::<_, WireError>(value)
        };
        let mut request = Request::post(inner.uri.clone())
            .header(HOST, inner.host_header.clone())
            .header(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE))
            .header(CONTENT_TYPE, HeaderValue::from_static(sigv4::CONTENT_TYPE))
            .header("x-amz-date", signature.amz_date.as_str())
            .header("x-amz-target", target)
            .header(AUTHORIZATION, sensitive(&signature.authorization)?);
        if let Some(token) = signature.security_token() {
            request = request.header("x-amz-security-token", sensitive(token)?);
        }
        request.body(Full::new(body)).map_err(|_| WireError::Send)
    }
}

impl Transport for Wire {
    /// One call: `operation` (e.g. `PutItem`) with a JSON body; the whole answer, whatever its
    /// status.
    ///
    /// A pooled connection the server closed while it sat idle (its idle timeout, or while
    /// Lambda froze the environment: nothing ran to notice the close) fails the request written
    /// on it with "closed before the answer" or "reset". hyper-util sends a request again by
    /// itself only when it was never written (`retry_canceled_requests`); once written, the
    /// error comes back here. Such a request is sent once more, at once, on a fresh connection,
    /// and is not one of the batch's retries (no backoff, no attempt spent). Safe because every
    /// call this wire makes is idempotent in effect: a conditional `PutItem` that did reach
    /// DynamoDB finds its own item the second time (a duplicate, never a second item), and
    /// `DescribeTable` changes nothing. A non-idempotent operation must not be sent through
    /// `call`. Once only: if the fresh connection fails too, the error is the batch's to retry.
    async fn call(&self, operation: &str, body: Bytes) -> Result<Reply, WireError> {
        let inner = &self.inner;
        let target = format!("{TARGET_PREFIX}{operation}");
        let sent = SystemTime::now();
        let signature = inner
            .signer
            .sign(&inner.host, &target, &body, sent)
            .await
            .map_err(|e| WireError::Credentials(e.to_string()))?;
        let mut resent = false;
        let response = loop {
            let request = self.signed(&target, &signature, body.clone())?;
            match inner.client.request(request).await {
                Ok(response) => break response,
                Err(error) if !resent && closed_before_answer(&error) => resent = true,
                Err(error) => return Err(transport_error(&error)),
            }
        };
        let status = response.status().as_u16();
        let error_type = response
            .headers()
            .get("x-amzn-errortype")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // Only error answers are measured: a refused signature is where the clock matters, and
        // the successful ones then cost nothing.
        let skew_ms = (status >= 400)
            .then(|| skew_ms(response.headers().get(DATE)?, sent, SystemTime::now()))
            .flatten();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|_| WireError::Response)?
            .to_bytes();
        Ok(Reply {
            status,
            error_type,
            body,
            skew_ms,
            signed_skew_ms: signature.skew_ms,
        })
    }

    /// Opens a connection (or reuses an idle one) with an unsigned `GET /`, which DynamoDB
    /// answers (`healthy: …`) without authentication or any IAM action; the answer itself does
    /// not matter, only that the connection stays in the pool for the first batch.
    async fn probe(&self) -> Result<(), WireError> {
        let inner = &self.inner;
        let request = Request::get(inner.uri.clone())
            .header(HOST, inner.host_header.clone())
            .header(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE))
            .body(Full::new(Bytes::new()))
            .map_err(|_| WireError::Send)?;
        let response = inner
            .client
            .request(request)
            .await
            .map_err(|e| transport_error(&e))?;
        response
            .into_body()
            .collect()
            .await
            .map_err(|_| WireError::Response)?;
        Ok(())
    }

    /// Makes the next call fetch the credentials again (DynamoDB said they expired).
    fn forget_credentials(&self) {
        self.inner.signer.invalidate();
    }

    /// Whether the request `reply` answers was signed more than `sigv4::SKEW_THRESHOLD` off the
    /// service's time, judged by the correction it was signed with; if so the signer signs at
    /// the service's time from now on (`Signer::correct_clock`).
    fn correct_clock(&self, reply: &Reply) -> bool {
        reply.skew_ms.is_some_and(|measured| {
            self.inner
                .signer
                .correct_clock(reply.signed_skew_ms, measured)
        })
    }
}

/// The service's clock (a `Date` header, whole seconds) minus ours at the midpoint of the
/// exchange, in milliseconds.
fn skew_ms(date: &HeaderValue, sent: SystemTime, received: SystemTime) -> Option<i64> {
    let server = chrono::DateTime::parse_from_rfc2822(date.to_str().ok()?).ok()?;
    let elapsed = received.duration_since(sent).unwrap_or_default();
    let midpoint: chrono::DateTime<chrono::Utc> = (sent + elapsed / 2).into();
    Some((server.to_utc() - midpoint).num_milliseconds())
}

/// rustls with the SDK's crypto (AWS-LC) and the system's roots, which honour `SSL_CERT_FILE`
/// and `SSL_CERT_DIR` as the SDK's client does. Plain HTTP endpoints load no roots.
fn tls_config(https: bool) -> Result<rustls::ClientConfig, SetupError> {
    let mut roots = rustls::RootCertStore::empty();
    if https {
        let found = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            return Err(SetupError(format!(
                "no trusted root certificates found (SSL_CERT_FILE, SSL_CERT_DIR or the system's store): {:?}",
                found.errors
            )));
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SetupError(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Bounds a whole connection set-up (DNS, TCP and the TLS handshake) by `CONNECT_TIMEOUT`, as the
/// SDK's connect timeout does; hyper's own bounds the TCP connect only.
#[derive(Clone)]
struct ConnectTimeout<C>(C);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<C> tower_service::Service<Uri> for ConnectTimeout<C>
where
    C: tower_service::Service<Uri> + Send,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move {
            match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
                Ok(result) => result.map_err(Into::into),
                Err(_) => Err(Box::new(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "connect timed out",
                )) as BoxError),
            }
        })
    }
}

/// The connection was closed or reset before any answer came back, after it was opened: what a
/// pooled connection the server had closed while idle does. Connect errors and timeouts are
/// not this.
fn closed_before_answer(error: &hyper_util::client::legacy::Error) -> bool {
    use std::io::ErrorKind;
    if error.is_connect() {
        return false;
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(hyper) = cause.downcast_ref::<hyper::Error>()
            && (hyper.is_incomplete_message() || hyper.is_canceled())
        {
            return true;
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                ErrorKind::ConnectionReset
                    | ErrorKind::BrokenPipe
                    | ErrorKind::ConnectionAborted
                    | ErrorKind::UnexpectedEof
            )
        {
            return true;
        }
        source = cause.source();
    }
    false
}

/// A failed exchange as the batch needs it: each kind is worth another attempt.
fn transport_error(error: &hyper_util::client::legacy::Error) -> WireError {
    if error.is_connect() {
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            if cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
            {
                return WireError::ConnectTimeout;
            }
            source = cause.source();
        }
        return WireError::Connect;
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if cause.downcast_ref::<hyper::Error>().is_some() {
            return WireError::Response;
        }
        source = cause.source();
    }
    WireError::Send
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_credential_types::Credentials;
    use aws_types::SdkConfig;
    use aws_types::region::Region;
    use aws_types::service_config::{LoadServiceConfig, ServiceConfigKey};

    fn config() -> aws_types::sdk_config::Builder {
        SdkConfig::builder()
            .region(Region::new("eu-central-1"))
            .credentials_provider(SharedCredentialsProvider::new(Credentials::for_tests()))
    }

    async fn endpoint(config: SdkConfig) -> Result<(String, String), SetupError> {
        let wire = Wire::from_sdk_config(&config).await?;
        Ok((wire.inner.uri.to_string(), wire.inner.host.clone()))
    }

    #[derive(Debug)]
    struct ServiceEndpoint(&'static str);
    impl LoadServiceConfig for ServiceEndpoint {
        fn load_config(&self, key: ServiceConfigKey<'_>) -> Option<String> {
            (key.service_id() == "DynamoDB" && key.env() == "AWS_ENDPOINT_URL")
                .then(|| self.0.to_owned())
        }
    }

    #[tokio::test]
    async fn the_endpoint_is_the_one_the_sdk_would_use() {
        assert_eq!(
            endpoint(config().build()).await.unwrap(),
            (
                "https://dynamodb.eu-central-1.amazonaws.com/".into(),
                "dynamodb.eu-central-1.amazonaws.com".into()
            )
        );
        assert_eq!(
            endpoint(config().use_fips(true).build()).await.unwrap().1,
            "dynamodb-fips.eu-central-1.amazonaws.com"
        );
        // AWS_ENDPOINT_URL, and AWS_ENDPOINT_URL_DYNAMODB before it; a port is part of the host.
        let local = config().endpoint_url("http://127.0.0.1:4566").build();
        assert_eq!(
            endpoint(local).await.unwrap(),
            ("http://127.0.0.1:4566/".into(), "127.0.0.1:4566".into())
        );
        // The region `local` (DynamoDB Local) signs as us-east-1, as the SDK does.
        let local = SdkConfig::builder()
            .region(Region::new("local"))
            .credentials_provider(SharedCredentialsProvider::new(Credentials::for_tests()))
            .build();
        let wire = Wire::from_sdk_config(&local).await.unwrap();
        assert_eq!(wire.inner.host, "localhost:8000");
        let signature = wire
            .inner
            .signer
            .sign("h", "t", b"", SystemTime::now())
            .await
            .unwrap();
        assert!(
            signature
                .authorization
                .contains("/us-east-1/dynamodb/aws4_request")
        );

        let both = config()
            .endpoint_url("http://127.0.0.1:4566")
            .service_config(ServiceEndpoint("https://localhost:8443"))
            .build();
        assert_eq!(endpoint(both).await.unwrap().1, "localhost:8443");
        let default_port = config().endpoint_url("https://ddb.example:443").build();
        assert_eq!(endpoint(default_port).await.unwrap().1, "ddb.example");
    }

    #[test]
    fn the_skew_is_the_services_date_against_the_midpoint_of_the_exchange() {
        let sent = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_350_000);
        let received = sent + Duration::from_millis(400);
        let date = |text: &str| HeaderValue::from_str(text).unwrap();
        // `sent` is 2026-11-22T12:20:00Z; the midpoint is 200 ms later.
        assert_eq!(
            skew_ms(&date("Sun, 22 Nov 2026 13:20:00 GMT"), sent, received),
            Some(3_600_000 - 200)
        );
        assert_eq!(
            skew_ms(&date("Sun, 22 Nov 2026 11:20:00 GMT"), sent, received),
            Some(-3_600_000 - 200)
        );
        assert_eq!(skew_ms(&date("yesterday"), sent, received), None);
    }

    #[tokio::test]
    async fn a_bad_endpoint_or_a_missing_region_is_named() {
        let no_region = SdkConfig::builder()
            .credentials_provider(SharedCredentialsProvider::new(Credentials::for_tests()))
            .build();
        let error = endpoint(no_region).await.unwrap_err().to_string();
        assert!(error.contains("AWS_REGION"), "{error}");

        for (url, says) in [
            ("http://127.0.0.1:4566/dynamodb", "has a path"),
            ("ftp://127.0.0.1", "https://"),
        ] {
            let credentials = SharedCredentialsProvider::new(Credentials::for_tests());
            let error = Wire::new(url, "us-east-1", credentials)
                .unwrap_err()
                .to_string();
            assert!(error.contains(says), "{url}: {error}");
        }
    }
}
