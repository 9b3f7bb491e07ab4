//! Meshes to springs: procedural shapes and OBJ import. Every mesh edge becomes one
//! spring; edges shared by several faces are merged so each appears once.

use glam::DVec3;
use std::path::Path;

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
    #[error("cannot read OBJ file {path}: {message}")]
    Obj { path: String, message: String },
}

/// Torus about the z axis: `rings` around the major circle, `sides` around the tube.
pub fn torus(
    major_radius: f64,
    minor_radius: f64,
    rings: u32,
    sides: u32,
) -> Result<Mesh, MeshError> {
    let _ = (major_radius, minor_radius, rings, sides);
    todo!("mesh helper")
}

/// Icosahedron subdivided `subdivisions` times, projected onto a sphere of `radius`.
pub fn icosphere(radius: f64, subdivisions: u32) -> Result<Mesh, MeshError> {
    let _ = (radius, subdivisions);
    todo!("mesh helper")
}

/// Cloth in the x-y plane centred on the origin: `resolution` vertices along x and y,
/// structural springs, optional shear (cell diagonals) and bending (every second vertex).
pub fn grid(
    size: [f64; 2],
    resolution: [u32; 2],
    shear: bool,
    bending: bool,
) -> Result<Mesh, MeshError> {
    let _ = (size, resolution, shear, bending);
    todo!("mesh helper")
}

/// Cubic lattice centred on the origin with `resolution` vertices per axis.
pub fn lattice(size: [f64; 3], resolution: [u32; 3]) -> Result<Mesh, MeshError> {
    let _ = (size, resolution);
    todo!("mesh helper")
}

/// Loads an OBJ file; every face edge becomes one spring. Positions are multiplied by `scale`.
pub fn obj(path: &Path, scale: f64) -> Result<Mesh, MeshError> {
    let _ = (path, scale);
    todo!("mesh helper")
}
