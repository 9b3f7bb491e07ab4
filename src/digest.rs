//! Content digests (byte size and SHA-256) of files and texts: what a run read and what it
//! wrote, so that a later batch can tell a complete run from a stale or damaged one.
//!
//! SHA-256 because anyone can check it with standard tools (`sha256sum`), and because it
//! is fast enough here: with the CPU's SHA extensions it hashes over 1 GB/s, far below
//! the cost of computing the frames it hashes.

use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// One file: where it is, how many bytes it has, and the SHA-256 of those bytes
/// (lower-case hex, as `sha256sum` prints it).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileDigest {
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// SHA-256 of `bytes`, as lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The size and SHA-256 of bytes as they stream past: a writer's record of what it wrote
/// (not of what a later reader finds on disk).
#[derive(Clone, Debug, Default)]
pub struct StreamDigest {
    hasher: Sha256,
    bytes: u64,
}

impl StreamDigest {
    pub fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        self.bytes += bytes.len() as u64;
    }

    /// The digest of everything passed to [`Self::update`], recorded under `path`.
    pub fn finish(self, path: impl Into<String>) -> FileDigest {
        FileDigest {
            path: path.into(),
            bytes: self.bytes,
            sha256: hex(&self.hasher.finalize()),
        }
    }
}

impl FileDigest {
    /// The digest of in-memory contents, recorded under `path`.
    pub fn of_bytes(path: impl Into<String>, bytes: &[u8]) -> Self {
        Self {
            path: path.into(),
            bytes: bytes.len() as u64,
            sha256: sha256_hex(bytes),
        }
    }

    /// Reads `file` and records its digest under `path` (streamed: a large frame is never
    /// held whole in memory).
    pub fn of_file(path: impl Into<String>, file: &Path) -> std::io::Result<Self> {
        let mut f = std::fs::File::open(file)?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut bytes = 0u64;
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            bytes += n as u64;
        }
        Ok(Self {
            path: path.into(),
            bytes,
            sha256: hex(&hasher.finalize()),
        })
    }

    /// True when `file` has exactly this size and hash. The size is compared first, so a
    /// truncated or deleted file costs no hashing.
    pub fn matches(&self, file: &Path) -> bool {
        match std::fs::metadata(file) {
            Ok(m) if m.is_file() && m.len() == self.bytes => {}
            _ => return false,
        }
        FileDigest::of_file(self.path.clone(), file).is_ok_and(|d| d == *self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_match_the_standard_sha256_and_notice_any_change() {
        // FIPS 180-2 test vector.
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.csv");
        // Larger than one read buffer, so streaming is exercised.
        let text: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&file, &text).unwrap();
        let d = FileDigest::of_file("a.csv", &file).unwrap();
        assert_eq!(d, FileDigest::of_bytes("a.csv", &text));
        assert!(d.matches(&file));
        // Same size, one byte changed.
        let mut changed = text.clone();
        changed[100_000] ^= 1;
        std::fs::write(&file, &changed).unwrap();
        assert!(!d.matches(&file));
        // Truncated, emptied, deleted, or a folder in its place.
        std::fs::write(&file, &text[..1000]).unwrap();
        assert!(!d.matches(&file));
        std::fs::write(&file, b"").unwrap();
        assert!(!d.matches(&file));
        std::fs::remove_file(&file).unwrap();
        assert!(!d.matches(&file));
        std::fs::create_dir(&file).unwrap();
        assert!(!d.matches(&file));
    }
}
