//! Owns AWS Signature Version 4 for DynamoDB's JSON POSTs: the credentials, cached until they
//! near their expiry, and the day's signing key, derived once a day. Must not know HTTP clients,
//! operations or audit items.
//!
//! Hand-written rather than `aws-sigv4`: that crate derives the signing key (four HMACs) and builds
//! a generic canonical request with its own allocations for every request; the profile in
//! BENCHMARKS.md put signing at about a tenth of a record's CPU. A DynamoDB request is always the
//! same shape (POST `/`, no query, the same five headers), so its canonical request is one
//! `format!`. The unit tests check every signature against `aws-sigv4` itself.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_lc_rs::{digest, hmac};

/// The signing name of DynamoDB.
const SERVICE: &str = "dynamodb";
/// The headers every request signs, in canonical order.
const SIGNED_HEADERS: &str = "content-type;host;x-amz-date;x-amz-target";
const SIGNED_HEADERS_WITH_TOKEN: &str =
    "content-type;host;x-amz-date;x-amz-security-token;x-amz-target";
/// The body's media type for DynamoDB's JSON 1.0 protocol.
pub const CONTENT_TYPE: &str = "application/x-amz-json-1.0";
/// Credentials this close to their expiry are fetched again before signing (the SDK's identity
/// cache uses the same kind of buffer).
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(300);

/// The headers a signed request carries, besides `content-type`, `host` and `x-amz-target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// `x-amz-date`: `YYYYMMDDTHHMMSSZ`.
    pub amz_date: String,
    /// `x-amz-security-token`, for temporary credentials (Lambda's always are).
    pub security_token: Option<Arc<str>>,
    /// `authorization`.
    pub authorization: String,
}

#[derive(Debug, thiserror::Error)]
#[error("no AWS credentials: {0}")]
pub struct CredentialsError(String);

/// Signs requests to one region's DynamoDB.
#[derive(Debug)]
pub struct Signer {
    region: String,
    provider: SharedCredentialsProvider,
    keys: RwLock<Option<Arc<Keys>>>,
    /// One fetch of the credentials at a time; the others wait for it and use its result.
    refreshing: tokio::sync::Mutex<()>,
    /// Counts `invalidate` calls, so that a fetch begun before one does not put back old keys.
    generation: AtomicU64,
}

/// What a day's signatures need: the credentials and the key derived from their secret.
#[derive(Debug)]
struct Keys {
    /// `YYYYMMDD`, the day the key is for.
    day: String,
    /// `access-key-id/YYYYMMDD/region/dynamodb/aws4_request`.
    credential: String,
    /// `YYYYMMDD/region/dynamodb/aws4_request`.
    scope: String,
    token: Option<Arc<str>>,
    key: hmac::Key,
    credentials: Credentials,
    /// When to fetch the credentials again (None: they do not expire).
    refresh_at: Option<SystemTime>,
}

impl Signer {
    pub fn new(region: impl Into<String>, provider: SharedCredentialsProvider) -> Self {
        Self {
            region: region.into(),
            provider,
            keys: RwLock::new(None),
            refreshing: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
        }
    }

    /// The signature of a POST to `/` on `host` (as sent in the `host` header) with this target
    /// and body, at `now`.
    pub async fn sign(
        &self,
        host: &str,
        target: &str,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Signature, CredentialsError> {
        let amz_date = amz_date(now);
        let keys = self.keys(&amz_date[..8], now).await?;
        let signed_headers = match keys.token {
            Some(_) => SIGNED_HEADERS_WITH_TOKEN,
            None => SIGNED_HEADERS,
        };
        let mut canonical = String::with_capacity(320 + host.len());
        canonical.push_str("POST\n/\n\ncontent-type:");
        canonical.push_str(CONTENT_TYPE);
        let _ = write!(canonical, "\nhost:{host}\nx-amz-date:{amz_date}\n");
        if let Some(token) = &keys.token {
            let _ = writeln!(canonical, "x-amz-security-token:{token}");
        }
        let _ = write!(canonical, "x-amz-target:{target}\n\n{signed_headers}\n");
        hex_into(
            &mut canonical,
            digest::digest(&digest::SHA256, body).as_ref(),
        );

        let mut to_sign = String::with_capacity(160);
        let _ = write!(to_sign, "AWS4-HMAC-SHA256\n{amz_date}\n{}\n", keys.scope);
        hex_into(
            &mut to_sign,
            digest::digest(&digest::SHA256, canonical.as_bytes()).as_ref(),
        );
        let mut authorization = String::with_capacity(256);
        let _ = write!(
            authorization,
            "AWS4-HMAC-SHA256 Credential={}, SignedHeaders={signed_headers}, Signature=",
            keys.credential
        );
        hex_into(
            &mut authorization,
            hmac::sign(&keys.key, to_sign.as_bytes()).as_ref(),
        );
        Ok(Signature {
            amz_date,
            security_token: keys.token.clone(),
            authorization,
        })
    }

    /// Forgets the credentials, so that the next request fetches them again (after DynamoDB
    /// refused them: expired, rotated, or a clock too far off).
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut keys) = self.keys.write() {
            *keys = None;
        }
    }

    fn cached(&self) -> Option<Arc<Keys>> {
        self.keys.read().ok().and_then(|keys| keys.clone())
    }

    async fn keys(&self, day: &str, now: SystemTime) -> Result<Arc<Keys>, CredentialsError> {
        if let Some(keys) = self.cached().filter(|k| k.day == day && k.fresh(now)) {
            return Ok(keys);
        }
        let _one_at_a_time = self.refreshing.lock().await;
        // Another task may have fetched them while this one waited.
        let cached = self.cached();
        if let Some(keys) = cached.as_ref().filter(|k| k.day == day && k.fresh(now)) {
            return Ok(keys.clone());
        }
        let generation = self.generation.load(Ordering::SeqCst);
        let credentials = match cached {
            // A new day (UTC): the same credentials, a new key.
            Some(keys) if keys.fresh(now) => keys.credentials.clone(),
            _ => self
                .provider
                .provide_credentials()
                .await
                .map_err(|e| CredentialsError(e.to_string()))?,
        };
        let keys = Arc::new(Keys::derive(credentials, day, &self.region, now));
        if self.generation.load(Ordering::SeqCst) == generation
            && let Ok(mut slot) = self.keys.write()
        {
            *slot = Some(keys.clone());
        }
        Ok(keys)
    }
}

impl Keys {
    /// `now`: when the credentials were fetched. They are fetched again 5 minutes before they
    /// expire, or halfway through their life if that is shorter, never for every request.
    fn derive(credentials: Credentials, day: &str, region: &str, now: SystemTime) -> Self {
        let refresh_at = credentials.expiry().map(|expiry| {
            let life = expiry.duration_since(now).unwrap_or_default();
            expiry - REFRESH_BEFORE_EXPIRY.min(life / 2)
        });
        let scope = format!("{day}/{region}/{SERVICE}/aws4_request");
        let step = |key: &[u8], data: &str| {
            hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
        };
        let secret = format!("AWS4{}", credentials.secret_access_key());
        let k_date = step(secret.as_bytes(), day);
        let k_region = step(k_date.as_ref(), region);
        let k_service = step(k_region.as_ref(), SERVICE);
        let k_signing = step(k_service.as_ref(), "aws4_request");
        Self {
            day: day.to_owned(),
            credential: format!("{}/{scope}", credentials.access_key_id()),
            scope,
            token: credentials.session_token().map(Arc::from),
            key: hmac::Key::new(hmac::HMAC_SHA256, k_signing.as_ref()),
            credentials,
            refresh_at,
        }
    }

    fn fresh(&self, now: SystemTime) -> bool {
        self.refresh_at.is_none_or(|at| now < at)
    }
}

/// `YYYYMMDDTHHMMSSZ` in UTC.
fn amz_date(now: SystemTime) -> String {
    let time: chrono::DateTime<chrono::Utc> = now.into();
    time.format("%Y%m%dT%H%M%SZ").to_string()
}

fn hex_into(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for byte in bytes {
        out.push(DIGITS[usize::from(byte >> 4)] as char);
        out.push(DIGITS[usize::from(byte & 0xf)] as char);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    use aws_sigv4::sign::v4;

    const TARGET: &str = "DynamoDB_20120810.PutItem";

    /// The headers `aws-sigv4` (the SDK's signer) gives the same request.
    fn reference(
        credentials: &Credentials,
        region: &str,
        host: &str,
        body: &[u8],
        now: SystemTime,
    ) -> Vec<(String, String)> {
        let identity = credentials.clone().into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(region)
            .name(SERVICE)
            .time(now)
            .settings(SigningSettings::default())
            .build()
            .unwrap()
            .into();
        let headers = [
            ("content-type", CONTENT_TYPE),
            ("host", host),
            ("x-amz-target", TARGET),
        ];
        let uri = format!("https://{host}/");
        let request = SignableRequest::new(
            "POST",
            uri.as_str(),
            headers.into_iter(),
            SignableBody::Bytes(body),
        )
        .unwrap();
        let (instructions, _) = sign(request, &params).unwrap().into_parts();
        instructions
            .headers()
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect()
    }

    fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    #[derive(Debug)]
    struct Counting(Arc<std::sync::atomic::AtomicUsize>, SystemTime);
    impl ProvideCredentials for Counting {
        fn provide_credentials<'a>(
            &'a self,
        ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            aws_credential_types::provider::future::ProvideCredentials::ready(Ok(Credentials::new(
                format!("AKID{n}"),
                "secret",
                Some("token".into()),
                Some(self.1),
                "test",
            )))
        }
    }

    fn signer(credentials: &Credentials, region: &str) -> Signer {
        Signer::new(region, SharedCredentialsProvider::new(credentials.clone()))
    }

    #[tokio::test]
    async fn signatures_match_the_sdks_signer() {
        let temporary = Credentials::new(
            "ASIAEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            Some("FwoGZXIvYXdzEJr//////////token+/=".into()),
            None,
            "test",
        );
        let long_term = Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
        let cases = [
            (&temporary, "eu-west-1", "dynamodb.eu-west-1.amazonaws.com"),
            (&long_term, "us-east-1", "127.0.0.1:4566"),
        ];
        let body = br#"{"TableName":"AuditMessages","Item":{"messageId":{"S":"a\u00e9"}}}"#;
        // Midnight, a second before, and an ordinary time: the day in the scope follows UTC.
        for seconds in [1_795_305_600u64, 1_795_305_599, 1_795_350_123] {
            let now = SystemTime::UNIX_EPOCH + Duration::from_secs(seconds);
            for (credentials, region, host) in cases {
                let ours = signer(credentials, region)
                    .sign(host, TARGET, body, now)
                    .await
                    .unwrap();
                let theirs = reference(credentials, region, host, body, now);
                assert_eq!(
                    Some(ours.authorization.as_str()),
                    header(&theirs, "authorization")
                );
                assert_eq!(Some(ours.amz_date.as_str()), header(&theirs, "x-amz-date"));
                assert_eq!(
                    ours.security_token.as_deref(),
                    header(&theirs, "x-amz-security-token")
                );
            }
        }
    }

    #[tokio::test]
    async fn one_signer_keeps_signing_right_across_midnight() {
        let credentials = Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
        let signer = signer(&credentials, "us-east-1");
        let host = "dynamodb.us-east-1.amazonaws.com";
        for seconds in [1_795_305_599u64, 1_795_305_600, 1_795_305_601] {
            let now = SystemTime::UNIX_EPOCH + Duration::from_secs(seconds);
            let ours = signer.sign(host, TARGET, b"{}", now).await.unwrap();
            let theirs = reference(&credentials, "us-east-1", host, b"{}", now);
            assert_eq!(
                Some(ours.authorization.as_str()),
                header(&theirs, "authorization")
            );
        }
    }

    #[tokio::test]
    async fn short_lived_credentials_are_not_fetched_for_every_request() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_350_000);
        let fetched = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        // 4 minutes of life: inside the 5-minute margin from the start.
        let provider = Counting(fetched.clone(), start + Duration::from_secs(240));
        let signer = Signer::new("us-east-1", SharedCredentialsProvider::new(provider));
        for at in [0, 30, 90] {
            let now = start + Duration::from_secs(at);
            signer.sign("h", TARGET, b"{}", now).await.unwrap();
        }
        assert_eq!(
            fetched.load(Ordering::SeqCst),
            1,
            "halfway through their life"
        );
        let now = start + Duration::from_secs(121);
        signer.sign("h", TARGET, b"{}", now).await.unwrap();
        assert_eq!(fetched.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn credentials_near_their_expiry_are_fetched_again() {
        use std::sync::atomic::AtomicUsize;

        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_350_000);
        let fetched = Arc::new(AtomicUsize::new(0));
        let signer = Signer::new(
            "us-east-1",
            SharedCredentialsProvider::new(Counting(
                fetched.clone(),
                start + Duration::from_secs(3600),
            )),
        );
        let sign = |at: u64| signer.sign("h", TARGET, b"{}", start + Duration::from_secs(at));

        let first = sign(0).await.unwrap();
        sign(60).await.unwrap();
        assert_eq!(fetched.load(Ordering::SeqCst), 1, "cached while fresh");
        assert!(first.authorization.contains("Credential=AKID0/"));

        // Within five minutes of the expiry: fetched again before signing.
        let late = sign(3600 - 200).await.unwrap();
        assert_eq!(fetched.load(Ordering::SeqCst), 2);
        assert!(late.authorization.contains("Credential=AKID1/"));

        // After DynamoDB refused them: fetched again.
        signer.invalidate();
        sign(0).await.unwrap();
        assert_eq!(fetched.load(Ordering::SeqCst), 3);

        // Many requests at once when they must be fetched: one fetch.
        signer.invalidate();
        let all = futures::future::join_all((0..16).map(|_| sign(10))).await;
        assert!(all.iter().all(Result::is_ok));
        assert_eq!(fetched.load(Ordering::SeqCst), 4);
    }
}
