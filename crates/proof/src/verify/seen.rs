//! Owns the records read in the range's sealed objects: each one's 64-bit fingerprint and the
//! object it was first read in. Must not know objects, S3, or what a record's key is made of.
//!
//! About 12 bytes a record (a fingerprint and an object index in parallel arrays, at a load of
//! about 0.85 when sized from the digests, [`Seen::reserve`]), so about 14 MB at 1,000,000 records
//! instead of the ~100 MB of a `HashMap<u128, u32>` and its old table while it grows. The table is
//! split into shards by the fingerprint's top byte, each grown on its own (to a load of 0.75 once
//! at 0.9), so growing copies one shard (1/256 of the table), never the whole.
//!
//! A fingerprint is not a key: two records can share one. So a fingerprint found is only a
//! candidate ([`Lookup::Confirm`]): the caller compares the exact key with the records of the
//! object the fingerprint was first read in, and tells [`Seen::remember_exact`] of a record that
//! was not there, whose exact key is then kept (a false collision is rare: about one in 2^64 / n
//! per record), so that a later copy of that record is still found.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

/// Shards, by the fingerprint's top byte.
const SHARDS: usize = 256;
/// The smallest shard table.
const MIN_SLOTS: usize = 16;

/// What a record's key is, among those read before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Not read before; remembered now, as first read in the object given.
    New,
    /// Read before (its exact key was remembered): first in this object.
    Duplicate(u32),
    /// A record with the same fingerprint was first read in this object: the key is a duplicate
    /// only if that object holds it (else tell [`Seen::remember_exact`]).
    Confirm(u32),
}

/// The records read so far. `S` makes the fingerprint: random per run by default, so that no one
/// can choose events whose fingerprints collide (each collision costs the caller a comparison).
pub struct Seen<S = RandomState> {
    hasher: S,
    shards: Vec<Shard>,
    /// The exact keys of records whose fingerprint was already taken by another key, with the
    /// object each was first read in.
    exact: HashMap<u128, u32>,
}

impl Seen {
    pub fn new() -> Self {
        Self::with_hasher(RandomState::new())
    }
}

impl Default for Seen {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: BuildHasher> Seen<S> {
    /// Fingerprints made by `hasher` (the tests choose colliding ones).
    pub fn with_hasher(hasher: S) -> Self {
        Self {
            hasher,
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            exact: HashMap::new(),
        }
    }

    /// Looks `key` up; when its fingerprint is new, remembers it as first read in `object`.
    pub fn lookup(&mut self, key: u128, object: u32) -> Lookup {
        // 0 marks an empty slot: a fingerprint 0 is taken for 1 (one more collision to confirm).
        let fingerprint = self.hasher.hash_one(key).max(1);
        let shard = (fingerprint >> 56) as usize % SHARDS;
        let Some(shard) = self.shards.get_mut(shard) else {
            return Lookup::New; // unreachable: the index is below SHARDS
        };
        match shard.find_or_insert(fingerprint, object) {
            None => Lookup::New,
            // Only a key whose fingerprint was found can be in `exact`: it is looked for then.
            Some(first) => match self.exact.get(&key) {
                Some(exact) => Lookup::Duplicate(*exact),
                None => Lookup::Confirm(first),
            },
        }
    }

    /// Room for `records` in all (the walk's estimate of the range's, from its digests), made
    /// at once so that the shards need not grow record by record: growing leaves the old arrays
    /// behind as holes in the heap (about 6 MB of them at 1,000,000 records), sizing once does
    /// not. A shard is given its share and some slack (a shard's count varies by about its square
    /// root); one that still fills up grows on its own.
    pub fn reserve(&mut self, records: u64) {
        let share = usize::try_from(records / SHARDS as u64).unwrap_or(usize::MAX);
        let slack = 4 * share.isqrt() + MIN_SLOTS;
        let slots = share.saturating_add(slack).saturating_mul(10) / 9 + 1;
        for shard in &mut self.shards {
            if shard.fingerprints.len() < slots {
                shard.resize(slots);
            }
        }
    }

    /// `key`, looked up as [`Lookup::Confirm`], was not in the object named: it is first read in
    /// `object`, and is kept whole.
    pub fn remember_exact(&mut self, key: u128, object: u32) {
        self.exact.entry(key).or_insert(object);
    }

    /// Records remembered (by fingerprint or exactly).
    #[cfg(test)]
    pub fn records(&self) -> usize {
        self.shards.iter().map(|s| s.len).sum::<usize>() + self.exact.len()
    }

    /// Slots allocated over every shard.
    #[cfg(test)]
    pub fn slots(&self) -> usize {
        self.shards.iter().map(|s| s.fingerprints.len()).sum()
    }
}

/// An open-addressing table (linear probing) of fingerprints (0: empty) and object indexes.
#[derive(Default)]
struct Shard {
    fingerprints: Vec<u64>,
    objects: Vec<u32>,
    len: usize,
}

impl Shard {
    /// The object of `fingerprint` when present; else it is inserted with `object`.
    fn find_or_insert(&mut self, fingerprint: u64, object: u32) -> Option<u32> {
        // Grown at a load of 0.9 (so one slot at least is always empty and a probe ends).
        if (self.len + 1) * 10 > self.fingerprints.len() * 9 {
            self.grow();
        }
        let mut at = self.home(fingerprint);
        loop {
            match self.fingerprints.get(at).copied() {
                Some(0) => break,
                Some(f) if f == fingerprint => return self.objects.get(at).copied(),
                Some(_) => at += 1,
                None => at = 0,
            }
        }
        if let (Some(f), Some(o)) = (self.fingerprints.get_mut(at), self.objects.get_mut(at)) {
            *f = fingerprint;
            *o = object;
            self.len += 1;
        }
        None
    }

    /// The first slot to probe: the fingerprint's bits below the shard's byte, scaled to the
    /// table (no power of two needed, so the table is sized to its records).
    fn home(&self, fingerprint: u64) -> usize {
        (((u128::from(fingerprint << 8)) * self.fingerprints.len() as u128) >> 64) as usize
    }

    /// To a load of 0.75: the records copied into new arrays, one shard at a time.
    fn grow(&mut self) {
        self.resize(((self.len + 1) * 4 / 3 + 1).max(MIN_SLOTS));
    }

    /// To `slots` (more than its records).
    fn resize(&mut self, slots: usize) {
        let fingerprints = std::mem::replace(&mut self.fingerprints, vec![0; slots]);
        let objects = std::mem::replace(&mut self.objects, vec![0; slots]);
        self.len = 0;
        for (fingerprint, object) in fingerprints.into_iter().zip(objects) {
            if fingerprint != 0 {
                self.find_or_insert(fingerprint, object);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::hash::{BuildHasherDefault, Hasher};

    use super::*;

    /// Fingerprints of one byte: the key's lowest byte modulo 4, so most keys collide.
    #[derive(Default)]
    struct Colliding(u64);

    impl Hasher for Colliding {
        fn write(&mut self, bytes: &[u8]) {
            // A u128 is written in native order: its lowest byte first on little-endian.
            let low = if cfg!(target_endian = "little") {
                bytes.first()
            } else {
                bytes.last()
            };
            self.0 = u64::from(low.copied().unwrap_or(0) % 4);
        }
        fn finish(&self) -> u64 {
            self.0
        }
    }

    /// The caller's part, as the walk does it: a candidate is a duplicate only if the object it
    /// names holds the exact key (among the records before it, in the object being read).
    fn duplicates(
        seen: &mut Seen<impl BuildHasher>,
        objects: &[&[u128]],
    ) -> Vec<(u32, usize, Option<u32>)> {
        let mut found = Vec::new();
        for (index, keys) in objects.iter().enumerate() {
            let index = index as u32;
            for (at, key) in keys.iter().enumerate() {
                let first = match seen.lookup(*key, index) {
                    Lookup::New => None,
                    Lookup::Duplicate(first) => Some(first),
                    Lookup::Confirm(first) => {
                        let held: &[u128] = if first == index {
                            &keys[..at]
                        } else {
                            objects[first as usize]
                        };
                        if held.contains(key) {
                            Some(first)
                        } else {
                            seen.remember_exact(*key, index);
                            None
                        }
                    }
                };
                found.push((index, at, first));
            }
        }
        found
    }

    #[test]
    fn a_fingerprint_collision_is_not_a_duplicate_and_a_true_duplicate_is() {
        let mut seen = Seen::with_hasher(BuildHasherDefault::<Colliding>::default());
        // 1, 5, 9 share the fingerprint 1, and so do 4 and 8 (0, taken for 1); 2 and 6 share 2.
        assert_eq!(seen.lookup(1, 0), Lookup::New);
        assert_eq!(seen.lookup(5, 1), Lookup::Confirm(0));
        assert_eq!(seen.lookup(8, 1), Lookup::Confirm(0));
        // Object 1's 5 and 6, object 2's 9, 4 and 8 collide with object 0's records: none is a
        // duplicate, and each is kept exactly, so that its second copy is one.
        let found = duplicates(
            &mut Seen::with_hasher(BuildHasherDefault::<Colliding>::default()),
            &[&[1, 2], &[5, 6, 1, 5], &[6, 9, 2, 4, 8, 4]],
        );
        let twice: Vec<(u32, usize, u32)> = found
            .iter()
            .filter_map(|(o, at, first)| first.map(|f| (*o, *at, f)))
            .collect();
        assert_eq!(
            twice,
            [
                // 1 again, first read in object 0.
                (1, 2, 0),
                // 5 twice in object 1 (its fingerprint is 1's: kept exactly).
                (1, 3, 1),
                // 6 again (its fingerprint is 2's), first read in object 1.
                (2, 0, 1),
                // 2 again.
                (2, 2, 0),
                // 4 again: 4, 8 (and 1, 5) share the fingerprint 1.
                (2, 5, 2),
            ]
        );
    }

    #[test]
    fn many_records_are_each_found_once_and_the_table_stays_near_its_records() {
        let mut seen = Seen::new();
        let keys: Vec<u128> = (0..200_000u128)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
            .collect();
        for key in &keys {
            assert_eq!(seen.lookup(*key, 7), Lookup::New);
        }
        for key in keys.iter().step_by(1_000) {
            // Distinct keys with random fingerprints: a 64-bit collision here is 1 in 2^30.
            assert_eq!(seen.lookup(*key, 8), Lookup::Confirm(7));
        }
        assert_eq!(seen.records(), keys.len());
        let load = keys.len() as f64 / seen.slots() as f64;
        assert!((0.7..=0.9).contains(&load), "load {load}");

        // Sized first for as many, the table holds them at about 0.8 (0.85 at 1,000,000) and
        // does not grow (a shard 4.4 standard deviations over its share would, by itself).
        let mut sized = Seen::new();
        sized.reserve(keys.len() as u64);
        let slots = sized.slots();
        for key in &keys {
            assert_eq!(sized.lookup(*key, 7), Lookup::New);
        }
        assert!(sized.slots() <= slots + slots / 100);
        let load = keys.len() as f64 / sized.slots() as f64;
        assert!((0.75..=0.9).contains(&load), "load {load}");
        let unique: HashSet<u128> = keys.into_iter().collect();
        assert_eq!(unique.len(), seen.records());
    }
}
