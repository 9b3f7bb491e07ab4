//! Atomic file writes: write to a temporary file in the target's directory, flush and
//! fsync it, then rename it over the target. A run killed half-way leaves at most a
//! hidden `.NAME.tmp-*` file, never a complete-looking truncated output.

use super::OutputError;
use crate::digest::{FileDigest, StreamDigest};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes temp files of one process (several writers may be open at once).
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A file being written; it appears under its final name only on [`AtomicFile::commit`].
/// Dropping it uncommitted removes the temporary file.
#[derive(Debug)]
pub struct AtomicFile {
    target: PathBuf,
    temp: PathBuf,
    writer: Option<BufWriter<File>>,
    /// Every byte handed to the file, for [`AtomicFile::commit_digest`].
    written: StreamDigest,
}

impl AtomicFile {
    /// Opens a fresh temporary file beside `target`.
    pub fn create(target: &Path) -> Result<Self, OutputError> {
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| OutputError::NotAFile {
                path: target.to_path_buf(),
            })?;
        // create_new: never reuse (and so never clobber) a file that already exists.
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let temp = dir.join(format!(".{name}.tmp-{}-{n}", std::process::id()));
            match OpenOptions::new().write(true).create_new(true).open(&temp) {
                Ok(file) => {
                    return Ok(Self {
                        target: target.to_path_buf(),
                        temp,
                        writer: Some(BufWriter::new(file)),
                        written: StreamDigest::default(),
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(source) => return Err(OutputError::write(target, source)),
            }
        }
    }

    /// The final path.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Flushes, fsyncs and renames the temporary file onto the target.
    pub fn commit(self) -> Result<(), OutputError> {
        self.commit_digest("").map(|_| ())
    }

    /// [`Self::commit`], returning the size and SHA-256 of the bytes written (recorded
    /// under `path`): what this writer put there, whatever another process may do to the
    /// file afterwards.
    pub fn commit_digest(mut self, path: &str) -> Result<FileDigest, OutputError> {
        let writer = self.writer.take().expect("writer present until commit");
        let file = writer.into_inner().map_err(|e| e.into_error());
        self.rename_into_place(file)?;
        Ok(std::mem::take(&mut self.written).finish(path))
    }

    /// Keeps the first `len` bytes written (those known to be on disk: flushed before),
    /// dropping whatever is still buffered, and renames them onto the target. For a
    /// streamed log that hit a write error (a full disk): the rows before it survive.
    pub fn commit_prefix(mut self, len: u64) -> Result<(), OutputError> {
        let writer = self.writer.take().expect("writer present until commit");
        let (file, _unwritten) = writer.into_parts();
        let file = file.set_len(len).map(|()| file);
        self.rename_into_place(file)
    }

    /// fsyncs `file`, renames the temporary file onto the target and makes the rename
    /// durable; on any failure removes the temporary file and names the target.
    fn rename_into_place(&self, file: std::io::Result<File>) -> Result<(), OutputError> {
        let result = file.and_then(|file| {
            file.sync_all()?;
            drop(file);
            std::fs::rename(&self.temp, &self.target)?;
            sync_dir(&self.target);
            Ok(())
        });
        result.map_err(|source| {
            let _ = std::fs::remove_file(&self.temp);
            OutputError::write(&self.target, source)
        })
    }

    /// Writes bytes, naming the target in the error.
    pub fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), OutputError> {
        self.write_all(bytes)
            .map_err(|source| OutputError::write(&self.target, source))
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.writer.as_mut().expect("not committed").write(buf)?;
        self.written.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.writer.as_mut().expect("not committed").flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.writer.take().is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// Makes the rename itself durable (best effort: not every platform can open a directory).
fn sync_dir(target: &Path) {
    #[cfg(unix)]
    if let Some(dir) = target.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    #[cfg(not(unix))]
    let _ = target;
}

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let mut file = AtomicFile::create(path)?;
    file.write_bytes(bytes)?;
    file.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("msc-atomic-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn commit_replaces_the_target_and_leaves_no_temp_file() {
        let dir = temp_dir("commit");
        let target = dir.join("a.txt");
        std::fs::write(&target, "old contents that are longer").unwrap();
        write_atomic(&target, b"new").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(entries(&dir), vec!["a.txt".to_string()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_uncommitted_file_never_appears() {
        let dir = temp_dir("drop");
        let target = dir.join("b.txt");
        {
            let mut f = AtomicFile::create(&target).unwrap();
            f.write_bytes(b"partial").unwrap();
            // While open, only the hidden temporary exists.
            let names = entries(&dir);
            assert_eq!(names.len(), 1);
            assert!(names[0].starts_with(".b.txt.tmp-"), "{names:?}");
        }
        assert!(entries(&dir).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn errors_name_the_path() {
        let dir = temp_dir("missing");
        let target = dir.join("no-such-dir").join("c.txt");
        let err = write_atomic(&target, b"x").unwrap_err();
        assert!(err.to_string().contains("c.txt"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
