//! Resuming a batch: which earlier run folders a batch (or `msc merge`) trusts, and the
//! clearing of one it does not (only of what a run wrote there; a folder holding anything
//! else is refused).

use super::record::SummaryRecord;
use crate::digest::sha256_hex;
use crate::output::lock::LOCK_FILE;
use crate::output::ply::{frame_name, is_numbered};
use crate::output::run_dir::{
    check_outputs, ENERGY_FILE, FRAMES_DIR, RENDER_DIR, SCENE_FILE, SUMMARY_FILE,
};
use crate::output::OutputError;
use crate::run::BackendArg;
use crate::scene::LoadedScene;
use std::path::Path;

/// The earlier run in `dir`, when its `summary.json` vouches that it is complete and ran
/// exactly this scene:
/// - the summary parses (one from before sizes and hashes were recorded does not), this
///   msc version made it, and the run finished: not interrupted, and all its steps done unless it diverged (a
///   diverged run is complete: rerunning it would diverge again);
/// - with `--backend cpu` or `gpu`, it ran on that backend;
/// - the scene name, the resolved scene's hash and every input file's size and hash are
///   those of `scene` now;
/// - it lists `energy.csv`, `scene.toml` and frames 0 to N-1 for the N it wrote, each
///   listed file exists with its recorded size and hash, and `frames/` holds no other.
///
/// Otherwise `Err` says why, or is `None` when there was no earlier run in `dir`.
pub(super) fn completed(
    dir: &Path,
    scene: &LoadedScene,
    backend: BackendArg,
) -> Result<SummaryRecord, Option<String>> {
    match dir.try_exists() {
        Ok(false) => return Err(None),
        Ok(true) => {}
        Err(e) => return Err(Some(format!("cannot look into the folder: {e}"))),
    }
    let why = |s: &str| Err(Some(s.to_string()));
    let summary_path = dir.join(SUMMARY_FILE);
    // A summary that is there but cannot be read (permissions) is named as such, not
    // mistaken for a run that never finished.
    match std::fs::File::open(&summary_path) {
        Ok(_) if summary_path.is_file() => {}
        Ok(_) => return why("summary.json is not a file"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return why("no summary.json (the earlier run did not finish)")
        }
        Err(e) => return Err(Some(format!("cannot read summary.json: {e}"))),
    }
    let Some(s) = SummaryRecord::read(&summary_path) else {
        return why("summary.json is unreadable or from an older msc");
    };
    // Another version may compute other results from the same resolved scene.
    let ours = env!("CARGO_PKG_VERSION");
    if s.msc_version != ours {
        return Err(Some(format!(
            "the earlier run was made by msc {} (this is msc {ours})",
            s.msc_version
        )));
    }
    if s.interrupted {
        return why("the earlier run was interrupted");
    }
    if s.finite && s.steps != s.steps_requested {
        return why("the earlier run did not do all its steps");
    }
    let same_backend = match backend {
        BackendArg::Cpu => s.backend == "cpu",
        BackendArg::Gpu => s.backend != "cpu",
        BackendArg::Auto => true,
    };
    if !same_backend {
        return Err(Some(format!(
            "the earlier run used the backend {}",
            s.backend
        )));
    }
    if s.scene != scene.name || s.scene_sha256 != sha256_hex(scene.resolved_toml.as_bytes()) {
        return why("the resolved scene changed");
    }
    if s.inputs != scene.inputs {
        let changed = scene
            .inputs
            .iter()
            .find(|d| !s.inputs.contains(d))
            .or_else(|| s.inputs.iter().find(|d| !scene.inputs.contains(d)))
            .map_or("an input", |d| d.path.as_str());
        return Err(Some(format!("{changed} changed since the earlier run")));
    }
    let listed = |name: &str| s.outputs.iter().find(|d| d.path == name);
    let frames: Vec<&str> = s
        .outputs
        .iter()
        .filter_map(|d| d.path.strip_prefix(&format!("{FRAMES_DIR}/")))
        .collect();
    // Exactly frame 0, 1, ... in order: a frame listed twice stands for no other.
    let every_frame = frames.len() as u64 == s.frames
        && (0u64..)
            .zip(&frames)
            .all(|(i, name)| *name == frame_name(i));
    let scene_copy_ok = listed(SCENE_FILE).is_some_and(|d| d.sha256 == s.scene_sha256);
    if listed(ENERGY_FILE).is_none() || !scene_copy_ok || !every_frame {
        return why("summary.json does not vouch for every output");
    }
    check_outputs(dir, &s.outputs).map_err(Some)?;
    // A frame the summary does not list (another run's) would be read as this run's.
    let unlisted = entries(dir, true).map_err(Some)?.into_iter().find(|p| {
        p.strip_prefix(&format!("{FRAMES_DIR}/"))
            .is_some_and(|n| is_numbered(n, "ply") && !frames.contains(&n))
    });
    if let Some(p) = unlisted {
        return Err(Some(format!("{p} is not one of the earlier run's frames")));
    }
    Ok(s)
}

/// Whether the file `name` of a run folder is one a run writes there: an output, its
/// hidden temporary file (an interrupted run may leave one) or the lock.
fn run_file(name: &str) -> bool {
    name == LOCK_FILE
        || [SCENE_FILE, ENERGY_FILE, SUMMARY_FILE]
            .iter()
            .any(|f| name == *f || name.starts_with(&format!(".{f}.tmp-")))
}

/// The extension of the numbered images a run writes in its sub-folder `name` (frames,
/// render), or `None` for any other folder.
fn numbered_dir(name: &str) -> Option<&'static str> {
    match name {
        FRAMES_DIR => Some("ply"),
        RENDER_DIR => Some("png"),
        _ => None,
    }
}

/// `frame_NNNNNN.<ext>` or `.frame_NNNNNN.<ext>.tmp-*` (one an interrupted run was
/// writing).
fn numbered_file(name: &str, ext: &str) -> bool {
    is_numbered(name, ext)
        || name
            .strip_prefix('.')
            .and_then(|n| n.split_once(".tmp-"))
            .is_some_and(|(n, _)| is_numbered(n, ext))
}

/// The entries of `dir`, as paths below it, that a run writes (`ours`) or that no msc
/// run wrote (`!ours`), sorted. `Err` when `dir` or one of its run sub-folders cannot be
/// listed (or `dir` is a file).
fn entries(dir: &Path, ours: bool) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    for (name, is_dir) in list(dir)? {
        match (is_dir, numbered_dir(&name)) {
            (true, Some(ext)) => {
                for (n, d) in list(&dir.join(&name))? {
                    if ours == (!d && numbered_file(&n, ext)) {
                        found.push(format!("{name}/{n}{}", if d { "/" } else { "" }));
                    }
                }
            }
            (true, None) if !ours => found.push(format!("{name}/")),
            (false, _) if ours == run_file(&name) => found.push(name),
            _ => {}
        }
    }
    found.sort();
    Ok(found)
}

/// The entries of `dir` that no msc run wrote, for a refusal: anything but the lock,
/// `scene.toml`, `energy.csv`, `summary.json` (and their temporary files), frames in
/// `frames/` and frame images in `render/`.
pub(super) fn foreign_entries(dir: &Path) -> Result<Vec<String>, String> {
    entries(dir, false)
}

/// (name, is a folder) of each entry of `dir`; a name that is not UTF-8 is shown lossily.
fn list(dir: &Path) -> Result<Vec<(String, bool)>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot list it: {e}"))?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list it: {e}"))?;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        out.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
    }
    Ok(out)
}

/// Removes what an incomplete run left in its folder (the files [`foreign_entries`]
/// accepts, but the lock), so nothing of it is mistaken for the new run's. Anything else
/// is left alone, and the folder itself stays.
pub(super) fn clear(dir: &Path) -> Result<(), OutputError> {
    // Not there (nothing to clear), or not listable: creating the run folder says why.
    let Ok(ours) = entries(dir, true) else {
        return Ok(());
    };
    for name in ours.iter().filter(|n| *n != LOCK_FILE) {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(OutputError::Write { path, source }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(tag: &str, files: &[&str]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("msc-resume-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for f in files {
            let path = dir.join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            if f.ends_with('/') {
                std::fs::create_dir_all(&path).unwrap();
            } else {
                std::fs::write(&path, "x").unwrap();
            }
        }
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn what_a_run_leaves_is_its_own_and_is_cleared() {
        let dir = folder(
            "own",
            &[
                ".msc.lock",
                "scene.toml",
                ".energy.csv.tmp-12-0",
                "frames/frame_000000.ply",
                "frames/.frame_000007.ply.tmp-12-3",
                "render/frame_000000.png",
            ],
        );
        assert_eq!(foreign_entries(&dir).unwrap(), Vec::<String>::new());
        clear(&dir).unwrap();
        let left: Vec<_> = list(&dir).unwrap().into_iter().map(|(n, _)| n).collect();
        assert!(!left.contains(&"scene.toml".to_string()), "{left:?}");
        assert!(!left.iter().any(|n| n.starts_with(".energy")), "{left:?}");
        assert_eq!(list(&dir.join("frames")).unwrap(), vec![]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_folder_the_user_made_is_named_and_never_cleared() {
        let dir = folder(
            "user",
            &["thesis.txt", "sub/", "frames/notes.txt", "energy.csv"],
        );
        assert_eq!(
            foreign_entries(&dir).unwrap(),
            ["frames/notes.txt", "sub/", "thesis.txt"]
        );
        clear(&dir).unwrap();
        assert!(dir.join("thesis.txt").is_file() && dir.join("sub").is_dir());
        assert!(dir.join("frames/notes.txt").is_file());
        assert!(foreign_entries(&dir.join("thesis.txt")).is_err());
        clear(&dir.join("thesis.txt")).unwrap();
        assert!(dir.join("thesis.txt").is_file());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
