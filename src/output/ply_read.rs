//! Reading PLY frames back: the binary files `msc run` writes (see [`super::ply`]) and
//! PLY from elsewhere (ASCII, binary little- or big-endian), for `msc fit` targets and
//! `msc render`. One reader, so every consumer accepts the same files.

use crate::model::mesh::ply;
use glam::DVec3;
use std::path::{Path, PathBuf};

/// A PLY file that could not be read. Each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlyReadError {
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a readable PLY file: {message}", path.display())]
    Malformed { path: PathBuf, message: String },
}

/// The vertex data and triangles of one PLY file, with the step and time of an `msc`
/// header comment (`comment msc VERSION step S time T`) when present.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlyFrame {
    pub step: Option<u64>,
    pub time: Option<f64>,
    pub positions: Vec<DVec3>,
    /// `vx vy vz`, when the file has them.
    pub velocities: Option<Vec<DVec3>>,
    /// `charge`, when the file has it.
    pub charges: Option<Vec<f64>>,
    /// Faces (`vertex_indices` or `vertex_index` lists), polygons split into fans.
    pub faces: Vec<[u32; 3]>,
}

/// Reads and parses one PLY file.
pub fn read_ply(path: &Path) -> Result<PlyFrame, PlyReadError> {
    let bytes = crate::files::read(path).map_err(|source| PlyReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_ply(&bytes).map_err(|message| PlyReadError::Malformed {
        path: path.to_path_buf(),
        message,
    })
}

/// Parses PLY bytes ([`crate::model::mesh::ply`]). Positions must be finite; face
/// indices must name vertices; polygons are split into fans.
pub fn parse_ply(bytes: &[u8]) -> Result<PlyFrame, String> {
    let d = ply::parse(bytes).map_err(|f| match f.at {
        Some(at) => format!("{at}: {}", f.message),
        None => f.message,
    })?;
    Ok(PlyFrame {
        step: d.step,
        time: d.time,
        faces: d.triangles(),
        positions: d.positions,
        velocities: d.velocities,
        charges: d.charges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_and_binary_ply_read_the_same_positions() {
        let ascii = b"ply\nformat ascii 1.0\ncomment msc 0.1.0 step 20 time 1e-1\n\
            element vertex 2\nproperty float x\nproperty float y\nproperty float z\n\
            property float charge\nelement face 1\nproperty list uchar int vertex_indices\n\
            end_header\n1 2 3 0.5\n-1 0.25 4 0\n3 0 1 1\n";
        let f = parse_ply(ascii).unwrap();
        assert_eq!((f.step, f.time), (Some(20), Some(0.1)));
        assert_eq!(
            f.positions,
            vec![DVec3::new(1.0, 2.0, 3.0), DVec3::new(-1.0, 0.25, 4.0)]
        );
        assert_eq!(f.charges, Some(vec![0.5, 0.0]));
        assert_eq!(f.velocities, None);
        assert_eq!(f.faces, vec![[0, 1, 1]]);
        // A face naming a vertex that does not exist is refused.
        let bad_face = String::from_utf8(ascii.to_vec())
            .unwrap()
            .replace("3 0 1 1", "3 0 1 5");
        assert!(parse_ply(bad_face.as_bytes())
            .unwrap_err()
            .contains("out of range"));

        let mut bin = b"ply\nformat binary_big_endian 1.0\nelement vertex 1\n\
            property double z\nproperty uchar tag\nproperty double x\nproperty double y\nend_header\n"
            .to_vec();
        bin.extend(3.5f64.to_be_bytes());
        bin.push(7);
        bin.extend(1.5f64.to_be_bytes());
        bin.extend((-2.0f64).to_be_bytes());
        let f = parse_ply(&bin).unwrap();
        assert_eq!((f.step, f.time), (None, None));
        assert_eq!(f.positions, vec![DVec3::new(1.5, -2.0, 3.5)]);

        let short = &bin[..bin.len() - 3];
        assert!(parse_ply(short).unwrap_err().contains("truncated"));
        assert!(parse_ply(b"ply\nformat ascii 1.0\nend_header\n")
            .unwrap_err()
            .contains("no vertex"));
    }
}
