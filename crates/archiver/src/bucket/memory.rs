//! Owns the in-memory twin of the archive bucket: S3's behaviour that the archiver relies on
//! (`If-None-Match: *` answered with 412, versions, ETags, a missing bucket refused) plus faults
//! that tests and benchmarks inject. Must not know the archive's layout.

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

use super::{
    ArchiveBucket, BucketError, Created, NewObject, ObjectInfo, StoredObject, VersionEntry,
    VersionInfo,
};

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
    Fail(BucketError),
    /// The request is carried out, then its answer is lost (a crash or timeout after the write).
    LoseAnswer(BucketError),
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

#[derive(Debug, Default)]
struct State {
    objects: BTreeMap<String, Vec<Version>>,
    faults: Vec<Fault>,
    missing: bool,
    puts: usize,
    next_version: u64,
}

/// The bucket in memory.
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

    /// Every key with `prefix`, in key order.
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

    /// Every version of `key`, oldest first.
    pub fn versions(&self, key: &str) -> Vec<Version> {
        self.state().objects.get(key).cloned().unwrap_or_default()
    }

    /// PUT requests received (created, refused or answered 412).
    pub fn puts(&self) -> usize {
        self.state().puts
    }

    /// Stores a version directly, unconditionally (another writer's overwrite, in tests).
    pub fn overwrite(&self, key: &str, body: Bytes) {
        self.overwrite_with(key, body, Vec::new());
    }

    /// Stores a version with its metadata directly, unconditionally (a forged object, in tests).
    pub fn overwrite_with(&self, key: &str, body: Bytes, metadata: Vec<(&'static str, String)>) {
        let mut state = self.state();
        let sha256 = audit_model::digest::sha256(&body);
        let version = state.version(body, sha256, metadata);
        state
            .objects
            .entry(key.to_owned())
            .or_default()
            .push(version);
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

    /// Runs `read` on the state unless a fault of `operation` on `key` says otherwise.
    async fn read<T>(
        &self,
        operation: Operation,
        key: &str,
        read: impl FnOnce(&State) -> T,
    ) -> Result<T, BucketError> {
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

    fn check_bucket(&self) -> Result<(), BucketError> {
        if self.missing {
            return Err(BucketError::Refused {
                code: "NoSuchBucket".into(),
                message: "The specified bucket does not exist".into(),
            });
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
}

/// Waits forever: a request that never answers.
async fn hang<T>() -> T {
    std::future::pending().await
}

impl ArchiveBucket for MemoryBucket {
    async fn put_if_absent(&self, object: NewObject) -> Result<Created, BucketError> {
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

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, BucketError> {
        let outcome = {
            let mut state = self.state();
            match state.fault(Operation::Head, key) {
                Some(Effect::Fail(error) | Effect::LoseAnswer(error)) => Err(Some(error)),
                Some(Effect::Hang) => Err(None),
                None => state.check_bucket().map_err(Some).map(|()| {
                    state.current(key).map(|v| ObjectInfo {
                        etag: Some(v.etag.clone()),
                        version_id: Some(v.version_id.clone()),
                        size: v.body.len() as u64,
                    })
                }),
            }
        };
        match outcome {
            Ok(info) => Ok(info),
            Err(Some(error)) => Err(error),
            Err(None) => hang().await,
        }
    }

    async fn get(&self, key: &str) -> Result<Option<Bytes>, BucketError> {
        let outcome = {
            let mut state = self.state();
            match state.fault(Operation::Get, key) {
                Some(Effect::Fail(error) | Effect::LoseAnswer(error)) => Err(Some(error)),
                Some(Effect::Hang) => Err(None),
                None => state
                    .check_bucket()
                    .map_err(Some)
                    .map(|()| state.current(key).map(|v| v.body.clone())),
            }
        };
        match outcome {
            Ok(body) => Ok(body),
            Err(Some(error)) => Err(error),
            Err(None) => hang().await,
        }
    }

    async fn get_object(&self, key: &str) -> Result<Option<StoredObject>, BucketError> {
        self.read(Operation::Get, key, |state| {
            state.current(key).map(Version::stored)
        })
        .await
    }

    async fn get_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<StoredObject>, BucketError> {
        self.read(Operation::Get, key, |state| {
            state.version_of(key, version_id).map(Version::stored)
        })
        .await
    }

    async fn head_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<VersionInfo>, BucketError> {
        self.read(Operation::Head, key, |state| {
            state.version_of(key, version_id).map(|v| VersionInfo {
                sha256: Some(v.sha256),
                events: v
                    .metadata
                    .iter()
                    .find(|(n, _)| *n == "events")
                    .and_then(|(_, e)| e.parse().ok()),
                size: v.body.len() as u64,
            })
        })
        .await
    }

    async fn list_keys(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>, BucketError> {
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

    async fn list_versions(&self, prefix: &str) -> Result<Vec<VersionEntry>, BucketError> {
        self.read(Operation::List, prefix, |state| {
            state
                .objects
                .iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .flat_map(|(k, versions)| {
                    versions.iter().rev().map(|v| VersionEntry {
                        key: k.clone(),
                        version_id: v.version_id.clone(),
                        delete_marker: v.delete_marker,
                    })
                })
                .collect()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(key: &str, body: &'static str) -> NewObject {
        NewObject {
            key: key.into(),
            body: Bytes::from_static(body.as_bytes()),
            content_type: "text/plain",
            sha256: [0; 32],
            metadata: Vec::new(),
        }
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
        assert_eq!(bucket.get("a").await.unwrap().unwrap(), "1");
        assert_eq!(bucket.versions("a").len(), 1);
        assert_eq!(bucket.head("b").await, Ok(None));
        bucket.overwrite("a", Bytes::from_static(b"3"));
        assert_eq!(bucket.versions("a").len(), 2);
        assert_eq!(bucket.get("a").await.unwrap().unwrap(), "3");
    }

    #[tokio::test]
    async fn faults_fail_lose_answers_and_run_out() {
        let bucket = MemoryBucket::new();
        bucket.inject(Fault {
            operation: Operation::Put,
            prefix: "x/".into(),
            times: Some(1),
            effect: Effect::LoseAnswer(BucketError::TimedOut),
        });
        assert_eq!(
            bucket.put_if_absent(object("x/1", "1")).await,
            Err(BucketError::TimedOut)
        );
        assert!(bucket.current("x/1").is_some(), "written, answer lost");
        assert_eq!(
            bucket.put_if_absent(object("x/1", "1")).await,
            Ok(Created::AlreadyExists)
        );
        bucket.set_missing(true);
        assert!(matches!(
            bucket.head("x/1").await,
            Err(BucketError::Refused { code, .. }) if code == "NoSuchBucket"
        ));
    }
}
