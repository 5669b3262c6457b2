//! Sorting byte strings without comparing them whole (the string trie and the token index both need byte order).

/// The big-endian key of `s[off..off + 8]` (zero-padded, so keys order like the bytes) and how many of those 8
/// bytes `s` has.
#[inline]
fn chunk(s: &[u8], off: usize) -> (u64, u32) {
    let n = s.len().saturating_sub(off).min(8);
    let mut b = [0u8; 8];
    b[..n].copy_from_slice(&s[off..off + n]);
    (u64::from_be_bytes(b), n as u32)
}

/// The input indices of `strings` in byte order (equal strings by index): a stable LSD radix sort on the first
/// 8 bytes (big-endian, zero-padded, which orders like the bytes themselves), then each run of equal keys is
/// refined 8 bytes at a time (sorting small `(bytes in the chunk, next chunk, index)` keys, most-significant
/// chunk first), so strings are read chunk by chunk and never compared whole.
pub(crate) fn sorted_order<S: AsRef<[u8]>>(strings: &[S]) -> Vec<u32> {
    let mut items: Vec<(u64, u32)> =
        strings.iter().enumerate().map(|(i, s)| (chunk(s.as_ref(), 0).0, i as u32)).collect();
    if items.len() < 1024 {
        items.sort_unstable();
    } else {
        let mut counts = vec![[0u32; 256]; 8];
        for &(key, _) in &items {
            for (digit, c) in counts.iter_mut().enumerate() {
                c[(key >> (8 * digit)) as u8 as usize] += 1;
            }
        }
        let mut scratch = vec![(0u64, 0u32); items.len()];
        for (digit, c) in counts.iter().enumerate() {
            if c.iter().any(|&n| n as usize == items.len()) {
                continue; // every key has the same byte here
            }
            let mut start = [0u32; 256];
            for b in 1..256 {
                start[b] = start[b - 1] + c[b - 1];
            }
            for &item in &items {
                let b = (item.0 >> (8 * digit)) as u8 as usize;
                scratch[start[b] as usize] = item;
                start[b] += 1;
            }
            std::mem::swap(&mut items, &mut scratch);
        }
    }
    // (a, b, off): items[a..b] (ascending by index) agree on their zero-padded bytes 0..off + 8 and are all at
    // least `off` bytes long.
    let mut work: Vec<(usize, usize, usize)> = Vec::new();
    let mut a = 0;
    while a < items.len() {
        let mut b = a + 1;
        while b < items.len() && items[b].0 == items[a].0 {
            b += 1;
        }
        if b - a > 1 {
            work.push((a, b, 0));
        }
        a = b;
    }
    let mut keys: Vec<(u32, u64, u32)> = Vec::new();
    while let Some((a, b, off)) = work.pop() {
        // Within the run, shorter strings (fewer bytes in this chunk) come first: their missing bytes are the
        // zeros of the padding, so they are prefixes of the longer ones. Strings with all 8 bytes here go on
        // to the next chunk.
        keys.clear();
        keys.extend(items[a..b].iter().map(|&(_, i)| {
            let s = strings[i as usize].as_ref();
            let n = chunk(s, off).1;
            (n, if n == 8 { chunk(s, off + 8).0 } else { 0 }, i)
        }));
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
        for (item, k) in items[a..b].iter_mut().zip(&keys) {
            *item = (k.1, k.2);
        }
    }
    items.into_iter().map(|(_, i)| i).collect()
}
