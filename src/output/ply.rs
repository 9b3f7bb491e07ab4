//! PLY frames (`frames/frame_NNNNNN.ply`): binary little-endian, readable by ParaView,
//! Blender and MeshLab. Vertex properties `x y z vx vy vz charge` as 32-bit floats
//! (frames are for viewing; `energy.csv` and `summary.json` keep full precision), plus
//! the system's triangles, if it has any, as `vertex_indices` lists.

use super::atomic::AtomicFile;
use super::OutputError;
use crate::digest::FileDigest;
use crate::model::State;
use std::path::{Path, PathBuf};

/// `frame_000042.ply` for frame 42.
pub fn frame_name(index: u64) -> String {
    format!("frame_{index:06}.ply")
}

/// True for names [`frame_name`] produces (used to clear a previous run's frames).
pub fn is_frame_name(name: &str) -> bool {
    is_numbered(name, "ply")
}

/// `frame_NNNNNN.<ext>` (six digits or more): the names of frames and of their images.
pub fn is_numbered(name: &str, ext: &str) -> bool {
    name.strip_prefix("frame_")
        .and_then(|s| s.strip_suffix(ext))
        .and_then(|s| s.strip_suffix('.'))
        .is_some_and(|d| d.len() >= 6 && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Writes one frame atomically; returns the size and SHA-256 of what it wrote, under the
/// file's name.
pub fn write_frame(
    path: &Path,
    state: &State,
    charges: &[f64],
    faces: &[[u32; 3]],
) -> Result<FileDigest, OutputError> {
    let n = state.x.len();
    if state.v.len() != n || charges.len() != n {
        return Err(OutputError::Mismatch {
            path: path.to_path_buf(),
            message: format!(
                "{} positions, {} velocities and {} charges",
                n,
                state.v.len(),
                charges.len()
            ),
        });
    }
    let mut header = String::from("ply\nformat binary_little_endian 1.0\n");
    header.push_str(&format!(
        "comment msc {} step {} time {:e}\n",
        env!("CARGO_PKG_VERSION"),
        state.step,
        state.t
    ));
    header.push_str(&format!("element vertex {n}\n"));
    for p in ["x", "y", "z", "vx", "vy", "vz", "charge"] {
        header.push_str(&format!("property float {p}\n"));
    }
    if !faces.is_empty() {
        header.push_str(&format!("element face {}\n", faces.len()));
        header.push_str("property list uchar int vertex_indices\n");
    }
    header.push_str("end_header\n");

    let mut bytes = Vec::with_capacity(header.len() + n * 28 + faces.len() * 13);
    bytes.extend_from_slice(header.as_bytes());
    for ((x, v), &q) in state.x.iter().zip(&state.v).zip(charges) {
        for c in [x.x, x.y, x.z, v.x, v.y, v.z, q] {
            bytes.extend_from_slice(&(c as f32).to_le_bytes());
        }
    }
    for f in faces {
        if let Some(&bad) = f.iter().find(|&&k| k as usize >= n) {
            return Err(OutputError::Mismatch {
                path: path.to_path_buf(),
                message: format!("face index {bad} out of range for {n} vertices"),
            });
        }
        bytes.push(3);
        for &k in f {
            // PLY `int` is signed 32-bit; System caps particle counts below i32::MAX.
            bytes.extend_from_slice(&(k as i32).to_le_bytes());
        }
    }
    let mut file = AtomicFile::create(path)?;
    file.write_bytes(&bytes)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    file.commit_digest(&name)
}

/// Removes `frame_NNNNNN.ply` files a previous run left in `dir`, so a shorter run does not
/// leave stale frames mixed with its own. Other files are left alone.
pub fn clear_frames(dir: &Path) -> Result<usize, OutputError> {
    clear_numbered(dir, "ply")
}

/// Removes the `frame_NNNNNN.<ext>` files in `dir` (none when it does not exist); other
/// files are left alone.
pub fn clear_numbered(dir: &Path, ext: &str) -> Result<usize, OutputError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(source) => return Err(OutputError::write(dir, source)),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry.map_err(|source| OutputError::write(dir, source))?;
        let name = entry.file_name();
        if name.to_str().is_some_and(|n| is_numbered(n, ext)) {
            let path: PathBuf = entry.path();
            std::fs::remove_file(&path).map_err(|source| OutputError::write(&path, source))?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use glam::DVec3;

    #[test]
    fn frame_names_sort_and_are_recognized() {
        assert_eq!(frame_name(42), "frame_000042.ply");
        assert!(is_frame_name("frame_000042.ply"));
        assert!(is_frame_name("frame_1234567.ply"));
        assert!(!is_frame_name("frame_42.ply"));
        assert!(!is_frame_name("frame_00004a.ply"));
        assert!(!is_frame_name("notes.ply"));
    }

    #[test]
    fn binary_layout_matches_the_header() {
        let dir = std::env::temp_dir().join(format!("msc-ply-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(frame_name(0));
        let state = State {
            x: vec![DVec3::new(1.0, 2.0, 3.0), DVec3::ZERO, DVec3::X],
            v: vec![DVec3::new(-1.0, 0.5, 0.25), DVec3::ZERO, DVec3::Y],
            t: 0.5,
            step: 10,
        };
        write_frame(&path, &state, &[1e-6, 0.0, -2e-6], &[[0, 1, 2]]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let end = b"end_header\n";
        let pos = bytes.windows(end.len()).position(|w| w == end).unwrap() + end.len();
        let header = std::str::from_utf8(&bytes[..pos]).unwrap();
        assert!(header.contains("element vertex 3\n"));
        assert!(header.contains("element face 1\n"));
        let body = &bytes[pos..];
        assert_eq!(body.len(), 3 * 7 * 4 + 1 + 3 * 4);
        let f = |k: usize| f32::from_le_bytes(body[4 * k..4 * k + 4].try_into().unwrap());
        assert_eq!(
            [f(0), f(1), f(2), f(3), f(4), f(5)],
            [1.0, 2.0, 3.0, -1.0, 0.5, 0.25]
        );
        assert_eq!(f(6), 1e-6f32);
        assert_eq!(body[84], 3);
        assert_eq!(i32::from_le_bytes(body[93..97].try_into().unwrap()), 2);

        let bad = write_frame(&path, &state, &[0.0; 3], &[[0, 1, 3]]).unwrap_err();
        assert!(bad.to_string().contains("frame_000000.ply"), "{bad}");

        assert_eq!(clear_frames(&dir).unwrap(), 1);
        assert!(!path.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
