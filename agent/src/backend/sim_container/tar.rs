//! The tar archives `kubectl cp` sends and expects (pure): USTAR headers, PAX extended headers
//! and GNU long names when reading (Go's `archive/tar` writes USTAR, and PAX for long names);
//! USTAR, with a PAX header for a name over 100 bytes, when writing. Regular files and
//! directories only: links and devices are skipped, as a container's copy would not need them.

use bytes::Bytes;

/// One block.
const BLOCK: usize = 512;

/// What an archive holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory.
    Dir(String),
    /// A regular file.
    File(String, Bytes),
}

/// Why an archive could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TarError {
    /// A header's checksum does not match.
    #[error("This does not look like a tar archive")]
    Checksum,
    /// The archive ends inside an entry.
    #[error("Unexpected EOF in archive")]
    Truncated,
    /// A numeric field is not octal.
    #[error("Archive contains an invalid number")]
    Number,
}

fn octal(field: &[u8]) -> Result<u64, TarError> {
    let text: Vec<u8> = field
        .iter()
        .copied()
        .filter(|b| *b != 0 && *b != b' ')
        .collect();
    if text.is_empty() {
        return Ok(0);
    }
    let text = std::str::from_utf8(&text).map_err(|_| TarError::Number)?;
    u64::from_str_radix(text, 8).map_err(|_| TarError::Number)
}

fn text(field: &[u8]) -> String {
    let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

fn checksum(header: &[u8]) -> u64 {
    header
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if (148..156).contains(&i) {
                u64::from(b' ')
            } else {
                u64::from(*b)
            }
        })
        .sum()
}

/// The `path` record of a PAX extended header, if it has one.
fn pax_path(data: &[u8]) -> Option<String> {
    let mut rest = data;
    let mut path = None;
    while !rest.is_empty() {
        let space = rest.iter().position(|b| *b == b' ')?;
        let len: usize = std::str::from_utf8(&rest[..space]).ok()?.parse().ok()?;
        if len <= space || len > rest.len() {
            return path;
        }
        let record = &rest[space + 1..len];
        let record = record.strip_suffix(b"\n").unwrap_or(record);
        if let Some(value) = record.strip_prefix(b"path=") {
            path = Some(String::from_utf8_lossy(value).into_owned());
        }
        rest = &rest[len..];
    }
    path
}

/// The entries of an archive, in order.
pub fn read(archive: &[u8]) -> Result<Vec<Entry>, TarError> {
    let mut entries = Vec::new();
    let mut at = 0;
    let mut long_name: Option<String> = None;
    while at + BLOCK <= archive.len() {
        let header = &archive[at..at + BLOCK];
        if header.iter().all(|b| *b == 0) {
            return Ok(entries);
        }
        if octal(&header[148..156])? != checksum(header) {
            return Err(TarError::Checksum);
        }
        let size = usize::try_from(octal(&header[124..136])?).map_err(|_| TarError::Number)?;
        let start = at + BLOCK;
        let end = start.checked_add(size).ok_or(TarError::Number)?;
        if end > archive.len() {
            return Err(TarError::Truncated);
        }
        let data = &archive[start..end];
        at = start + size.div_ceil(BLOCK) * BLOCK;
        let mut name = text(&header[0..100]);
        if &header[257..262] == b"ustar" {
            let prefix = text(&header[345..500]);
            if !prefix.is_empty() {
                name = format!("{prefix}/{name}");
            }
        }
        let name = long_name.take().unwrap_or(name);
        match header[156] {
            b'0' | 0 | b'7' => entries.push(Entry::File(name, Bytes::copy_from_slice(data))),
            b'5' => entries.push(Entry::Dir(name)),
            b'x' => long_name = pax_path(data),
            b'L' => long_name = Some(text(data)),
            // Links, devices, FIFOs, global headers: not in a simulated container.
            _ => {}
        }
    }
    // No end-of-archive block: a piece of a block left is not an archive (or a cut one).
    match archive.len() - at.min(archive.len()) {
        0 => Ok(entries),
        _ if at == 0 => Err(TarError::Checksum),
        _ => Err(TarError::Truncated),
    }
}

fn put(header: &mut [u8], at: usize, len: usize, value: &[u8]) {
    let n = value.len().min(len);
    header[at..at + n].copy_from_slice(&value[..n]);
}

fn put_octal(header: &mut [u8], at: usize, len: usize, value: u64) {
    let text = format!("{value:0width$o}", width = len - 1);
    put(header, at, len, text.as_bytes());
}

fn header(name: &str, size: usize, kind: u8, mode: u64) -> [u8; BLOCK] {
    let mut h = [0u8; BLOCK];
    put(&mut h, 0, 100, name.as_bytes());
    put_octal(&mut h, 100, 8, mode);
    put_octal(&mut h, 108, 8, 0);
    put_octal(&mut h, 116, 8, 0);
    put_octal(&mut h, 124, 12, size as u64);
    put_octal(&mut h, 136, 12, 0);
    h[156] = kind;
    put(&mut h, 257, 6, b"ustar\0");
    put(&mut h, 263, 2, b"00");
    put(&mut h, 265, 32, b"root");
    put(&mut h, 297, 32, b"root");
    let sum = checksum(&h);
    put(&mut h, 148, 8, format!("{sum:06o}\0 ").as_bytes());
    h
}

fn pad(out: &mut Vec<u8>) {
    let rem = out.len() % BLOCK;
    if rem != 0 {
        out.resize(out.len() + BLOCK - rem, 0);
    }
}

/// An archive of `entries` (names relative, directories ending in `/` as GNU tar writes them).
pub fn write(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in entries {
        let (name, data, kind, mode) = match entry {
            Entry::Dir(name) => (
                format!("{}/", name.trim_end_matches('/')),
                &[][..],
                b'5',
                0o755,
            ),
            Entry::File(name, data) => (name.clone(), &data[..], b'0', 0o644),
        };
        if name.len() > 100 {
            // "LEN path=NAME\n", LEN counting itself.
            let body = format!(" path={name}\n");
            let mut len = body.len() + 1;
            while len.to_string().len() + body.len() != len {
                len += 1;
            }
            let record = format!("{len}{body}");
            out.extend_from_slice(&header("PaxHeader", record.len(), b'x', 0o644));
            out.extend_from_slice(record.as_bytes());
            pad(&mut out);
        }
        out.extend_from_slice(&header(&name, data.len(), kind, mode));
        out.extend_from_slice(data);
        pad(&mut out);
    }
    out.resize(out.len() + 2 * BLOCK, 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_round_trip_with_long_names_and_directories() {
        let long = format!("d/{}", "x".repeat(150));
        let entries = vec![
            Entry::Dir("d".into()),
            Entry::File("d/a.txt".into(), Bytes::from_static(b"hello\n")),
            Entry::File(long.clone(), Bytes::from(vec![7u8; 1000])),
            Entry::File("d/empty".into(), Bytes::new()),
        ];
        let archive = write(&entries);
        assert_eq!(archive.len() % BLOCK, 0);
        let mut back = read(&archive).unwrap();
        assert_eq!(back.remove(0), Entry::Dir("d/".into()));
        assert_eq!(back, entries[1..]);
    }

    #[test]
    fn broken_archives_are_refused_with_tars_words() {
        let archive = write(&[Entry::File("a".into(), Bytes::from(vec![1u8; 600]))]);
        let mut bad = archive.clone();
        bad[10] ^= 1;
        assert_eq!(read(&bad), Err(TarError::Checksum));
        assert_eq!(read(&archive[..700]), Err(TarError::Truncated));
        assert_eq!(read(&[]), Ok(vec![]));
    }

    #[test]
    fn gnu_tar_and_go_archives_read() {
        // `tar cf - d` by GNU tar 1.34 (USTAR/GNU format): a directory and a file.
        let mut gnu = header("d/", 0, b'5', 0o755).to_vec();
        let mut file = header("d/f", 3, b'0', 0o644);
        // GNU's magic "ustar  \0" instead of "ustar\000".
        file[257..265].copy_from_slice(b"ustar  \0");
        let sum = checksum(&file);
        file[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        gnu.extend_from_slice(&file);
        gnu.extend_from_slice(b"abc");
        pad(&mut gnu);
        gnu.resize(gnu.len() + 1024, 0);
        assert_eq!(
            read(&gnu).unwrap(),
            [
                Entry::Dir("d/".into()),
                Entry::File("d/f".into(), Bytes::from_static(b"abc"))
            ]
        );
    }
}
