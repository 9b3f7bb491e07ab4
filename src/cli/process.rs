//! Process set-up of the `msc` binary (never of the library, whose embedders own their
//! process): a private runtime directory for Mesa when none is set, and stop-request
//! handlers for the commands that write run folders.

use std::path::{Path, PathBuf};

/// Gives the process a private `XDG_RUNTIME_DIR` when none is set or the one set is not
/// a writable directory. Mesa's drivers print "XDG_RUNTIME_DIR is invalid or not set" at
/// every adapter enumeration on a headless server otherwise. Must run before any thread
/// starts (it sets an environment variable).
pub fn ensure_runtime_dir() {
    let usable = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .is_some_and(|d| is_private_writable_dir(&d, false));
    if usable {
        return;
    }
    if let Some(dir) = private_dir() {
        // Safe: called first thing in `main`, before any other thread exists.
        std::env::set_var("XDG_RUNTIME_DIR", dir);
    }
}

/// `<temp>/msc-runtime-<uid>`, created 0700 and reused; `None` when it exists but is not
/// ours and private (then Mesa keeps its note rather than us using a shared folder).
fn private_dir() -> Option<PathBuf> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        let uid = std::fs::metadata("/proc/self").ok()?.uid();
        let dir = std::env::temp_dir().join(format!("msc-runtime-{uid}"));
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
        is_private_writable_dir(&dir, true).then_some(dir)
    }
    #[cfg(not(unix))]
    None
}

/// A directory we can write; with `private`, also owned by us and closed to others.
fn is_private_writable_dir(dir: &Path, private: bool) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return false;
    };
    if !meta.is_dir() || meta.permissions().readonly() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if private {
            let Ok(me) = std::fs::metadata("/proc/self") else {
                return false;
            };
            return meta.uid() == me.uid() && meta.mode() & 0o077 == 0;
        }
        // Writable by us: owner with the owner write bit, or root.
        let Ok(me) = std::fs::metadata("/proc/self") else {
            return true;
        };
        me.uid() == 0 || (meta.uid() == me.uid() && meta.mode() & 0o200 != 0)
    }
    #[cfg(not(unix))]
    {
        let _ = private;
        true
    }
}

/// Installs the SIGINT/SIGTERM handlers for the commands that write run folders (`run`,
/// `sweep`, `batch`, `fit`); the others keep the default (stop at once).
pub fn install_stop_handlers(command: &super::Command) {
    use super::Command;
    if matches!(
        command,
        Command::Run(_) | Command::Sweep(_) | Command::Batch(_) | Command::Fit(_)
    ) {
        if let Err(e) = crate::interrupt::install() {
            eprintln!("note: Ctrl-C will stop at once, without writing the outputs so far: {e}");
        }
    }
}
