//! A reader for the metadata of GGUF files (llama.cpp's model format): just the key/value section, never the
//! tensors. Every length is checked against the bytes that remain, so truncated or corrupt files are errors.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

/// One metadata value of a GGUF file.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// Any integer type (u8 .. i64), widened.
    Int(i64),
    /// u64 values above `i64::MAX` are kept apart.
    UInt(u64),
    /// f32 or f64.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string, as raw bytes (GGUF promises UTF-8 but files do not always keep that promise).
    Str(Vec<u8>),
    /// An array of strings (kept in one buffer).
    StrArray(StrArray),
    /// An array of integers (any integer type; u64 values above `i64::MAX` wrap).
    IntArray(Vec<i64>),
    /// Any other array (floats, booleans, nested arrays).
    Array(Vec<Value>),
}

/// An array of strings stored contiguously: string `i` is `bytes[offsets[i]..offsets[i + 1]]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StrArray {
    bytes: Vec<u8>,
    offsets: Vec<usize>,
}

impl StrArray {
    /// The number of strings.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether the array is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// String `i` (raw bytes).
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        (i < self.len()).then(|| &self.bytes[self.offsets[i]..self.offsets[i + 1]])
    }

    /// The strings in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.offsets.windows(2).map(|w| &self.bytes[w[0]..w[1]])
    }
}

impl Value {
    /// The value as an integer, if it is one.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int(v) => Some(v),
            Value::UInt(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a string, if it is one.
    pub fn as_str(&self) -> Option<&[u8]> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// The metadata of a GGUF file: key -> value.
#[derive(Clone, Debug, Default)]
pub struct Metadata {
    /// The GGUF version (2 or 3).
    pub version: u32,
    /// Key/value pairs.
    pub values: HashMap<String, Value>,
}

impl Metadata {
    /// Reads the metadata of the GGUF file at `path`, stopping before the tensor data.
    pub fn read_file(path: &Path) -> Result<Metadata> {
        Self::read_file_keys(path, &|_| true)
    }

    /// Like [`Metadata::read_file`], keeping only the keys `keep` accepts: the values of the others are
    /// skipped without being decoded or allocated.
    pub fn read_file_keys(path: &Path, keep: &dyn Fn(&str) -> bool) -> Result<Metadata> {
        let file = std::fs::File::open(path)
            .map_err(|e| Error::new(crate::ErrorKind::Io, format!("cannot open GGUF file {}: {e}", path.display())))?;
        let len = file
            .metadata()
            .map_err(|e| Error::new(crate::ErrorKind::Io, format!("cannot read GGUF file {}: {e}", path.display())))?
            .len();
        let mut reader = Reader { inner: std::io::BufReader::with_capacity(1 << 16, file), remaining: len };
        reader.metadata(keep).map_err(|e| Error::new(e.kind(), format!("{}: {}", path.display(), e.message())))
    }

    /// Reads GGUF metadata from bytes in memory.
    pub fn read_bytes(bytes: &[u8]) -> Result<Metadata> {
        Self::read_bytes_keys(bytes, &|_| true)
    }

    /// Like [`Metadata::read_bytes`], keeping only the keys `keep` accepts.
    pub fn read_bytes_keys(bytes: &[u8], keep: &dyn Fn(&str) -> bool) -> Result<Metadata> {
        let mut reader = Reader { inner: bytes, remaining: bytes.len() as u64 };
        reader.metadata(keep)
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }
}

/// GGUF value type tags.
const T_U8: u32 = 0;
const T_I8: u32 = 1;
const T_U16: u32 = 2;
const T_I16: u32 = 3;
const T_U32: u32 = 4;
const T_I32: u32 = 5;
const T_F32: u32 = 6;
const T_BOOL: u32 = 7;
const T_STRING: u32 = 8;
const T_ARRAY: u32 = 9;
const T_U64: u32 = 10;
const T_I64: u32 = 11;
const T_F64: u32 = 12;

/// The fewest bytes a value of type `ty` takes in a file (an unknown type: 1, and it fails when read).
fn min_item_size(ty: u32) -> u64 {
    match ty {
        T_U8 | T_I8 | T_BOOL => 1,
        T_U16 | T_I16 => 2,
        T_U32 | T_I32 | T_F32 => 4,
        T_U64 | T_I64 | T_F64 | T_STRING => 8,
        T_ARRAY => 12,
        _ => 1,
    }
}

/// Arrays nest at most this deep (llama.cpp never nests them).
const MAX_DEPTH: u32 = 4;

struct Reader<R: BufRead> {
    inner: R,
    /// Bytes left in the file: no length may promise more than this.
    remaining: u64,
}

impl<R: BufRead> Reader<R> {
    fn truncated(&self, n: u64, what: &str) -> Error {
        Error::malformed(format!("truncated GGUF: {what} needs {n} bytes but only {} remain", self.remaining))
    }

    fn io_error(what: &str, e: std::io::Error) -> Error {
        Error::malformed(format!("truncated GGUF while reading {what}: {e}"))
    }

    /// Consumes `n` bytes without keeping them.
    fn skip(&mut self, n: u64, what: &str) -> Result<()> {
        if n > self.remaining {
            return Err(self.truncated(n, what));
        }
        let mut left = n;
        while left > 0 {
            let avail = self.inner.fill_buf().map_err(|e| Self::io_error(what, e))?.len();
            if avail == 0 {
                return Err(Error::malformed(format!("truncated GGUF while reading {what}")));
            }
            let k = avail.min(left.min(usize::MAX as u64) as usize);
            self.inner.consume(k);
            left -= k as u64;
        }
        self.remaining -= n;
        Ok(())
    }

    /// Fills `out` from the file.
    fn read_into(&mut self, out: &mut [u8], what: &str) -> Result<()> {
        let n = out.len() as u64;
        if n > self.remaining {
            return Err(self.truncated(n, what));
        }
        // Fast path: the buffer holds it all.
        let buf = self.inner.fill_buf().map_err(|e| Self::io_error(what, e))?;
        if buf.len() >= out.len() {
            out.copy_from_slice(&buf[..out.len()]);
            self.inner.consume(out.len());
        } else {
            self.inner.read_exact(out).map_err(|e| Self::io_error(what, e))?;
        }
        self.remaining -= n;
        Ok(())
    }

    /// Consumes a value of type `ty` without decoding it.
    fn skip_value(&mut self, ty: u32, depth: u32, key: &str) -> Result<()> {
        match ty {
            T_STRING => {
                let n = self.u64(key)?;
                self.skip(n, key)
            }
            T_ARRAY => {
                if depth >= MAX_DEPTH {
                    return Err(Error::malformed(format!("GGUF array for {key} nests deeper than {MAX_DEPTH}")));
                }
                let item_ty = self.u32(key)?;
                let n = self.array_len(item_ty, key)?;
                match item_ty {
                    T_STRING | T_ARRAY => (0..n).try_for_each(|_| self.skip_value(item_ty, depth + 1, key)),
                    _ => self.skip(n * min_item_size(item_ty), key),
                }
            }
            T_U8 | T_I8 | T_BOOL | T_U16 | T_I16 | T_U32 | T_I32 | T_F32 | T_U64 | T_I64 | T_F64 => {
                self.skip(min_item_size(ty), key)
            }
            other => Err(Error::malformed(format!("GGUF value of {key} has unknown type {other}"))),
        }
    }

    /// The item count of an array, checked against the bytes that remain: every item takes at least
    /// `min_item_size` bytes of the file, so a count they cannot hold is corrupt and is refused before anything is
    /// allocated for it.
    fn array_len(&mut self, item_ty: u32, key: &str) -> Result<u64> {
        let n = self.u64(key)?;
        let min_size = min_item_size(item_ty);
        if n.saturating_mul(min_size) > self.remaining {
            return Err(Error::malformed(format!(
                "GGUF array {key} claims {n} items of at least {min_size} bytes but only {} bytes remain",
                self.remaining
            )));
        }
        Ok(n)
    }

    fn bytes(&mut self, n: u64, what: &str) -> Result<Vec<u8>> {
        if n > self.remaining {
            return Err(self.truncated(n, what));
        }
        let mut buf = vec![0u8; n as usize];
        self.read_into(&mut buf, what)?;
        Ok(buf)
    }

    fn fixed<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut b = [0u8; N];
        self.read_into(&mut b, what)?;
        Ok(b)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.fixed(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.fixed(what)?))
    }

    fn string(&mut self, what: &str) -> Result<Vec<u8>> {
        let n = self.u64(what)?;
        self.bytes(n, what)
    }

    /// `n` strings into one buffer.
    fn str_array(&mut self, n: u64, key: &str) -> Result<StrArray> {
        let mut offsets = Vec::with_capacity(n as usize + 1);
        let mut bytes = Vec::new();
        offsets.push(0);
        for _ in 0..n {
            let len = self.u64(key)?;
            if len > self.remaining {
                return Err(self.truncated(len, key));
            }
            let start = bytes.len();
            bytes.resize(start + len as usize, 0);
            self.read_into(&mut bytes[start..], key)?;
            offsets.push(bytes.len());
        }
        Ok(StrArray { bytes, offsets })
    }

    /// `n` integers of type `ty` (read as one block).
    fn int_array(&mut self, ty: u32, n: u64, key: &str) -> Result<Vec<i64>> {
        let size = min_item_size(ty) as usize;
        let raw = self.bytes(n * size as u64, key)?;
        Ok(raw
            .chunks_exact(size)
            .map(|c| match ty {
                T_U8 => c[0] as i64,
                T_I8 => c[0] as i8 as i64,
                T_U16 => u16::from_le_bytes([c[0], c[1]]) as i64,
                T_I16 => i16::from_le_bytes([c[0], c[1]]) as i64,
                T_U32 => u32::from_le_bytes(c.try_into().unwrap()) as i64,
                T_I32 => i32::from_le_bytes(c.try_into().unwrap()) as i64,
                _ => i64::from_le_bytes(c.try_into().unwrap()),
            })
            .collect())
    }

    fn metadata(&mut self, keep: &dyn Fn(&str) -> bool) -> Result<Metadata> {
        let magic: [u8; 4] = self.fixed("magic")?;
        if &magic != b"GGUF" {
            return Err(Error::malformed("not a GGUF file (the first 4 bytes are not \"GGUF\")"));
        }
        let version = self.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(Error::malformed(format!("unsupported GGUF version {version} (libtrie reads 2 and 3)")));
        }
        let _n_tensors = self.u64("tensor count")?;
        let n_kv = self.u64("metadata count")?;
        // Each pair takes at least 8 (key length) + 4 (type) + 1 bytes.
        if n_kv > self.remaining / 13 {
            return Err(Error::malformed(format!("GGUF claims {n_kv} metadata pairs, more than the file can hold")));
        }
        let mut values = HashMap::new();
        for _ in 0..n_kv {
            let key = self.string("metadata key")?;
            let key = String::from_utf8(key).map_err(|_| Error::malformed("GGUF metadata key is not UTF-8"))?;
            let ty = self.u32("value type")?;
            if keep(&key) {
                let value = self.value(ty, 0, &key)?;
                values.insert(key, value);
            } else {
                self.skip_value(ty, 0, &key)?;
            }
        }
        Ok(Metadata { version, values })
    }

    fn value(&mut self, ty: u32, depth: u32, key: &str) -> Result<Value> {
        Ok(match ty {
            T_U8 => Value::Int(self.fixed::<1>(key)?[0] as i64),
            T_I8 => Value::Int(self.fixed::<1>(key)?[0] as i8 as i64),
            T_U16 => Value::Int(u16::from_le_bytes(self.fixed(key)?) as i64),
            T_I16 => Value::Int(i16::from_le_bytes(self.fixed(key)?) as i64),
            T_U32 => Value::Int(u32::from_le_bytes(self.fixed(key)?) as i64),
            T_I32 => Value::Int(i32::from_le_bytes(self.fixed(key)?) as i64),
            T_F32 => Value::Float(f32::from_le_bytes(self.fixed(key)?) as f64),
            T_BOOL => Value::Bool(self.fixed::<1>(key)?[0] != 0),
            T_STRING => Value::Str(self.string(key)?),
            T_U64 => {
                let v = u64::from_le_bytes(self.fixed(key)?);
                i64::try_from(v).map(Value::Int).unwrap_or(Value::UInt(v))
            }
            T_I64 => Value::Int(i64::from_le_bytes(self.fixed(key)?)),
            T_F64 => Value::Float(f64::from_le_bytes(self.fixed(key)?)),
            T_ARRAY => {
                if depth >= MAX_DEPTH {
                    return Err(Error::malformed(format!("GGUF array for {key} nests deeper than {MAX_DEPTH}")));
                }
                let item_ty = self.u32(key)?;
                let n = self.array_len(item_ty, key)?;
                match item_ty {
                    T_STRING => Value::StrArray(self.str_array(n, key)?),
                    T_U8 | T_I8 | T_U16 | T_I16 | T_U32 | T_I32 | T_U64 | T_I64 => {
                        Value::IntArray(self.int_array(item_ty, n, key)?)
                    }
                    _ => {
                        // Grown as items are read (each value takes more memory than its bytes in the file).
                        let mut items = Vec::with_capacity(n.min(1 << 16) as usize);
                        for _ in 0..n {
                            items.push(self.value(item_ty, depth + 1, key)?);
                        }
                        Value::Array(items)
                    }
                }
            }
            other => return Err(Error::malformed(format!("GGUF value of {key} has unknown type {other}"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(n_kv: u64) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend(n_kv.to_le_bytes());
        b
    }

    fn kv_str(b: &mut Vec<u8>, key: &str, val: &str) {
        b.extend((key.len() as u64).to_le_bytes());
        b.extend(key.as_bytes());
        b.extend(T_STRING.to_le_bytes());
        b.extend((val.len() as u64).to_le_bytes());
        b.extend(val.as_bytes());
    }

    #[test]
    fn reads_a_string_value() {
        let mut b = header(1);
        kv_str(&mut b, "tokenizer.ggml.model", "gpt2");
        let m = Metadata::read_bytes(&b).unwrap();
        assert_eq!(m.get("tokenizer.ggml.model").unwrap().as_str(), Some(&b"gpt2"[..]));
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let mut b = header(1);
        kv_str(&mut b, "tokenizer.ggml.model", "gpt2");
        for cut in 0..b.len() {
            let err = Metadata::read_bytes(&b[..cut]).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::MalformedFile, "cut at {cut}: {err}");
        }
    }

    #[test]
    fn huge_counts_are_refused_before_allocating() {
        let mut b = header(1);
        b.extend(3u64.to_le_bytes());
        b.extend(b"key");
        b.extend(T_ARRAY.to_le_bytes());
        b.extend(T_U8.to_le_bytes());
        b.extend(u64::MAX.to_le_bytes());
        let err = Metadata::read_bytes(&b).unwrap_err();
        assert!(err.message().contains("claims"), "{err}");
    }

    #[test]
    fn skipped_keys_are_not_decoded_but_still_checked() {
        let mut b = header(3);
        kv_str(&mut b, "tokenizer.ggml.merges", "a b");
        b.extend(5u64.to_le_bytes());
        b.extend(b"array");
        b.extend(T_ARRAY.to_le_bytes());
        b.extend(T_U32.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        b.extend([1u8, 0, 0, 0, 2, 0, 0, 0]);
        kv_str(&mut b, "tokenizer.ggml.model", "gpt2");
        let keep = |k: &str| k == "tokenizer.ggml.model";
        let m = Metadata::read_bytes_keys(&b, &keep).unwrap();
        assert_eq!(m.values.len(), 1);
        assert_eq!(m.get("tokenizer.ggml.model").unwrap().as_str(), Some(&b"gpt2"[..]));
        assert_eq!(Metadata::read_bytes(&b).unwrap().values.len(), 3);
        for cut in 0..b.len() {
            let err = Metadata::read_bytes_keys(&b[..cut], &keep).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::MalformedFile, "cut at {cut}: {err}");
        }
    }

    #[test]
    fn array_counts_are_checked_against_the_item_size() {
        // 1,000,000 strings need at least 8 MB; the file has a few hundred bytes left. Refused by the count,
        // before a vector for a million values is allocated.
        let mut b = header(1);
        b.extend(3u64.to_le_bytes());
        b.extend(b"key");
        b.extend(T_ARRAY.to_le_bytes());
        b.extend(T_STRING.to_le_bytes());
        b.extend(1_000_000u64.to_le_bytes());
        b.extend([0u8; 400]);
        let err = Metadata::read_bytes(&b).unwrap_err();
        assert!(err.message().contains("at least 8 bytes"), "{err}");
        // Strings inside the array: a length over the remaining bytes is refused too.
        let mut b = header(1);
        b.extend(3u64.to_le_bytes());
        b.extend(b"key");
        b.extend(T_ARRAY.to_le_bytes());
        b.extend(T_STRING.to_le_bytes());
        b.extend(1u64.to_le_bytes());
        b.extend((1u64 << 40).to_le_bytes());
        let err = Metadata::read_bytes(&b).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::MalformedFile, "{err}");
    }
}
