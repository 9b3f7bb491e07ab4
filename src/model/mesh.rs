//! Meshes to springs: procedural shapes and OBJ import. Every mesh edge becomes one
//! spring; edges shared by several faces are merged so each appears once.

use crate::model::System;
use glam::DVec3;
use std::collections::HashMap;
use std::f64::consts::TAU;
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

/// Torus about the z axis: `rings` around the major circle, `sides` around the tube.
///
/// Vertex `r * sides + s` sits at ring angle 2 pi r / rings and tube angle 2 pi s / sides.
/// Each quad is split by the diagonal (r, s)-(r+1, s+1), so there are rings*sides
/// vertices, 3 rings*sides edges and 2 rings*sides triangles (V - E + F = 0).
pub fn torus(
    major_radius: f64,
    minor_radius: f64,
    rings: u32,
    sides: u32,
) -> Result<Mesh, MeshError> {
    positive("major_radius", major_radius)?;
    positive("minor_radius", minor_radius)?;
    if minor_radius >= major_radius {
        // At minor = major the inner ring collapses onto the axis: coincident particles.
        return Err(bad(
            "minor_radius",
            format!(
                "must be smaller than major_radius ({}), got {}",
                crate::display::num(major_radius),
                crate::display::num(minor_radius)
            ),
        ));
    }
    at_least("rings", rings, 3)?;
    at_least("sides", sides, 3)?;
    let n = vertex_count("rings", &[rings, sides])?;

    let mut positions = try_vec("rings", "vertices", n)?;
    for r in 0..rings {
        let (sp, cp) = (TAU * r as f64 / rings as f64).sin_cos();
        for s in 0..sides {
            let (st, ct) = (TAU * s as f64 / sides as f64).sin_cos();
            let rho = major_radius + minor_radius * ct;
            positions.push(DVec3::new(rho * cp, rho * sp, minor_radius * st));
        }
    }
    let id = |r: u32, s: u32| (r % rings) * sides + (s % sides);
    let mut edges = try_vec("rings", "edges", 3 * n)?;
    let mut faces = try_vec("rings", "triangles", 2 * n)?;
    for r in 0..rings {
        for s in 0..sides {
            let (a, b, c, d) = (id(r, s), id(r + 1, s), id(r + 1, s + 1), id(r, s + 1));
            edges.extend([[a, b], [a, d], [a, c]]);
            // Counter-clockwise seen from outside the tube.
            faces.extend([[a, b, c], [a, c, d]]);
        }
    }
    Ok(Mesh {
        positions,
        edges: unique_edges(edges),
        faces,
    })
}

/// Icosahedron subdivided `subdivisions` times, projected onto a sphere of `radius`.
///
/// Each subdivision splits every triangle into four at its edge midpoints:
/// V = 10 * 4^s + 2, E = 30 * 4^s, F = 20 * 4^s.
pub fn icosphere(radius: f64, subdivisions: u32) -> Result<Mesh, MeshError> {
    positive("radius", radius)?;
    let four_pow = 4u128.checked_pow(subdivisions).unwrap_or(u128::MAX);
    let v = four_pow.saturating_mul(10).saturating_add(2);
    if v > System::MAX_PARTICLES as u128 {
        return Err(bad(
            "subdivisions",
            format!(
                "{subdivisions} gives more than the limit of {} vertices",
                System::MAX_PARTICLES
            ),
        ));
    }

    let t = (1.0 + 5f64.sqrt()) / 2.0;
    let mut positions: Vec<DVec3> = [
        [-1.0, t, 0.0],
        [1.0, t, 0.0],
        [-1.0, -t, 0.0],
        [1.0, -t, 0.0],
        [0.0, -1.0, t],
        [0.0, 1.0, t],
        [0.0, -1.0, -t],
        [0.0, 1.0, -t],
        [t, 0.0, -1.0],
        [t, 0.0, 1.0],
        [-t, 0.0, -1.0],
        [-t, 0.0, 1.0],
    ]
    .iter()
    .map(|p| DVec3::from_array(*p).normalize())
    .collect();
    let mut faces: Vec<[u32; 3]> = vec![
        [0, 11, 5],
        [0, 5, 1],
        [0, 1, 7],
        [0, 7, 10],
        [0, 10, 11],
        [1, 5, 9],
        [5, 11, 4],
        [11, 10, 2],
        [10, 7, 6],
        [7, 1, 8],
        [3, 9, 4],
        [3, 4, 2],
        [3, 2, 6],
        [3, 6, 8],
        [3, 8, 9],
        [4, 9, 5],
        [2, 4, 11],
        [6, 2, 10],
        [8, 6, 7],
        [9, 8, 1],
    ];
    let counts = MeshCounts::icosphere(subdivisions);
    positions
        .try_reserve_exact(counts.vertices as usize - positions.len())
        .map_err(|_| MeshError::OutOfMemory {
            param: "subdivisions",
            what: "vertices",
            bytes: counts.vertices as u128 * 24,
        })?;
    for _ in 0..subdivisions {
        let mut midpoint: HashMap<(u32, u32), u32> = HashMap::new();
        midpoint
            .try_reserve(faces.len() * 3 / 2)
            .map_err(|_| MeshError::OutOfMemory {
                param: "subdivisions",
                what: "edge midpoints",
                bytes: faces.len() as u128 * 3 / 2 * 16,
            })?;
        let mut mid = |a: u32, b: u32, positions: &mut Vec<DVec3>| -> u32 {
            let key = (a.min(b), a.max(b));
            *midpoint.entry(key).or_insert_with(|| {
                let p = (positions[a as usize] + positions[b as usize]).normalize();
                positions.push(p);
                (positions.len() - 1) as u32
            })
        };
        let mut next = try_vec("subdivisions", "triangles", faces.len() * 4)?;
        for &[a, b, c] in &faces {
            let ab = mid(a, b, &mut positions);
            let bc = mid(b, c, &mut positions);
            let ca = mid(c, a, &mut positions);
            next.extend([[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]);
        }
        faces = next;
    }
    for p in &mut positions {
        *p *= radius;
    }
    let edges = unique_edges(
        faces
            .iter()
            .flat_map(|&[a, b, c]| [[a, b], [b, c], [c, a]])
            .collect(),
    );
    Ok(Mesh {
        positions,
        edges,
        faces,
    })
}

/// Cloth in the x-y plane centred on the origin: `resolution` vertices along x and y,
/// structural springs, optional shear (cell diagonals) and bending (every second vertex).
///
/// Vertex `j * nx + i` sits at x = -w/2 + w i/(nx-1), y = -h/2 + h j/(ny-1), z = 0.
/// Structural: (nx-1) ny + nx (ny-1) springs; shear: both diagonals of every cell,
/// 2 (nx-1)(ny-1); bending: to the vertex two away along x and along y,
/// (nx-2) ny + nx (ny-2). Faces: two triangles per cell, split along (i, j)-(i+1, j+1).
pub fn grid(
    size: [f64; 2],
    resolution: [u32; 2],
    shear: bool,
    bending: bool,
) -> Result<Mesh, MeshError> {
    positive("size", size[0])?;
    positive("size", size[1])?;
    at_least("resolution", resolution[0], 2)?;
    at_least("resolution", resolution[1], 2)?;
    let [nx, ny] = resolution;
    let n = vertex_count("resolution", &[nx, ny])?;
    let [w, h] = size;
    let counts = MeshCounts::grid(resolution, shear, bending);

    let mut positions = try_vec("resolution", "vertices", n)?;
    for j in 0..ny {
        let y = -0.5 * h + h * j as f64 / (ny - 1) as f64;
        for i in 0..nx {
            let x = -0.5 * w + w * i as f64 / (nx - 1) as f64;
            positions.push(DVec3::new(x, y, 0.0));
        }
    }
    let id = |i: u32, j: u32| j * nx + i;
    let mut edges = try_vec("resolution", "edges", counts.edges as usize)?;
    let mut faces = try_vec("resolution", "triangles", counts.faces as usize)?;
    for j in 0..ny {
        for i in 0..nx {
            if i + 1 < nx {
                edges.push([id(i, j), id(i + 1, j)]);
            }
            if j + 1 < ny {
                edges.push([id(i, j), id(i, j + 1)]);
            }
            if i + 1 < nx && j + 1 < ny {
                let (a, b, c, d) = (id(i, j), id(i + 1, j), id(i + 1, j + 1), id(i, j + 1));
                if shear {
                    edges.extend([[a, c], [b, d]]);
                }
                // Normal +z.
                faces.extend([[a, b, c], [a, c, d]]);
            }
            if bending {
                if i + 2 < nx {
                    edges.push([id(i, j), id(i + 2, j)]);
                }
                if j + 2 < ny {
                    edges.push([id(i, j), id(i, j + 2)]);
                }
            }
        }
    }
    Ok(Mesh {
        positions,
        edges: unique_edges(edges),
        faces,
    })
}

/// Cubic lattice centred on the origin with `resolution` vertices per axis.
///
/// Vertex `(k * ny + j) * nx + i`. Springs: every axis-aligned edge between neighbours,
/// plus BOTH diagonals of every square face of every cell (in the xy, yz and zx planes).
/// Each face is then a braced tetrahedron of springs, so every cube's surface is made of
/// rigid faces and the cube is rigid (Cauchy); the lattice is not a mechanism. There are
/// no body diagonals. Counts: axis edges (nx-1) ny nz + nx (ny-1) nz + nx ny (nz-1),
/// face diagonals 2 [(nx-1)(ny-1) nz + (nx-1) ny (nz-1) + nx (ny-1)(nz-1)].
/// Faces (output only): the boundary of the box, two outward triangles per square.
pub fn lattice(size: [f64; 3], resolution: [u32; 3]) -> Result<Mesh, MeshError> {
    for s in size {
        positive("size", s)?;
    }
    for r in resolution {
        at_least("resolution", r, 2)?;
    }
    let n = vertex_count("resolution", &resolution)?;
    let [nx, ny, nz] = resolution;
    let counts = MeshCounts::lattice(resolution);
    let coord = |a: u32, na: u32, len: f64| -0.5 * len + len * a as f64 / (na - 1) as f64;
    let mut positions = try_vec("resolution", "vertices", n)?;
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                positions.push(DVec3::new(
                    coord(i, nx, size[0]),
                    coord(j, ny, size[1]),
                    coord(k, nz, size[2]),
                ));
            }
        }
    }
    let id = |i: u32, j: u32, k: u32| (k * ny + j) * nx + i;
    let mut edges = try_vec("resolution", "edges", counts.edges as usize)?;
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                let a = id(i, j, k);
                let (xi, yj, zk) = (i + 1 < nx, j + 1 < ny, k + 1 < nz);
                if xi {
                    edges.push([a, id(i + 1, j, k)]);
                }
                if yj {
                    edges.push([a, id(i, j + 1, k)]);
                }
                if zk {
                    edges.push([a, id(i, j, k + 1)]);
                }
                if xi && yj {
                    edges.push([a, id(i + 1, j + 1, k)]);
                    edges.push([id(i + 1, j, k), id(i, j + 1, k)]);
                }
                if yj && zk {
                    edges.push([a, id(i, j + 1, k + 1)]);
                    edges.push([id(i, j + 1, k), id(i, j, k + 1)]);
                }
                if xi && zk {
                    edges.push([a, id(i + 1, j, k + 1)]);
                    edges.push([id(i + 1, j, k), id(i, j, k + 1)]);
                }
            }
        }
    }

    // Boundary faces: for each axis, the two end planes, with outward normals.
    let mut faces = try_vec("resolution", "triangles", counts.faces as usize)?;
    let mut quad = |a: u32, b: u32, c: u32, d: u32, flip: bool| {
        if flip {
            faces.extend([[a, c, b], [a, d, c]]);
        } else {
            faces.extend([[a, b, c], [a, c, d]]);
        }
    };
    for (k, flip) in [(0, true), (nz - 1, false)] {
        for j in 0..ny - 1 {
            for i in 0..nx - 1 {
                let (a, b, c, d) = (
                    id(i, j, k),
                    id(i + 1, j, k),
                    id(i + 1, j + 1, k),
                    id(i, j + 1, k),
                );
                quad(a, b, c, d, flip);
            }
        }
    }
    for (i, flip) in [(0, true), (nx - 1, false)] {
        for k in 0..nz - 1 {
            for j in 0..ny - 1 {
                let (a, b, c, d) = (
                    id(i, j, k),
                    id(i, j + 1, k),
                    id(i, j + 1, k + 1),
                    id(i, j, k + 1),
                );
                quad(a, b, c, d, flip);
            }
        }
    }
    for (j, flip) in [(0, true), (ny - 1, false)] {
        for i in 0..nx - 1 {
            for k in 0..nz - 1 {
                let (a, b, c, d) = (
                    id(i, j, k),
                    id(i, j, k + 1),
                    id(i + 1, j, k + 1),
                    id(i + 1, j, k),
                );
                quad(a, b, c, d, flip);
            }
        }
    }
    Ok(Mesh {
        positions,
        edges: unique_edges(edges),
        faces,
    })
}

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
