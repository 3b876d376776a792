//! Owns AWS Signature Version 4 for DynamoDB's JSON POSTs: the credentials, cached until they
//! near their expiry, the day's signing key, derived once a day, and the signing clock, corrected
//! by the skew DynamoDB's answers show. Must not know HTTP clients, operations or audit items.
//!
//! The cryptography is the platform's: `aws-sigv4`'s `generate_signing_key` (the four HMACs of
//! the day's key) and `calculate_signature` (the request's HMAC). What is ours is only the
//! fixed-shape canonical request and string to sign, which that crate does not expose on their
//! own: its full signer builds a generic canonical request with its own allocations for every
//! request (a tenth of a record's CPU in the profile in BENCHMARKS.md), and derives the key anew
//! each time, where a DynamoDB request is always the same shape (POST `/`, no query, the same
//! headers) and the key changes once a day. The unit tests check every signature against
//! `aws-sigv4`'s full signer.
//!
//! Secrets: the secret key and the session token stay inside `aws-credential-types`'
//! `Credentials` (zeroized on drop, redacted in `Debug`); the day's key is `Zeroizing`; the
//! token goes into the hash of the canonical request without being copied into a string. Nothing
//! here prints them.

use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_lc_rs::digest;
use aws_sigv4::sign::v4::{calculate_signature, generate_signing_key};
use zeroize::Zeroizing;

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
/// After a failed fetch, credentials that are still valid are used this long before the next
/// fetch is tried, so that a provider in trouble is not asked again for every request.
const RETRY_FAILED_REFRESH: Duration = Duration::from_secs(10);
/// A signing clock off by more than this from the service's is corrected (the SDK's threshold;
/// SigV4 accepts 5 minutes either way).
pub const SKEW_THRESHOLD: Duration = Duration::from_secs(4 * 60);

/// The headers a signed request carries, besides `content-type`, `host` and `x-amz-target`.
pub struct Signature {
    /// `x-amz-date`: `YYYYMMDDTHHMMSSZ`.
    pub amz_date: String,
    /// `authorization`.
    pub authorization: String,
    /// The clock correction it was signed with (the service's clock minus ours, in
    /// milliseconds): an answer refusing it for its time is judged against this, not against
    /// whatever the signer uses by then (`Signer::correct_clock`).
    pub skew_ms: i64,
    /// The keys it was signed with: the session token is read from their credentials.
    keys: Arc<Keys>,
}

impl Signature {
    /// `x-amz-security-token`, for temporary credentials (Lambda's always are).
    pub fn security_token(&self) -> Option<&str> {
        self.keys.credentials.session_token()
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signature")
            .field("amz_date", &self.amz_date)
            .field("skew_ms", &self.skew_ms)
            .field("authorization", &"** redacted **")
            .field("security_token", &"** redacted **")
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("no AWS credentials: {0}")]
pub struct CredentialsError(String);

/// Signs requests to one region's DynamoDB.
pub struct Signer {
    region: String,
    provider: SharedCredentialsProvider,
    keys: RwLock<Option<Arc<Keys>>>,
    /// One fetch of the credentials at a time; the others wait for it and use its result.
    refreshing: tokio::sync::Mutex<()>,
    /// Counts `invalidate` calls, so that a fetch begun before one does not put back old keys.
    generation: AtomicU64,
    /// The service's clock minus ours, in milliseconds: requests are signed at now + skew.
    skew_ms: AtomicI64,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("region", &self.region)
            .field("keys", &self.cached())
            .field("skew_ms", &self.skew_ms.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// What a day's signatures need: the credentials and the key derived from their secret.
struct Keys {
    /// `YYYYMMDD`, the day the key is for.
    day: String,
    /// `access-key-id/YYYYMMDD/region/dynamodb/aws4_request`.
    credential: String,
    /// `YYYYMMDD/region/dynamodb/aws4_request`.
    scope: String,
    /// The day's signing key (`aws4_request` HMAC chain), wiped when dropped.
    key: Zeroizing<Vec<u8>>,
    credentials: Credentials,
    /// When to fetch the credentials again (None: they do not expire).
    refresh_at: Option<SystemTime>,
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The access key id is not a secret (the SDK's `Credentials` prints it too).
        f.debug_struct("Keys")
            .field("credential", &self.credential)
            .field("key", &"** redacted **")
            .field("credentials", &self.credentials)
            .field("refresh_at", &self.refresh_at)
            .finish()
    }
}

impl Signer {
    pub fn new(region: impl Into<String>, provider: SharedCredentialsProvider) -> Self {
        Self {
            region: region.into(),
            provider,
            keys: RwLock::new(None),
            refreshing: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
            skew_ms: AtomicI64::new(0),
        }
    }

    /// The signature of a POST to `/` on `host` (as sent in the `host` header) with this target
    /// and body, at `now` on this machine's clock (signed at `now` + the service's skew).
    pub async fn sign(
        &self,
        host: &str,
        target: &str,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Signature, CredentialsError> {
        let skew_ms = self.skew_ms.load(Ordering::SeqCst);
        let at = signing_time(now, skew_ms);
        let amz_date = amz_date(at);
        let keys = self.keys(&amz_date[..8], now, at).await?;
        let token = keys.credentials.session_token();
        let signed_headers = match token {
            Some(_) => SIGNED_HEADERS_WITH_TOKEN,
            None => SIGNED_HEADERS,
        };
        // The canonical request, hashed in three parts so that the token is hashed where it is
        // and never copied: what comes before it, the token, what comes after it.
        let mut head = Vec::with_capacity(128 + host.len());
        for part in [
            "POST\n/\n\ncontent-type:",
            CONTENT_TYPE,
            "\nhost:",
            host,
            "\nx-amz-date:",
            &amz_date,
            "\n",
        ] {
            head.extend_from_slice(part.as_bytes());
        }
        let mut tail = Vec::with_capacity(224);
        if token.is_some() {
            head.extend_from_slice(b"x-amz-security-token:");
            tail.push(b'\n');
        }
        for part in ["x-amz-target:", target, "\n\n", signed_headers, "\n"] {
            tail.extend_from_slice(part.as_bytes());
        }
        let mut payload_hash = [0u8; 64];
        tail.extend_from_slice(hex(
            digest::digest(&digest::SHA256, body).as_ref(),
            &mut payload_hash,
        ));
        let mut canonical = digest::Context::new(&digest::SHA256);
        canonical.update(&head);
        if let Some(token) = token {
            canonical.update(token.as_bytes());
        }
        canonical.update(&tail);

        let mut to_sign = Vec::with_capacity(160);
        for part in ["AWS4-HMAC-SHA256\n", &amz_date, "\n", &keys.scope, "\n"] {
            to_sign.extend_from_slice(part.as_bytes());
        }
        let mut request_hash = [0u8; 64];
        to_sign.extend_from_slice(hex(canonical.finish().as_ref(), &mut request_hash));
        let signature = calculate_signature(&keys.key[..], &to_sign);
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential={}, SignedHeaders={signed_headers}, Signature={signature}",
            keys.credential
        );
        Ok(Signature {
            amz_date,
            authorization,
            skew_ms,
            keys,
        })
    }

    /// Forgets the credentials, so that the next request fetches them again (after DynamoDB
    /// refused them: expired or rotated).
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut keys) = self.keys.write() {
            *keys = None;
        }
    }

    /// A request signed with the correction `signed_ms` (`Signature::skew_ms`) was refused, and
    /// its answer showed the service's clock `measured_ms` off ours (its time minus ours at the
    /// exchange's midpoint). Says whether that request was signed more than `SKEW_THRESHOLD` off
    /// the service's time, i.e. whether signing it again can succeed, as the SDK's clock-skew
    /// correction does; if so, the signing clock takes the service's time, unless it already
    /// signs within the threshold of it.
    ///
    /// Judged against the correction the request was signed with, not the one in use now: many
    /// requests are in flight at once (32 by default), all signed before the first answer came.
    /// The first answer corrects the clock; the others, signed at the old time, are just as
    /// refused for it, and must be signed again too, not taken for refused credentials (which
    /// would throw valid ones away) or left to the batch's retries (which would spend its budget
    /// and backoff on 31 of 32 records).
    pub fn correct_clock(&self, signed_ms: i64, measured_ms: i64) -> bool {
        let off = |ms: i64| Duration::from_millis(measured_ms.abs_diff(ms));
        if off(signed_ms) <= SKEW_THRESHOLD {
            return false;
        }
        // Another answer may have corrected it since (or be correcting it now: both store what
        // the service showed, within a second of each other).
        if off(self.skew_ms.load(Ordering::SeqCst)) > SKEW_THRESHOLD {
            self.skew_ms.store(measured_ms, Ordering::SeqCst);
        }
        true
    }

    fn cached(&self) -> Option<Arc<Keys>> {
        self.keys.read().ok().and_then(|keys| keys.clone())
    }

    /// The keys for `day`. `now` (this machine's clock) decides whether the credentials are
    /// fresh, as the provider's expiry is on it; `at` (the signing time) derives the day's key.
    async fn keys(
        &self,
        day: &str,
        now: SystemTime,
        at: SystemTime,
    ) -> Result<Arc<Keys>, CredentialsError> {
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
        let keys = match cached {
            // A new day (UTC): the same credentials, a new key.
            Some(old) if old.fresh(now) => {
                let mut keys = Keys::derive(old.credentials.clone(), &self.region, now, at);
                keys.refresh_at = old.refresh_at;
                keys
            }
            _ => match self.provider.provide_credentials().await {
                Ok(credentials) => Keys::derive(credentials, &self.region, now, at),
                // A failed refresh does not throw away credentials that are still valid: they
                // sign until they expire, and the fetch is tried again every few seconds.
                Err(error) => match cached.filter(|k| k.valid(now)) {
                    Some(old) => {
                        tracing::warn!(%error, "credentials refresh failed; using the current ones until they expire");
                        let mut keys = Keys::derive(old.credentials.clone(), &self.region, now, at);
                        let retry = now + RETRY_FAILED_REFRESH;
                        keys.refresh_at =
                            Some(old.credentials.expiry().map_or(retry, |e| e.min(retry)));
                        keys
                    }
                    None => return Err(CredentialsError(error.to_string())),
                },
            },
        };
        let keys = Arc::new(keys);
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
    /// `at`: the signing time, whose UTC day the key is for.
    fn derive(credentials: Credentials, region: &str, now: SystemTime, at: SystemTime) -> Self {
        let refresh_at = credentials.expiry().map(|expiry| {
            let life = expiry.duration_since(now).unwrap_or_default();
            expiry - REFRESH_BEFORE_EXPIRY.min(life / 2)
        });
        let day = amz_date(at)[..8].to_owned();
        let scope = format!("{day}/{region}/{SERVICE}/aws4_request");
        let key = Zeroizing::new(
            generate_signing_key(credentials.secret_access_key(), at, region, SERVICE)
                .as_ref()
                .to_vec(),
        );
        Self {
            credential: format!("{}/{scope}", credentials.access_key_id()),
            day,
            scope,
            key,
            credentials,
            refresh_at,
        }
    }

    fn fresh(&self, now: SystemTime) -> bool {
        self.refresh_at.is_none_or(|at| now < at)
    }

    /// Not yet expired: still accepted, though due for a refresh.
    fn valid(&self, now: SystemTime) -> bool {
        self.credentials.expiry().is_none_or(|expiry| now < expiry)
    }
}

/// `now` on the service's clock, as far as its answers showed it (`skew_ms`: its clock minus
/// ours).
fn signing_time(now: SystemTime, skew_ms: i64) -> SystemTime {
    let shift = Duration::from_millis(skew_ms.unsigned_abs());
    match skew_ms {
        0 => now,
        1.. => now.checked_add(shift).unwrap_or(now),
        _ => now.checked_sub(shift).unwrap_or(now),
    }
}

/// `YYYYMMDDTHHMMSSZ` in UTC.
fn amz_date(now: SystemTime) -> String {
    let time: chrono::DateTime<chrono::Utc> = now.into();
    time.format("%Y%m%dT%H%M%SZ").to_string()
}

/// A 32-byte digest as 64 lowercase hex digits, written into `out`.
fn hex<'a>(bytes: &[u8], out: &'a mut [u8; 64]) -> &'a [u8] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (byte, pair) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
    &out[..bytes.len().min(32) * 2]
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
                    ours.security_token(),
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

    /// Credentials first, then a provider that fails: a metadata endpoint in trouble.
    #[derive(Debug)]
    struct FailsAfterFirst(Arc<std::sync::atomic::AtomicUsize>, SystemTime);
    impl ProvideCredentials for FailsAfterFirst {
        fn provide_credentials<'a>(
            &'a self,
        ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            use aws_credential_types::provider::error::CredentialsError as Failed;
            let result = match self.0.fetch_add(1, Ordering::SeqCst) {
                0 => Ok(Credentials::new(
                    "AKID0",
                    "secret",
                    Some("token".into()),
                    Some(self.1),
                    "test",
                )),
                _ => Err(Failed::provider_error("the endpoint is down")),
            };
            aws_credential_types::provider::future::ProvideCredentials::ready(result)
        }
    }

    #[tokio::test]
    async fn a_failed_refresh_keeps_credentials_that_are_still_valid() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_350_000);
        let fetched = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let expiry = start + Duration::from_secs(3600);
        let signer = Signer::new(
            "us-east-1",
            SharedCredentialsProvider::new(FailsAfterFirst(fetched.clone(), expiry)),
        );
        let sign = |at: u64| signer.sign("h", TARGET, b"{}", start + Duration::from_secs(at));
        sign(0).await.unwrap();

        // Due for a refresh (5 minutes before the expiry), and the refresh fails: still signed
        // with the current credentials, which DynamoDB still accepts.
        let late = sign(3600 - 200)
            .await
            .expect("signed with the still-valid credentials");
        assert!(late.authorization.contains("Credential=AKID0/"));
        assert_eq!(fetched.load(Ordering::SeqCst), 2);
        // The provider is not asked again for every request, but again after a few seconds.
        sign(3600 - 199).await.unwrap();
        assert_eq!(fetched.load(Ordering::SeqCst), 2);
        sign(3600 - 150).await.unwrap();
        assert_eq!(fetched.load(Ordering::SeqCst), 3);

        // Once they have expired, a failed refresh is an error.
        let expired = sign(3600 + 1).await;
        assert!(expired.is_err(), "expired credentials are not used");
    }

    #[tokio::test]
    async fn debug_output_shows_no_secret_key_session_token_or_signature() {
        let credentials = Credentials::new(
            "ASIAEXAMPLE",
            "wJalrXUtnFEMI-SECRET",
            Some("FwoGZXIv-SESSION-TOKEN".into()),
            None,
            "test",
        );
        let signer = signer(&credentials, "eu-west-1");
        let signature = signer
            .sign("h", TARGET, b"{}", SystemTime::now())
            .await
            .unwrap();
        let signature_hex = signature
            .authorization
            .rsplit("Signature=")
            .next()
            .unwrap()
            .to_owned();
        for printed in [format!("{signer:?}"), format!("{signature:?}")] {
            assert!(printed.contains("ASIAEXAMPLE") || printed.contains("Signature"));
            for secret in [
                "wJalrXUtnFEMI-SECRET",
                "FwoGZXIv-SESSION-TOKEN",
                signature_hex.as_str(),
            ] {
                assert!(!printed.contains(secret), "{printed}");
            }
        }
    }

    #[tokio::test]
    async fn a_corrected_clock_signs_at_the_services_time() {
        let credentials = Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
        let signer = signer(&credentials, "us-east-1");
        let host = "dynamodb.us-east-1.amazonaws.com";
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_350_123);

        // Within the threshold: not a clock problem, nothing changes.
        assert!(!signer.correct_clock(0, 60_000));
        let ours = signer.sign(host, TARGET, b"{}", now).await.unwrap();
        assert_eq!(ours.skew_ms, 0);
        let theirs = reference(&credentials, "us-east-1", host, b"{}", now);
        assert_eq!(
            Some(ours.authorization.as_str()),
            header(&theirs, "authorization")
        );

        // The service's clock is 10 hours ahead (across its midnight): signed at its time, with
        // its day's key.
        let ahead = Duration::from_secs(10 * 3600);
        let ahead_ms = ahead.as_millis() as i64;
        assert!(signer.correct_clock(0, ahead_ms));
        let ours = signer.sign(host, TARGET, b"{}", now).await.unwrap();
        assert_eq!(ours.skew_ms, ahead_ms);
        let theirs = reference(&credentials, "us-east-1", host, b"{}", now + ahead);
        assert_eq!(Some(ours.amz_date.as_str()), header(&theirs, "x-amz-date"));
        assert_eq!(
            Some(ours.authorization.as_str()),
            header(&theirs, "authorization")
        );
        // Another request signed before the correction, refused for its time: worth signing
        // again, and the correction it would make is already made.
        assert!(signer.correct_clock(0, ahead_ms + 1_000));
        assert_eq!(signer.skew_ms.load(Ordering::SeqCst), ahead_ms);
        // A request signed after it, refused all the same: not the clock.
        assert!(!signer.correct_clock(ahead_ms, ahead_ms + 1_000));

        // And behind.
        assert!(signer.correct_clock(ahead_ms, -ahead_ms));
        let ours = signer.sign(host, TARGET, b"{}", now).await.unwrap();
        let theirs = reference(&credentials, "us-east-1", host, b"{}", now - ahead);
        assert_eq!(
            Some(ours.authorization.as_str()),
            header(&theirs, "authorization")
        );
    }
}
