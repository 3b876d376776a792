//! Owns what a period's place holds, examined for its digest: every object version read, hashed
//! and checked against its marker and the void markers (attested, or unattested with why). Must
//! not know how digests are chained or written (`seal.rs`) nor what becomes of late objects.

use audit_aws::s3::VersionInfo;

use super::*;

impl<B: Bucket, S: DigestSigner> Run<'_, '_, B, S> {
    /// Every object version in `period`'s place (the original of each key that `wanted` keeps),
    /// read and checked against its marker and the void markers.
    pub(super) async fn examine_period(
        &self,
        period: Period,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<Vec<Examined>, SealError> {
        let (originals, voided) = self.place(period, wanted).await?;
        self.examine_all(originals, period, &voided).await
    }

    /// `period`'s place: the original of each key that `wanted` keeps, and the keys a void marker
    /// names.
    pub(super) async fn place(
        &self,
        period: Period,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<(Vec<VersionEntry>, HashSet<String>), SealError> {
        let mut originals: Vec<VersionEntry> = Vec::new();
        let mut voided: HashSet<String> = HashSet::new();
        for prefix in object_prefixes(period) {
            let entries = self.request(self.bucket().list_versions(&prefix)).await?;
            let before = originals.len();
            for (key, versions) in by_key(&entries) {
                if let Some(original) = versions.iter().rev().find(|v| !v.delete_marker)
                    && wanted(key)
                {
                    originals.push((*original).clone());
                }
            }
            if originals.len() == before {
                continue;
            }
            // A void marker counts whatever was put over it or hid it since.
            let voids = self
                .request(
                    self.bucket()
                        .list_versions(&format!("{VOID_PREFIX}{prefix}")),
                )
                .await?;
            voided.extend(
                voids
                    .iter()
                    .filter(|v| !v.delete_marker)
                    .filter_map(|v| v.key.strip_prefix(VOID_PREFIX)?.strip_suffix(".json"))
                    .map(str::to_owned),
            );
        }
        Ok((originals, voided))
    }

    /// `originals` (of `period`'s place) read and checked, concurrently, in this order.
    pub(super) async fn examine_all(
        &self,
        originals: Vec<VersionEntry>,
        period: Period,
        voided: &HashSet<String>,
    ) -> Result<Vec<Examined>, SealError> {
        futures::stream::iter(originals)
            .map(|entry| self.examine(entry, period, voided))
            .buffered(HEAD_CONCURRENCY)
            .try_filter_map(|found| async move { Ok(found) })
            .try_collect()
            .await
    }

    /// One object version: its hash, size and events, and whether it is attested. `None` when
    /// the version vanished while it was read. Only a request that may pass later (throttling,
    /// 5xx, a time-out) fails the run; a refusal for this object lists it as unreadable.
    pub(super) async fn examine(
        &self,
        entry: VersionEntry,
        period: Period,
        voided: &HashSet<String>,
    ) -> Result<Option<Examined>, SealError> {
        let VersionEntry {
            key, version_id, ..
        } = entry;
        let mut found = Examined {
            key,
            version_id,
            sha256: String::new(),
            size: 0,
            events: 0,
            attestation: Err(String::new()),
            voided: false,
        };
        let info = match self.read_version(&mut found).await {
            Ok(Some(info)) => info,
            Ok(None) => return Ok(None),
            Err(SealError::Bucket(error)) if words::refused(&error) => {
                let code = words::refusal_code(&error);
                found.attestation = Err(format!("not readable: {code}"));
                return Ok(Some(found));
            }
            Err(error) => return Err(error),
        };
        found.sha256 = info.sha256.map(|h| hex(&h)).unwrap_or_default();
        let Some(events) = info.events else {
            found.attestation = Err("neither gzip nor carrying an events count".into());
            return Ok(Some(found));
        };
        found.events = events;
        found.voided = voided.contains(&found.key);
        let ours = ObjectKey::parse(&found.key).is_some_and(|k| {
            k.period_start == period.start && k.written_within_its_period(self.length())
        });
        found.attestation = if ours {
            self.attestation(&found.key, &found.sha256, info.marker.as_deref())
                .await?
        } else {
            Err("its key is not an archive object key of this period".into())
        };
        Ok(Some(found))
    }

    /// `found`'s version as its head gives it, with its SHA-256 and events read from its body
    /// when it was not written with a checksum and an event count; `None` when the version
    /// vanished while it was read. `found` takes its size from the head, before the body is
    /// read.
    async fn read_version(&self, found: &mut Examined) -> Result<Option<VersionInfo>, SealError> {
        let head = self.bucket().head_version(&found.key, &found.version_id);
        let Some(mut info) = self.request(head).await? else {
            return Ok(None);
        };
        found.size = info.size;
        if info.sha256.is_none() || info.events.is_none() {
            let get = self.bucket().get_version(&found.key, &found.version_id);
            let Some(object) = self.request(get).await? else {
                return Ok(None);
            };
            info.sha256 = Some(sha256(&object.body));
            info.events = info.events.or_else(|| count_lines(&object.body));
        }
        Ok(Some(info))
    }

    /// The marker that attests `key` with `sha256` (its key and body), or why there is none.
    pub(super) async fn attestation(
        &self,
        key: &str,
        sha256: &str,
        marker: Option<&str>,
    ) -> Result<Result<(String, Marker), String>, SealError> {
        let Some(marker_key) = marker else {
            return Ok(Err("no marker names it".into()));
        };
        if !marker_key.starts_with(STATE_PREFIX) || marker_key.starts_with(VOID_PREFIX) {
            return Ok(Err(format!(
                "its marker {marker_key} is not under {STATE_PREFIX}"
            )));
        }
        let stored = match self.original(marker_key).await {
            Ok(Some(stored)) => stored,
            Ok(None) => return Ok(Err(format!("its marker {marker_key} does not exist"))),
            Err(SealError::Bucket(error)) if words::refused(&error) => {
                let code = words::refusal_code(&error);
                return Ok(Err(format!(
                    "its marker {marker_key} is not readable: {code}"
                )));
            }
            Err(error) => return Err(error),
        };
        let Ok(body) = Marker::from_json(&stored.body) else {
            return Ok(Err(format!("its marker {marker_key} is not a marker")));
        };
        if !body.attests(key, sha256) {
            return Ok(Err(format!(
                "its marker {marker_key} does not list it with this SHA-256"
            )));
        }
        Ok(Ok((marker_key.to_owned(), body)))
    }
}
