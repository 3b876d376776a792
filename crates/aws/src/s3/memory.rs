//! Owns the in-memory twin of a versioned bucket, which answers as the S3 adapter does: every put a
//! new version, `If-None-Match: *` answered "already exists", deletes as delete markers, listings
//! page by page in S3's order, a missing bucket refused with `NoSuchBucket`; plus what tests and
//! benchmarks do to it (faults, overwrites, versions removed for good). Must not know the archive's
//! layout, nor any program's port.

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use futures::StreamExt;

use super::{
    Bucket, Created, NewObject, ObjectInfo, StoredObject, StreamedObject, VersionEntry,
    VersionInfo, VersionMarker, VersionPage,
};
use crate::error::AwsError;

/// One stored version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub version_id: String,
    pub etag: String,
    pub body: Bytes,
    pub sha256: [u8; 32],
    pub metadata: Vec<(&'static str, String)>,
    /// A delete marker (S3's DeleteObject without a version id on a versioned bucket).
    pub delete_marker: bool,
}

/// Which requests a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Put,
    Head,
    Get,
    List,
}

/// What a fault does to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// The request fails; nothing is written.
    Fail(AwsError),
    /// The request is carried out, then its answer is lost (a crash or timeout after the write).
    LoseAnswer(AwsError),
    /// The request never answers (the caller's timeout or deadline has to end it).
    Hang,
}

/// A fault on the requests of one kind whose key starts with `prefix`, for the next `times` of
/// them (`None`: all of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub operation: Operation,
    pub prefix: String,
    pub times: Option<usize>,
    pub effect: Effect,
}

/// How many entries a page of a version listing holds (S3's default).
const PAGE: usize = 1000;

/// How many bytes a streamed body's chunks hold at most: small, so that readers meet bodies cut
/// where S3's may be.
const CHUNK: usize = 7;

#[derive(Debug)]
struct State {
    objects: BTreeMap<String, Vec<Version>>,
    faults: Vec<Fault>,
    missing: bool,
    puts: usize,
    next_version: u64,
    page: usize,
    latency: std::time::Duration,
}

impl Default for State {
    fn default() -> Self {
        Self {
            objects: BTreeMap::new(),
            faults: Vec::new(),
            missing: false,
            puts: 0,
            next_version: 0,
            page: PAGE,
            latency: std::time::Duration::ZERO,
        }
    }
}

/// A versioned bucket in memory.
#[derive(Debug, Default)]
pub struct MemoryBucket {
    state: Mutex<State>,
}

impl MemoryBucket {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind: keep using it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds a fault.
    pub fn inject(&self, fault: Fault) {
        self.state().faults.push(fault);
    }

    /// Removes every fault.
    pub fn heal(&self) {
        self.state().faults.clear();
    }

    /// Every request is refused with `NoSuchBucket` (as S3 answers for a deleted bucket), or no
    /// longer.
    pub fn set_missing(&self, missing: bool) {
        self.state().missing = missing;
    }

    /// Version listings answer at most `entries` a page (S3: 1,000).
    pub fn set_page_size(&self, entries: usize) {
        self.state().page = entries.max(1);
    }

    /// Every request waits `latency` on tokio's clock first (which a test may pause, so that
    /// time moves by the requests alone), or no longer (zero).
    pub fn set_latency(&self, latency: std::time::Duration) {
        self.state().latency = latency;
    }

    /// Waits the latency set, if any.
    async fn wait(&self) {
        let latency = self.state().latency;
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
    }

    /// Every key with `prefix` (with a version or only delete markers), in key order.
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        self.state()
            .objects
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// The current version of `key` (none when a delete marker hides it).
    pub fn current(&self, key: &str) -> Option<Version> {
        self.state().current(key).cloned()
    }

    /// Every version of `key` and its delete markers, oldest first.
    pub fn versions(&self, key: &str) -> Vec<Version> {
        self.state().objects.get(key).cloned().unwrap_or_default()
    }

    /// PUT requests received (created, refused or answered "already exists").
    pub fn puts(&self) -> usize {
        self.state().puts
    }

    /// Stores a version directly, unconditionally (another writer's overwrite, in tests); its
    /// version id.
    pub fn overwrite(&self, key: &str, body: Bytes) -> String {
        self.overwrite_with(key, body, Vec::new())
    }

    /// Stores a version with its metadata directly, unconditionally (an object written as a
    /// program writes it, or a forged one, in tests); its version id.
    pub fn overwrite_with(
        &self,
        key: &str,
        body: Bytes,
        metadata: Vec<(&'static str, String)>,
    ) -> String {
        let mut state = self.state();
        let sha256 = audit_model::digest::sha256(&body);
        let version = state.version(body, sha256, metadata);
        let version_id = version.version_id.clone();
        state
            .objects
            .entry(key.to_owned())
            .or_default()
            .push(version);
        version_id
    }

    /// Adds a delete marker over `key` (a DeleteObject without a version id).
    pub fn delete(&self, key: &str) {
        let mut state = self.state();
        let mut marker = state.version(Bytes::new(), [0; 32], Vec::new());
        marker.delete_marker = true;
        state
            .objects
            .entry(key.to_owned())
            .or_default()
            .push(marker);
    }

    /// Removes one version for good (a DeleteObject with its version id: refused under Object
    /// Lock, possible without it).
    pub fn remove_version(&self, key: &str, version_id: &str) {
        let mut state = self.state();
        if let Some(versions) = state.objects.get_mut(key) {
            versions.retain(|v| v.version_id != version_id);
            if versions.is_empty() {
                state.objects.remove(key);
            }
        }
    }

    /// Runs `read` on the state unless a fault of `operation` on `key` says otherwise.
    async fn read<T>(
        &self,
        operation: Operation,
        key: &str,
        read: impl FnOnce(&State) -> T,
    ) -> Result<T, AwsError> {
        self.wait().await;
        let outcome = {
            let mut state = self.state();
            match state.fault(operation, key) {
                Some(Effect::Fail(error) | Effect::LoseAnswer(error)) => Err(Some(error)),
                Some(Effect::Hang) => Err(None),
                None => state.check_bucket().map_err(Some).map(|()| read(&state)),
            }
        };
        match outcome {
            Ok(value) => Ok(value),
            Err(Some(error)) => Err(error),
            Err(None) => hang().await,
        }
    }
}

impl Version {
    fn stored(&self) -> StoredObject {
        StoredObject {
            body: self.body.clone(),
            version_id: Some(self.version_id.clone()),
            metadata: self
                .metadata
                .iter()
                .map(|(n, v)| ((*n).to_owned(), v.clone()))
                .collect(),
        }
    }
}

impl State {
    fn current(&self, key: &str) -> Option<&Version> {
        self.objects
            .get(key)
            .and_then(|versions| versions.last())
            .filter(|v| !v.delete_marker)
    }

    /// A version (never a delete marker's: S3 answers 405 for one).
    fn version_of(&self, key: &str, version_id: &str) -> Option<&Version> {
        self.objects
            .get(key)?
            .iter()
            .find(|v| v.version_id == version_id && !v.delete_marker)
    }

    /// The effect of the first matching fault, used up once when it is counted.
    fn fault(&mut self, operation: Operation, key: &str) -> Option<Effect> {
        let index = self.faults.iter().position(|f| {
            f.operation == operation && key.starts_with(&f.prefix) && f.times != Some(0)
        })?;
        let fault = &mut self.faults[index];
        let effect = fault.effect.clone();
        if let Some(times) = fault.times.as_mut() {
            *times -= 1;
        }
        Some(effect)
    }

    fn check_bucket(&self) -> Result<(), AwsError> {
        if self.missing {
            return Err(AwsError::from_answer(
                404,
                "NoSuchBucket",
                "The specified bucket does not exist",
            ));
        }
        Ok(())
    }

    fn version(
        &mut self,
        body: Bytes,
        sha256: [u8; 32],
        metadata: Vec<(&'static str, String)>,
    ) -> Version {
        self.next_version += 1;
        let mut hasher = DefaultHasher::new();
        body.hash(&mut hasher);
        Version {
            version_id: format!("v{:06}", self.next_version),
            etag: format!("\"{:016x}\"", hasher.finish()),
            body,
            sha256,
            metadata,
            delete_marker: false,
        }
    }

    /// Every version and delete marker under `prefix` in S3's order: keys in order, each key's
    /// newest first.
    fn entries(&self, prefix: &str) -> Vec<VersionEntry> {
        self.objects
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .flat_map(|(k, versions)| {
                versions
                    .iter()
                    .rev()
                    .enumerate()
                    .map(|(i, v)| VersionEntry {
                        key: k.clone(),
                        version_id: v.version_id.clone(),
                        latest: i == 0,
                        delete_marker: v.delete_marker,
                    })
            })
            .collect()
    }
}

/// Waits forever: a request that never answers.
async fn hang<T>() -> T {
    std::future::pending().await
}

impl Bucket for MemoryBucket {
    async fn put_if_absent(&self, object: NewObject) -> Result<Created, AwsError> {
        self.wait().await;
        let outcome = {
            let mut state = self.state();
            state.puts += 1;
            let effect = state.fault(Operation::Put, &object.key);
            match effect {
                Some(Effect::Fail(error)) => Err(Some(error)),
                Some(Effect::Hang) => Err(None),
                lose => match state.check_bucket() {
                    Err(error) => Err(Some(error)),
                    Ok(()) => {
                        let created = if state.current(&object.key).is_some() {
                            Created::AlreadyExists
                        } else {
                            let version =
                                state.version(object.body, object.sha256, object.metadata);
                            let version_id = version.version_id.clone();
                            state.objects.entry(object.key).or_default().push(version);
                            Created::New {
                                version_id: Some(version_id),
                            }
                        };
                        match lose {
                            Some(Effect::LoseAnswer(error)) => Err(Some(error)),
                            _ => Ok(created),
                        }
                    }
                },
            }
        };
        match outcome {
            Ok(created) => Ok(created),
            Err(Some(error)) => Err(error),
            Err(None) => hang().await,
        }
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, AwsError> {
        self.read(Operation::Head, key, |state| {
            state.current(key).map(|v| ObjectInfo {
                etag: Some(v.etag.clone()),
                version_id: Some(v.version_id.clone()),
                size: v.body.len() as u64,
            })
        })
        .await
    }

    async fn get(&self, key: &str) -> Result<Option<StoredObject>, AwsError> {
        self.read(Operation::Get, key, |state| {
            state.current(key).map(Version::stored)
        })
        .await
    }

    async fn get_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<StoredObject>, AwsError> {
        self.read(Operation::Get, key, |state| {
            state.version_of(key, version_id).map(Version::stored)
        })
        .await
    }

    async fn stream_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<StreamedObject>, AwsError> {
        let found = self
            .read(Operation::Get, key, |state| {
                state.version_of(key, version_id).map(Version::stored)
            })
            .await?;
        Ok(found.map(|stored| {
            let body = stored.body;
            let chunks: Vec<Result<Bytes, AwsError>> = (0..body.len())
                .step_by(CHUNK)
                .map(|start| Ok(body.slice(start..(start + CHUNK).min(body.len()))))
                .collect();
            StreamedObject {
                metadata: stored.metadata.into_iter().collect(),
                body: futures::stream::iter(chunks).boxed(),
            }
        }))
    }

    async fn head_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<VersionInfo>, AwsError> {
        self.read(Operation::Head, key, |state| {
            state.version_of(key, version_id).map(|v| VersionInfo {
                sha256: Some(v.sha256),
                events: v
                    .metadata
                    .iter()
                    .find(|(n, _)| *n == "events")
                    .and_then(|(_, e)| e.parse().ok()),
                size: v.body.len() as u64,
                marker: v
                    .metadata
                    .iter()
                    .find(|(n, _)| *n == "marker")
                    .map(|(_, m)| m.clone()),
            })
        })
        .await
    }

    async fn list_keys(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>, AwsError> {
        self.read(Operation::List, prefix, |state| {
            state
                .objects
                .keys()
                .filter(|k| k.starts_with(prefix) && start_after.is_none_or(|a| k.as_str() > a))
                .filter(|k| state.current(k).is_some())
                .take(max)
                .cloned()
                .collect()
        })
        .await
    }

    async fn list_versions_page(
        &self,
        prefix: &str,
        from: Option<VersionMarker>,
    ) -> Result<VersionPage, AwsError> {
        self.read(Operation::List, prefix, |state| {
            let entries = state.entries(prefix);
            // The page starts after the marker's entry (after the whole key without a version).
            let start = match &from {
                None => 0,
                Some(marker) => {
                    let key = marker.key.as_deref().unwrap_or_default();
                    entries
                        .iter()
                        .position(|e| match &marker.version_id {
                            Some(v) => e.key == key && &e.version_id == v,
                            None => e.key.as_str() > key,
                        })
                        .map_or(entries.len(), |at| {
                            at + usize::from(marker.version_id.is_some())
                        })
                }
            };
            let end = (start + state.page).min(entries.len());
            let next = (end < entries.len()).then(|| VersionMarker {
                key: Some(entries[end - 1].key.clone()),
                version_id: Some(entries[end - 1].version_id.clone()),
            });
            VersionPage {
                entries: entries[start..end].to_vec(),
                next,
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use futures::TryStreamExt;

    fn object(key: &str, body: &'static str) -> NewObject {
        NewObject {
            key: key.into(),
            body: Bytes::from_static(body.as_bytes()),
            content_type: "text/plain",
            sha256: [0; 32],
            metadata: Vec::new(),
        }
    }

    fn body(stored: Option<StoredObject>) -> Option<Bytes> {
        stored.map(|s| s.body)
    }

    #[tokio::test]
    async fn a_second_create_of_a_key_is_refused_like_s3s_412() {
        let bucket = MemoryBucket::new();
        assert!(matches!(
            bucket.put_if_absent(object("a", "1")).await,
            Ok(Created::New { .. })
        ));
        assert_eq!(
            bucket.put_if_absent(object("a", "2")).await,
            Ok(Created::AlreadyExists)
        );
        assert_eq!(body(bucket.get("a").await.unwrap()).unwrap(), "1");
        assert_eq!(bucket.versions("a").len(), 1);
        assert_eq!(bucket.head("b").await, Ok(None));
        bucket.overwrite("a", Bytes::from_static(b"3"));
        assert_eq!(bucket.versions("a").len(), 2);
        assert_eq!(body(bucket.get("a").await.unwrap()).unwrap(), "3");
    }

    #[tokio::test]
    async fn faults_fail_lose_answers_and_run_out() {
        let bucket = MemoryBucket::new();
        let timed_out = AwsError::without_answer(ErrorKind::TimedOut, "timed out");
        bucket.inject(Fault {
            operation: Operation::Put,
            prefix: "x/".into(),
            times: Some(1),
            effect: Effect::LoseAnswer(timed_out.clone()),
        });
        assert_eq!(
            bucket.put_if_absent(object("x/1", "1")).await,
            Err(timed_out)
        );
        assert!(bucket.current("x/1").is_some(), "written, answer lost");
        assert_eq!(
            bucket.put_if_absent(object("x/1", "1")).await,
            Ok(Created::AlreadyExists)
        );
        bucket.set_missing(true);
        assert!(matches!(
            bucket.head("x/1").await,
            Err(error) if error.code == "NoSuchBucket" && error.kind == ErrorKind::NotFound
        ));
    }

    #[tokio::test]
    async fn versions_and_delete_markers_list_in_s3s_order_page_by_page() {
        let bucket = MemoryBucket::new();
        let a1 = bucket.overwrite("k/a", Bytes::from_static(b"1"));
        bucket.delete("k/a");
        let a2 = bucket.overwrite("k/a", Bytes::from_static(b"2"));
        let b1 = bucket.overwrite("k/b", Bytes::from_static(b"3"));
        bucket.delete("k/b");
        bucket.overwrite("l/c", Bytes::from_static(b"4"));
        bucket.set_page_size(2);
        let listed = bucket.list_versions("k/").await.unwrap();
        let seen: Vec<(&str, bool, bool)> = listed
            .iter()
            .map(|e| (e.key.as_str(), e.latest, e.delete_marker))
            .collect();
        assert_eq!(
            seen,
            [
                ("k/a", true, false),
                ("k/a", false, true),
                ("k/a", false, false),
                ("k/b", true, true),
                ("k/b", false, false),
            ]
        );
        assert_eq!(listed[0].version_id, a2);
        assert_eq!(listed[2].version_id, a1);
        assert_eq!(listed[4].version_id, b1);
        let first = bucket.list_versions_page("k/", None).await.unwrap();
        assert_eq!(first.entries.len(), 2);
        assert!(first.next.is_some());
        // A delete marker's version and an unknown one are no object; the stream cuts a body.
        let marker = &listed[1].version_id;
        assert_eq!(bucket.get_version("k/a", marker).await, Ok(None));
        assert_eq!(bucket.head_version("k/a", "v999999").await, Ok(None));
        bucket.remove_version("k/a", &a2);
        assert_eq!(bucket.get("k/a").await, Ok(None), "the marker is current");
        let streamed = bucket
            .stream_version(
                "l/c",
                &bucket
                    .keys("l/")
                    .iter()
                    .map(|k| bucket.current(k).unwrap().version_id)
                    .next()
                    .unwrap(),
            )
            .await
            .unwrap()
            .unwrap();
        let chunks: Vec<Bytes> = streamed.body.try_collect().await.unwrap();
        assert_eq!(chunks, [Bytes::from_static(b"4")]);
    }
}
