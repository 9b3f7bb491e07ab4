//! Meshes to springs: the [`Mesh`] type, its errors, its sizes computed from the
//! parameters before it is built, and the checks and edge merging every builder shares.
//! Every mesh edge becomes one spring; edges shared by several faces are merged so each
//! appears once. The builders: procedural shapes in `procedural`; mesh files in `file`
//! (surface formats through `surface`, tetrahedral ones through `volume`).

mod file;
mod gmsh;
mod medit;
mod obj;
pub mod ply;
mod procedural;
#[cfg(test)]
mod refusal_tests;
mod stl;
mod surface;
mod tetgen;
mod text;
mod volume;
mod vtk;
mod vtu;
#[cfg(test)]
mod vtu_tests;

pub use file::{load_bytes, load_file, At, FileOptions, MeshFormat, STL_MERGE_TOLERANCE};
pub use obj::obj;
pub use procedural::{grid, icosphere, lattice, torus};
pub use surface::{Polygons, MAX_FILE_SPRINGS, MAX_POLYGON_DIAGONALS};
pub use text::Fail;

use crate::model::System;
use glam::DVec3;

/// Vertices, unique undirected edges (`[a, b]` with a < b, sorted) and triangles.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mesh {
    pub positions: Vec<DVec3>,
    pub edges: Vec<[u32; 2]>,
    pub faces: Vec<[u32; 3]>,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MeshError {
    #[error("{param}: {message}")]
    BadParameter {
        param: &'static str,
        message: String,
    },
    /// A mesh file that cannot be read or is malformed: the format, the file, where in it
    /// (a line of a text file, an element of a binary one) and what is wrong.
    #[error("cannot read {} file {path}{}: {message}", format.name(), at.as_ref().map(|a| format!(", {a}")).unwrap_or_default())]
    File {
        format: MeshFormat,
        path: String,
        at: Option<At>,
        message: String,
    },
    /// An allocation for the mesh failed: the mesh does not fit in memory.
    #[error("cannot allocate {bytes} bytes for the mesh's {what}: it does not fit in memory")]
    OutOfMemory {
        param: &'static str,
        what: &'static str,
        bytes: u128,
    },
}

/// What a mesh holds, computed from its parameters before it is built (the formulas of
/// the builders' documentation), so a mesh too large for memory is refused up front.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeshCounts {
    pub vertices: u64,
    pub edges: u64,
    pub faces: u64,
}

impl MeshCounts {
    fn new(vertices: u128, edges: u128, faces: u128) -> Self {
        let c = |v: u128| u64::try_from(v).unwrap_or(u64::MAX);
        Self {
            vertices: c(vertices),
            edges: c(edges),
            faces: c(faces),
        }
    }
    /// [`torus`]: V = rings sides, E = 3 V, F = 2 V.
    pub fn torus(rings: u32, sides: u32) -> Self {
        let v = rings as u128 * sides as u128;
        Self::new(v, 3 * v, 2 * v)
    }
    /// [`icosphere`]: V = 10 * 4^s + 2, E = 30 * 4^s, F = 20 * 4^s.
    pub fn icosphere(subdivisions: u32) -> Self {
        let p = 4u128.checked_pow(subdivisions).unwrap_or(u128::MAX / 64);
        Self::new(10 * p + 2, 30 * p, 20 * p)
    }
    /// [`grid`]: structural, shear and bending springs, two triangles per cell.
    pub fn grid(resolution: [u32; 2], shear: bool, bending: bool) -> Self {
        let [nx, ny] = resolution.map(|r| r as u128);
        let (cx, cy) = (nx.saturating_sub(1), ny.saturating_sub(1));
        let mut e = cx * ny + nx * cy;
        if shear {
            e += 2 * cx * cy;
        }
        if bending {
            e += nx.saturating_sub(2) * ny + nx * ny.saturating_sub(2);
        }
        Self::new(nx * ny, e, 2 * cx * cy)
    }
    /// [`lattice`]: axis edges, both diagonals of every cell face, boundary triangles.
    pub fn lattice(resolution: [u32; 3]) -> Self {
        let [nx, ny, nz] = resolution.map(|r| r as u128);
        let [cx, cy, cz] = [nx, ny, nz].map(|r| r.saturating_sub(1));
        let axis = cx * ny * nz + nx * cy * nz + nx * ny * cz;
        let diagonals = 2 * (cx * cy * nz + cx * ny * cz + nx * cy * cz);
        let faces = 4 * (cx * cy + cy * cz + cx * cz);
        Self::new(nx * ny * nz, axis + diagonals, faces)
    }
}

/// File vertex `index` (a `vertex` or `node`) times `scale`, refused where a coordinate
/// leaves what the solver holds (beyond `f32::MAX`, or infinite after scaling): its
/// spring lengths would overflow to inf and read as a degenerate element, or load as inf.
fn scaled(p: DVec3, scale: f64, what: &'static str, index: usize) -> text::Parsed<DVec3> {
    let q = p * scale;
    if q.to_array()
        .iter()
        .all(|c| c.abs() <= crate::model::F32_MAX)
    {
        return Ok(q);
    }
    Err(text::fail(
        At::Element {
            what,
            index: index as u64,
            line: None,
        },
        format!(
            "{what} ({:e}, {:e}, {:e}) times mesh scale {scale:e} is beyond {:e}, the largest \
             coordinate the solver holds (f32)",
            p.x,
            p.y,
            p.z,
            crate::model::F32_MAX
        ),
    ))
}

/// An empty vector with room for `n` items, or [`MeshError::OutOfMemory`]: a mesh too
/// large for memory fails with a message instead of aborting the process.
fn try_vec<T>(param: &'static str, what: &'static str, n: usize) -> Result<Vec<T>, MeshError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| MeshError::OutOfMemory {
        param,
        what,
        bytes: n as u128 * std::mem::size_of::<T>() as u128,
    })?;
    Ok(v)
}

fn bad(param: &'static str, message: impl Into<String>) -> MeshError {
    MeshError::BadParameter {
        param,
        message: message.into(),
    }
}

fn positive(param: &'static str, v: f64) -> Result<(), MeshError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(bad(
            param,
            format!(
                "must be positive and finite, got {}",
                crate::display::num(v)
            ),
        ))
    }
}

fn at_least(param: &'static str, v: u32, min: u32) -> Result<(), MeshError> {
    if v >= min {
        Ok(())
    } else {
        Err(bad(param, format!("must be at least {min}, got {v}")))
    }
}

/// Checks that a vertex count fits the particle limit (indices are u32 on the GPU).
/// Computed in u128 so the product itself never overflows.
fn vertex_count(param: &'static str, factors: &[u32]) -> Result<usize, MeshError> {
    let n: u128 = factors.iter().map(|&f| f as u128).product();
    if n > System::MAX_PARTICLES as u128 {
        return Err(bad(
            param,
            format!(
                "gives {n} vertices, more than the limit of {}",
                System::MAX_PARTICLES
            ),
        ));
    }
    Ok(n as usize)
}

/// Sorts each edge as `[min, max]`, drops self-loops, sorts the list and removes duplicates.
fn unique_edges(mut edges: Vec<[u32; 2]>) -> Vec<[u32; 2]> {
    edges.retain(|e| e[0] != e[1]);
    for e in &mut edges {
        if e[0] > e[1] {
            e.swap(0, 1);
        }
    }
    edges.sort_unstable();
    edges.dedup();
    edges
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(m: &Mesh) -> MeshCounts {
        MeshCounts {
            vertices: m.positions.len() as u64,
            edges: m.edges.len() as u64,
            faces: m.faces.len() as u64,
        }
    }

    #[test]
    fn counts_from_parameters_match_the_built_meshes() {
        for (r, s) in [(3, 3), (7, 4), (29, 5)] {
            assert_eq!(
                MeshCounts::torus(r, s),
                counts(&torus(2.0, 1.0, r, s).unwrap())
            );
        }
        for sub in 0..4 {
            assert_eq!(
                MeshCounts::icosphere(sub),
                counts(&icosphere(1.0, sub).unwrap())
            );
        }
        for res in [[2, 2], [2, 5], [7, 3], [21, 21]] {
            for (shear, bending) in [(false, false), (true, false), (true, true), (false, true)] {
                assert_eq!(
                    MeshCounts::grid(res, shear, bending),
                    counts(&grid([1.0, 1.0], res, shear, bending).unwrap())
                );
            }
        }
        for res in [[2, 2, 2], [3, 4, 5]] {
            assert_eq!(
                MeshCounts::lattice(res),
                counts(&lattice([1.0; 3], res).unwrap())
            );
        }
    }
}
