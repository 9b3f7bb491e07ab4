//! The folder one run writes into.

use super::energy::EnergyLog;
use super::{atomic::write_atomic, ply, OutputError, Summary};
use crate::model::State;
use std::path::{Path, PathBuf};

/// File names inside a run folder.
pub const ENERGY_FILE: &str = "energy.csv";
pub const SUMMARY_FILE: &str = "summary.json";
pub const SCENE_FILE: &str = "scene.toml";
pub const FRAMES_DIR: &str = "frames";
/// Images drawn from the frames (`msc render`, `msc run --render`): `frame_NNNNNN.png`.
pub const RENDER_DIR: &str = "render";

/// A run folder: creates it, and writes the outputs under their fixed names.
#[derive(Debug)]
pub struct RunDir {
    root: PathBuf,
    frames: bool,
    frame_count: u64,
}

impl RunDir {
    /// Creates `root` (and `frames/` when `frames` is set). An earlier run's `energy.csv`,
    /// `summary.json`, frames and rendered images in the same folder are removed first, so
    /// a run that is stopped never sits beside outputs that look like its own.
    pub fn create(root: &Path, frames: bool) -> Result<Self, OutputError> {
        std::fs::create_dir_all(root).map_err(|source| OutputError::CreateDir {
            path: root.to_path_buf(),
            source,
        })?;
        for name in [ENERGY_FILE, SUMMARY_FILE] {
            let path = root.join(name);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(OutputError::write(&path, source)),
            }
        }
        let frames_dir = root.join(FRAMES_DIR);
        ply::clear_frames(&frames_dir)?;
        ply::clear_numbered(&root.join(RENDER_DIR), "png")?;
        if frames {
            std::fs::create_dir_all(&frames_dir).map_err(|source| OutputError::CreateDir {
                path: frames_dir.clone(),
                source,
            })?;
        }
        Ok(Self {
            root: root.to_path_buf(),
            frames,
            frame_count: 0,
        })
    }

    /// Refuses a folder where an output would replace one of `inputs` ((path, what) pairs,
    /// e.g. the scene file): run folders are overwritten, inputs never are.
    pub fn check_inputs(root: &Path, inputs: &[(&Path, &'static str)]) -> Result<(), OutputError> {
        let outputs = [SCENE_FILE, ENERGY_FILE, SUMMARY_FILE].map(|n| root.join(n));
        for &(input, what) in inputs {
            let Ok(input_real) = input.canonicalize() else {
                continue;
            };
            let in_frames =
                input_real.parent() == root.join(FRAMES_DIR).canonicalize().ok().as_deref();
            let clobbered = in_frames
                || outputs
                    .iter()
                    .any(|o| o.canonicalize().is_ok_and(|o| o == input_real));
            if clobbered {
                return Err(OutputError::WouldOverwriteInput {
                    path: input.to_path_buf(),
                    what,
                });
            }
        }
        Ok(())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    /// True when this run writes PLY frames.
    pub fn writes_frames(&self) -> bool {
        self.frames
    }
    pub fn frame_count(&self) -> u64 {
        self.frame_count
    }
    pub fn energy_path(&self) -> PathBuf {
        self.root.join(ENERGY_FILE)
    }
    pub fn summary_path(&self) -> PathBuf {
        self.root.join(SUMMARY_FILE)
    }
    pub fn scene_path(&self) -> PathBuf {
        self.root.join(SCENE_FILE)
    }
    pub fn frame_path(&self, index: u64) -> PathBuf {
        self.root.join(FRAMES_DIR).join(ply::frame_name(index))
    }

    /// Opens `energy.csv` (visible under that name once finished).
    pub fn energy_log(&self) -> Result<EnergyLog, OutputError> {
        EnergyLog::create(&self.energy_path())
    }
    pub fn write_scene(&self, toml: &str) -> Result<(), OutputError> {
        write_atomic(&self.scene_path(), toml.as_bytes())
    }
    /// Writes the next frame (numbered from 0); a no-op when frames are off.
    pub fn write_frame(
        &mut self,
        state: &State,
        charges: &[f64],
        faces: &[[u32; 3]],
    ) -> Result<(), OutputError> {
        if !self.frames {
            return Ok(());
        }
        ply::write_frame(&self.frame_path(self.frame_count), state, charges, faces)?;
        self.frame_count += 1;
        Ok(())
    }
    pub fn write_summary(&self, summary: &Summary) -> Result<(), OutputError> {
        summary.write(&self.summary_path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_clears_a_previous_run_and_nothing_else() {
        let root = std::env::temp_dir().join(format!("msc-rundir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join(FRAMES_DIR)).unwrap();
        std::fs::create_dir_all(root.join(RENDER_DIR)).unwrap();
        for f in [
            ENERGY_FILE,
            SUMMARY_FILE,
            "notes.txt",
            "frames/frame_000009.ply",
            "render/frame_000009.png",
        ] {
            std::fs::write(root.join(f), "old").unwrap();
        }
        std::fs::write(root.join("frames/mine.ply"), "keep").unwrap();
        let dir = RunDir::create(&root, true).unwrap();
        assert!(!dir.energy_path().exists());
        assert!(!dir.summary_path().exists());
        assert!(!dir.frame_path(9).exists());
        assert!(!root.join("render/frame_000009.png").exists());
        assert!(root.join("notes.txt").exists());
        assert!(root.join("frames/mine.ply").exists());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
