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

/// The text of the regular file `path` (UTF-8).
pub fn read_to_string(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    io::Read::read_to_string(&mut open(path)?, &mut text)?;
    Ok(text)
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
    }
}
