//! Meshes, model validation and scene files: closed-form mesh counts, every bad input
//! returning its typed error naming the key or index, and the built-in scenes.

use glam::DVec3;
use msc::model::mesh::{self, Mesh, MeshError};
use std::collections::HashSet;
use std::io::Write;

// ---------------------------------------------------------------- mesh helpers

/// Edges are `[a, b]` with a < b, strictly increasing (so unique), and in range; faces
/// are in range and every face edge is a mesh edge when `faces_are_springs`.
fn check_topology(m: &Mesh, faces_are_springs: bool) {
    let n = m.positions.len() as u32;
    for e in &m.edges {
        assert!(e[0] < e[1], "edge {e:?} not ordered");
        assert!(e[1] < n, "edge {e:?} out of range");
    }
    for w in m.edges.windows(2) {
        assert!(
            w[0] < w[1],
            "edges not sorted/unique: {:?} {:?}",
            w[0],
            w[1]
        );
    }
    let set: HashSet<[u32; 2]> = m.edges.iter().copied().collect();
    for f in &m.faces {
        assert!(f.iter().all(|&v| v < n), "face {f:?} out of range");
        if faces_are_springs {
            for (a, b) in [(f[0], f[1]), (f[1], f[2]), (f[2], f[0])] {
                assert!(
                    set.contains(&[a.min(b), a.max(b)]),
                    "face edge {a}-{b} missing"
                );
            }
        }
    }
}

fn euler(m: &Mesh) -> i64 {
    m.positions.len() as i64 - m.edges.len() as i64 + m.faces.len() as i64
}

fn bad_param(r: Result<Mesh, MeshError>, name: &str) {
    match r {
        Err(MeshError::BadParameter { param, ref message }) => {
            assert_eq!(param, name, "wrong parameter named: {message}");
            assert!(r.unwrap_err().to_string().contains(name));
        }
        other => panic!("expected BadParameter({name}), got {other:?}"),
    }
}

#[test]
fn torus_counts_euler_and_shape() {
    for (rings, sides) in [(29, 5), (24, 6), (7, 11), (3, 3)] {
        let (big, small) = (1.0, 0.3);
        let m = mesh::torus(big, small, rings, sides).unwrap();
        let rs = (rings * sides) as usize;
        assert_eq!(m.positions.len(), rs);
        assert_eq!(m.edges.len(), 3 * rs);
        assert_eq!(m.faces.len(), 2 * rs);
        assert_eq!(euler(&m), 0, "torus V-E+F");
        check_topology(&m, true);
        for p in &m.positions {
            let rho = (p.x * p.x + p.y * p.y).sqrt();
            let d = ((rho - big).powi(2) + p.z * p.z).sqrt();
            assert!((d - small).abs() < 1e-12, "vertex {p} off the torus");
        }
        // Outward-facing triangles: normal points away from the tube centre line (a
        // centroid test, meaningful only when the triangles are not too coarse).
        for f in m.faces.iter().filter(|_| rings >= 5 && sides >= 5) {
            let [a, b, c] = f.map(|i| m.positions[i as usize]);
            let nrm = (b - a).cross(c - a);
            let g = (a + b + c) / 3.0;
            let axis_pt = DVec3::new(g.x, g.y, 0.0).normalize() * big;
            assert!(nrm.dot(g - axis_pt) > 0.0, "face {f:?} faces inward");
        }
    }
}

#[test]
fn icosphere_counts_euler_and_radius() {
    for s in 0..4u32 {
        let r = 0.7;
        let m = mesh::icosphere(r, s).unwrap();
        let p4 = 4usize.pow(s);
        assert_eq!(m.positions.len(), 10 * p4 + 2);
        assert_eq!(m.edges.len(), 30 * p4);
        assert_eq!(m.faces.len(), 20 * p4);
        assert_eq!(euler(&m), 2, "sphere V-E+F");
        check_topology(&m, true);
        for p in &m.positions {
            assert!((p.length() - r).abs() < 1e-12);
        }
        // Exactly 12 vertices of degree 5, the rest degree 6.
        let mut deg = vec![0; m.positions.len()];
        for e in &m.edges {
            deg[e[0] as usize] += 1;
            deg[e[1] as usize] += 1;
        }
        assert_eq!(deg.iter().filter(|&&d| d == 5).count(), 12);
        assert!(deg.iter().all(|&d| d == 5 || d == 6));
    }
}

#[test]
fn grid_counts_and_extents() {
    let (w, h) = (2.0, 3.0);
    for (nx, ny) in [(2u32, 2u32), (5, 4), (3, 7)] {
        for shear in [false, true] {
            for bending in [false, true] {
                let m = mesh::grid([w, h], [nx, ny], shear, bending).unwrap();
                let (x, y) = (nx as usize, ny as usize);
                let mut e = (x - 1) * y + x * (y - 1);
                if shear {
                    e += 2 * (x - 1) * (y - 1);
                }
                if bending {
                    e += x.saturating_sub(2) * y + x * y.saturating_sub(2);
                }
                assert_eq!(m.positions.len(), x * y);
                assert_eq!(
                    m.edges.len(),
                    e,
                    "nx={nx} ny={ny} shear={shear} bend={bending}"
                );
                assert_eq!(m.faces.len(), 2 * (x - 1) * (y - 1));
                check_topology(&m, false);
                let min = m.positions.iter().fold(DVec3::INFINITY, |a, &p| a.min(p));
                let max = m
                    .positions
                    .iter()
                    .fold(DVec3::NEG_INFINITY, |a, &p| a.max(p));
                assert_eq!(min, DVec3::new(-w / 2.0, -h / 2.0, 0.0));
                assert_eq!(max, DVec3::new(w / 2.0, h / 2.0, 0.0));
                // Structural springs have length w/(nx-1) or h/(ny-1).
                let (dx, dy) = (w / (nx - 1) as f64, h / (ny - 1) as f64);
                let lens: Vec<f64> = m
                    .edges
                    .iter()
                    .map(|e| (m.positions[e[0] as usize] - m.positions[e[1] as usize]).length())
                    .collect();
                let structural = lens
                    .iter()
                    .filter(|&&l| (l - dx).abs() < 1e-12 || (l - dy).abs() < 1e-12)
                    .count();
                assert!(structural >= (x - 1) * y + x * (y - 1));
                let shortest = lens.iter().cloned().fold(f64::INFINITY, f64::min);
                assert!((shortest - dx.min(dy)).abs() < 1e-12);
            }
        }
    }
}

/// Rank of a dense matrix by Gaussian elimination with partial pivoting.
fn rank(mut a: Vec<Vec<f64>>, cols: usize) -> usize {
    let mut r = 0;
    for c in 0..cols {
        let Some(p) = (r..a.len()).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs())) else {
            break;
        };
        if a[p][c].abs() < 1e-9 {
            continue;
        }
        a.swap(r, p);
        let pivot = a[r].clone();
        for row in &mut a[r + 1..] {
            let f = row[c] / pivot[c];
            if f != 0.0 {
                for (x, &y) in row[c..].iter_mut().zip(&pivot[c..]) {
                    *x -= f * y;
                }
            }
        }
        r += 1;
    }
    r
}

/// Rank of the rigidity matrix (one row per edge: d^T at i, -d^T at j).
fn rigidity_rank(pos: &[DVec3], edges: &[[u32; 2]]) -> usize {
    let cols = 3 * pos.len();
    let rows = edges
        .iter()
        .map(|&[i, j]| {
            let d = pos[j as usize] - pos[i as usize];
            let mut row = vec![0.0; cols];
            for k in 0..3 {
                row[3 * i as usize + k] = -d[k];
                row[3 * j as usize + k] = d[k];
            }
            row
        })
        .collect();
    rank(rows, cols)
}

#[test]
fn lattice_counts_and_rigidity() {
    for res in [[2u32, 2, 2], [3, 2, 2], [3, 3, 3], [4, 2, 3]] {
        let m = mesh::lattice([1.0, 2.0, 1.5], res).unwrap();
        let [x, y, z] = res.map(|v| v as usize);
        let axis = (x - 1) * y * z + x * (y - 1) * z + x * y * (z - 1);
        let diag = 2 * ((x - 1) * (y - 1) * z + (x - 1) * y * (z - 1) + x * (y - 1) * (z - 1));
        assert_eq!(m.positions.len(), x * y * z);
        assert_eq!(m.edges.len(), axis + diag);
        // Boundary surface: a closed sphere-like surface.
        let surface_faces = 4 * ((x - 1) * (y - 1) + (y - 1) * (z - 1) + (x - 1) * (z - 1));
        assert_eq!(m.faces.len(), surface_faces);
        check_topology(&m, true);
        let min = m.positions.iter().fold(DVec3::INFINITY, |a, &p| a.min(p));
        assert_eq!(min, DVec3::new(-0.5, -1.0, -0.75));
        // Not a mechanism: only the 6 rigid-body motions are infinitesimal flexes.
        let n = m.positions.len();
        assert_eq!(rigidity_rank(&m.positions, &m.edges), 3 * n - 6, "{res:?}");
        // The check can fail: the axis-aligned edges alone are a mechanism.
        let axis_only: Vec<[u32; 2]> = m
            .edges
            .iter()
            .copied()
            .filter(|&[i, j]| {
                let d = m.positions[j as usize] - m.positions[i as usize];
                [d.x, d.y, d.z].iter().filter(|c| c.abs() > 0.0).count() == 1
            })
            .collect();
        assert_eq!(axis_only.len(), axis);
        assert!(rigidity_rank(&m.positions, &axis_only) < 3 * n - 6);
        // Outward faces: normal points away from the box centre.
        for f in &m.faces {
            let [a, b, c] = f.map(|i| m.positions[i as usize]);
            assert!((b - a).cross(c - a).dot((a + b + c) / 3.0) > 0.0, "{f:?}");
        }
    }
}

#[test]
fn mesh_parameters_are_rejected_by_name() {
    bad_param(mesh::torus(0.0, 0.1, 10, 10), "major_radius");
    bad_param(mesh::torus(f64::NAN, 0.1, 10, 10), "major_radius");
    bad_param(mesh::torus(1.0, -0.1, 10, 10), "minor_radius");
    bad_param(mesh::torus(1.0, 1.0, 10, 10), "minor_radius");
    bad_param(mesh::torus(1.0, 0.2, 2, 10), "rings");
    bad_param(mesh::torus(1.0, 0.2, 10, 0), "sides");
    bad_param(mesh::torus(1.0, 0.2, u32::MAX, u32::MAX), "rings");
    bad_param(mesh::icosphere(-1.0, 2), "radius");
    bad_param(mesh::icosphere(f64::INFINITY, 2), "radius");
    bad_param(mesh::icosphere(1.0, 20), "subdivisions");
    bad_param(mesh::icosphere(1.0, u32::MAX), "subdivisions");
    bad_param(mesh::grid([0.0, 1.0], [4, 4], true, false), "size");
    bad_param(mesh::grid([1.0, f64::NAN], [4, 4], true, false), "size");
    bad_param(mesh::grid([1.0, 1.0], [1, 4], true, false), "resolution");
    bad_param(mesh::grid([1.0, 1.0], [4, 0], true, false), "resolution");
    bad_param(
        mesh::grid([1.0, 1.0], [100_000, 100_000], true, false),
        "resolution",
    );
    bad_param(mesh::lattice([1.0, -1.0, 1.0], [3, 3, 3]), "size");
    bad_param(mesh::lattice([1.0, 1.0, 1.0], [3, 1, 3]), "resolution");
    bad_param(
        mesh::lattice([1.0, 1.0, 1.0], [2000, 2000, 2000]),
        "resolution",
    );
    let dir = tempfile::tempdir().unwrap();
    let p = write_obj(dir.path(), "a.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n");
    bad_param(mesh::obj(&p, 0.0), "scale");
}

// ---------------------------------------------------------------- OBJ

fn write_obj(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    let mut f = std::fs::File::create(&p).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    p
}

fn obj_error(r: Result<Mesh, MeshError>, needle: &str) {
    match r {
        Err(e @ MeshError::Obj { .. }) => {
            let s = e.to_string();
            assert!(s.contains(needle), "'{s}' does not mention '{needle}'");
        }
        other => panic!("expected MeshError::Obj, got {other:?}"),
    }
}

#[test]
fn obj_two_triangles_and_quad() {
    let dir = tempfile::tempdir().unwrap();
    let square = "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\n";
    let tris = write_obj(
        dir.path(),
        "tris.obj",
        &format!("{square}f 1 2 3\nf 1 3 4\n"),
    );
    let quad = write_obj(
        dir.path(),
        "quad.obj",
        &format!("mtllib missing.mtl\n{square}f 1/1 2/2 3/3 4/4\n"),
    );
    for p in [&tris, &quad] {
        let m = mesh::obj(p, 2.0).unwrap();
        assert_eq!(m.positions.len(), 4);
        assert_eq!(m.edges.len(), 5, "{}", p.display());
        assert_eq!(m.faces.len(), 2);
        check_topology(&m, true);
        let max = m
            .positions
            .iter()
            .fold(DVec3::NEG_INFINITY, |a, &p| a.max(p));
        assert_eq!(max, DVec3::new(2.0, 2.0, 0.0), "scale applied");
    }
    // Two objects repeating the shared edge's vertices: merged into 4 particles.
    let split = write_obj(
        dir.path(),
        "split.obj",
        "o a\nv 0 0 0\nv 1 0 0\nv 1 1 0\nf 1 2 3\no b\nv 0 0 0\nv 1 1 0\nv 0 1 0\nf 4 5 6\n",
    );
    let m = mesh::obj(&split, 1.0).unwrap();
    assert_eq!(m.positions.len(), 4);
    assert_eq!(m.edges.len(), 5);
    check_topology(&m, true);
    // Negative (relative) indices.
    let rel = write_obj(dir.path(), "rel.obj", &format!("{square}f -4 -3 -2 -1\n"));
    assert_eq!(mesh::obj(&rel, 1.0).unwrap().edges.len(), 5);
}

#[test]
fn obj_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.obj");
    obj_error(mesh::obj(&missing, 1.0), "nope.obj");
    let empty = write_obj(dir.path(), "empty.obj", "# nothing here\n");
    obj_error(mesh::obj(&empty, 1.0), "no vertices");
    let no_faces = write_obj(dir.path(), "nofaces.obj", "v 0 0 0\nv 1 0 0\n");
    obj_error(mesh::obj(&no_faces, 1.0), "no vertices");
    let bad_index = write_obj(
        dir.path(),
        "badindex.obj",
        "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9\n",
    );
    obj_error(mesh::obj(&bad_index, 1.0), "badindex.obj");
    let garbage = write_obj(dir.path(), "garbage.obj", "v 0 zero 0\nf 1 2 3\n");
    obj_error(mesh::obj(&garbage, 1.0), "garbage.obj");
}
