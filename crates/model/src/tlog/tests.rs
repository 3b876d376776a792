//! Tests of the transparency log's tree: hashes, proofs, tiles, checked against a tree held whole.
//! Unit tests: they reach the module's private items through `use super::*`; no I/O.

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
                assert!(verify_inclusion((index + 1) % size, size, &leaf, &path, &root).is_err());
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
fn proofs_through_remembered_tiles_are_those_made_from_the_tiles() {
    // Every leaf of a tree over three level-0 tiles, a partial one and a level-1 tile, in leaf
    // order as an evidence bundle proves them, and a few out of order.
    let size = 70_000u64;
    let all = leaves(size);
    let mut edge = TreeEdge::default();
    let mut full = Vec::new();
    for leaf in &all {
        edge.push(*leaf, &mut full);
    }
    let mut tiles = Tiles {
        size,
        tiles: full.into_iter().chain(edge.partial_tiles()).collect(),
    };
    let mut memo = Memo(HashMap::new(), all);
    let mut direct = tiles.clone();
    let mut remembered = Remembered::new(&mut tiles);
    let order = (0..size).chain([size - 1, 0, 65_536, 255, 256]);
    for index in order {
        let path = inclusion_proof(index, size, &mut remembered).unwrap();
        assert_eq!(path, inclusion_proof(index, size, &mut memo).unwrap());
        if index % 997 == 0 {
            assert_eq!(path, inclusion_proof(index, size, &mut direct).unwrap());
        }
    }
    assert_eq!(tree_root(size, &mut remembered).unwrap(), edge.root());
}

#[test]
fn a_missing_tile_is_named_through_remembered_tiles_too() {
    let mut empty = Tiles {
        size: 1000,
        tiles: HashMap::new(),
    };
    let mut remembered = Remembered::new(&mut empty);
    assert_eq!(
        inclusion_proof(3, 1000, &mut remembered),
        Err(TlogError::TileMissing {
            path: TileRef {
                level: 0,
                index: 0,
                width: 256
            }
            .key()
        })
    );
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

#[test]
fn alternates_are_numbered_after_the_name_and_choices_take_the_first_first() {
    assert_eq!(
        log_names("log/tile/0/000.p/5"),
        [
            "log/tile/0/000.p/5",
            "log/tile/0/000.p/5.1",
            "log/tile/0/000.p/5.2",
            "log/tile/0/000.p/5.3"
        ]
    );
    assert_eq!(TileRef::parse_key("log/tile/0/000.p/5.1"), None);
    assert_eq!(choices(&[1, 2], 10), [vec![0, 0], vec![0, 1]]);
    assert_eq!(choices(&[2, 2], 3), [vec![0, 0], vec![0, 1], vec![1, 0]]);
}
