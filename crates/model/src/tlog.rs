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
fn range_hash(lo: u64, hi: u64, source: &mut impl SubtreeHashes) -> Result<Hash, TlogError> {
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
fn split(n: u64) -> u64 {
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
    if snode != 0 || hash != *root {
        return Err(TlogError::RootMismatch);
    }
    Ok(())
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
        let mut key = format!("{LOG_PREFIX}tile/{}/{}", self.level, parts.join("/"));
        if self.width < TILE_WIDTH {
            key.push_str(&format!(".p/{}", self.width));
        }
        key
    }

    /// The tile `key` names, when it is exactly a tile key.
    pub fn parse_key(key: &str) -> Option<Self> {
        let rest = key.strip_prefix(LOG_PREFIX)?.strip_prefix("tile/")?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every leaf's hash: the subtree oracle of a tree held whole in memory.
    struct Leaves(Vec<Hash>);

    impl SubtreeHashes for Leaves {
        fn subtree(&mut self, s: Subtree) -> Result<Hash, TlogError> {
            let lo = usize::try_from(s.index << s.height).unwrap();
            let hi = lo + (1usize << s.height);
            Ok(mth(&self.0[lo..hi]))
        }
    }

    /// The same, remembering what it hashed (the big trees' tests ask for many large subtrees).
    #[derive(Default)]
    struct Memo(HashMap<Subtree, Hash>, Vec<Hash>);

    impl SubtreeHashes for Memo {
        fn subtree(&mut self, s: Subtree) -> Result<Hash, TlogError> {
            if let Some(hash) = self.0.get(&s) {
                return Ok(*hash);
            }
            let hash = if s.height == 0 {
                self.1[usize::try_from(s.index).unwrap()]
            } else {
                let left = self.subtree(Subtree {
                    height: s.height - 1,
                    index: 2 * s.index,
                })?;
                let right = self.subtree(Subtree {
                    height: s.height - 1,
                    index: 2 * s.index + 1,
                })?;
                node_hash(&left, &right)
            };
            self.0.insert(s, hash);
            Ok(hash)
        }
    }

    /// RFC 9162 MTH, written as the RFC defines it.
    fn mth(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => EMPTY_ROOT,
            1 => leaves[0],
            n => {
                let k = split(n as u64) as usize;
                node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
            }
        }
    }

    fn hexes(hashes: &[Hash]) -> Vec<String> {
        hashes.iter().map(|h| HexHash(h).to_string()).collect()
    }

    /// The leaves of the RFC 6962 reference vectors (certificate-transparency's merkle tests).
    fn reference_leaves() -> Vec<Hash> {
        [
            "",
            "00",
            "10",
            "2021",
            "3031",
            "40414243",
            "5051525354555657",
            "606162636465666768696a6b6c6d6e6f",
        ]
        .iter()
        .map(|h| leaf_hash(&crate::digest::unhex(h).unwrap()))
        .collect()
    }

    #[test]
    fn roots_are_the_reference_vectors() {
        let roots = [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
            "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
            "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
            "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
            "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
        ];
        let leaves = reference_leaves();
        for (n, want) in roots.iter().enumerate() {
            let size = n as u64 + 1;
            let mut source = Leaves(leaves.clone());
            assert_eq!(
                HexHash(&tree_root(size, &mut source).unwrap()).to_string(),
                *want
            );
            let mut edge = TreeEdge::default();
            for leaf in &leaves[..=n] {
                edge.push(*leaf, &mut Vec::new());
            }
            assert_eq!(
                HexHash(&edge.root()).to_string(),
                *want,
                "edge root of {size}"
            );
        }
        assert_eq!(TreeEdge::default().root(), EMPTY_ROOT);
        assert_eq!(
            HexHash(&EMPTY_ROOT).to_string(),
            crate::digest::hex(&crate::digest::sha256(b""))
        );
    }

    #[test]
    fn inclusion_paths_are_the_reference_vectors() {
        let leaves = reference_leaves();
        let cases: [(u64, u64, &[&str]); 5] = [
            (0, 1, &[]),
            (
                0,
                8,
                &[
                    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
                ],
            ),
            (
                5,
                8,
                &[
                    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                    "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                ],
            ),
            (
                2,
                3,
                &["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
            ),
            (
                1,
                5,
                &[
                    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                ],
            ),
        ];
        for (index, size, want) in cases {
            let path = inclusion_proof(index, size, &mut Leaves(leaves.clone())).unwrap();
            assert_eq!(hexes(&path), want, "path of {index} in {size}");
        }
    }

    #[test]
    fn consistency_proofs_are_the_reference_vectors() {
        let leaves = reference_leaves();
        let cases: [(u64, u64, &[&str]); 4] = [
            (1, 1, &[]),
            (
                1,
                8,
                &[
                    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
                ],
            ),
            (
                6,
                8,
                &[
                    "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                    "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                ],
            ),
            (
                2,
                5,
                &[
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                ],
            ),
        ];
        for (old, new, want) in cases {
            let proof = consistency_proof(old, new, &mut Leaves(leaves.clone())).unwrap();
            assert_eq!(hexes(&proof), want, "proof of {old} in {new}");
        }
    }

    fn leaves(n: u64) -> Vec<Hash> {
        (0..n)
            .map(|i| leaf_hash(format!("line {i}").as_bytes()))
            .collect()
    }

    #[test]
    fn every_inclusion_proof_of_trees_up_to_70_leaves_holds_and_no_other_does() {
        let all = leaves(70);
        for size in 1..=70u64 {
            let root = mth(&all[..size as usize]);
            for index in 0..size {
                let path = inclusion_proof(index, size, &mut Leaves(all.clone())).unwrap();
                let leaf = all[index as usize];
                verify_inclusion(index, size, &leaf, &path, &root).unwrap();
                assert!(
                    verify_inclusion(index, size, &all[(index as usize + 1) % 70], &path, &root)
                        .is_err()
                );
                if size > 1 {
                    assert!(
                        verify_inclusion((index + 1) % size, size, &leaf, &path, &root).is_err()
                    );
                    let mut bad = path.clone();
                    bad[0][0] ^= 1;
                    assert!(verify_inclusion(index, size, &leaf, &bad, &root).is_err());
                    assert!(verify_inclusion(index, size, &leaf, &path[1..], &root).is_err());
                }
            }
            assert!(inclusion_proof(size, size, &mut Leaves(all.clone())).is_err());
        }
    }

    #[test]
    fn every_consistency_proof_of_trees_up_to_70_leaves_holds_and_no_other_does() {
        let all = leaves(71);
        for new in 1..=70u64 {
            let new_root = mth(&all[..new as usize]);
            for old in 0..=new {
                let old_root = mth(&all[..old as usize]);
                let proof = consistency_proof(old, new, &mut Leaves(all.clone())).unwrap();
                verify_consistency(old, new, &old_root, &new_root, &proof).unwrap();
                let other = mth(&all[1..old.max(1) as usize + 1]);
                if old > 0 {
                    assert!(verify_consistency(old, new, &other, &new_root, &proof).is_err());
                }
                if !proof.is_empty() {
                    let mut bad = proof.clone();
                    bad[proof.len() - 1][0] ^= 1;
                    assert!(verify_consistency(old, new, &old_root, &new_root, &bad).is_err());
                }
            }
        }
    }

    #[test]
    fn proofs_made_from_tiles_are_those_made_from_the_leaves() {
        // Across the 256 boundary and a level-1 tile: 1 to 66,000 leaves at chosen sizes.
        let all = leaves(66_000);
        let mut memo = Memo(HashMap::new(), all.clone());
        let mut edge = TreeEdge::default();
        let mut stored: HashMap<TileRef, Vec<u8>> = HashMap::new();
        let sizes = [
            1u64, 2, 255, 256, 257, 511, 512, 700, 65_535, 65_536, 65_537, 66_000,
        ];
        let mut written = 0u64;
        for size in sizes {
            let mut full = Vec::new();
            for leaf in &all[written as usize..size as usize] {
                edge.push(*leaf, &mut full);
            }
            written = size;
            stored.extend(full);
            stored.extend(edge.partial_tiles());
            assert_eq!(
                edge.root(),
                tree_root(size, &mut memo).unwrap(),
                "root at {size}"
            );
            let mut tiles = Tiles {
                size,
                tiles: stored.clone(),
            };
            assert_eq!(tree_root(size, &mut tiles).unwrap(), edge.root());
            for index in [0, size / 3, size / 2, size - 1] {
                let needed = inclusion_tiles(index, size).unwrap();
                let mut only = Tiles {
                    size,
                    tiles: needed.iter().map(|t| (*t, stored[t].clone())).collect(),
                };
                assert!(needed.len() <= 2 * (1 + (64 - size.leading_zeros() as usize) / 8));
                let path = inclusion_proof(index, size, &mut only).unwrap();
                assert_eq!(path, inclusion_proof(index, size, &mut memo).unwrap());
            }
            for old in [1u64, 255, 256, 257, 65_536] {
                if old > size {
                    continue;
                }
                let needed = consistency_tiles(old, size).unwrap();
                let mut only = Tiles {
                    size,
                    tiles: needed.iter().map(|t| (*t, stored[t].clone())).collect(),
                };
                let proof = consistency_proof(old, size, &mut only).unwrap();
                assert_eq!(proof, consistency_proof(old, size, &mut memo).unwrap());
            }
            let resumed = TreeEdge::from_tiles(size, &stored).unwrap();
            assert_eq!(resumed, edge, "the edge read back from tiles at {size}");
        }
    }

    #[test]
    fn tile_keys_follow_the_c2sp_layout() {
        let key = |level, index, width| {
            TileRef {
                level,
                index,
                width,
            }
            .key()
        };
        assert_eq!(key(0, 0, 256), "log/tile/0/000");
        assert_eq!(key(0, 1_234_067, 256), "log/tile/0/x001/x234/067");
        assert_eq!(key(1, 5, 17), "log/tile/1/005.p/17");
        assert_eq!(key(2, 1000, 1), "log/tile/2/x001/000.p/1");
        for (level, index, width) in [(0, 0, 256), (0, 1_234_067, 256), (1, 5, 17), (2, 1000, 1)] {
            let tile = TileRef {
                level,
                index,
                width,
            };
            assert_eq!(TileRef::parse_key(&tile.key()), Some(tile));
        }
        for bad in [
            "log/tile/0/0",
            "log/tile/0/x000/001",
            "log/tile/0/000.p/0",
            "log/tile/0/000.p/256",
            "tile/0/000",
        ] {
            assert_eq!(TileRef::parse_key(bad), None, "{bad}");
        }
        // c2sp.org/tlog-tiles' example: a tree of 70,000 ends in a level-0 tile of 112, a level-1
        // tile of 17 and a level-2 tile of 1; one of 256 in a level-1 tile of 1.
        let widths = |size| {
            TreeEdge::edge_tiles(size)
                .iter()
                .map(|t| (t.level, t.index, t.width))
                .collect::<Vec<_>>()
        };
        assert_eq!(widths(70_000), vec![(0, 273, 112), (1, 1, 17), (2, 0, 1)]);
        assert_eq!(widths(256), vec![(1, 0, 1)]);
        assert_eq!(widths(0), vec![]);
    }

    #[test]
    fn a_missing_tile_is_named() {
        let mut tiles = Tiles {
            size: 300,
            tiles: HashMap::new(),
        };
        let error = inclusion_proof(3, 300, &mut tiles).unwrap_err();
        assert!(
            matches!(error, TlogError::TileMissing { ref path } if path.starts_with("log/tile/0/")),
            "{error}"
        );
    }
}
