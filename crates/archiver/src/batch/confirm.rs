//! Owns what earlier attempts at a run already archived: the objects its markers list, each
//! checked against its listings, waited for until its `writeBy`, or made void. Must not know how
//! new objects or carried markers are written (`write.rs`).

use super::*;

/// An object as one marker lists it.
#[derive(Debug, Clone)]
pub(super) struct Listing {
    pub(super) sha256: String,
    /// Its events in stream order: the object's last lines.
    pub(super) event_ids: Vec<String>,
    pub(super) write_by: i64,
}

/// What the check of a listed object found.
pub(super) enum Checked {
    /// It exists with the bytes of some of its listings, its marker attests it, and its lines
    /// of delivered records are theirs: the events of those listings are archived in it.
    Holds(Confirmed),
    /// It does not exist.
    Missing,
    /// A void marker names it: it never counts.
    Void,
    /// It is not what its listings say (the reason).
    Conflict(String),
}

/// Whether a void marker's body says the sealer wrote it (`by` = `seal`).
fn voided_by_seal(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("by").and_then(Value::as_str).map(str::to_owned))
        .is_some_and(|by| by == crate::seal::VOIDED_BY_SEAL)
}

/// Every object the markers list, in the order first listed, with each marker's listing of it.
pub(super) fn listings(markers: &[(String, Marker)]) -> Vec<(String, Vec<Listing>)> {
    let mut out: Vec<(String, Vec<Listing>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (_, marker) in markers {
        for object in &marker.objects {
            let listing = Listing {
                sha256: object.sha256.clone(),
                event_ids: marker.event_ids(object),
                write_by: marker.write_by,
            };
            match index.get(&object.key) {
                Some(&i) => out[i].1.push(listing),
                None => {
                    index.insert(object.key.clone(), out.len());
                    out.push((object.key.clone(), vec![listing]));
                }
            }
        }
    }
    out
}

impl<B: Bucket, C: Clock> Archiver<'_, B, C> {
    /// The objects the markers list that hold their events (checked by `check`). One that does
    /// not exist is waited for until its marker's `writeBy` when the deadline allows; after it,
    /// it is made void (`by`: the marker key of the attempt that archives its events anew), so
    /// that it never counts wherever it lands.
    pub(super) async fn confirm(
        &self,
        markers: &[(String, Marker)],
        lookup: &Delivered<'_>,
        by: &str,
    ) -> Result<Vec<Confirmed>, Failure> {
        let objects = listings(markers);
        let mut done = Vec::new();
        let mut missing = self
            .check_all(objects.iter().collect(), markers, lookup, &mut done)
            .await?;
        if missing.is_empty() {
            return Ok(done);
        }
        let latest = missing
            .iter()
            .flat_map(|(_, listed)| listed.iter().map(|l| l.write_by))
            .max()
            .unwrap_or_default();
        let write_by = DateTime::from_timestamp_millis(latest).unwrap_or_default();
        let now = self.clock.now();
        if now < write_by {
            let wait = (write_by - now).to_std().unwrap_or_default();
            if !self.budget.allows(wait, READ_TIMEOUT * 3) {
                return Err(Failure::PreviousWriteInFlight(write_by));
            }
            tracing::info!(
                wait_ms = wait.as_millis() as u64,
                "waiting for a previous attempt's write to land or expire"
            );
            self.clock.sleep(wait).await;
            missing = self.check_all(missing, markers, lookup, &mut done).await?;
        }
        for (key, _) in missing {
            self.void(key, by).await?;
        }
        Ok(done)
    }

    /// Checks each of `objects` (`check`): those that hold their events go to `done`, conflicts
    /// are counted, void ones dropped; those that do not exist are returned.
    async fn check_all<'o>(
        &self,
        objects: Vec<&'o (String, Vec<Listing>)>,
        markers: &[(String, Marker)],
        lookup: &Delivered<'_>,
        done: &mut Vec<Confirmed>,
    ) -> Result<Vec<&'o (String, Vec<Listing>)>, Failure> {
        let checks = join_all(
            objects
                .iter()
                .map(|(key, listed)| self.check(key, listed, markers, lookup)),
        )
        .await;
        let mut missing = Vec::new();
        for (object, checked) in objects.into_iter().zip(checks) {
            let key = object.0.as_str();
            match checked? {
                Checked::Holds(confirmed) => done.push(confirmed),
                Checked::Missing => missing.push(object),
                Checked::Void => tracing::debug!(key, "a listed object is void"),
                Checked::Conflict(reason) => self.conflict(key, reason),
            }
        }
        Ok(missing)
    }

    /// Whether `key` holds what `listed` (the markers' listings of it) says: it exists; its
    /// SHA-256 is one listing's; the marker its metadata names attests it with those bytes; it
    /// has one version; no void marker names it; and its lines of delivered records are theirs
    /// (a listing's events are the object's last lines, in order).
    pub(super) async fn check(
        &self,
        key: &str,
        listed: &[Listing],
        markers: &[(String, Marker)],
        lookup: &Delivered<'_>,
    ) -> Result<Checked, Failure> {
        let read = |error| Failure::from_step(Step::CheckObject, error);
        let object = match self.budget.run(READ_TIMEOUT, self.bucket.get(key)).await {
            Ok(Some(object)) => object,
            Ok(None) => return Ok(Checked::Missing),
            Err(error) => return Err(read(error)),
        };
        let sha256 = sha256_hex(&object.body);
        let mut matching: Vec<&Listing> = listed
            .iter()
            .filter(|l| l.sha256.eq_ignore_ascii_case(&sha256))
            .collect();
        if matching.is_empty() {
            return Ok(Checked::Conflict(format!(
                "its SHA-256 {sha256} is not the one its marker lists"
            )));
        }
        let Some(named) = object.metadata(MARKER_METADATA) else {
            return Ok(Checked::Conflict("it names no marker".into()));
        };
        let attested = match markers.iter().find(|(k, _)| k == named) {
            Some((_, marker)) => marker.attests(key, &sha256),
            None if named.starts_with(STATE_PREFIX) => {
                match self.budget.run(READ_TIMEOUT, self.bucket.get(named)).await {
                    Ok(Some(object)) => {
                        Marker::from_json(&object.body).is_ok_and(|m| m.attests(key, &sha256))
                    }
                    Ok(None) => false,
                    Err(error) => return Err(read(error)),
                }
            }
            None => false,
        };
        if !attested {
            return Ok(Checked::Conflict(format!(
                "the marker it names ({named}) does not attest it"
            )));
        }
        let versions = match self
            .budget
            .run(READ_TIMEOUT, self.bucket.list_versions(key))
            .await
        {
            Ok(entries) => entries
                .iter()
                .filter(|e| e.key == key && !e.delete_marker)
                .count(),
            Err(error) => return Err(read(error)),
        };
        if versions > 1 {
            return Ok(Checked::Conflict(format!(
                "it has {versions} versions; the archiver writes one"
            )));
        }
        match self
            .budget
            .run(READ_TIMEOUT, self.bucket.get(&void_key(key)))
            .await
        {
            // Voided by the sealer: the object landed after its period was sealed, and the
            // sealer archives its lines again in an open period (seal.rs, late objects). Its
            // events are archived there, so a retry must not write them a third time: the
            // object counts here when its lines are the records' own, as any other.
            Ok(Some(object)) if voided_by_seal(&object.body) => {}
            Ok(Some(_)) => return Ok(Checked::Void),
            Ok(None) => {}
            Err(error) => return Err(read(error)),
        }
        let mut text = String::new();
        if flate2::read::GzDecoder::new(&object.body[..])
            .take(MAX_OBJECT_TEXT)
            .read_to_string(&mut text)
            .is_err()
        {
            return Ok(Checked::Conflict("it is not gzip-compressed text".into()));
        }
        let lines: Vec<&str> = text.split_terminator('\n').collect();
        // The longest listing first: the others are suffixes of it.
        matching.sort_by_key(|l| std::cmp::Reverse(l.event_ids.len()));
        let mut event_ids: Vec<String> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for listing in matching {
            let Some(first) = lines.len().checked_sub(listing.event_ids.len()) else {
                return Ok(Checked::Conflict(format!(
                    "its marker lists {} events in it; it holds {} lines",
                    listing.event_ids.len(),
                    lines.len()
                )));
            };
            for (id, held) in listing.event_ids.iter().zip(&lines[first..]) {
                if let Some(record) = lookup.by_id.get(id.as_str())
                    && line(record).as_deref() != Some(*held)
                {
                    return Ok(Checked::Conflict(format!(
                        "its line of event {id} is not the record's"
                    )));
                }
                if seen.insert(id.as_str()) {
                    event_ids.push(id.clone());
                }
            }
        }
        Ok(Checked::Holds(Confirmed {
            key: key.to_owned(),
            event_ids,
            sha256,
        }))
    }

    /// Makes `key` void for good (`If-None-Match`; one that exists is already void).
    async fn void(&self, key: &str, by: &str) -> Result<(), Failure> {
        let body = Bytes::from(
            serde_json::json!({
                "version": 1,
                "voidedAt": self.clock.now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "by": by,
            })
            .to_string(),
        );
        let request = json_object(void_key(key), body);
        match self
            .budget
            .run(WRITE_START_SLACK, self.bucket.put_if_absent(request))
            .await
        {
            Ok(Created::New { .. }) => {
                tracing::warn!(
                    key,
                    by,
                    "a listed object missing after its writeBy is void; its events are archived anew"
                );
                self.found().voided.push(key.to_owned());
                Ok(())
            }
            Ok(Created::AlreadyExists) => Ok(()),
            Err(error) => Err(Failure::from_step(Step::WriteVoid, error)),
        }
    }
}
