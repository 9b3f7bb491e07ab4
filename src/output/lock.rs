//! Advisory locks on output folders, so that two processes never write into one folder at
//! once: a run folder (`msc run --out D`, and every run of a batch) is locked by its
//! writer; a batch folder is locked by a whole batch, or shared by the shards of a
//! sharded one, each of which also locks its own shard.
//!
//! The lock is the OS's advisory file lock (`flock` on Unix) on a hidden file in the
//! folder, `.msc.lock`, which holds the process ids of its holders (an exclusive holder
//! replaces the list, a shared one adds itself) for the message of the one refused. The OS releases it when the process ends, however it ends: a killed run never
//! leaves a stale lock behind. The file itself stays, emptied by an exclusive holder as it
//! leaves (removing it would let a third process lock a new file while the second still
//! holds the old one).

use super::OutputError;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file of a folder.
pub const LOCK_FILE: &str = ".msc.lock";

/// Exclusive: the only writer. Shared: one of several cooperating writers (the shards of a
/// batch), which excludes an exclusive writer only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    Exclusive,
    Shared,
}

/// A held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct FolderLock {
    file: File,
    kind: LockKind,
}

impl Drop for FolderLock {
    /// An exclusive holder empties the file as it leaves, so a folder nobody writes holds
    /// an empty `.msc.lock` (the lock itself goes with the file's closing).
    fn drop(&mut self) {
        if self.kind == LockKind::Exclusive {
            let _ = self.file.set_len(0);
        }
    }
}

impl FolderLock {
    /// Locks `DIR/.msc.lock` for the whole folder `dir` (which must exist).
    pub fn folder(dir: &Path, kind: LockKind) -> Result<Self, OutputError> {
        Self::file(dir, &dir.join(LOCK_FILE), kind)
    }

    /// Locks the file `lock` (created if needed) on behalf of the folder `dir`, which the
    /// refusal names. [`OutputError::Locked`] when another process holds a conflicting
    /// lock; on a file system without locks, the caller goes on unlocked.
    pub fn file(dir: &Path, lock: &Path, kind: LockKind) -> Result<Self, OutputError> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(lock)
            .map_err(|source| OutputError::write(lock, source))?;
        let tried = match kind {
            LockKind::Exclusive => file.try_lock(),
            LockKind::Shared => file.try_lock_shared(),
        };
        match tried {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(OutputError::Locked {
                    path: dir.to_path_buf(),
                    holders: holders(&mut file),
                })
            }
            Err(TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Unsupported => {}
            Err(TryLockError::Error(source)) => return Err(OutputError::write(lock, source)),
        }
        // Best effort: the ids are only for the message of a process refused later. One
        // short appended line per holder (the file is opened for appending).
        let cleared = match kind {
            LockKind::Exclusive => file.set_len(0),
            LockKind::Shared => Ok(()),
        };
        let _ = cleared
            .and_then(|()| file.write_all(format!("{}\n", std::process::id()).as_bytes()))
            .and_then(|()| file.flush());
        Ok(Self { file, kind })
    }
}

/// The process ids the holders wrote, those still running where that can be told (a
/// shared holder that has ended leaves its line behind).
fn holders(file: &mut File) -> Vec<u32> {
    let mut text = String::new();
    if file
        .rewind()
        .and_then(|()| file.read_to_string(&mut text))
        .is_err()
    {
        return Vec::new();
    }
    let mut pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    pids.dedup();
    #[cfg(target_os = "linux")]
    pids.retain(|p| Path::new(&format!("/proc/{p}")).exists());
    pids
}

/// The lock file of shard `name` (e.g. `runs.shard-2-of-4.csv`) in the batch folder `dir`.
pub fn shard_lock_path(dir: &Path, table: &str) -> PathBuf {
    dir.join(format!(".{table}.lock"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within one process, two opens of the lock file are two open file descriptions, so
    /// flock-style locks conflict between them as between processes.
    #[test]
    fn a_second_writer_is_refused_with_the_holders_pid_until_the_first_is_done() {
        let dir = tempfile::tempdir().unwrap();
        let first = FolderLock::folder(dir.path(), LockKind::Exclusive).unwrap();
        match FolderLock::folder(dir.path(), LockKind::Exclusive) {
            Err(OutputError::Locked { path, holders }) => {
                assert_eq!(path, dir.path());
                assert_eq!(holders, [std::process::id()]);
            }
            other => panic!("{other:?}"),
        }
        assert!(FolderLock::folder(dir.path(), LockKind::Shared).is_err());
        drop(first);
        let lock_file = dir.path().join(LOCK_FILE);
        assert_eq!(
            std::fs::read(&lock_file).unwrap(),
            b"",
            "left behind by an ended writer"
        );
        let a = FolderLock::folder(dir.path(), LockKind::Shared).unwrap();
        let b = FolderLock::folder(dir.path(), LockKind::Shared).unwrap();
        assert!(FolderLock::folder(dir.path(), LockKind::Exclusive).is_err());
        drop((a, b));
        FolderLock::folder(dir.path(), LockKind::Exclusive).unwrap();
    }
}
