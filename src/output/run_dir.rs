//! The folder one run writes into.

use super::energy::EnergyLog;
use super::inputs::{inside, refuse_overwrite};
use super::lock::{FolderLock, LockKind};
use super::{atomic::write_atomic, ply, OutputError, Summary};
use crate::digest::FileDigest;
use crate::model::State;
use std::path::{Path, PathBuf};

/// File names inside a run folder.
pub const ENERGY_FILE: &str = "energy.csv";
pub const SUMMARY_FILE: &str = "summary.json";
pub const SCENE_FILE: &str = "scene.toml";
pub const FRAMES_DIR: &str = "frames";
/// Images drawn from the frames (`msc render`, `msc run --render`): `frame_NNNNNN.png`.
pub const RENDER_DIR: &str = "render";

/// A run folder: creates and locks it, and writes the outputs under their fixed names,
/// recording the size and SHA-256 of each as written.
#[derive(Debug)]
pub struct RunDir {
    root: PathBuf,
    frames: bool,
    /// What this run wrote, as it wrote it: `scene.toml`, `energy.csv`, the frames.
    scene: Option<FileDigest>,
    energy: Option<FileDigest>,
    written_frames: Vec<FileDigest>,
    /// Held while the run writes: a second writer is refused.
    _lock: FolderLock,
}

impl RunDir {
    /// Creates `root` (and `frames/` when `frames` is set) and locks it
    /// ([`OutputError::Locked`] when another process writes there). An earlier run's
    /// `energy.csv`, `summary.json`, frames and rendered images in the same folder are
    /// removed first, so a run that is stopped never sits beside outputs that look like
    /// its own.
    pub fn create(root: &Path, frames: bool) -> Result<Self, OutputError> {
        std::fs::create_dir_all(root).map_err(|source| OutputError::CreateDir {
            path: root.to_path_buf(),
            source,
        })?;
        let lock = FolderLock::folder(root, LockKind::Exclusive)?;
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
            scene: None,
            energy: None,
            written_frames: Vec::new(),
            _lock: lock,
        })
    }

    /// Refuses a folder where an output would replace one of `inputs` ((path, what)
    /// pairs: the scene file, a mesh): run folders are overwritten, inputs never are. The
    /// outputs are `scene.toml`, `energy.csv`, `summary.json`, and whatever lies in
    /// `frames/` and `render/`, which a run clears.
    pub fn check_inputs(root: &Path, inputs: &[(&Path, &'static str)]) -> Result<(), OutputError> {
        for name in [SCENE_FILE, ENERGY_FILE, SUMMARY_FILE] {
            refuse_overwrite(&root.join(name), "--out", inputs)?;
        }
        for &(input, what) in inputs {
            if inside(input, &root.join(FRAMES_DIR)) || inside(input, &root.join(RENDER_DIR)) {
                return Err(OutputError::WouldOverwriteInput {
                    path: input.to_path_buf(),
                    what,
                    option: "--out",
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
        self.written_frames.len() as u64
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

    /// Opens `energy.csv` (visible under that name once finished: see
    /// [`Self::finish_energy_log`]).
    pub fn energy_log(&self) -> Result<EnergyLog, OutputError> {
        EnergyLog::create(&self.energy_path())
    }
    /// Finishes `energy.csv` and records what was written to it.
    pub fn finish_energy_log(&mut self, log: EnergyLog) -> Result<(), OutputError> {
        self.energy = Some(log.finish()?);
        Ok(())
    }
    pub fn write_scene(&mut self, toml: &str) -> Result<(), OutputError> {
        write_atomic(&self.scene_path(), toml.as_bytes())?;
        self.scene = Some(FileDigest::of_bytes(SCENE_FILE, toml.as_bytes()));
        Ok(())
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
        let name = format!("{FRAMES_DIR}/{}", ply::frame_name(self.frame_count()));
        let mut written = ply::write_frame(&self.root.join(&name), state, charges, faces)?;
        written.path = name;
        self.written_frames.push(written);
        Ok(())
    }
    pub fn write_summary(&self, summary: &Summary) -> Result<(), OutputError> {
        summary.write(&self.summary_path())
    }

    /// Size and SHA-256 of what this run wrote, for its summary to vouch for:
    /// `energy.csv`, `scene.toml` and each frame written, by path relative to the folder
    /// (with `/`). Recorded as each was written, so that a file replaced since (another
    /// process, a user) is not vouched for; an output not written yet is an error.
    pub fn digest_outputs(&self) -> Result<Vec<FileDigest>, OutputError> {
        let missing = |name: &str| OutputError::Mismatch {
            path: self.root.join(name),
            message: "this run has not written it yet".into(),
        };
        let energy = self.energy.clone().ok_or_else(|| missing(ENERGY_FILE))?;
        let scene = self.scene.clone().ok_or_else(|| missing(SCENE_FILE))?;
        let mut all = vec![energy, scene];
        all.extend(self.written_frames.iter().cloned());
        Ok(all)
    }
}

/// Whether the run folder `root` still holds exactly the `outputs` a summary vouches for:
/// `Err` names the first file that is missing or differs in size or hash.
pub fn check_outputs(root: &Path, outputs: &[FileDigest]) -> Result<(), String> {
    for d in outputs {
        let relative = Path::new(&d.path);
        let inside = relative
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !inside {
            return Err(format!("{} is not a path inside the run folder", d.path));
        }
        if !d.matches(&root.join(relative)) {
            return Err(format!("{} is missing or changed", d.path));
        }
    }
    Ok(())
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

    #[test]
    fn outputs_are_vouched_for_by_size_and_hash_and_only_inside_the_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("run");
        let mut dir = RunDir::create(&root, true).unwrap();
        dir.write_scene("name = \"x\"\n").unwrap();
        let mut log = dir.energy_log().unwrap();
        log.row(0, 0.0, &crate::measures::Energies::default())
            .unwrap();
        dir.finish_energy_log(log).unwrap();
        let system = crate::model::System::new(crate::model::SystemDesc {
            positions: vec![glam::DVec3::ZERO],
            velocities: vec![glam::DVec3::ZERO],
            masses: vec![1.0],
            charges: vec![0.0],
            ..Default::default()
        })
        .unwrap();
        let state = system.initial_state();
        for _ in 0..2 {
            dir.write_frame(&state, system.charges(), system.faces())
                .unwrap();
        }
        let outputs = dir.digest_outputs().unwrap();
        let paths: Vec<&str> = outputs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "energy.csv",
                "scene.toml",
                "frames/frame_000000.ply",
                "frames/frame_000001.ply"
            ]
        );
        assert_eq!(check_outputs(&root, &outputs), Ok(()));
        for d in &outputs {
            assert_eq!(
                *d,
                FileDigest::of_file(d.path.clone(), &root.join(&d.path)).unwrap()
            );
        }
        // A listed file replaced by another of the same size.
        let scene = root.join(SCENE_FILE);
        std::fs::write(&scene, "name = \"y\"\n").unwrap();
        let e = check_outputs(&root, &outputs).unwrap_err();
        assert!(e.contains("scene.toml"), "{e}");
        std::fs::write(&scene, "name = \"x\"\n").unwrap();
        // A summary may not vouch for files outside its folder.
        std::fs::write(tmp.path().join("outside"), "x").unwrap();
        let mut escaping = outputs.clone();
        escaping.push(crate::digest::FileDigest::of_bytes("../outside", b"x"));
        let e = check_outputs(&root, &escaping).unwrap_err();
        assert!(e.contains("not a path inside"), "{e}");
        // What was written is vouched for, not what is found later: a frame replaced
        // by another writer after this one wrote it.
        let frame = root.join("frames/frame_000001.ply");
        std::fs::write(&frame, "another writer's frame").unwrap();
        assert_eq!(dir.digest_outputs().unwrap(), outputs);
        let e = check_outputs(&root, &outputs).unwrap_err();
        assert!(e.contains("frame_000001.ply"), "{e}");
    }
}
