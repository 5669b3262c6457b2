//! Sorting byte strings without comparing them whole (the string trie and the token index both need byte order).

use rayon::prelude::*;

/// The big-endian key of `s[off..off + 8]` (zero-padded, so keys order like the bytes) and how many of those 8
/// bytes `s` has.
#[inline]
fn chunk(s: &[u8], off: usize) -> (u64, u32) {
    if let Some(bytes) = s.get(off..off + 8) {
        // The common case, a whole chunk: one load (no copy of a variable length).
        return (u64::from_be_bytes(bytes.try_into().unwrap()), 8);
    }
    let n = s.len().saturating_sub(off).min(8);
    let mut b = [0u8; 8];
    b[..n].copy_from_slice(&s[off..off + n]);
    (u64::from_be_bytes(b), n as u32)
}

/// What the sort moves: `(0, key, input index)` with the string's first 8 bytes as a big-endian key, or while a
/// run of equal keys is refined (in the scratch space), `(bytes in the chunk, next chunk, input index)`. One type
/// for both, so that the refinement needs no memory of its own.
type Item = (u32, u64, u32);

/// Inputs from this many strings on are sorted on all cores: split by their first two bytes, each part sorted on
/// its own (below it, the extra pass and the threads cost more than they save: with it at 32768, the 100,000
/// cities sorted no faster and the alignment after them ran slower).
const PARALLEL_MIN: usize = 1 << 18;

/// Fewer items than this are sorted by comparison; from it on, by radix.
const RADIX_MIN: usize = 1024;

/// The input indices of `strings` in byte order (equal strings by index): a stable LSD radix sort on the first
/// 8 bytes (big-endian, zero-padded, which orders like the bytes themselves), then each run of equal keys is
/// refined 8 bytes at a time (sorting small `(bytes in the chunk, next chunk, index)` keys, most-significant
/// chunk first), so strings are read chunk by chunk and never compared whole. Large inputs are first split
/// stably by their first two bytes, and the parts (already in order among themselves) are sorted in parallel.
pub(crate) fn sorted_order<S: AsRef<[u8]> + Sync>(strings: &[S]) -> Vec<u32> {
    let key = |(i, s): (usize, &S)| (0, chunk(s.as_ref(), 0).0, i as u32);
    if strings.len() < PARALLEL_MIN {
        let mut items: Vec<Item> = strings.iter().enumerate().map(key).collect();
        let mut scratch = vec![(0, 0, 0); items.len()];
        sort_items(&mut items, &mut scratch, strings);
        return items.into_iter().map(|(_, _, i)| i).collect();
    }
    let keyed: Vec<Item> = strings.par_iter().enumerate().with_min_len(1 << 13).map(key).collect();
    // A stable counting scatter on the top 16 bits of the keys: the parts come out in byte order, each in
    // input order.
    let mut counts = vec![0usize; 1 << 16];
    for &(_, k, _) in &keyed {
        counts[(k >> 48) as usize] += 1;
    }
    let mut cursor = Vec::with_capacity(1 << 16);
    let mut at = 0;
    for &c in &counts {
        cursor.push(at);
        at += c;
    }
    let mut items = vec![(0, 0, 0); keyed.len()];
    for &item in &keyed {
        let b = (item.1 >> 48) as usize;
        items[cursor[b]] = item;
        cursor[b] += 1;
    }
    // The keys' first copy is each part's scratch space (no allocation in the threads).
    let mut scratch = keyed;
    let mut parts: Vec<(&mut [Item], &mut [Item])> = Vec::new();
    let (mut rest, mut rest_scratch) = (&mut items[..], &mut scratch[..]);
    for &c in &counts {
        if c > 0 {
            let (part, tail) = std::mem::take(&mut rest).split_at_mut(c);
            let (part_scratch, scratch_tail) = std::mem::take(&mut rest_scratch).split_at_mut(c);
            parts.push((part, part_scratch));
            (rest, rest_scratch) = (tail, scratch_tail);
        }
    }
    parts.into_par_iter().for_each(|(part, part_scratch)| sort_items(part, part_scratch, strings));
    drop(scratch);
    // Serial, so that the indices are collected in place (a parallel collect would hold both at once).
    items.into_iter().map(|(_, _, i)| i).collect()
}

/// Sorts `items` (`(0, first 8 bytes as a big-endian key, input index)`, ascending by index) into the byte order
/// of their strings, equal strings by index. `scratch`, as long as `items`, is overwritten.
fn sort_items<S: AsRef<[u8]>>(items: &mut [Item], scratch: &mut [Item], strings: &[S]) {
    if items.len() < RADIX_MIN {
        items.sort_unstable();
    } else {
        let mut counts = [[0u32; 256]; 8];
        for &(_, key, _) in items.iter() {
            for (digit, c) in counts.iter_mut().enumerate() {
                c[(key >> (8 * digit)) as u8 as usize] += 1;
            }
        }
        // Whether the keys now lie in `scratch` (the passes alternate between the two).
        let mut in_scratch = false;
        for (digit, c) in counts.iter().enumerate() {
            if c.iter().any(|&n| n as usize == items.len()) {
                continue; // every key has the same byte here
            }
            let mut start = [0u32; 256];
            for b in 1..256 {
                start[b] = start[b - 1] + c[b - 1];
            }
            let (from, to): (&[Item], &mut [Item]) =
                if in_scratch { (&*scratch, &mut *items) } else { (&*items, &mut *scratch) };
            for &item in from {
                let b = (item.1 >> (8 * digit)) as u8 as usize;
                to[start[b] as usize] = item;
                start[b] += 1;
            }
            in_scratch = !in_scratch;
        }
        if in_scratch {
            items.copy_from_slice(scratch);
        }
    }
    // (a, b, off): items[a..b] (ascending by index) agree on their zero-padded bytes 0..off + 8 and are all at
    // least `off` bytes long. Each run of equal keys is refined as soon as it is found, so that the stack holds
    // only the runs within it (it stays small, and in the threads' memory that is never handed back).
    let mut work: Vec<(usize, usize, usize)> = Vec::new();
    let mut start = 0;
    while start < items.len() {
        let mut end = start + 1;
        while end < items.len() && items[end].1 == items[start].1 {
            end += 1;
        }
        if end - start > 1 {
            work.push((start, end, 0));
        }
        start = end;
        while let Some((a, b, off)) = work.pop() {
            // Within the run, shorter strings (fewer bytes in this chunk) come first: their missing bytes are the
            // zeros of the padding, so they are prefixes of the longer ones. Strings with all 8 bytes here go on
            // to the next chunk.
            let keys = &mut scratch[a..b];
            for (k, &(_, _, i)) in keys.iter_mut().zip(&items[a..b]) {
                let s = strings[i as usize].as_ref();
                let n = chunk(s, off).1;
                *k = (n, if n == 8 { chunk(s, off + 8).0 } else { 0 }, i);
            }
            keys.sort_unstable();
            let mut x = 0;
            while x < keys.len() {
                let mut y = x + 1;
                while y < keys.len() && keys[y].0 == keys[x].0 && keys[y].1 == keys[x].1 {
                    y += 1;
                }
                if y - x > 1 && keys[x].0 == 8 {
                    work.push((a + x, a + y, off + 8));
                }
                x = y;
            }
            for (item, k) in items[a..b].iter_mut().zip(keys.iter()) {
                *item = (0, k.1, k.2);
            }
        }
    }
}
