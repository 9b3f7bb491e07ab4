//! OBJ import: a triangulated OBJ file's faces to a mesh, equal vertices merged.

use super::{positive, unique_edges, Mesh, MeshError};
use crate::model::System;
use glam::DVec3;
use std::collections::HashMap;
use std::path::Path;

/// Loads an OBJ file; every face edge becomes one spring. Positions are multiplied by `scale`.
///
/// Polygons are triangulated; points and lines are ignored; `mtllib` is not read.
/// Coordinates are parsed as f64 (correctly rounded), so distinct values in the file stay
/// distinct particles. Vertices not used by any face are dropped, and vertices with equal
/// positions (e.g. repeated by separate `o`/`g` groups; -0 equals 0) are merged into one
/// particle, because two charged particles at one point would feel an infinite Coulomb
/// force.
pub fn obj(path: &Path, scale: f64) -> Result<Mesh, MeshError> {
    positive("scale", scale)?;
    let err = |message: String| MeshError::Obj {
        path: path.display().to_string(),
        message,
    };
    let file = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
    let mut reader = std::io::BufReader::new(file);
    let options = tobj::LoadOptions {
        triangulate: true,
        ignore_points: true,
        ignore_lines: true,
        ..Default::default()
    };
    let (models, _materials) = tobj::load_obj_buf(&mut reader, &options, |_| {
        // Materials are irrelevant to the simulation: never open them.
        Err(tobj::LoadError::OpenFileFailed)
    })
    .map_err(|e| err(e.to_string()))?;

    let mut positions: Vec<DVec3> = Vec::new();
    let mut index_of: HashMap<[u64; 3], u32> = HashMap::new();
    let mut faces = Vec::new();
    let mut edges = Vec::new();
    for model in &models {
        let m = &model.mesh;
        let mut local = Vec::with_capacity(m.positions.len() / 3);
        for (v, p) in m.positions.chunks_exact(3).enumerate() {
            let p = DVec3::new(p[0], p[1], p[2]) * scale;
            if !p.is_finite() {
                return Err(err(format!(
                    "object '{}': vertex {v} is not finite",
                    model.name
                )));
            }
            // + 0.0 turns -0 into +0, so equal positions share one key.
            let key = [p.x, p.y, p.z].map(|c| (c + 0.0).to_bits());
            let next = positions.len();
            let id = *index_of.entry(key).or_insert_with(|| {
                positions.push(p);
                next as u32
            });
            if positions.len() > System::MAX_PARTICLES {
                return Err(err(format!("more than {} vertices", System::MAX_PARTICLES)));
            }
            local.push(id);
        }
        for tri in m.indices.chunks_exact(3) {
            let mut f = [0u32; 3];
            for (slot, &ix) in f.iter_mut().zip(tri) {
                *slot = *local.get(ix as usize).ok_or_else(|| {
                    err(format!(
                        "object '{}': face index {ix} is out of range ({} vertices)",
                        model.name,
                        local.len()
                    ))
                })?;
            }
            // A triangle degenerate after merging has no area: keep its edges, not the face.
            edges.extend([[f[0], f[1]], [f[1], f[2]], [f[2], f[0]]]);
            if f[0] != f[1] && f[1] != f[2] && f[2] != f[0] {
                faces.push(f);
            }
        }
    }
    if positions.is_empty() {
        return Err(err("the file has no vertices used by a face".into()));
    }
    Ok(Mesh {
        positions,
        edges: unique_edges(edges),
        faces,
    })
}
