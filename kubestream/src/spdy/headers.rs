//! SPDY/3 header blocks (pure): the name/value block and its zlib compression with the SPDY
//! dictionary, one context per direction for the whole connection.
//!
//! A block is `count:32`, then per pair `len:32 name len:32 value`; names are lower-case and
//! unique, several values of one name are joined with NUL (draft 3.1 §2.6.10). Every block is
//! deflated in the connection's one stream per direction, starting from the preset
//! [`DICTIONARY`], and ends with a sync flush (spdystream keeps one `zlib.NewReaderDict` and
//! one `NewWriterLevelDict` per framer). So *every* block received must be inflated, even a
//! refused stream's, or the next one cannot be read; and any error here leaves the context
//! unusable — the connection ends with GOAWAY(PROTOCOL_ERROR).
//!
//! Bounds (zip-bomb guard): a block inflates to at most [`MAX_BLOCK`] bytes and holds at most
//! [`MAX_PAIRS`] pairs.

use bytes::{BufMut, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};

pub use super::dictionary::DICTIONARY;

#[cfg(test)]
mod tests;

/// The largest inflated header block accepted.
pub const MAX_BLOCK: usize = 64 * 1024;
/// The most name/value pairs accepted in one block.
pub const MAX_PAIRS: usize = 100;
/// The Adler-32 of [`DICTIONARY`], which a zlib stream using it names.
pub const DICTIONARY_ID: u32 = 0xe3c6_a7c2;

/// A stream's headers: unique lower-case names, each with one or more values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    pairs: Vec<(String, Vec<String>)>,
}

/// Why a header block was refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A name that is empty, not lower-case, or holds a NUL.
    #[error("header name {name:?} is not a lower-case SPDY header name")]
    BadName {
        /// The name (lossy UTF-8, cut to 64 characters).
        name: String,
    },
    /// A name or value that is not UTF-8.
    #[error("header {name:?} is not UTF-8")]
    NotUtf8 {
        /// The name, as far as it is known (lossy).
        name: String,
    },
    /// The same name twice in one block.
    #[error("header {name:?} appears twice")]
    Duplicate {
        /// The name.
        name: String,
    },
    /// More pairs than [`MAX_PAIRS`].
    #[error("header block has {count} pairs; the limit is {MAX_PAIRS}")]
    TooManyPairs {
        /// The count declared.
        count: u64,
    },
    /// A block that inflates past [`MAX_BLOCK`], or encodes past it.
    #[error("header block is over {MAX_BLOCK} bytes")]
    TooLarge,
    /// A block that ends inside a length, name or value, or has bytes after its last pair.
    #[error("header block is malformed: {what}")]
    Malformed {
        /// What was wrong.
        what: &'static str,
    },
    /// The zlib stream names a preset dictionary that is not SPDY/3's.
    #[error("header block asks for dictionary {id:#010x}, not SPDY/3's")]
    WrongDictionary {
        /// The Adler-32 asked for.
        id: u32,
    },
    /// The zlib stream is corrupt.
    #[error("header block does not inflate: {source}")]
    Inflate {
        /// zlib's error.
        #[source]
        source: flate2::DecompressError,
    },
    /// Compression failed (zlib's own error; not expected).
    #[error("header block does not deflate: {source}")]
    Deflate {
        /// zlib's error.
        #[source]
        source: flate2::CompressError,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Headers {
    /// No headers.
    pub fn new() -> Headers {
        Headers::default()
    }

    /// Adds `name` with `value` (kept in order); refuses a name that is not lower-case or is
    /// already present, and a value holding NUL (the separator of several values).
    pub fn insert(&mut self, name: &str, values: &[&str]) -> Result<()> {
        check_name(name)?;
        if values.iter().any(|v| v.contains('\0')) {
            return Err(Error::Malformed {
                what: "a value holds NUL, the separator of values",
            });
        }
        if self.get(name).is_some() {
            return Err(Error::Duplicate { name: name.into() });
        }
        self.pairs.push((
            name.to_owned(),
            values.iter().map(|v| (*v).to_owned()).collect(),
        ));
        Ok(())
    }

    /// `insert` for building: adds the pair and returns the headers.
    pub fn with(mut self, name: &str, value: &str) -> Result<Headers> {
        self.insert(name, &[value])?;
        Ok(self)
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values(name)
            .and_then(|v| v.first())
            .map(String::as_str)
    }

    /// Every value of `name`.
    pub fn values(&self, name: &str) -> Option<&[String]> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// The pairs in block order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.pairs.iter().map(|(n, v)| (n.as_str(), v.as_slice()))
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// No names.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The uncompressed block.
    pub fn to_block(&self) -> Result<Bytes> {
        let mut buf = BytesMut::new();
        buf.put_u32(self.pairs.len() as u32);
        for (name, values) in &self.pairs {
            let value = values.join("\0");
            buf.put_u32(name.len() as u32);
            buf.put_slice(name.as_bytes());
            buf.put_u32(value.len() as u32);
            buf.put_slice(value.as_bytes());
        }
        if buf.len() > MAX_BLOCK || self.pairs.len() > MAX_PAIRS {
            return Err(Error::TooLarge);
        }
        Ok(buf.freeze())
    }

    /// Reads an uncompressed block, with every check of this module.
    pub fn from_block(block: &[u8]) -> Result<Headers> {
        let mut r = Reader(block);
        let count = r.u32("the pair count")?;
        if count as usize > MAX_PAIRS {
            return Err(Error::TooManyPairs {
                count: u64::from(count),
            });
        }
        let mut headers = Headers::new();
        for _ in 0..count {
            let name = r.field("a name")?;
            let name =
                std::str::from_utf8(name).map_err(|_| Error::NotUtf8 { name: lossy(name) })?;
            let value = r.field("a value")?;
            let value = std::str::from_utf8(value).map_err(|_| Error::NotUtf8 {
                name: lossy(name.as_bytes()),
            })?;
            check_name(name)?;
            if headers.get(name).is_some() {
                return Err(Error::Duplicate { name: name.into() });
            }
            headers.pairs.push((
                name.to_owned(),
                value.split('\0').map(str::to_owned).collect(),
            ));
        }
        if !r.0.is_empty() {
            return Err(Error::Malformed {
                what: "bytes after the last pair",
            });
        }
        Ok(headers)
    }
}

fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && !name.contains('\0')
        && !name.chars().any(|c| c.is_uppercase() || c.is_control());
    if ok {
        Ok(())
    } else {
        Err(Error::BadName {
            name: lossy(name.as_bytes()),
        })
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).chars().take(64).collect()
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn u32(&mut self, what: &'static str) -> Result<u32> {
        let (head, rest) = self
            .0
            .split_first_chunk::<4>()
            .ok_or(Error::Malformed { what })?;
        self.0 = rest;
        Ok(u32::from_be_bytes(*head))
    }

    fn field(&mut self, what: &'static str) -> Result<&'a [u8]> {
        let len = self.u32(what)? as usize;
        if len > self.0.len() {
            return Err(Error::Malformed { what });
        }
        let (field, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(field)
    }
}

/// The compressing side of one direction of a connection.
pub struct Encoder {
    zlib: Compress,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("total_in", &self.zlib.total_in())
            .finish()
    }
}

impl Encoder {
    /// A new context with the SPDY dictionary preset.
    pub fn new() -> Result<Encoder> {
        let mut zlib = Compress::new(Compression::default(), true);
        zlib.set_dictionary(&DICTIONARY)
            .map_err(|source| Error::Deflate { source })?;
        Ok(Encoder { zlib })
    }

    /// Deflates `headers` in this context, ending with a sync flush.
    pub fn encode(&mut self, headers: &Headers) -> Result<Bytes> {
        let raw = headers.to_block()?;
        let mut out = Vec::with_capacity(raw.len() / 2 + 64);
        let mut consumed = 0;
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(raw.len() - consumed + 64);
            }
            let before = self.zlib.total_in();
            self.zlib
                .compress_vec(&raw[consumed..], &mut out, FlushCompress::Sync)
                .map_err(|source| Error::Deflate { source })?;
            consumed += (self.zlib.total_in() - before) as usize;
            // The flush is complete once all input is in and zlib left output space unused.
            if consumed == raw.len() && out.len() < out.capacity() {
                return Ok(Bytes::from(out));
            }
        }
    }
}

/// The inflating side of one direction of a connection.
pub struct Decoder {
    zlib: Decompress,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("total_in", &self.zlib.total_in())
            .finish()
    }
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    /// A new context; the dictionary is given when the stream asks for it.
    pub fn new() -> Decoder {
        Decoder {
            zlib: Decompress::new(true),
        }
    }

    /// Inflates one compressed block (a SYN_STREAM's, SYN_REPLY's or HEADERS' header bytes)
    /// and reads it.
    pub fn decode(&mut self, compressed: &[u8]) -> Result<Headers> {
        let block = self.inflate(compressed)?;
        Headers::from_block(&block)
    }

    fn inflate(&mut self, input: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut chunk = [0u8; 4096];
        let mut consumed = 0;
        loop {
            let (in0, out0) = (self.zlib.total_in(), self.zlib.total_out());
            let result =
                self.zlib
                    .decompress(&input[consumed..], &mut chunk, FlushDecompress::Sync);
            let read = (self.zlib.total_in() - in0) as usize;
            let produced = (self.zlib.total_out() - out0) as usize;
            consumed += read;
            if out.len() + produced > MAX_BLOCK {
                return Err(Error::TooLarge);
            }
            out.extend_from_slice(&chunk[..produced]);
            match result {
                Err(e) => match e.needs_dictionary() {
                    Some(DICTIONARY_ID) => {
                        self.zlib
                            .set_dictionary(&DICTIONARY)
                            .map_err(|source| Error::Inflate { source })?;
                        continue;
                    }
                    Some(id) => return Err(Error::WrongDictionary { id }),
                    None => return Err(Error::Inflate { source: e }),
                },
                Ok(_) if consumed == input.len() && produced < chunk.len() => return Ok(out),
                Ok(_) if read == 0 && produced == 0 => {
                    return Err(Error::Malformed {
                        what: "the compressed block does not progress",
                    });
                }
                Ok(_) => {}
            }
        }
    }
}
