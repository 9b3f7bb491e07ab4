//! Resuming a batch: which earlier run folders a batch (or `msc merge`) trusts, and the
//! clearing of one it does not.

use super::record::SummaryRecord;
use crate::digest::sha256_hex;
use crate::output::run_dir::{check_outputs, ENERGY_FILE, FRAMES_DIR, SCENE_FILE, SUMMARY_FILE};
use crate::output::OutputError;
use crate::run::BackendArg;
use crate::scene::LoadedScene;
use std::path::Path;

/// The earlier run in `dir`, when its `summary.json` vouches that it is complete and ran
/// exactly this scene:
/// - the summary parses (one from before sizes and hashes were recorded does not), and
///   the run finished: not interrupted, and all its steps done unless it diverged (a
///   diverged run is complete: rerunning it would diverge again);
/// - with `--backend cpu` or `gpu`, it ran on that backend;
/// - the scene name, the resolved scene's hash and every input file's size and hash are
///   those of `scene` now;
/// - it lists `energy.csv`, `scene.toml` and as many frames as it wrote, and each listed
///   file exists with its recorded size and hash.
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
    let frames = s
        .outputs
        .iter()
        .filter(|d| d.path.starts_with(&format!("{FRAMES_DIR}/")))
        .count();
    let scene_copy_ok = listed(SCENE_FILE).is_some_and(|d| d.sha256 == s.scene_sha256);
    if listed(ENERGY_FILE).is_none() || !scene_copy_ok || frames as u64 != s.frames {
        return why("summary.json does not vouch for every output");
    }
    check_outputs(dir, &s.outputs).map_err(Some)?;
    Ok(s)
}

/// Removes an incomplete run's folder, so nothing of it is mistaken for the new run's.
pub(super) fn clear(dir: &Path) -> Result<(), OutputError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(OutputError::Write {
            path: dir.to_path_buf(),
            source,
        }),
    }
}
