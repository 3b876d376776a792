//! Owns the archive the viewer reads: bucket, name, digest period, the digest key's fetch.
//! Must not know health.rs or checks.rs (both read it), HTTP or the pages.

use std::sync::Arc;

use futures::future::BoxFuture;

use audit_model::archive::PeriodLength;
use audit_model::note::WitnessKey;
use audit_proof::archive::S3Archive;
use audit_proof::verify::ports::{KeySource, PublicKeyInfo};

/// The archive bucket, the digest period, where the digest key's public key comes from (for
/// verify and the log's signature; `None`: not configured), and the witnesses' keys a cosignature
/// must verify under to be shown as one (`auditctl ui --witness-key`).
pub struct Archive<B> {
    pub bucket: S3Archive<B>,
    pub name: String,
    pub length: PeriodLength,
    pub key: Option<KeyFetch>,
    pub witnesses: Vec<WitnessKey>,
}

/// Where the digest key's public key comes from (KMS GetPublicKey, or a twin), asked at each use.
pub type KeyFetch =
    Arc<dyn Fn() -> BoxFuture<'static, Result<PublicKeyInfo, audit_proof::Error>> + Send + Sync>;

/// The public key of `key`, fetched at each use.
pub fn key_fetch<K: KeySource + 'static>(key: K) -> KeyFetch {
    let key = Arc::new(key);
    Arc::new(move || {
        let key = key.clone();
        Box::pin(async move { key.public_key().await })
    })
}
