//! Owns the transparency log's Merkle tree: RFC 9162 section 2.1 hashing, inclusion and
//! consistency proofs (made from complete subtrees' hashes, checked from a path alone), and the
//! C2SP tlog-tiles layout the sealer stores the tree in. Shared by the archiver (which appends each
//! period's leaves and writes tiles) and `auditctl` (`prove`, `check-proof`, `consistency`,
//! `witness`, `verify`). Pure: no S3, no async, no crypto beyond SHA-256.
//!
//! Leaves are every archived event's line (the exact bytes of one line of an archive object, its
//! newline not included), in archive order: period by period, the objects in their digest's
//! order, the lines in object order (docs/archive.md "The transparency log").
//!
//! Tiles (c2sp.org/tlog-tiles) live under [`LOG_PREFIX`]: `log/tile/<L>/<N>[.p/<W>]`. A tile at
//! level L holds up to 256 hashes of complete subtrees of 256^L leaves; a full tile is 8,192
//! bytes, a partial one (the tree's right edge at some checkpoint's size) `W` hashes.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use sha2::{Digest as _, Sha256};

/// A SHA-256 hash of the tree.
pub type Hash = [u8; 32];

/// Where the log lives in the archive bucket.
pub const LOG_PREFIX: &str = "log/";
/// Where the log's tiles live: `log/tile/<L>/<N>[.p/<W>]`.
pub const TILE_PREFIX: &str = "log/tile/";
/// Hashes in a full tile.
pub const TILE_WIDTH: u64 = 256;
/// Levels of the tree one tile spans.
pub const TILE_HEIGHT: u32 = 8;
/// The root of the empty tree: SHA-256 of nothing.
pub const EMPTY_ROOT: Hash = [
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
];

/// The lines of a gunzipped archive object, as leaves are made of them: the bytes between
/// newlines, the newline excluded; the empty piece after a final newline (or of an empty object)
/// is not a line, an empty line inside is.
pub fn object_lines(text: &[u8]) -> Vec<&[u8]> {
    if text.is_empty() {
        return Vec::new();
    }
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    text.split(|b| *b == b'\n').collect()
}

/// The leaf hash of one line: SHA-256(0x00 || line).
pub fn leaf_hash(line: &[u8]) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([0u8]);
    hasher.update(line);
    hasher.finalize().into()
}

/// An inner node's hash: SHA-256(0x01 || left || right).
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([1u8]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
}

/// Why a proof could not be made or does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlogError {
    #[error("leaf index {index} is not in a tree of size {size}")]
    IndexOutOfRange { index: u64, size: u64 },
    #[error("a tree of size {old} cannot be proven against one of size {new}")]
    SizesOutOfOrder { old: u64, new: u64 },
    #[error("the proof has {got} hashes where a tree of this size needs {want}")]
    WrongLength { got: usize, want: usize },
    #[error("the path does not lead to the root")]
    RootMismatch,
    #[error("the proof does not lead to the old tree's root")]
    OldRootMismatch,
    #[error("tile {path} is missing or too short")]
    TileMissing { path: String },
}

/// A complete subtree: the leaves `[index·2^height, (index+1)·2^height)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Subtree {
    pub height: u32,
    pub index: u64,
}

/// Where the hashes of complete subtrees come from (tiles, or the leaves themselves).
pub trait SubtreeHashes {
    fn subtree(&mut self, subtree: Subtree) -> Result<Hash, TlogError>;
}

/// MTH(D[lo:hi]) for a range a proof uses (lo aligned to a power of two at least `hi - lo`):
/// its complete subtrees left to right, folded from the right.
pub(crate) fn range_hash(
    lo: u64,
    hi: u64,
    source: &mut impl SubtreeHashes,
) -> Result<Hash, TlogError> {
    let mut parts = Vec::new();
    let mut at = lo;
    while at < hi {
        let mut height = 0u32;
        while height < 63 {
            let size = 1u64 << (height + 1);
            if !at.is_multiple_of(size) || at + size > hi {
                break;
            }
            height += 1;
        }
        parts.push(source.subtree(Subtree {
            height,
            index: at >> height,
        })?);
        at += 1u64 << height;
    }
    let mut hash = parts.pop().unwrap_or(EMPTY_ROOT);
    while let Some(left) = parts.pop() {
        hash = node_hash(&left, &hash);
    }
    Ok(hash)
}

/// The largest power of two smaller than `n` (n ≥ 2).
pub(crate) fn split(n: u64) -> u64 {
    1u64 << (63 - (n - 1).leading_zeros())
}

/// The root of the tree of `size` leaves.
pub fn tree_root(size: u64, source: &mut impl SubtreeHashes) -> Result<Hash, TlogError> {
    if size == 0 {
        return Ok(EMPTY_ROOT);
    }
    range_hash(0, size, source)
}

/// RFC 9162 PATH(index, D[size]): the inclusion path, from the leaf's sibling up.
pub fn inclusion_proof(
    index: u64,
    size: u64,
    source: &mut impl SubtreeHashes,
) -> Result<Vec<Hash>, TlogError> {
    if index >= size {
        return Err(TlogError::IndexOutOfRange { index, size });
    }
    let mut path = Vec::new();
    inclusion(index, 0, size, source, &mut path)?;
    Ok(path)
}

fn inclusion(
    m: u64,
    lo: u64,
    hi: u64,
    source: &mut impl SubtreeHashes,
    path: &mut Vec<Hash>,
) -> Result<(), TlogError> {
    if hi - lo <= 1 {
        return Ok(());
    }
    let k = split(hi - lo);
    if m < lo + k {
        inclusion(m, lo, lo + k, source, path)?;
        path.push(range_hash(lo + k, hi, source)?);
    } else {
        inclusion(m, lo + k, hi, source, path)?;
        path.push(range_hash(lo, lo + k, source)?);
    }
    Ok(())
}

/// RFC 9162 PROOF(old, D[new]): the consistency proof of the tree of `old` leaves with that of
/// `new` (empty when they are the same size or `old` is 0).
pub fn consistency_proof(
    old: u64,
    new: u64,
    source: &mut impl SubtreeHashes,
) -> Result<Vec<Hash>, TlogError> {
    if old > new {
        return Err(TlogError::SizesOutOfOrder { old, new });
    }
    let mut proof = Vec::new();
    if old == 0 || old == new {
        return Ok(proof);
    }
    subproof(old, 0, new, true, source, &mut proof)?;
    Ok(proof)
}

fn subproof(
    m: u64,
    lo: u64,
    hi: u64,
    whole: bool,
    source: &mut impl SubtreeHashes,
    proof: &mut Vec<Hash>,
) -> Result<(), TlogError> {
    let n = hi - lo;
    if m == n {
        if !whole {
            proof.push(range_hash(lo, hi, source)?);
        }
        return Ok(());
    }
    let k = split(n);
    if m <= k {
        subproof(m, lo, lo + k, whole, source, proof)?;
        proof.push(range_hash(lo + k, hi, source)?);
    } else {
        subproof(m - k, lo + k, hi, false, source, proof)?;
        proof.push(range_hash(lo, lo + k, source)?);
    }
    Ok(())
}

/// RFC 9162 section 2.1.3.2: whether `path` proves the leaf `leaf` at `index` in the tree of
/// `size` leaves whose root is `root`.
pub fn verify_inclusion(
    index: u64,
    size: u64,
    leaf: &Hash,
    path: &[Hash],
    root: &Hash,
) -> Result<(), TlogError> {
    if root_of_inclusion(index, size, leaf, path)? != *root {
        return Err(TlogError::RootMismatch);
    }
    Ok(())
}

/// The root that `path` leads to from the leaf `leaf` at `index` in a tree of `size` leaves
/// (RFC 9162 section 2.1.3.2, the hash it compares): an error when the path cannot be one.
pub fn root_of_inclusion(
    index: u64,
    size: u64,
    leaf: &Hash,
    path: &[Hash],
) -> Result<Hash, TlogError> {
    if index >= size {
        return Err(TlogError::IndexOutOfRange { index, size });
    }
    let want = inclusion_length(index, size);
    if path.len() != want {
        return Err(TlogError::WrongLength {
            got: path.len(),
            want,
        });
    }
    let (mut fnode, mut snode) = (index, size - 1);
    let mut hash = *leaf;
    for sibling in path {
        if snode == 0 {
            return Err(TlogError::RootMismatch);
        }
        if fnode & 1 == 1 || fnode == snode {
            hash = node_hash(sibling, &hash);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            hash = node_hash(&hash, sibling);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    if snode != 0 {
        return Err(TlogError::RootMismatch);
    }
    Ok(hash)
}

/// The number of hashes in the inclusion path of `index` in a tree of `size`.
fn inclusion_length(index: u64, size: u64) -> usize {
    let (mut lo, mut hi, mut length) = (0u64, size, 0usize);
    while hi - lo > 1 {
        let k = split(hi - lo);
        if index < lo + k {
            hi = lo + k;
        } else {
            lo += k;
        }
        length += 1;
    }
    length
}

/// RFC 9162 section 2.1.4.2: whether `proof` shows that the tree of `old` leaves (root
/// `old_root`) is a prefix of the tree of `new` leaves (root `new_root`).
pub fn verify_consistency(
    old: u64,
    new: u64,
    old_root: &Hash,
    new_root: &Hash,
    proof: &[Hash],
) -> Result<(), TlogError> {
    if old > new {
        return Err(TlogError::SizesOutOfOrder { old, new });
    }
    if old == new {
        if !proof.is_empty() {
            return Err(TlogError::WrongLength {
                got: proof.len(),
                want: 0,
            });
        }
        return if old_root == new_root {
            Ok(())
        } else {
            Err(TlogError::RootMismatch)
        };
    }
    if old == 0 {
        if !proof.is_empty() {
            return Err(TlogError::WrongLength {
                got: proof.len(),
                want: 0,
            });
        }
        return if *old_root == EMPTY_ROOT {
            Ok(())
        } else {
            Err(TlogError::OldRootMismatch)
        };
    }
    let mut path: Vec<Hash> = Vec::with_capacity(proof.len() + 1);
    if old.is_power_of_two() {
        path.push(*old_root);
    }
    path.extend_from_slice(proof);
    let Some((first, rest)) = path.split_first() else {
        return Err(TlogError::WrongLength { got: 0, want: 1 });
    };
    let (mut fnode, mut snode) = (old - 1, new - 1);
    while fnode & 1 == 1 {
        fnode >>= 1;
        snode >>= 1;
    }
    let (mut fr, mut sr) = (*first, *first);
    for c in rest {
        if snode == 0 {
            return Err(TlogError::RootMismatch);
        }
        if fnode & 1 == 1 || fnode == snode {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    if snode != 0 {
        return Err(TlogError::RootMismatch);
    }
    if fr != *old_root {
        return Err(TlogError::OldRootMismatch);
    }
    if sr != *new_root {
        return Err(TlogError::RootMismatch);
    }
    Ok(())
}

/// Alternate names a log object (tile, index, checkpoint) may be written under after its own,
/// when someone planted another object at its name first (docs/archive.md "Planted log
/// objects"): `<name>.1` … `<name>.3`.
pub const LOG_ALTERNATES: usize = 3;
/// Choices of tiles among their alternates tried, at most, before a reader gives up.
pub const MAX_TILE_CHOICES: usize = 64;

/// The names a log object of `name` may be stored under, in the order the sealer tries them and
/// readers read them: `name`, then `name.1` … `name.3`. A reader stops at the first name that is
/// not there (the sealer fills them in order).
pub fn log_names(name: &str) -> Vec<String> {
    std::iter::once(name.to_owned())
        .chain((1..=LOG_ALTERNATES).map(|n| format!("{name}.{n}")))
        .collect()
}

/// Every choice of one of `counts[i]` candidates for each `i`, the first candidates first, at
/// most `limit` of them.
pub fn choices(counts: &[usize], limit: usize) -> Vec<Vec<usize>> {
    let mut all = vec![Vec::new()];
    for &count in counts {
        all = all
            .into_iter()
            .flat_map(|choice: Vec<usize>| {
                (0..count.max(1)).map(move |n| {
                    let mut next = choice.clone();
                    next.push(n);
                    next
                })
            })
            .take(limit)
            .collect();
    }
    all
}

/// One tile: its level, its index in the level, and its width (256 when full).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TileRef {
    pub level: u32,
    pub index: u64,
    pub width: u64,
}

impl TileRef {
    /// Its key in the bucket: `log/tile/<L>/<N>[.p/<W>]`, N in 3-digit path elements, all but the
    /// last prefixed `x` (c2sp.org/tlog-tiles).
    pub fn key(&self) -> String {
        let mut digits = Vec::new();
        let mut n = self.index;
        loop {
            digits.push(n % 1000);
            n /= 1000;
            if n == 0 {
                break;
            }
        }
        let parts: Vec<String> = digits
            .iter()
            .rev()
            .enumerate()
            .map(|(i, d)| {
                if i + 1 < digits.len() {
                    format!("x{d:03}")
                } else {
                    format!("{d:03}")
                }
            })
            .collect();
        let mut key = format!("{TILE_PREFIX}{}/{}", self.level, parts.join("/"));
        if self.width < TILE_WIDTH {
            key.push_str(&format!(".p/{}", self.width));
        }
        key
    }

    /// The tile `key` names, when it is exactly a tile key.
    pub fn parse_key(key: &str) -> Option<Self> {
        let rest = key.strip_prefix(TILE_PREFIX)?;
        let (level, rest) = rest.split_once('/')?;
        let level: u32 = level.parse().ok()?;
        let (index_part, width) = match rest.split_once(".p/") {
            Some((index, width)) => (index, width.parse::<u64>().ok()?),
            None => (rest, TILE_WIDTH),
        };
        let mut index = 0u64;
        for part in index_part.split('/') {
            let digits = part.strip_prefix('x').unwrap_or(part);
            index = index.checked_mul(1000)?.checked_add(digits.parse().ok()?)?;
        }
        let tile = Self {
            level,
            index,
            width,
        };
        ((1..=TILE_WIDTH).contains(&width) && tile.key() == key).then_some(tile)
    }

    /// Its bytes' expected length.
    pub fn bytes(&self) -> usize {
        usize::try_from(self.width).unwrap_or(0) * 32
    }
}

/// The tile, as the tree of `size` leaves has it, that holds the hashes under `subtree`, and
/// where in it they are (first entry, entries).
pub fn tile_of(subtree: Subtree, size: u64) -> (TileRef, u64, u64) {
    let level = subtree.height / TILE_HEIGHT;
    let per = 1u64 << (subtree.height - level * TILE_HEIGHT);
    let first = subtree.index * per;
    let index = first / TILE_WIDTH;
    let at_level = size >> (level * TILE_HEIGHT);
    let width = (at_level - index * TILE_WIDTH).min(TILE_WIDTH);
    (
        TileRef {
            level,
            index,
            width,
        },
        first % TILE_WIDTH,
        per,
    )
}

/// The hash of `count` (a power of two) consecutive hashes of a tile's bytes from `first`.
fn hash_entries(data: &[u8], first: u64, count: u64) -> Option<Hash> {
    let mut level: Vec<Hash> = (first..first + count)
        .map(|i| {
            let at = usize::try_from(i).ok()? * 32;
            data.get(at..at + 32)?.try_into().ok()
        })
        .collect::<Option<_>>()?;
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|pair| node_hash(&pair[0], &pair[1]))
            .collect();
    }
    level.pop()
}

/// Records which subtrees a proof needs (answering zeros), so that their tiles can be fetched
/// before the proof is made from them.
#[derive(Debug, Default)]
pub struct Needs(pub BTreeSet<Subtree>);

impl SubtreeHashes for Needs {
    fn subtree(&mut self, subtree: Subtree) -> Result<Hash, TlogError> {
        self.0.insert(subtree);
        Ok([0; 32])
    }
}

impl Needs {
    /// The tiles of the tree of `size` leaves that hold what was recorded.
    pub fn tiles(&self, size: u64) -> BTreeSet<TileRef> {
        self.0.iter().map(|s| tile_of(*s, size).0).collect()
    }
}

/// The tiles of the tree of `size` that an inclusion proof of `index` reads.
pub fn inclusion_tiles(index: u64, size: u64) -> Result<BTreeSet<TileRef>, TlogError> {
    let mut needs = Needs::default();
    inclusion_proof(index, size, &mut needs)?;
    Ok(needs.tiles(size))
}

/// The tiles of the tree of `new` leaves that a consistency proof from `old` (and both roots)
/// reads.
pub fn consistency_tiles(old: u64, new: u64) -> Result<BTreeSet<TileRef>, TlogError> {
    let mut needs = Needs::default();
    consistency_proof(old, new, &mut needs)?;
    tree_root(old, &mut needs)?;
    tree_root(new, &mut needs)?;
    Ok(needs.tiles(new))
}

/// Tiles read from the bucket, for the tree of `size` leaves.
#[derive(Debug, Clone, Default)]
pub struct Tiles {
    pub size: u64,
    pub tiles: HashMap<TileRef, Vec<u8>>,
}

impl SubtreeHashes for Tiles {
    fn subtree(&mut self, subtree: Subtree) -> Result<Hash, TlogError> {
        let (tile, first, count) = tile_of(subtree, self.size);
        self.tiles
            .get(&tile)
            .and_then(|data| hash_entries(data, first, count))
            .ok_or_else(|| TlogError::TileMissing { path: tile.key() })
    }
}

/// Complete subtrees' hashes remembered across proofs in one tree: a subtree inside a tile (its
/// height not a multiple of [`TILE_HEIGHT`]) is the node hash of its two halves, each computed
/// once; one at a tile entry is the source's. Proofs of neighbouring leaves (an evidence bundle's,
/// one per event) then share their hashing, where each alone rehashes up to a tile's 256 entries
/// at every tile level.
pub struct Remembered<'a, S> {
    source: &'a mut S,
    known: HashMap<Subtree, Hash>,
}

impl<'a, S: SubtreeHashes> Remembered<'a, S> {
    pub fn new(source: &'a mut S) -> Self {
        Self {
            source,
            known: HashMap::new(),
        }
    }
}

impl<S: SubtreeHashes> SubtreeHashes for Remembered<'_, S> {
    fn subtree(&mut self, subtree: Subtree) -> Result<Hash, TlogError> {
        if let Some(hash) = self.known.get(&subtree) {
            return Ok(*hash);
        }
        let hash = if subtree.height.is_multiple_of(TILE_HEIGHT) {
            self.source.subtree(subtree)?
        } else {
            let half = |index| Subtree {
                height: subtree.height - 1,
                index,
            };
            let left = self.subtree(half(2 * subtree.index))?;
            let right = self.subtree(half(2 * subtree.index + 1))?;
            node_hash(&left, &right)
        };
        self.known.insert(subtree, hash);
        Ok(hash)
    }
}

/// The tree's right edge: at each level, the hashes of the tile that is not full yet. What the
/// sealer keeps to append leaves, write tiles and compute the root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeEdge {
    pub size: u64,
    /// `levels[L]`: the entries of the level-L tile after the last full one.
    levels: Vec<Vec<Hash>>,
}

impl TreeEdge {
    /// The partial tiles a tree of `size` leaves ends in (what [`TreeEdge::from_tiles`] reads).
    pub fn edge_tiles(size: u64) -> Vec<TileRef> {
        let mut tiles = Vec::new();
        let mut level = 0u32;
        while level * TILE_HEIGHT < 64 && size >> (level * TILE_HEIGHT) > 0 {
            let at_level = size >> (level * TILE_HEIGHT);
            let width = at_level % TILE_WIDTH;
            if width > 0 {
                tiles.push(TileRef {
                    level,
                    index: at_level / TILE_WIDTH,
                    width,
                });
            }
            level += 1;
        }
        tiles
    }

    /// The edge of the tree of `size` from its partial tiles' bytes (as [`TreeEdge::edge_tiles`]
    /// names them).
    pub fn from_tiles(size: u64, tiles: &HashMap<TileRef, Vec<u8>>) -> Result<Self, TlogError> {
        let mut edge = Self {
            size,
            levels: Vec::new(),
        };
        for tile in Self::edge_tiles(size) {
            let data = tiles
                .get(&tile)
                .filter(|d| d.len() == tile.bytes())
                .ok_or_else(|| TlogError::TileMissing { path: tile.key() })?;
            let level = usize::try_from(tile.level).unwrap_or(0);
            if edge.levels.len() <= level {
                edge.levels.resize(level + 1, Vec::new());
            }
            edge.levels[level] = data
                .chunks(32)
                .map(|c| c.try_into().unwrap_or([0; 32]))
                .collect();
        }
        Ok(edge)
    }

    /// Appends one leaf hash; each tile it fills is pushed to `full` (its ref and bytes).
    pub fn push(&mut self, leaf: Hash, full: &mut Vec<(TileRef, Vec<u8>)>) {
        self.size += 1;
        let mut hash = leaf;
        let mut level = 0usize;
        loop {
            if self.levels.len() <= level {
                self.levels.resize(level + 1, Vec::new());
            }
            self.levels[level].push(hash);
            if self.levels[level].len() < TILE_WIDTH as usize {
                return;
            }
            let entries = std::mem::take(&mut self.levels[level]);
            let bytes: Vec<u8> = entries.iter().flatten().copied().collect();
            let shift = (level as u32 + 1) * TILE_HEIGHT;
            let tile = TileRef {
                level: level as u32,
                index: (self.size >> shift) - 1,
                width: TILE_WIDTH,
            };
            hash = hash_entries(&bytes, 0, TILE_WIDTH).unwrap_or([0; 32]);
            full.push((tile, bytes));
            level += 1;
        }
    }

    /// The partial tiles of the tree as it is (what a checkpoint of this size needs stored).
    pub fn partial_tiles(&self) -> Vec<(TileRef, Vec<u8>)> {
        Self::edge_tiles(self.size)
            .into_iter()
            .map(|tile| {
                let level = usize::try_from(tile.level).unwrap_or(0);
                let bytes = self.levels[level].iter().flatten().copied().collect();
                (tile, bytes)
            })
            .collect()
    }

    /// The tree's root hash.
    pub fn root(&self) -> Hash {
        let mut parts: Vec<Hash> = Vec::new();
        for level in (0..self.levels.len()).rev() {
            let entries = &self.levels[level];
            let mut at = 0usize;
            let mut width = entries.len();
            while width > 0 {
                let chunk = 1usize << (usize::BITS - 1 - width.leading_zeros());
                let bytes: Vec<u8> = entries[at..at + chunk].iter().flatten().copied().collect();
                parts.push(hash_entries(&bytes, 0, chunk as u64).unwrap_or([0; 32]));
                at += chunk;
                width -= chunk;
            }
        }
        let Some(mut hash) = parts.pop() else {
            return EMPTY_ROOT;
        };
        while let Some(left) = parts.pop() {
            hash = node_hash(&left, &hash);
        }
        hash
    }
}

/// A hash as lower-case hex.
pub struct HexHash<'a>(pub &'a Hash);

impl fmt::Display for HexHash<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// A hash from 64 hex digits.
pub fn parse_hex_hash(text: &str) -> Option<Hash> {
    crate::digest::unhex(text)?.try_into().ok()
}

pub mod range;

#[cfg(test)]
mod tests;
