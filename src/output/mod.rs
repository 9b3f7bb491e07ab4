//! Run outputs, every file written atomically (temp file, fsync, rename):
//! - `energy.csv` ([`energy`]): energy terms every `output.every` steps and at the last step;
//! - `frames/frame_NNNNNN.ply` ([`ply`]): positions, velocities, charges and faces;
//! - `summary.json` ([`summary`]): backend, sizes, timings, final energies, solver stats,
//!   and the size and SHA-256 of each file above and of each input: written last, it
//!   vouches for the rest;
//! - `scene.toml`: the resolved scene, to re-run it.
//!
//! Outside run folders, `msc bench --out` ([`lines`]) holds its records so far after each.
//!
//! [`RunDir`] lays these out in one folder.

pub mod atomic;
pub mod energy;
pub mod inputs;
pub mod lines;
pub mod lock;
pub mod ply;
pub mod ply_read;
pub mod run_dir;
pub mod summary;

pub use atomic::{write_atomic, AtomicFile};
pub use energy::EnergyLog;
pub use lines::LinesFile;
pub use run_dir::RunDir;
pub use summary::Summary;

use std::path::{Path, PathBuf};

/// An output that could not be written. Each names the path; the OS error is the source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputError {
    #[error("cannot create the directory {}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot serialize {}", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{} is not a file path", path.display())]
    NotAFile { path: PathBuf },
    #[error("cannot write {}: {message}", path.display())]
    Mismatch { path: PathBuf, message: String },
    /// An output would replace a file the command reads (`msc run scene.toml --out .`,
    /// `msc plot R --out R/energy.csv`): nothing was written.
    #[error(
        "{} is an input of this command (the {what}); the output would overwrite it: \
         choose another {option}",
        path.display()
    )]
    WouldOverwriteInput {
        path: PathBuf,
        what: &'static str,
        /// The option that names the output (`--out`, `--gif`, ...).
        option: &'static str,
    },
    /// Another process holds the folder's lock ([`lock`]): two writers would mix their
    /// outputs.
    #[error(
        "{} is being written by another msc process{}; wait for it to end, or choose \
         another --out",
        path.display(),
        match holders.as_slice() {
            [] => String::new(),
            [p] => format!(" (pid {p})"),
            many => format!(
                " (pids {})",
                many.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            ),
        }
    )]
    Locked {
        path: PathBuf,
        /// The holders' process ids, when known.
        holders: Vec<u32>,
    },
    /// An output just written could not be read back to record its size and hash.
    #[error("cannot read back {} to record its hash", path.display())]
    ReadBack {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl OutputError {
    pub(crate) fn write(path: &Path, source: std::io::Error) -> Self {
        Self::Write {
            path: path.to_path_buf(),
            source,
        }
    }
    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Self::CreateDir { path, .. }
            | Self::Write { path, .. }
            | Self::Json { path, .. }
            | Self::NotAFile { path }
            | Self::Mismatch { path, .. }
            | Self::WouldOverwriteInput { path, .. }
            | Self::Locked { path, .. }
            | Self::ReadBack { path, .. } => path,
        }
    }
}
