//! Reading the files a user names (scenes, meshes, manifests, plans, frames, images): only
//! regular files. A device such as `/dev/zero` would be read until memory runs out and a
//! FIFO would block the open with no way to stop it, so both are refused up front.

use std::fs::File;
use std::io;
use std::path::Path;

/// Opens `path` for reading if it is a regular file (after following links).
pub fn open(path: &Path) -> io::Result<File> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a folder"
        } else {
            "not a regular file (a device, FIFO or socket)"
        };
        return Err(io::Error::new(io::ErrorKind::InvalidInput, what));
    }
    File::open(path)
}

/// The bytes of the regular file `path`.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut open(path)?, &mut bytes)?;
    Ok(bytes)
}

/// The text of the regular file `path` (UTF-8). Text that is not UTF-8 is an
/// [`io::ErrorKind::InvalidData`] error holding a [`NotUtf8`], which says where.
pub fn read_to_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read(path)?).map_err(|e| {
        let bytes = e.as_bytes();
        let offset = e.utf8_error().valid_up_to();
        let start = bytes[..offset]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        // The bytes before `offset` are valid UTF-8: count characters, not bytes.
        let column = 1 + String::from_utf8_lossy(&bytes[start..offset])
            .chars()
            .count();
        let bad = NotUtf8 {
            offset,
            line: 1 + bytes[..offset].iter().filter(|&&b| b == b'\n').count(),
            column,
            byte: e.utf8_error().error_len().map(|_| bytes[offset]),
        };
        io::Error::new(io::ErrorKind::InvalidData, bad)
    })
}

/// Where a file stops being UTF-8 text: its first invalid byte.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not UTF-8 text: {} at line {line}, column {column} (byte offset {offset})",
    match byte {
        Some(b) => format!("invalid byte 0x{b:02X}"),
        None => "a character cut off by the end of the file".to_string(),
    }
)]
pub struct NotUtf8 {
    /// Bytes before the first invalid one (std's `Utf8Error::valid_up_to`).
    pub offset: usize,
    /// 1-based line and column (in characters) of that byte.
    pub line: usize,
    pub column: usize,
    /// The invalid byte; `None` when the file ends inside a multi-byte character.
    pub byte: Option<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_and_a_folder_are_refused_a_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let e = read(dir.path()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(e.to_string(), "a folder");
        #[cfg(unix)]
        {
            let e = read(Path::new("/dev/zero")).unwrap_err();
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
        let p = dir.path().join("a.txt");
        std::fs::write(&p, "text").unwrap();
        assert_eq!(read_to_string(&p).unwrap(), "text");
        assert_eq!(read(&p).unwrap(), b"text");
        assert_eq!(
            read(&dir.path().join("missing")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        let q = dir.path().join("latin1.txt");
        // Not UTF-8: the first invalid byte's line, column and offset (the error said
        // only "stream did not contain valid UTF-8").
        std::fs::write(&q, b"a = 1\nb = 2\nc = \"\xc3\xa9\xff\"\n").unwrap();
        let e = read_to_string(&q).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        let want = NotUtf8 {
            offset: 19,
            line: 3,
            column: 7,
            byte: Some(0xff),
        };
        assert_eq!(e.get_ref().unwrap().downcast_ref::<NotUtf8>(), Some(&want));
        assert_eq!(
            e.to_string(),
            "not UTF-8 text: invalid byte 0xFF at line 3, column 7 (byte offset 19)"
        );
        std::fs::write(&q, b"ab\xc3").unwrap();
        let e = read_to_string(&q).unwrap_err().to_string();
        assert!(
            e.contains("cut off by the end") && e.contains("column 3"),
            "{e}"
        );
    }
}
