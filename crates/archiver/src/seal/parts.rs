//! Owns sealing progress that survives the run (docs/scaling.md §8, docs/archive.md "Sealing in
//! parts"): a period's place, in key order, is sealed [`PART_OBJECTS`] keys at a time. Each part
//! (its listed and unattested objects, the tree's edge after their leaves, the SHA-256 of its
//! index rows, and the SHA-256 of the part before, or of the previous digest for the first) is
//! signed with the digest key and created with `If-None-Match: *` at
//! `state/seal/p<period start>/<n>.json` (or an alternate name `<n>.a<k>.json`): that is its
//! commit point; the tiles its leaves filled and its rows (`<n>.rows.gz`, or an alternate
//! `<n>.rows.a<k>.gz`) are written after it. A run goes on from the parts there are: the chain of parts signed by the key,
//! of this bucket and period, each naming the one before; anything else at their names is passed
//! over, so nothing planted stops sealing. The digest is built from the parts. Must not know how
//! digests are chained or written (`seal.rs`).

use serde::{Deserialize, Serialize};

use std::collections::HashMap;

use audit_model::note::IndexRow;
use audit_model::tlog::TileRef;

use super::log::{Appended, index_body};
use super::*;

/// Where the parts are kept: `state/seal/p<period start>/`.
pub const PARTS_PREFIX: &str = "state/seal/";
/// Keys of a period's place a part covers (the last part fewer). A part of objects of 1,000
/// events holds 64,000 leaves: about 2.5 s of the sealer's CPU at 256 MB (docs/scaling.md §8).
pub const PART_OBJECTS: usize = 64;
/// Time kept in hand to seal one more part.
pub const PART_STEP_TIME: Duration = Duration::from_secs(5);
/// What a part's `format` says.
const PART_FORMAT: &str = "audit-receiver/seal-part/1";

/// The prefix of `period`'s parts.
pub fn parts_prefix(period: Period) -> String {
    format!("{PARTS_PREFIX}p{}/", period.start)
}

/// The name of `period`'s part `number` (its `alternate`-th alternate name when not 0).
pub fn part_key(period: Period, number: u32, alternate: u32) -> String {
    match alternate {
        0 => format!("{}{number:06}.json", parts_prefix(period)),
        _ => format!("{}{number:06}.a{alternate}.json", parts_prefix(period)),
    }
}

/// The part number and alternate a key under `period`'s prefix names.
fn parse_part_key(key: &str, period: Period) -> Option<(u32, u32)> {
    let name = key
        .strip_prefix(&parts_prefix(period))?
        .strip_suffix(".json")?;
    let (number, alternate) = match name.split_once(".a") {
        Some((number, alternate)) => (number, alternate.parse().ok().filter(|a| *a > 0)?),
        None => (name, 0),
    };
    (number.len() == 6)
        .then(|| number.parse().ok())
        .flatten()
        .map(|n| (n, alternate))
}

/// What the digest key signs for a part: its name and its bytes' SHA-256, under a first line
/// that no digest's or checkpoint's signed bytes begin with.
pub fn part_signing_string(key: &str, body_sha256: &[u8; 32]) -> String {
    format!("audit-receiver seal part\n{key}\n{}\n", hex(body_sha256))
}

/// A part's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    format: String,
    bucket: String,
    period_start: i64,
    period_seconds: u32,
    number: u32,
    /// Hex SHA-256 of the part before; for part 0, of the digest before (empty at the chain's
    /// start).
    previous: String,
    /// The last key of the period's place it covers.
    through: String,
    objects: Vec<ListedObject>,
    unattested: Vec<UnattestedObject>,
    leaves: u64,
    tree_size: u64,
    /// Hex of the partial tiles of the tree after its leaves (`TreeEdge::edge_tiles` order).
    edge: Vec<String>,
    /// Hex SHA-256 of the gzip of its index rows' lines (empty: none), kept at its rows' name.
    rows_sha256: String,
}

/// A part of the chain: its name, its bytes' SHA-256, its body and the tree's edge after it.
struct Chained {
    key: String,
    sha256: [u8; 32],
    part: Part,
    edge: TreeEdge,
}

/// The tree's edge at `size` from its partial tiles in hex; `None` when they are not.
fn edge_of(size: u64, tiles: &[String]) -> Option<TreeEdge> {
    let refs = TreeEdge::edge_tiles(size);
    if refs.len() != tiles.len() {
        return None;
    }
    let mut map: HashMap<TileRef, Vec<u8>> = HashMap::new();
    for (tile, bytes) in refs.into_iter().zip(tiles) {
        map.insert(tile, unhex(bytes)?);
    }
    TreeEdge::from_tiles(size, &map).ok()
}

/// The name of part `number`'s index rows (its `alternate`-th alternate name when not 0).
fn rows_key(period: Period, number: u32, alternate: u32) -> String {
    match alternate {
        0 => format!("{}{number:06}.rows.gz", parts_prefix(period)),
        _ => format!("{}{number:06}.rows.a{alternate}.gz", parts_prefix(period)),
    }
}

/// Index rows from their gzip.
fn rows_of(gzip: &[u8]) -> Option<Vec<IndexRow>> {
    let text = String::from_utf8(gunzip(gzip)?).ok()?;
    text.lines().map(IndexRow::parse).collect()
}

/// The gzip of `rows` (empty when there are none).
fn rows_body(rows: &[IndexRow]) -> Result<Vec<u8>, SealError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    // Compressing into memory fails only without memory.
    index_body(rows)
        .map_err(|e| SealError::Bucket(words::unavailable(format!("a part's index rows: {e}"))))
}

/// The period's examined objects as a digest lists them: attested ones, and the rest with why.
fn sorted_out(found: Vec<Examined>) -> (Vec<ListedObject>, Vec<UnattestedObject>) {
    let mut objects = Vec::new();
    let mut unattested = Vec::new();
    for found in found {
        match (&found.attestation, found.voided) {
            (Err(reason), _) => unattested.push(found.unattested(reason.clone())),
            (Ok(_), true) => unattested.push(found.unattested(format!(
                "voided: {} says its events were archived anew",
                void_key(&found.key)
            ))),
            (Ok((marker, _)), false) => objects.push(ListedObject {
                key: found.key.clone(),
                version_id: found.version_id.clone(),
                sha256: found.sha256.clone(),
                events: found.events,
                size: found.size,
                marker: marker.clone(),
            }),
        }
    }
    objects.sort_by(|a, b| a.key.cmp(&b.key));
    unattested.sort_by(|a, b| a.key.cmp(&b.key));
    (objects, unattested)
}

impl<B: Bucket, S: DigestSigner> Run<'_, '_, B, S> {
    /// What `period`'s digest lists and the leaves it appends to `edge`, sealed in parts: the
    /// parts there are (the last one's tiles made sure of), then the rest of the place a part at
    /// a time while the budget allows ([`SealError::Deadline`] when it does not).
    pub(super) async fn sealed_in_parts(
        &self,
        period: Period,
        previous: Option<&SealedDigest>,
        recent: &VecDeque<(Period, Digest)>,
        edge: &TreeEdge,
    ) -> Result<(Contents, Appended), SealError> {
        let anchor = previous.map(|p| hex(&p.sha256)).unwrap_or_default();
        let mut parts = self.found_parts(period, &anchor).await?;
        if let Some(last) = parts.last() {
            let before = parts.len().checked_sub(2).map_or(edge, |i| &parts[i].edge);
            let before = before.clone();
            self.log_of_part(period, last, &before).await?;
        }
        let (mut place, voided) = self.place(period, |_| true).await?;
        place.sort_by(|a, b| a.key.cmp(&b.key));
        if let Some(last) = parts.last() {
            let through = last.part.through.as_str();
            place.retain(|entry| entry.key.as_str() > through);
        }
        for keys in place.chunks(PART_OBJECTS) {
            if !self.budget.allows(PART_STEP_TIME, Duration::ZERO) {
                return Err(SealError::Deadline);
            }
            let before = parts.last().map_or(edge, |p| &p.edge).clone();
            let previous = parts.last().map_or(anchor.clone(), |p| hex(&p.sha256));
            let number = u32::try_from(parts.len()).unwrap_or(u32::MAX);
            let found = self.examine_all(keys.to_vec(), period, &voided).await?;
            let (objects, unattested) = sorted_out(found);
            let appended = self.append(&before, &objects).await?;
            let rows = rows_body(&appended.rows)?;
            let part = Part {
                format: PART_FORMAT.to_owned(),
                bucket: self.sealer.bucket_name.to_owned(),
                period_start: period.start,
                period_seconds: period.length.seconds(),
                number,
                previous,
                through: keys.last().map(|e| e.key.clone()).unwrap_or_default(),
                objects,
                unattested,
                leaves: appended.leaves,
                tree_size: appended.edge.size,
                edge: appended
                    .edge
                    .partial_tiles()
                    .iter()
                    .map(|(_, b)| hex(b))
                    .collect(),
                rows_sha256: match rows.is_empty() {
                    true => String::new(),
                    false => hex(&sha256(&rows)),
                },
            };
            let chained = self.write_part(period, part).await?;
            if chained.edge.size != appended.edge.size
                || chained.edge.root() != appended.edge.root()
            {
                return Err(SealError::LogConflict { key: chained.key });
            }
            // After the part, its commit point: the tiles its leaves filled, and its rows.
            self.put_tiles(appended.full).await?;
            self.put_rows(period, &chained, rows).await?;
            parts.push(chained);
        }
        self.built_from_parts(period, &parts, edge, recent).await
    }

    /// The digest's contents and leaves from a period's parts (the tiles they filled written),
    /// on the tree at `edge`.
    async fn built_from_parts(
        &self,
        period: Period,
        parts: &[Chained],
        edge: &TreeEdge,
        recent: &VecDeque<(Period, Digest)>,
    ) -> Result<(Contents, Appended), SealError> {
        let mut contents = Contents {
            objects: Vec::new(),
            unattested: Vec::new(),
            late: self.late_objects(recent).await?,
        };
        let mut appended = Appended {
            edge: parts.last().map_or(edge, |p| &p.edge).clone(),
            ..Appended::default()
        };
        let rows: Vec<Vec<IndexRow>> = futures::stream::iter(parts)
            .map(|chained| self.rows_of_part(period, chained))
            .buffered(HEAD_CONCURRENCY)
            .try_collect()
            .await?;
        for (chained, rows) in parts.iter().zip(rows) {
            contents
                .objects
                .extend(chained.part.objects.iter().cloned());
            contents
                .unattested
                .extend(chained.part.unattested.iter().cloned());
            appended.leaves += chained.part.leaves;
            appended.rows.extend(rows);
        }
        contents.unattested.sort_by(|a, b| a.key.cmp(&b.key));
        Ok((contents, appended))
    }

    /// A part's index rows, from the first of their names whose first version has the part's
    /// SHA-256 of them.
    async fn rows_of_part(
        &self,
        period: Period,
        chained: &Chained,
    ) -> Result<Vec<IndexRow>, SealError> {
        let part = &chained.part;
        if part.rows_sha256.is_empty() {
            return Ok(Vec::new());
        }
        for alternate in 0..=MAX_DIGEST_ALTERNATES {
            let key = rows_key(period, part.number, alternate);
            let Some(stored) = self.original(&key).await? else {
                break;
            };
            if hex(&sha256(&stored.body)) == part.rows_sha256 {
                return rows_of(&stored.body).ok_or(SealError::LogConflict { key });
            }
        }
        Err(SealError::LogTileMissing {
            key: rows_key(period, part.number, 0),
        })
    }

    /// The leaves of `digest` (of `period`) from its parts, with no object read, when its parts
    /// are there and give its objects and its tree.
    pub(super) async fn appended_from_parts(
        &self,
        period: Period,
        digest: &Digest,
    ) -> Result<Option<Appended>, SealError> {
        let anchor = digest
            .previous
            .as_ref()
            .map(|p| p.sha256.clone())
            .unwrap_or_default();
        let parts = self.found_parts(period, &anchor).await?;
        let listed = parts.iter().flat_map(|p| p.part.objects.iter());
        if parts.is_empty() || !listed.eq(digest.objects.iter()) {
            return Ok(None);
        }
        let (_, appended) = self
            .built_from_parts(period, &parts, &TreeEdge::default(), &VecDeque::new())
            .await?;
        Ok(digest
            .tree
            .as_ref()
            .is_some_and(|t| *t == appended.head())
            .then_some(appended))
    }

    /// The chain of `period`'s parts: part 0 naming `anchor`, each next one naming the one
    /// before; at each number, the first name (then alternates) holding a part signed by the key.
    async fn found_parts(&self, period: Period, anchor: &str) -> Result<Vec<Chained>, SealError> {
        let mut names: BTreeMap<u32, Vec<(u32, String)>> = BTreeMap::new();
        for key in self.all_keys(&parts_prefix(period), None).await? {
            if let Some((number, alternate)) = parse_part_key(&key, period) {
                names.entry(number).or_default().push((alternate, key));
            }
        }
        // Every candidate read at once (16 in flight), then checked in order.
        let candidates: Vec<(u32, String)> = names
            .into_iter()
            .flat_map(|(number, mut names)| {
                names.sort();
                names.into_iter().map(move |(_, key)| (number, key))
            })
            .collect();
        let stored: Vec<Option<StoredObject>> = futures::stream::iter(&candidates)
            .map(|(_, key)| self.original(key))
            .buffered(HEAD_CONCURRENCY)
            .try_collect()
            .await?;
        let mut parts: Vec<Chained> = Vec::new();
        let mut previous = anchor.to_owned();
        for ((number, key), object) in candidates.iter().zip(stored) {
            let next = u32::try_from(parts.len()).unwrap_or(u32::MAX);
            if *number < next {
                continue;
            }
            if *number > next {
                break;
            }
            match self.checked_part(key, object, period, &previous).await? {
                Some(part) => {
                    previous = hex(&part.sha256);
                    parts.push(part);
                }
                None => {
                    tracing::warn!(part = %key, "not a sealing part signed by the digest key chaining on the part before: passed over")
                }
            }
        }
        Ok(parts)
    }

    /// The part at `key` (its first version), when the key signed it, and it is of this bucket
    /// and `period`, numbered as its name says, naming `previous`.
    async fn chained_part(
        &self,
        key: &str,
        period: Period,
        previous: &str,
    ) -> Result<Option<Chained>, SealError> {
        let object = self.original(key).await?;
        self.checked_part(key, object, period, previous).await
    }

    /// `object`, read at `key`, as a part of the chain (see [`Self::chained_part`]).
    async fn checked_part(
        &self,
        key: &str,
        object: Option<StoredObject>,
        period: Period,
        previous: &str,
    ) -> Result<Option<Chained>, SealError> {
        let Some(object) = object else {
            return Ok(None);
        };
        let Some(signature) = object.metadata(SIGNATURE_METADATA).and_then(unhex) else {
            return Ok(None);
        };
        let hash = sha256(&object.body);
        let string = part_signing_string(key, &hash);
        let public = self.public_key().await?;
        if public.verify_sig(string.as_bytes(), &signature).is_err() {
            return Ok(None);
        }
        let Ok(part) = serde_json::from_slice::<Part>(&object.body) else {
            return Ok(None);
        };
        let named = parse_part_key(key, period).map(|(number, _)| number);
        if part.format != PART_FORMAT
            || part.bucket != self.sealer.bucket_name
            || part.period_start != period.start
            || part.period_seconds != period.length.seconds()
            || named != Some(part.number)
            || part.previous != previous
        {
            return Ok(None);
        }
        let Some(edge) = edge_of(part.tree_size, &part.edge) else {
            return Ok(None);
        };
        Ok(Some(Chained {
            key: key.to_owned(),
            sha256: hash,
            part,
            edge,
        }))
    }

    /// Signs and creates `part` at its first free name; a part found there that the key signed
    /// and that chains on the same part before (another sealer's) is taken instead.
    async fn write_part(&self, period: Period, part: Part) -> Result<Chained, SealError> {
        let body = serde_json::to_vec(&part)
            .map_err(|e| words::unavailable(format!("a part's JSON: {e}")))?;
        let hash = sha256(&body);
        let body = Bytes::from(body);
        for alternate in 0..=MAX_DIGEST_ALTERNATES {
            let key = part_key(period, part.number, alternate);
            let signature = self
                .sealer
                .signer
                .sign(part_signing_string(&key, &hash).as_bytes())
                .await
                .map_err(SealError::Sign)?;
            let object = NewObject {
                key: key.clone(),
                body: body.clone(),
                content_type: "application/json",
                sha256: hash,
                metadata: vec![
                    (SIGNATURE_METADATA, hex(&signature)),
                    (SIGNATURE_ALGORITHM_METADATA, SIGNING_ALGORITHM.to_owned()),
                ],
            };
            match self.request(self.bucket().put_if_absent(object)).await? {
                Created::New { .. } => {
                    let edge = edge_of(part.tree_size, &part.edge).unwrap_or_default();
                    return Ok(Chained {
                        key,
                        sha256: hash,
                        part,
                        edge,
                    });
                }
                Created::AlreadyExists => {
                    if let Some(found) = self.chained_part(&key, period, &part.previous).await? {
                        return Ok(found);
                    }
                    tracing::warn!(part = %key, "a part's name is taken by something that is not this part: the next alternate name is used");
                }
            }
        }
        Err(SealError::NamesTaken {
            key: part_key(period, part.number, 0),
        })
    }

    /// The tiles `last` filled and its rows, made sure of (its objects read again, on the tree
    /// at `before`): the run that wrote it may have stopped before them.
    async fn log_of_part(
        &self,
        period: Period,
        last: &Chained,
        before: &TreeEdge,
    ) -> Result<(), SealError> {
        let appended = self.append(before, &last.part.objects).await?;
        if appended.edge.size != last.edge.size || appended.edge.root() != last.edge.root() {
            tracing::error!(part = %last.key, "a part's objects do not give its tree");
            return Err(SealError::LogConflict {
                key: last.key.clone(),
            });
        }
        self.put_tiles(appended.full).await?;
        self.put_rows(period, last, rows_body(&appended.rows)?)
            .await
    }

    /// Creates `chained`'s rows (`rows`, their gzip) at the first of their names free or holding
    /// the same bytes; nothing when it has none.
    async fn put_rows(
        &self,
        period: Period,
        chained: &Chained,
        rows: Vec<u8>,
    ) -> Result<(), SealError> {
        if rows.is_empty() {
            return Ok(());
        }
        let hash = sha256(&rows);
        if hex(&hash) != chained.part.rows_sha256 {
            return Err(SealError::LogConflict {
                key: chained.key.clone(),
            });
        }
        let body = Bytes::from(rows);
        for alternate in 0..=MAX_DIGEST_ALTERNATES {
            let key = rows_key(period, chained.part.number, alternate);
            let object = NewObject {
                key: key.clone(),
                body: body.clone(),
                content_type: CONTENT_TYPE,
                sha256: hash,
                metadata: Vec::new(),
            };
            match self.request(self.bucket().put_if_absent(object)).await? {
                Created::New { .. } => return Ok(()),
                Created::AlreadyExists => {
                    let same = self
                        .original(&key)
                        .await?
                        .is_some_and(|stored| sha256(&stored.body) == hash);
                    if same {
                        return Ok(());
                    }
                    tracing::warn!(rows = %key, "a part's rows' name holds other bytes: the next alternate name is used");
                }
            }
        }
        Err(SealError::NamesTaken {
            key: rows_key(period, chained.part.number, 0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_parse_back_and_nothing_else_does() {
        let period = Period {
            start: 1_795_341_600,
            length: PeriodLength::new(3600).unwrap(),
        };
        assert_eq!(part_key(period, 7, 0), "state/seal/p1795341600/000007.json");
        assert_eq!(
            parse_part_key(&part_key(period, 7, 0), period),
            Some((7, 0))
        );
        assert_eq!(
            parse_part_key(&part_key(period, 7, 3), period),
            Some((7, 3))
        );
        for other in [
            "state/seal/p1795341600/7.json",
            "state/seal/p1795341600/000007.a0.json",
            "state/seal/p1795341600/000007.json.x",
            "state/seal/p1795338000/000007.json",
        ] {
            assert_eq!(parse_part_key(other, period), None, "{other}");
        }
    }
}
