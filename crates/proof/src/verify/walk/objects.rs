//! Owns one sealed period's objects: each one its digest lists read and checked against what
//! the bucket holds in the period's place, its lines to the log's tree, records archived twice,
//! tamper records. Must not know where the chain starts or the table.

use super::*;

impl<A: Archive, T: Table, O: Observer> Walk<'_, A, T, O> {
    /// The objects a digest lists, against what the bucket holds in the period's place; with
    /// `signed` and a tree, their lines against the transparency log.
    pub(super) async fn objects(
        &mut self,
        digest: &Digest,
        digest_key: &str,
        signed: bool,
        groups: Groups,
    ) -> Result<(), Error> {
        let listed: BTreeMap<&str, _> =
            digest.objects.iter().map(|o| (o.key.as_str(), o)).collect();
        let unattested: HashSet<(&str, &str)> = digest
            .unattested
            .iter()
            .map(|u| (u.key.as_str(), u.version_id.as_str()))
            .collect();
        for object in &digest.unattested {
            self.summary.unattested += 1;
            let sha256 = if object.sha256.is_empty() {
                "unknown SHA-256".to_owned()
            } else {
                format!("SHA-256 {}", object.sha256)
            };
            self.report(Problem::new(
                ProblemKind::ObjectNotAttested,
                &object.key,
                format!(
                    "version {} ({sha256}, {} bytes) was in the period's place when it was sealed, but no marker attests it: {}; its digest {digest_key} lists it apart from the trail",
                    object.version_id, object.size, object.reason
                ),
            ))?;
        }
        for (key, group) in &groups {
            let Some(object) = listed.get(key.as_str()) else {
                let versions: Vec<String> = group
                    .iter()
                    .filter(|e| !e.delete_marker)
                    .filter(|e| !unattested.contains(&(key.as_str(), e.version_id.as_str())))
                    .map(|e| e.version_id.clone())
                    .collect();
                let only_markers = group.iter().all(|e| e.delete_marker);
                if only_markers {
                    self.report(Problem::new(
                        ProblemKind::ObjectNotInDigest,
                        key,
                        format!(
                            "a delete marker of a key that its period's digest {digest_key} does not list"
                        ),
                    ))?;
                } else if !versions.is_empty() {
                    // Explained only by a later digest's list of late objects, if at all.
                    self.unlisted.push(Unlisted {
                        key: key.clone(),
                        versions,
                        digest_key: digest_key.to_owned(),
                    });
                    self.explain();
                }
                continue;
            };
            let sealed_at = group
                .iter()
                .position(|e| !e.delete_marker && e.version_id == object.version_id);
            for (i, other) in group.iter().enumerate() {
                if other.delete_marker
                    || other.version_id == object.version_id
                    || unattested.contains(&(key.as_str(), other.version_id.as_str()))
                {
                    continue;
                }
                let which = match sealed_at {
                    Some(at) if i > at => "an older version",
                    _ => "a newer version",
                };
                self.report(Problem::new(
                    ProblemKind::ObjectChanged,
                    key,
                    format!(
                        "{which} {} beside the sealed version {}",
                        other.version_id, object.version_id
                    ),
                ))?;
            }
            if sealed_at.is_some() && group.iter().any(|e| e.delete_marker && e.latest) {
                self.report(Problem::new(
                    ProblemKind::ObjectMissing,
                    key,
                    format!(
                        "deleted: a delete marker hides it; its sealed version {} is still in the bucket",
                        object.version_id
                    ),
                ))?;
            }
        }

        let keep_trail = self.table.is_some();
        let archive = self.archive;
        let reader = crate::tlog::LogReader { archive };
        // The period's leaves, appended in the digest's order as its objects are read.
        let mut leaves = if signed {
            let (leaves, problems) = self.log.start(&reader, digest, digest_key).await?;
            self.report_all(problems)?;
            leaves
        } else {
            self.log.unknown();
            None
        };
        let hash_leaves = leaves.is_some();
        let attestations = &self.settings.attestations;
        let mut reads = futures::stream::iter(digest.objects.iter())
            .map(|object| async move {
                let kind = kind_of(&object.key);
                let keep = kind == ObjectKind::Tamper || keep_trail;
                // Trail lines are the items' INSERTs: each checked as the receiver's.
                let attest = attestations.clone().filter(|_| kind == ObjectKind::Trail);
                let read = read_version(
                    archive,
                    &object.key,
                    &object.version_id,
                    keep,
                    Some(kind),
                    hash_leaves,
                    attest,
                )
                .await;
                (object, read)
            })
            .buffered(self.settings.concurrency.max(1));
        while let Some((object, read)) = reads.next().await {
            let Some(mut content) = read? else {
                self.report(Problem::new(
                    ProblemKind::ObjectMissing,
                    &object.key,
                    format!("its sealed version {} is gone", object.version_id),
                ))?;
                continue;
            };
            if let Some(leaves) = leaves.as_mut() {
                leaves.push(&std::mem::take(&mut content.leaves));
                if leaves.due() {
                    leaves.compare(&reader).await?;
                }
            }
            let kind = kind_of(&object.key);
            match kind {
                ObjectKind::Trail => {
                    self.summary.trail_objects += 1;
                    self.summary.trail_events += content.lines;
                }
                ObjectKind::Tamper => {
                    self.summary.tamper_objects += 1;
                    self.summary.tamper_events += content.lines;
                }
            }
            let mut why = Vec::new();
            if hex(&content.sha256) != object.sha256.to_ascii_lowercase() {
                why.push(format!(
                    "its SHA-256 is {}, its digest says {}",
                    hex(&content.sha256),
                    object.sha256
                ));
            }
            if content.size != object.size {
                why.push(format!(
                    "{} bytes, its digest says {}",
                    content.size, object.size
                ));
            }
            if content.lines != object.events {
                why.push(format!(
                    "{} events, its digest says {}",
                    content.lines, object.events
                ));
            }
            if !why.is_empty() {
                if let Some(unreadable) = &content.unreadable {
                    why.push(unreadable.clone());
                }
                self.report(Problem::new(
                    ProblemKind::ObjectChanged,
                    &object.key,
                    format!("version {}: {}", object.version_id, why.join("; ")),
                ))?;
            }
            for unattested in std::mem::take(&mut content.unattested) {
                self.unattested(&unattested, &object.key)?;
            }
            let keys = std::mem::take(&mut content.keys);
            let twice = self
                .duplicates(&object.key, &object.version_id, keys)
                .await?;
            match kind {
                ObjectKind::Trail => self.compare_events(&object.key, content).await?,
                ObjectKind::Tamper => self.tampered(&object.key, &content, &twice)?,
            }
        }
        drop(reads);
        if let Some(leaves) = leaves {
            let problems = self.log.finish(&reader, leaves).await?;
            self.report_all(problems)?;
        }
        if signed {
            let problems = self
                .log
                .checkpoint(&reader, self.key.log(), digest, digest_key)
                .await?;
            self.report_all(problems)?;
        }
        self.flush_table().await
    }

    /// `seen` sized once, at the range's first signed digest, before its objects are read: the
    /// range holds at most the log's leaves from before this period to the end of the last
    /// (the last period's signed digest read once more here; its tree size is the log's size
    /// then, this digest's less its events the size before). Without a tree (digests sealed
    /// before the log) or a signed last digest, it grows as records come.
    pub(super) async fn size_seen(&mut self, period: Period, digest: &Digest) -> Result<(), Error> {
        let Some(last) = self.last.take() else {
            return Ok(());
        };
        let Some(tree) = &digest.tree else {
            return Ok(());
        };
        let before = tree.size.saturating_sub(digest.events);
        let end = if last == period {
            Some(tree.size)
        } else {
            digests::load_period(self.archive, last)
                .await?
                .iter()
                .map(|l| digests::judge(l, last, &self.settings.bucket, self.key))
                .find(|j| j.signed)
                .and_then(|j| j.digest)
                .and_then(|d| d.tree)
                .map(|t| t.size)
        };
        if let Some(end) = end {
            // A tree of more than 2^32 leaves is not this range's: left to grow.
            let records = end.saturating_sub(before);
            if records <= u64::from(u32::MAX) {
                self.seen.reserve(records);
            }
        }
        Ok(())
    }

    /// The records of a sealed object: each one already read in another sealed object of the
    /// range (or earlier in this one) is `event duplicated`. Returns the positions of this
    /// object's records that were duplicates (among its keyed lines).
    pub(super) async fn duplicates(
        &mut self,
        object: &str,
        version_id: &str,
        keys: Vec<content::LineKey>,
    ) -> Result<HashSet<usize>, Error> {
        let index = u32::try_from(self.seen_objects.len()).unwrap_or(u32::MAX);
        self.seen_objects
            .push((Arc::from(object), Box::from(version_id)));
        // This object's keys, each at its first position, made on its first fingerprint found
        // in it.
        let mut here: Option<HashMap<u128, usize>> = None;
        let mut twice = HashSet::new();
        for (at, line) in keys.iter().enumerate() {
            let first = match self.seen.lookup(line.key, index) {
                Lookup::New => continue,
                Lookup::Duplicate(first) => first,
                // Only a fingerprint was found: a record of `first` has the same one. It is this
                // record again only if `first` holds its exact key (before it, when `first` is
                // this object); else the two differ and this one is kept whole. The exact keys
                // are not kept for every record (16 bytes more each), so `first` is read again:
                // that happens for each object of a duplicate (its keys are then kept for the
                // next ones) and for a false 64-bit collision (about 1 in 2^64 / n a record).
                Lookup::Confirm(first) => {
                    let holds = if first == index {
                        let here = here.get_or_insert_with(|| {
                            let mut positions = HashMap::with_capacity(keys.len());
                            for (position, key) in keys.iter().enumerate() {
                                positions.entry(key.key).or_insert(position);
                            }
                            positions
                        });
                        here.get(&line.key).is_some_and(|position| *position < at)
                    } else {
                        self.holds(first, line.key).await?
                    };
                    if !holds {
                        self.seen.remember_exact(line.key, index);
                        continue;
                    }
                    first
                }
            };
            twice.insert(at);
            self.summary.duplicated += 1;
            let first = self
                .seen_objects
                .get(first as usize)
                .map(|(o, _)| o.to_string())
                .unwrap_or_default();
            let detail = if first == object {
                format!("archived twice in {object}")
            } else {
                format!("archived in {object}, and already in {first}")
            };
            self.report(Problem::new(
                ProblemKind::EventDuplicated,
                &*line.message_id,
                detail,
            ))?;
        }
        Ok(twice)
    }

    /// Whether the sealed object `first` (read earlier in the walk) holds a record of exact key
    /// `key`: its version read again, its keys kept for the next questions. A version gone since
    /// is `object missing`, and holds nothing (none of its records can be compared any more).
    pub(super) async fn holds(&mut self, first: u32, key: u128) -> Result<bool, Error> {
        if !self.reread.contains_key(&first) {
            let Some((object, version_id)) = self.seen_objects.get(first as usize).cloned() else {
                return Ok(false);
            };
            let kind = kind_of(&object);
            let read = read_version(
                self.archive,
                &object,
                &version_id,
                false,
                Some(kind),
                false,
                None,
            )
            .await?;
            let keys: Option<HashSet<u128>> =
                read.map(|content| content.keys.iter().map(|k| k.key).collect());
            if keys.is_none() {
                self.report(Problem::new(
                    ProblemKind::ObjectMissing,
                    &*object,
                    format!("its sealed version {version_id}, read earlier in this run, is gone"),
                ))?;
            }
            let kept: usize = self.reread.values().flatten().map(HashSet::len).sum();
            if kept + keys.as_ref().map_or(0, HashSet::len) > REREAD_KEYS {
                self.reread.clear();
            }
            self.reread.insert(first, keys);
        }
        Ok(self
            .reread
            .get(&first)
            .and_then(Option::as_ref)
            .is_some_and(|keys| keys.contains(&key)))
    }

    /// The lines of a tamper object: each record (a MODIFY, or a REMOVE that is not TTL's) is
    /// `item modified`, whether the item was restored since or not. `twice`: positions of
    /// records already reported (archived twice).
    pub(super) fn tampered(
        &mut self,
        object: &str,
        content: &Content,
        twice: &HashSet<usize>,
    ) -> Result<(), Error> {
        let mut keyed = 0usize;
        for line in &content.kept {
            let Some(problem) = tamper_problem(object, line) else {
                continue;
            };
            let at = keyed;
            keyed += 1;
            if !twice.contains(&at) {
                self.report(problem)?;
            }
        }
        Ok(())
    }
}
