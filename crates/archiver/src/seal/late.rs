//! Owns late objects: what landed in a sealed period's place after its digest, voided and its
//! events archived again in the open period (docs/archive.md "Digests"). Must not know how a
//! digest is chained or written (`seal.rs`).

use super::*;

impl<B: Bucket, S: DigestSigner> Run<'_, '_, B, S> {
    /// Objects in the place of the `recent` sealed periods that their digest does not list (nor
    /// lists as unattested) and no later digest's `late` lists: a voided one is recorded; an
    /// attested one is voided, its events archived again in the open period, and recorded; the
    /// rest are left for `verify` (`object not in digest`).
    pub(super) async fn late_objects(
        &self,
        recent: &VecDeque<(Period, Digest)>,
    ) -> Result<Vec<LateObject>, SealError> {
        let explained: HashSet<&str> = recent
            .iter()
            .flat_map(|(_, d)| d.late.iter().map(|l| l.key.as_str()))
            .collect();
        let mut late = Vec::new();
        for (period, digest) in recent {
            let known: HashSet<&str> = digest
                .objects
                .iter()
                .map(|o| o.key.as_str())
                .chain(digest.unattested.iter().map(|o| o.key.as_str()))
                .chain(explained.iter().copied())
                .collect();
            for found in self.examine_period(*period, |k| !known.contains(k)).await? {
                if let Some(object) = self.settle_late(found).await? {
                    late.push(object);
                }
            }
        }
        late.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(late)
    }

    /// What becomes of one late object (`late_objects`).
    pub(super) async fn settle_late(
        &self,
        found: Examined,
    ) -> Result<Option<LateObject>, SealError> {
        let record = |archived_as: String| LateObject {
            key: found.key.clone(),
            version_id: found.version_id.clone(),
            sha256: found.sha256.clone(),
            events: found.events,
            archived_as,
        };
        let voided_by_seal = if found.voided {
            let by = self
                .original(&void_key(&found.key))
                .await?
                .and_then(|v| serde_json::from_slice::<serde_json::Value>(&v.body).ok())
                .and_then(|v| v.get("by").and_then(|b| b.as_str()).map(str::to_owned));
            by.as_deref() == Some(VOIDED_BY_SEAL)
        } else {
            false
        };
        let Ok((_, marker)) = &found.attestation else {
            if found.voided {
                return Ok(Some(record(String::new())));
            }
            tracing::warn!(key = %found.key, "an unattested object landed in a sealed period's place: left for verify");
            return Ok(None);
        };
        if found.voided && !voided_by_seal {
            // Whoever voided it archives its events anew.
            return Ok(Some(record(String::new())));
        }
        if !found.voided && !self.void(&found.key).await? {
            return Ok(Some(record(String::new())));
        }
        tracing::warn!(key = %found.key, "an object landed after its period was sealed: its events are archived again");
        Ok(self.archive_again(&found, marker).await?.map(record))
    }

    /// Writes the sealer's void marker for `key`: whoever writes it first archives the events
    /// anew. `false` when another's void marker was there first.
    pub(super) async fn void(&self, key: &str) -> Result<bool, SealError> {
        let body = serde_json::json!({
            "version": 1,
            "voidedAt": self.clock().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "by": VOIDED_BY_SEAL,
        })
        .to_string()
        .into_bytes();
        let hash = sha256(&body);
        let void = NewObject {
            key: void_key(key),
            body: Bytes::from(body),
            content_type: "application/json",
            sha256: hash,
            metadata: Vec::new(),
        };
        match self.request(self.bucket().put_if_absent(void)).await? {
            Created::New { .. } => Ok(true),
            Created::AlreadyExists => {
                let by = self
                    .original(&void_key(key))
                    .await?
                    .and_then(|v| serde_json::from_slice::<serde_json::Value>(&v.body).ok())
                    .and_then(|v| v.get("by").and_then(|b| b.as_str()).map(str::to_owned));
                Ok(by.as_deref() == Some(VOIDED_BY_SEAL))
            }
        }
    }

    /// Archives the late object's events again in the open period, through the archiver's own
    /// encoding, attested by a marker at `state/late/<key>/a<n>.json`; the new object's key.
    /// Every step can be run again (another sealer, a run after a crash) and comes to the same
    /// object; a plan whose object was never written and whose period is no longer open gives
    /// way to the next plan.
    pub(super) async fn archive_again(
        &self,
        found: &Examined,
        marker: &Marker,
    ) -> Result<Option<String>, SealError> {
        let Some(parsed) = ObjectKey::parse(&found.key) else {
            return Ok(None);
        };
        let Some(body) = self
            .request(self.bucket().get_version(&found.key, &found.version_id))
            .await?
        else {
            return Ok(None);
        };
        let Some(lines) = lines_of(&body.body) else {
            tracing::error!(key = %found.key, "a late object's lines cannot be read: not archived again");
            return Ok(None);
        };
        let Some(listed) = marker.objects.iter().find(|o| o.key == found.key) else {
            return Ok(None);
        };
        let run: Vec<RunEntry> = listed
            .events
            .iter()
            .filter_map(|&i| marker.run.get(i as usize).cloned())
            .collect();
        let event_ids: Vec<String> = run.iter().map(|e| e.event_id().to_owned()).collect();
        let encoded = gzip_lines(lines.iter().map(String::as_str))
            .map_err(|e| words::unavailable(e.to_string()))?;
        let encoded_hash = sha256(&encoded);
        let mut n = 0;
        let mut looks = 0;
        while n <= MAX_LATE_PLANS && looks <= 2 * (MAX_LATE_PLANS + 1) {
            looks += 1;
            let plan_key = format!("{LATE_PREFIX}{}/a{n}.json", found.key);
            let (object_key, chosen_at) = match self.original(&plan_key).await? {
                Some(stored) => {
                    let planned = Marker::from_json(&stored.body)
                        .ok()
                        .and_then(|p| p.objects.first().cloned());
                    let Some(planned) = planned.filter(|p| p.sha256 == hex(&encoded_hash)) else {
                        n += 1;
                        continue;
                    };
                    (planned.key, None)
                }
                None => {
                    let at = self.clock();
                    let Some(key) = ObjectKey::new(
                        parsed.kind,
                        at,
                        self.length(),
                        &parsed.first_sequence,
                        LATE_ATTEMPT_BASE + n,
                    ) else {
                        return Ok(None);
                    };
                    let key = key.to_string();
                    let write_by = at
                        + chrono::Duration::from_std(
                            WRITE_START_SLACK + OBJECT_WRITE_TIMEOUT + LAND_GRACE,
                        )
                        .unwrap_or_default();
                    let plan = Marker::new(
                        run.clone(),
                        &[Confirmed {
                            key: key.clone(),
                            event_ids: event_ids.clone(),
                            sha256: hex(&encoded_hash),
                        }],
                        write_by.timestamp_millis(),
                    );
                    let plan_body = plan.to_json();
                    let request = NewObject {
                        key: plan_key.clone(),
                        sha256: sha256(&plan_body),
                        body: Bytes::from(plan_body),
                        content_type: "application/json",
                        metadata: Vec::new(),
                    };
                    match self.request(self.bucket().put_if_absent(request)).await? {
                        Created::New { .. } => (key, Some(at)),
                        // Another sealer's plan: look at it.
                        Created::AlreadyExists => continue,
                    }
                }
            };
            if let Some(entry) = self.original_entry(&object_key).await? {
                let info = self
                    .request(self.bucket().head_version(&object_key, &entry.version_id))
                    .await?;
                if info.and_then(|i| i.sha256) == Some(encoded_hash) {
                    return Ok(Some(object_key));
                }
                // Someone else's bytes under the planned name: the next plan.
                n += 1;
                continue;
            }
            // A write of a period starts only before its end + WRITE_START_SLACK, and only within
            // WRITE_START_SLACK of choosing the key.
            let open = ObjectKey::parse(&object_key).is_some_and(|k| {
                self.clock().timestamp()
                    < k.period_start
                        + i64::from(self.length().seconds())
                        + WRITE_START_SLACK.as_secs() as i64
            }) && chosen_at.is_none_or(|at| {
                self.clock()
                    < at + chrono::Duration::from_std(WRITE_START_SLACK).unwrap_or_default()
            });
            if !open {
                n += 1;
                continue;
            }
            let object = NewObject {
                key: object_key.clone(),
                body: Bytes::from(encoded.clone()),
                content_type: CONTENT_TYPE,
                sha256: encoded_hash,
                metadata: vec![
                    ("events", lines.len().to_string()),
                    (
                        "first-sequence-number",
                        run.first().map_or(parsed.first_sequence.clone(), |e| {
                            e.sequence_number().to_owned()
                        }),
                    ),
                    (
                        "last-sequence-number",
                        run.last().map_or(parsed.first_sequence.clone(), |e| {
                            e.sequence_number().to_owned()
                        }),
                    ),
                    (MARKER_METADATA, plan_key.clone()),
                ],
            };
            // Created, or taken meanwhile: the next look compares its bytes.
            self.request(self.bucket().put_if_absent(object)).await?;
        }
        tracing::error!(key = %found.key, "a late object's events could not be archived again");
        Ok(None)
    }
}
