//! The procedural meshes: torus, icosphere, cloth grid and solid lattice, each checked
//! against its parameters and sized up front ([`MeshCounts`]).

use super::{
    at_least, bad, positive, try_vec, unique_edges, vertex_count, Mesh, MeshCounts, MeshError,
};
use crate::model::System;
use glam::DVec3;
use std::collections::HashMap;
use std::f64::consts::TAU;

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
