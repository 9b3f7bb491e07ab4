//! Reading a run folder's frames back: `frames/frame_NNNNNN.ply` (binary little-endian
//! PLY, as [`crate::output::ply`] writes them) and the springs to draw between them.

use super::camera::Bounds;
use super::RenderError;
use crate::output::ply::is_frame_name;
use crate::output::ply_read;
use crate::output::run_dir::{FRAMES_DIR, SCENE_FILE};
use glam::{DVec3, Vec3};
use std::path::{Path, PathBuf};

/// One frame read from a PLY file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Frame {
    /// The number in the file name.
    pub index: u64,
    /// Step and time from msc's header comment, when present.
    pub step: Option<u64>,
    pub time: Option<f64>,
    /// Positions as (x, y, z, 1): the layout the renderer draws from.
    pub positions: Vec<[f32; 4]>,
    /// Velocities as (vx, vy, vz, 0), when the file has them.
    pub velocities: Option<Vec<[f32; 4]>>,
    pub charges: Option<Vec<f32>>,
    /// Triangles (polygons are split into fans).
    pub faces: Vec<[u32; 3]>,
}

impl Frame {
    pub fn len(&self) -> usize {
        self.positions.len()
    }
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }
    pub fn bounds(&self) -> Option<Bounds> {
        Bounds::of_points(self.positions.iter().map(|p| Vec3::new(p[0], p[1], p[2])))
    }
    /// The largest finite speed (0 without velocities).
    pub fn max_speed(&self) -> f32 {
        self.velocities.as_ref().map_or(0.0, |v| {
            v.iter()
                .map(|v| Vec3::new(v[0], v[1], v[2]).length())
                .filter(|s| s.is_finite())
                .fold(0.0, f32::max)
        })
    }
}

/// Parses one frame's PLY bytes (any PLY [`crate::output::ply_read`] reads) into the f32
/// layout the renderer draws from.
pub fn parse_ply(path: &Path, data: &[u8], index: u64) -> Result<Frame, RenderError> {
    let ply = ply_read::parse_ply(data).map_err(|message| RenderError::Malformed {
        path: path.to_path_buf(),
        message,
    })?;
    let f4 = |v: &DVec3, w: f32| [v.x as f32, v.y as f32, v.z as f32, w];
    Ok(Frame {
        index,
        step: ply.step,
        time: ply.time,
        positions: ply.positions.iter().map(|p| f4(p, 1.0)).collect(),
        velocities: ply
            .velocities
            .map(|v| v.iter().map(|v| f4(v, 0.0)).collect()),
        charges: ply.charges.map(|q| q.iter().map(|&q| q as f32).collect()),
        faces: ply.faces,
    })
}

/// Reads one PLY file.
pub fn read_ply(path: &Path, index: u64) -> Result<Frame, RenderError> {
    let data = crate::files::read(path).map_err(|source| RenderError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_ply(path, &data, index)
}

/// The frames of a run folder, in order.
#[derive(Clone, Debug)]
pub struct RunFrames {
    /// The run folder.
    pub root: PathBuf,
    /// (frame number, path), sorted by number.
    pub frames: Vec<(u64, PathBuf)>,
}

impl RunFrames {
    /// Lists `RUN_DIR/frames/frame_NNNNNN.ply` (or the frames in `RUN_DIR` itself, when
    /// it is a frames folder).
    pub fn open(run_dir: &Path) -> Result<Self, RenderError> {
        if !run_dir.is_dir() {
            return Err(RenderError::NotFound {
                path: run_dir.to_path_buf(),
            });
        }
        let sub = run_dir.join(FRAMES_DIR);
        let frames = list_frames(&sub)?;
        if !frames.is_empty() {
            return Ok(RunFrames {
                root: run_dir.to_path_buf(),
                frames,
            });
        }
        let here = list_frames(run_dir)?;
        if here.is_empty() {
            return Err(RenderError::NoFrames { dir: sub });
        }
        // A frames folder given directly: its parent is the run folder.
        let root = run_dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        Ok(RunFrames { root, frames: here })
    }
    pub fn len(&self) -> usize {
        self.frames.len()
    }
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
    /// Reads the `k`-th frame of the list.
    pub fn read(&self, k: usize) -> Result<Frame, RenderError> {
        let (index, path) = &self.frames[k];
        read_ply(path, *index)
    }
}

fn list_frames(dir: &Path) -> Result<Vec<(u64, PathBuf)>, RenderError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(RenderError::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut frames = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| RenderError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|n| is_frame_name(n)) else {
            continue;
        };
        if let Ok(index) = name["frame_".len()..name.len() - ".ply".len()].parse::<u64>() {
            frames.push((index, entry.path()));
        }
    }
    frames.sort();
    Ok(frames)
}

/// Where the springs drawn for a run folder came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpringSource {
    /// Rebuilt from the run's `scene.toml`.
    Scene,
    /// The edges of the frames' triangles (`scene.toml` missing or not loadable: the
    /// reason). Grid shear and bending springs and lattice springs are not faces' edges.
    FaceEdges(String),
    /// None: no scene and no faces.
    None(String),
}

/// The springs to draw for a run folder of `n` particles: from its `scene.toml` when that
/// loads and has `n` particles, else the edges of `faces`.
pub fn run_springs(root: &Path, n: usize, faces: &[[u32; 3]]) -> (Vec<[u32; 2]>, SpringSource) {
    let scene = root.join(SCENE_FILE);
    let why = match scene.to_str() {
        None => format!("{} is not a UTF-8 path", scene.display()),
        Some(_) if !scene.is_file() => format!("no {}", scene.display()),
        Some(s) => match crate::scene::load(s, &[]) {
            Ok(loaded) if loaded.system.len() == n => {
                let springs = loaded.system.springs().iter().map(|s| [s.i, s.j]).collect();
                return (springs, SpringSource::Scene);
            }
            Ok(loaded) => format!(
                "{} has {} particles but the frames have {n}",
                scene.display(),
                loaded.system.len()
            ),
            Err(e) => format!("{} does not load: {e}", scene.display()),
        },
    };
    if faces.is_empty() {
        return (Vec::new(), SpringSource::None(why));
    }
    let mut edges: Vec<[u32; 2]> = faces
        .iter()
        .flat_map(|f| [[f[0], f[1]], [f[1], f[2]], [f[2], f[0]]])
        .map(|[a, b]| [a.min(b), a.max(b)])
        .filter(|[a, b]| a != b)
        .collect();
    edges.sort_unstable();
    edges.dedup();
    (edges, SpringSource::FaceEdges(why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::State;
    use glam::DVec3;

    #[test]
    fn reads_back_what_the_writer_wrote() {
        let dir = std::env::temp_dir().join(format!("msc-plyread-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("frame_000003.ply");
        let state = State {
            x: vec![DVec3::new(1.0, 2.0, 3.0), DVec3::ZERO, DVec3::X, DVec3::Y],
            v: vec![DVec3::new(-1.0, 0.5, 0.25), DVec3::ZERO, DVec3::Y, DVec3::Z],
            t: 0.5,
            step: 10,
        };
        crate::output::ply::write_frame(
            &path,
            &state,
            &[1e-6, 0.0, -2e-6, 0.0],
            &[[0, 1, 2], [1, 2, 3]],
        )
        .unwrap();
        let f = read_ply(&path, 3).unwrap();
        assert_eq!(f.index, 3);
        assert_eq!(f.step, Some(10));
        assert_eq!(f.time, Some(0.5));
        assert_eq!(f.positions[0], [1.0, 2.0, 3.0, 1.0]);
        assert_eq!(f.velocities.as_ref().unwrap()[0], [-1.0, 0.5, 0.25, 0.0]);
        assert_eq!(f.charges.as_ref().unwrap(), &[1e-6, 0.0, -2e-6, 0.0]);
        assert_eq!(f.faces, vec![[0, 1, 2], [1, 2, 3]]);
        // The fastest is particle 0, |(-1, 0.5, 0.25)|.
        assert!((f.max_speed() - 1.3125f32.sqrt()).abs() < 1e-6);

        // Truncation anywhere is an error that names the file, never a panic.
        let bytes = std::fs::read(&path).unwrap();
        for cut in [bytes.len() - 1, bytes.len() - 13, 200, 20] {
            let e = parse_ply(&path, &bytes[..cut], 3).unwrap_err();
            assert!(e.to_string().contains("frame_000003.ply"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn other_layouts_and_bad_headers() {
        let p = Path::new("x.ply");
        // Doubles, extra properties, a quad split into two triangles.
        let mut data = b"ply\nformat binary_little_endian 1.0\nelement vertex 4\n\
property double x\nproperty double y\nproperty double z\nproperty uchar red\n\
element face 1\nproperty list uchar uint vertex_indices\nend_header\n"
            .to_vec();
        for k in 0..4 {
            for c in [k as f64, 0.0, 1.0] {
                data.extend_from_slice(&c.to_le_bytes());
            }
            data.push(200);
        }
        data.push(4);
        for k in [0u32, 1, 2, 3] {
            data.extend_from_slice(&k.to_le_bytes());
        }
        let f = parse_ply(p, &data, 0).unwrap();
        assert_eq!(f.positions[3], [3.0, 0.0, 1.0, 1.0]);
        assert!(f.velocities.is_none() && f.charges.is_none());
        assert_eq!(f.faces, vec![[0, 1, 2], [0, 2, 3]]);

        // ASCII frames (from other tools) read too.
        let ascii = b"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\n\
property float y\nproperty float z\nend_header\n1 2 3\n";
        assert_eq!(
            parse_ply(p, ascii, 0).unwrap().positions,
            vec![[1.0, 2.0, 3.0, 1.0]]
        );
        let huge = b"ply\nformat binary_little_endian 1.0\nelement vertex 99999999999\n\
property float x\nproperty float y\nproperty float z\nend_header\n";
        assert!(parse_ply(p, huge, 0).is_err());
        let nox = b"ply\nformat binary_little_endian 1.0\nelement vertex 0\n\
property float y\nend_header\n";
        let e = parse_ply(p, nox, 0).unwrap_err().to_string();
        assert!(e.contains("x.ply") && e.contains("`x`"), "{e}");
        assert!(parse_ply(p, b"hello", 0).is_err());
    }

    #[test]
    fn face_edges_stand_in_for_a_missing_scene() {
        let dir = std::env::temp_dir().join(format!("msc-springs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (edges, src) = run_springs(&dir, 4, &[[0, 1, 2], [2, 1, 3]]);
        assert_eq!(edges, vec![[0, 1], [0, 2], [1, 2], [1, 3], [2, 3]]);
        assert!(matches!(src, SpringSource::FaceEdges(ref w) if w.contains("scene.toml")));
        let (edges, src) = run_springs(&dir, 4, &[]);
        assert!(edges.is_empty() && matches!(src, SpringSource::None(_)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
