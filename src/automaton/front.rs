//! Front-coded members (format version 7): in the large layout (automata with derived rows, see `derived`), each
//! member keeps only the bytes after the prefix it shares with the member before it.
//!
//! Member `m` is stored as its *suffix* `member_bytes[member_offsets[m]..member_offsets[m + 1]]` and the length
//! `member_lcp[m]` of the prefix it shares with member `m - 1`: member `m` is `member(m - 1)[..member_lcp[m]]`
//! followed by its suffix. Every [`RESTART`]-th member (`m % RESTART == 0`) is stored whole (`member_lcp[m] ==
//! 0`), so a member decodes from at most `RESTART` suffixes. Smaller automata store every member whole
//! (`member_lcp` empty, files as before).
//!
//! The hot path never decodes: a chain state (member `m`, depth `d`) reads the rest `member(m)[d..]`, and a
//! chain begins below the member's deepest explicit ancestor, whose depth is at least the member's shared prefix
//! with each neighbour (the trie branches or a member ends there), so `d > member_lcp[m]` and the rest lies inside
//! the stored suffix ([`Automaton::member_rest`]). A loaded file is checked for it (every chain's first depth is
//! past its member's shared prefix), and the rest of a crafted position outside the suffix reads as empty.

use super::*;
use std::borrow::Cow;

/// Every this many members one is stored whole (bounds the work of decoding a member).
pub(crate) const RESTART: usize = 16;

/// The front coding of the sorted members `offsets` / `bytes`: the suffix offsets, the suffix bytes (`bytes`,
/// compacted in place) and the shared prefix lengths (0 at every restart point).
pub(super) fn front_code(offsets: &[u64], mut bytes: Vec<u8>) -> (Vec<u64>, Vec<u8>, Vec<u32>) {
    let n = offsets.len() - 1;
    let lcp: Vec<u32> = {
        let member = |m: usize| &bytes[offsets[m] as usize..offsets[m + 1] as usize];
        (0..n)
            .into_par_iter()
            .with_min_len(1 << 14)
            .map(|m| {
                if m % RESTART == 0 {
                    return 0;
                }
                let (a, b) = (member(m - 1), member(m));
                a.iter().zip(b).take_while(|(x, y)| x == y).count() as u32
            })
            .collect()
    };
    // Each suffix moves towards the front (it begins at or after where its member did).
    let mut suffix_offsets = Vec::with_capacity(n + 1);
    suffix_offsets.push(0u64);
    let mut at = 0usize;
    for m in 0..n {
        let (from, to) = (offsets[m] as usize + lcp[m] as usize, offsets[m + 1] as usize);
        bytes.copy_within(from..to, at);
        at += to - from;
        suffix_offsets.push(at as u64);
    }
    bytes.truncate(at);
    bytes.shrink_to_fit();
    (suffix_offsets, bytes, lcp)
}

impl Automaton {
    /// Whether the members are front-coded (see the module doc).
    #[inline]
    pub(crate) fn is_front_coded(&self) -> bool {
        !self.member_lcp.is_empty()
    }

    /// The stored bytes of member `m`: all of it, or its suffix when front-coded.
    #[inline]
    fn stored(&self, m: usize) -> &[u8] {
        let (from, to) = self.member_offsets.pair(m);
        &self.member_bytes[from as usize..to as usize]
    }

    /// The length of member `m`'s prefix that is not stored with it (0 unless front-coded).
    #[inline]
    pub(crate) fn member_shared(&self, m: usize) -> usize {
        if self.member_lcp.is_empty() {
            0
        } else {
            self.member_lcp.get(m) as usize
        }
    }

    /// The length of member `m`.
    #[inline]
    pub(crate) fn member_len(&self, m: usize) -> usize {
        self.member_shared(m).saturating_add(self.stored(m).len())
    }

    /// `member(m)[d..]` without decoding, for the positions of the hot path (chain states, whose depth is past the
    /// member's shared prefix: see the module doc); empty where `d` is past the end or, on a crafted file, inside
    /// the shared prefix.
    #[inline]
    pub(crate) fn member_rest(&self, m: usize, d: usize) -> &[u8] {
        let stored = self.stored(m);
        match d.checked_sub(self.member_shared(m)) {
            Some(i) => stored.get(i..).unwrap_or(&[]),
            None => &[],
        }
    }

    /// Member `m`'s bytes (decoded when front-coded and not stored whole).
    pub(crate) fn member(&self, m: usize) -> Cow<'_, [u8]> {
        if self.member_shared(m) == 0 {
            return Cow::Borrowed(self.stored(m));
        }
        let mut buf = Vec::new();
        self.decode_into(m, &mut buf);
        Cow::Owned(buf)
    }

    /// `member(m)[d..]`, borrowed when it lies in the stored bytes; `None` when `d` is past the end.
    pub(crate) fn member_from(&self, m: usize, d: usize) -> Option<Cow<'_, [u8]>> {
        if d >= self.member_shared(m) {
            return self.stored(m).get(d - self.member_shared(m)..).map(Cow::Borrowed);
        }
        match self.member(m) {
            Cow::Owned(mut v) if d <= v.len() => {
                v.drain(..d);
                Some(Cow::Owned(v))
            }
            _ => None,
        }
    }

    /// Decodes member `m` into `buf` (replacing its contents) from its restart point. On a crafted file whose
    /// shared prefixes are longer than the members before them, the prefix is cut (a wrong member, never a panic).
    fn decode_into(&self, m: usize, buf: &mut Vec<u8>) {
        buf.clear();
        for i in m - m % RESTART..=m {
            let shared = self.member_shared(i).min(buf.len());
            buf.truncate(shared);
            buf.extend_from_slice(self.stored(i));
        }
    }

    /// Calls `f(m, member(m))` for the members `range`, in order, decoding each from the one before it.
    pub(crate) fn for_each_member(&self, range: std::ops::Range<usize>, mut f: impl FnMut(usize, &[u8])) {
        if !self.is_front_coded() {
            range.for_each(|m| f(m, self.stored(m)));
            return;
        }
        let mut buf = Vec::new();
        for m in range.clone() {
            if m == range.start {
                self.decode_into(m, &mut buf);
            } else {
                let shared = self.member_shared(m).min(buf.len());
                buf.truncate(shared);
                buf.extend_from_slice(self.stored(m));
            }
            f(m, &buf);
        }
    }

    /// Every member whole (offsets and bytes) when front-coded, for the code that reads the member table as one
    /// list (`with_changes`); `None` when the members are stored whole already.
    pub(crate) fn decoded_members(&self) -> Option<(Vec<u64>, Vec<u8>)> {
        if !self.is_front_coded() {
            return None;
        }
        let n = self.member_offsets.len() - 1;
        let mut offsets = Vec::with_capacity(n + 1);
        let mut bytes = Vec::new();
        offsets.push(0u64);
        self.for_each_member(0..n, |_, s| {
            bytes.extend_from_slice(s);
            offsets.push(bytes.len() as u64);
        });
        Some((offsets, bytes))
    }

    /// The front coding of a loaded file is sound: one shared length per member, 0 at every restart point, none
    /// longer than the member before it; and the members (decoded) ascending and distinct.
    pub(super) fn validate_members(&self) -> Result<()> {
        let n = self.member_offsets.len() - 1;
        if self.is_front_coded() {
            let lcp = self.member_lcp.ints();
            ensure(lcp.len() == n, || "member prefix lengths: not one per member".into())?;
            let bad = (0..n).into_par_iter().with_min_len(1 << 14).find_any(|&m| {
                let shared = lcp.get(m) as u64;
                if m % RESTART == 0 {
                    return shared != 0;
                }
                // The member before is at least as long as its own shared prefix plus its suffix bytes.
                shared > self.member_shared(m - 1) as u64 + self.stored(m - 1).len() as u64
            });
            ensure(bad.is_none(), || {
                format!("member {}'s shared prefix is longer than the member before it", bad.unwrap())
            })?;
        }
        // Sorted and distinct (`with_changes` and the member lookups binary-search them), in parallel blocks
        // that start at restart points.
        const BLOCK: usize = RESTART << 10;
        let unsorted = (0..n.div_ceil(BLOCK)).into_par_iter().find_map_any(|b| {
            let (from, to) = (b * BLOCK, ((b + 1) * BLOCK).min(n));
            let mut prev: Vec<u8> = if from == 0 { Vec::new() } else { self.member(from - 1).into_owned() };
            let mut bad = None;
            self.for_each_member(from..to, |m, s| {
                if bad.is_none() && m > 0 && *prev >= *s {
                    bad = Some(m);
                }
                prev.clear();
                prev.extend_from_slice(s);
            });
            bad
        });
        ensure(unsorted.is_none(), || {
            format!("members {} and {} are not ascending and distinct", unsorted.unwrap() - 1, unsorted.unwrap())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::TokenKind;
    use rand::{Rng, SeedableRng};

    /// Every byte a token, a few longer ones, an end-of-generation id (259).
    fn byte_vocab() -> Arc<Vocabulary> {
        let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        toks.extend([b"ab".to_vec(), b"abc".to_vec(), b"ba".to_vec(), b"</s>".to_vec()]);
        let mut kinds = vec![TokenKind::Normal; toks.len()];
        kinds[259] = TokenKind::Control;
        Arc::new(Vocabulary::new(toks, kinds, &[259], None).unwrap())
    }

    /// Strings over a few letters with long shared prefixes (and some members prefixes of others).
    fn set(seed: u64, n: usize) -> Vec<Vec<u8>> {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut out: Vec<Vec<u8>> = Vec::new();
        for _ in 0..n {
            let mut s = match out.len() {
                0 => Vec::new(),
                k => out[rng.gen_range(0..k)].clone(),
            };
            s.truncate(rng.gen_range(0..=s.len()));
            s.extend((0..rng.gen_range(1..8)).map(|_| b"abc-"[rng.gen_range(0..4)]));
            out.push(s);
        }
        out
    }

    /// Differential: every member decodes to the sorted input, `member_rest` and `member_from` are the full
    /// member's slices, every chain begins past its member's shared prefix; saved and loaded alike.
    #[test]
    fn front_coded_members_are_the_sorted_input() {
        let v = byte_vocab();
        for seed in 0..4 {
            let input = set(seed, 700);
            let a = Automaton::compile(v.clone(), &input, &CompileOptions::new().derive_rows(true)).unwrap();
            assert!(a.is_front_coded() && a.has_derived());
            let mut want = input.clone();
            want.sort();
            want.dedup();
            assert_eq!(a.n_members(), want.len());
            let shared: usize = (0..want.len()).map(|m| a.member_shared(m)).sum();
            assert!(shared > want.len(), "{shared}: the set shares prefixes");
            let stored = Automaton::compile(v.clone(), &input, &CompileOptions::new().derive_rows(false)).unwrap();
            assert!(!stored.is_front_coded() && a.member_bytes.len() + shared == stored.member_bytes.len());
            let bytes = a.to_bytes();
            let eager = Automaton::from_bytes(v.clone(), &bytes).unwrap();
            let lazy = Automaton::from_bytes_lazy(v.clone(), &bytes).unwrap();
            for x in [&a, &eager, &lazy] {
                for (r, m) in want.iter().enumerate() {
                    assert_eq!(x.member_bytes(r).as_deref(), Some(&m[..]), "rank {r}");
                    assert_eq!(x.member_len(r), m.len());
                    for d in 0..=m.len() + 1 {
                        assert_eq!(x.member_from(r, d).as_deref(), m.get(d..), "rank {r} depth {d}");
                        if d >= x.member_shared(r) {
                            assert_eq!(x.member_rest(r, d), m.get(d..).unwrap_or(&[]), "rank {r} depth {d}");
                        }
                    }
                }
                assert_eq!(x.member_bytes(want.len()), None);
                let mut seen = Vec::new();
                x.for_each_member(0..want.len(), |_, s| seen.push(s.to_vec()));
                assert_eq!(seen, want);
            }
            for k in 0..a.chain_member.len() {
                let m = a.chain_member.get(k) as usize;
                assert!(a.chain_first_depth.get(k) as usize > a.member_shared(m), "chain {k}");
            }
            assert_eq!(
                a.decoded_members().unwrap(),
                (stored.member_offsets.iter().collect(), stored.member_bytes.to_vec())
            );
        }
    }

    /// An update of a front-coded automaton (which reads its members decoded) is the compile of the changed set.
    #[test]
    fn updates_of_front_coded_members_equal_a_compile() {
        let v = byte_vocab();
        let opts = CompileOptions::new().derive_rows(true);
        let input = set(11, 500);
        let a = Automaton::compile(v.clone(), &input, &opts).unwrap();
        let (add, remove) = (vec![b"abc-zz".to_vec(), b"a".to_vec()], vec![input[3].clone(), input[100].clone()]);
        let updated = a.with_changes(&add, &remove, &opts).unwrap();
        let mut changed: Vec<Vec<u8>> = input.iter().filter(|s| !remove.contains(s)).cloned().collect();
        changed.extend(add.iter().cloned());
        let want = Automaton::compile(v.clone(), &changed, &opts).unwrap();
        assert!(updated.is_front_coded());
        assert_eq!(updated.to_bytes(), want.to_bytes());
    }

    /// A shared prefix reaching a chain's first depth (or past the member before) is refused by the eager check;
    /// in memory, the chain positions then read an empty rest, never out of bounds.
    #[test]
    fn a_chain_inside_its_shared_prefix_is_refused() {
        let v = byte_vocab();
        let a = Automaton::compile(v.clone(), &set(7, 400), &CompileOptions::new().derive_rows(true)).unwrap();
        a.validate().unwrap();
        let k = (0..a.chain_member.len())
            .find(|&k| a.chain_member.get(k) as usize % RESTART != 0)
            .expect("a chain of a member that is not a restart point");
        let (m, first) = (a.chain_member.get(k) as usize, a.chain_first_depth.get(k) as usize);
        let mut lcp: Vec<u32> = a.member_lcp.iter().collect();
        lcp[m] = first as u32;
        let mut bad = a;
        bad.member_lcp = Packed::narrow(&lcp);
        let e = bad.validate().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::MalformedFile);
        let _ = bad.member_rest(m, first - 1);
        assert_eq!(bad.member_rest(m, 0), b"");
        let _ = (bad.member(m), bad.member_from(m, 0), bad.member_len(m));
    }
}
