//! Owns the proof that a bundle holds a contiguous range of leaves whole (docs/archive.md
//! "Evidence for auditors"): the hashes of the tree of `size` outside the leaves
//! `[start, end)`, made from complete subtrees' hashes, and the roots a verifier recomputes
//! from the range's own leaves and those hashes. Pure: no I/O.
//!
//! The tree is walked as RFC 9162 splits it (the left part the largest power of two smaller
//! than the whole): a node with no leaf of the range is one hash of the proof, in walk order; a
//! leaf of the range is the range's. The nodes left of `start` are the complete subtrees that
//! make the tree of `start` leaves, so its root comes out too.

use super::{
    EMPTY_ROOT, Hash, Needs, SubtreeHashes, TileRef, TlogError, node_hash, range_hash, split,
};
use std::collections::BTreeSet;

fn check(start: u64, end: u64, size: u64) -> Result<(), TlogError> {
    if start > end || end > size {
        return Err(TlogError::IndexOutOfRange {
            index: end.max(start),
            size,
        });
    }
    Ok(())
}

/// The hashes of the tree of `size` leaves outside `[start, end)`, in walk order.
pub fn range_proof(
    start: u64,
    end: u64,
    size: u64,
    source: &mut impl SubtreeHashes,
) -> Result<Vec<Hash>, TlogError> {
    check(start, end, size)?;
    let mut proof = Vec::new();
    if size > 0 {
        walk_proof(start, end, 0, size, source, &mut proof)?;
    }
    Ok(proof)
}

fn walk_proof(
    start: u64,
    end: u64,
    lo: u64,
    hi: u64,
    source: &mut impl SubtreeHashes,
    proof: &mut Vec<Hash>,
) -> Result<(), TlogError> {
    if hi <= start || lo >= end {
        proof.push(range_hash(lo, hi, source)?);
    } else if hi - lo > 1 {
        let k = split(hi - lo);
        walk_proof(start, end, lo, lo + k, source, proof)?;
        walk_proof(start, end, lo + k, hi, source, proof)?;
    }
    Ok(())
}

/// The tiles of the tree of `size` that [`range_proof`] reads.
pub fn range_tiles(start: u64, end: u64, size: u64) -> Result<BTreeSet<TileRef>, TlogError> {
    let mut needs = Needs::default();
    range_proof(start, end, size, &mut needs)?;
    Ok(needs.tiles(size))
}

/// The roots a range proof leads to: of the tree of `size` leaves, and of the tree of `start`
/// leaves (its prefix before the range).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeRoots {
    pub root: Hash,
    pub start_root: Hash,
}

/// The roots recomputed from the leaf hashes of `[start, end)` (`leaves`, in order) and the
/// proof: an error when there are not `end - start` leaves or the proof is not as long as the
/// tree's shape needs.
pub fn roots_of_range(
    start: u64,
    end: u64,
    size: u64,
    leaves: &[Hash],
    proof: &[Hash],
) -> Result<RangeRoots, TlogError> {
    check(start, end, size)?;
    let count = usize::try_from(end - start).unwrap_or(usize::MAX);
    if leaves.len() != count {
        return Err(TlogError::WrongLength {
            got: leaves.len(),
            want: count,
        });
    }
    if size == 0 {
        return Ok(RangeRoots {
            root: EMPTY_ROOT,
            start_root: EMPTY_ROOT,
        });
    }
    let mut walk = Walk {
        start,
        end,
        leaves: leaves.iter(),
        proof: proof.iter(),
        before: Vec::new(),
        want: 0,
    };
    let root = walk.node(0, size);
    let used = walk.want;
    if walk.proof.next().is_some() || used != proof.len() {
        return Err(TlogError::WrongLength {
            got: proof.len(),
            want: used,
        });
    }
    let root = root.ok_or(TlogError::WrongLength {
        got: proof.len(),
        want: used,
    })?;
    let mut start_root = walk.before.pop().unwrap_or(EMPTY_ROOT);
    while let Some(left) = walk.before.pop() {
        start_root = node_hash(&left, &start_root);
    }
    Ok(RangeRoots { root, start_root })
}

struct Walk<L, P> {
    start: u64,
    end: u64,
    leaves: L,
    proof: P,
    /// The proof's nodes left of `start`, in order.
    before: Vec<Hash>,
    /// The proof's hashes the walk asked for.
    want: usize,
}

impl<'a, L: Iterator<Item = &'a Hash>, P: Iterator<Item = &'a Hash>> Walk<L, P> {
    /// The node's hash, `None` when the proof ran out (the walk still counts what it needs).
    fn node(&mut self, lo: u64, hi: u64) -> Option<Hash> {
        if hi <= self.start || lo >= self.end {
            self.want += 1;
            let hash = *self.proof.next()?;
            if hi <= self.start {
                self.before.push(hash);
            }
            return Some(hash);
        }
        if hi - lo == 1 {
            return self.leaves.next().copied();
        }
        let k = split(hi - lo);
        let left = self.node(lo, lo + k);
        let right = self.node(lo + k, hi);
        Some(node_hash(&left?, &right?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tlog::{Subtree, leaf_hash, tree_root};

    /// Subtree hashes computed from the leaves themselves.
    struct Leaves(Vec<Hash>);

    impl SubtreeHashes for Leaves {
        fn subtree(&mut self, subtree: Subtree) -> Result<Hash, TlogError> {
            let width = 1usize << subtree.height;
            let first = usize::try_from(subtree.index).unwrap() * width;
            let mut level = self.0[first..first + width].to_vec();
            while level.len() > 1 {
                level = level
                    .chunks(2)
                    .map(|pair| node_hash(&pair[0], &pair[1]))
                    .collect();
            }
            Ok(level[0])
        }
    }

    fn leaves(n: u64) -> Vec<Hash> {
        (0..n)
            .map(|i| leaf_hash(format!("{i}").as_bytes()))
            .collect()
    }

    #[test]
    fn every_range_of_every_small_tree_recomputes_both_roots() {
        for size in 0..40u64 {
            let all = leaves(size);
            let mut source = Leaves(all.clone());
            let root = tree_root(size, &mut source).unwrap();
            for start in 0..=size {
                for end in start..=size {
                    let proof = range_proof(start, end, size, &mut source).unwrap();
                    let range = &all[start as usize..end as usize];
                    let roots = roots_of_range(start, end, size, range, &proof).unwrap();
                    assert_eq!(roots.root, root, "size {size} range {start}..{end}");
                    let prefix = tree_root(start, &mut Leaves(all.clone())).unwrap();
                    assert_eq!(roots.start_root, prefix, "size {size} start {start}");
                }
            }
        }
    }

    #[test]
    fn a_range_missing_a_leaf_or_with_another_does_not_recompute_the_root() {
        let all = leaves(37);
        let mut source = Leaves(all.clone());
        let root = tree_root(37, &mut source).unwrap();
        let proof = range_proof(5, 30, 37, &mut source).unwrap();
        // One leaf fewer: the count is wrong, and as a range one shorter the root is not.
        let short: Vec<Hash> = all[5..29].to_vec();
        assert!(roots_of_range(5, 30, 37, &short, &proof).is_err());
        let shorter = roots_of_range(5, 29, 37, &short, &proof);
        assert!(shorter.map_or(true, |r| r.root != root));
        // One leaf replaced, two swapped: another root.
        let mut changed = all[5..30].to_vec();
        changed[3] = leaf_hash(b"another");
        assert_ne!(
            roots_of_range(5, 30, 37, &changed, &proof).unwrap().root,
            root
        );
        let mut swapped = all[5..30].to_vec();
        swapped.swap(0, 1);
        assert_ne!(
            roots_of_range(5, 30, 37, &swapped, &proof).unwrap().root,
            root
        );
        // A proof with a hash too many or too few.
        let mut long = proof.clone();
        long.push([0; 32]);
        assert!(roots_of_range(5, 30, 37, &all[5..30], &long).is_err());
        assert!(roots_of_range(5, 30, 37, &all[5..30], &proof[1..]).is_err());
        assert!(roots_of_range(5, 38, 37, &all[5..30], &proof).is_err());
    }
}
