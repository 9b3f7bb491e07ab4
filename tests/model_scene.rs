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
        Err(e @ MeshError::File { .. }) => {
            let s = e.to_string();
            assert!(s.contains(needle), "'{s}' does not mention '{needle}'");
        }
        other => panic!("expected MeshError::File, got {other:?}"),
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
        // The quad gets both diagonals (mesh.polygons = "both_diagonals", the default).
        let edges = if p == &quad { 6 } else { 5 };
        assert_eq!(m.edges.len(), edges, "{}", p.display());
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
    assert_eq!(mesh::obj(&rel, 1.0).unwrap().edges.len(), 6);
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

// ---------------------------------------------------------------- System::new

use msc::model::{ModelError, Spring, System, SystemDesc};

/// Three particles in a line, two springs: valid unless a test breaks one field.
fn desc() -> SystemDesc {
    let spring = |i, j| Spring {
        i,
        j,
        stiffness: 10.0,
        rest_length: 1.0,
        damping: 0.0,
    };
    SystemDesc {
        positions: vec![DVec3::ZERO, DVec3::X, 2.0 * DVec3::X],
        velocities: vec![],
        masses: vec![1.0; 3],
        charges: vec![1e-6; 3],
        pinned: vec![],
        springs: vec![spring(0, 1), spring(1, 2)],
        faces: vec![],
    }
}

fn model_err(d: SystemDesc) -> ModelError {
    match System::new(d) {
        Ok(_) => panic!("expected a ModelError"),
        Err(e) => e,
    }
}

#[test]
fn system_new_rejects_every_bad_input() {
    assert!(System::new(desc()).is_ok());

    let mut d = desc();
    d.springs[1].j = 3;
    let e = model_err(d);
    assert_eq!(
        e,
        ModelError::SpringIndexOutOfRange {
            spring: 1,
            index: 3,
            particles: 3
        }
    );
    assert!(e.to_string().contains("spring 1") && e.to_string().contains('3'));

    let mut d = desc();
    d.springs[0].j = 0;
    let e = model_err(d);
    assert_eq!(
        e,
        ModelError::SelfSpring {
            spring: 0,
            index: 0
        }
    );
    assert!(e.to_string().contains("spring 0"));

    // 1e-320 and 5e-324 are positive, but 1/m overflows (a divergence at step 1).
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-320, 5e-324] {
        let mut d = desc();
        d.masses[2] = bad;
        match model_err(d) {
            ModelError::BadMass { index: 2, value } => {
                assert!(value.is_nan() == bad.is_nan() && (bad.is_nan() || value == bad))
            }
            e => panic!("mass {bad}: {e:?}"),
        }
    }
    let mut d = desc();
    d.masses[2] = 1e-320;
    let e = model_err(d).to_string();
    assert!(e.contains("particle 2") && e.contains("1e-320"), "{e}");
    // The limit is a finite inverse, not normality: 1 / 2.2e-308 is finite.
    let mut d = desc();
    d.masses[2] = f64::MIN_POSITIVE;
    System::new(d).unwrap();

    let mut d = desc();
    d.positions[1].y = f64::NAN;
    assert_eq!(
        model_err(d),
        ModelError::NonFinite {
            index: 1,
            what: "position"
        }
    );
    let mut d = desc();
    d.velocities = vec![
        DVec3::ZERO,
        DVec3::ZERO,
        DVec3::new(0.0, f64::INFINITY, 0.0),
    ];
    assert_eq!(
        model_err(d),
        ModelError::NonFinite {
            index: 2,
            what: "velocity"
        }
    );
    let mut d = desc();
    d.charges[0] = f64::NAN;
    let e = model_err(d);
    assert_eq!(
        e,
        ModelError::NonFinite {
            index: 0,
            what: "charge"
        }
    );
    assert!(e.to_string().contains("particle 0") && e.to_string().contains("charge"));

    for (what, set) in [
        (
            "stiffness",
            (|s: &mut Spring| s.stiffness = -1.0) as fn(&mut Spring),
        ),
        ("damping", |s: &mut Spring| s.damping = -0.5),
        ("rest length", |s: &mut Spring| s.rest_length = -2.0),
        ("rest length", |s: &mut Spring| s.rest_length = f64::NAN),
    ] {
        let mut d = desc();
        set(&mut d.springs[1]);
        match model_err(d) {
            ModelError::BadSpringParameter {
                spring: 1, what: w, ..
            } => assert_eq!(w, what),
            e => panic!("{what}: {e:?}"),
        }
    }

    let mut d = desc();
    d.masses.pop();
    assert!(matches!(
        model_err(d),
        ModelError::LengthMismatch {
            what: "masses",
            got: 2,
            expected: 3
        }
    ));
    assert_eq!(model_err(SystemDesc::default()), ModelError::Empty);
}

// ---------------------------------------------------------------- scenes

use msc::config::{ExternalField, Integrator, SolverMethod};
use msc::scene::{self, FrameFormat, SceneError};

#[test]
fn every_builtin_scene_loads_and_validates() {
    let names = scene::builtin_names();
    let expected = ["torus", "torus_orbit", "swirl", "cloth", "cloth_large"];
    for n in expected {
        assert!(names.iter().any(|(b, _)| *b == n), "missing built-in {n}");
    }
    for (name, desc) in &names {
        assert!(!desc.is_empty());
        let s = scene::load(name, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&s.name, name);
        assert!(s.source.is_none());
        s.config.validate().unwrap();
        assert!(!s.system.is_empty() && !s.system.springs().is_empty());
        // Rest lengths are the initial edge lengths (rest_length_scale defaults to 1).
        for sp in s.system.springs() {
            let l = (s.system.positions()[sp.i as usize] - s.system.positions()[sp.j as usize])
                .length();
            assert!((sp.rest_length - l).abs() <= 1e-12 * l);
        }
        // The resolved TOML is itself a loadable scene with the same result.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("resolved.toml");
        std::fs::write(&p, &s.resolved_toml).unwrap();
        let again = scene::load(p.to_str().unwrap(), &[]).unwrap();
        assert_eq!(again.config, s.config);
        assert_eq!(again.system.positions(), s.system.positions());
        assert_eq!(again.output, s.output);
    }

    // The paper's parameters (the paper's section 4; docs/physics.md §1).
    let t = scene::load("torus", &[]).unwrap();
    assert_eq!(t.system.len(), 145);
    assert!(t.system.charges().iter().all(|&q| q == 6e-6));
    assert!(t.system.springs().iter().all(|s| s.stiffness == 10.0));
    assert_eq!((t.config.dt, t.config.steps), (0.015, 1000));
    let o = scene::load("torus_orbit", &[]).unwrap();
    assert!(o.system.charges().iter().all(|&q| q == 80e-6));
    assert_eq!((o.config.dt, o.config.steps), (0.06, 1000));
    assert_eq!(o.config.external_charges.len(), 1);
    assert_eq!(o.config.external_charges[0].charge, -42e-6);
    assert!(o.config.external_charges[0].orbit.is_some());
    let w = scene::load("swirl", &[]).unwrap();
    assert!(w.system.charges().iter().all(|&q| q == 8e-6));
    // Figure 13 needs a field that turns the body: the vortex, not the printed swirl.
    assert!(matches!(
        w.config.external_field,
        Some(ExternalField::Vortex { .. })
    ));
    let printed = scene::load("swirl", &["external_field.kind=swirl".into()]).unwrap();
    assert!(matches!(
        printed.config.external_field,
        Some(ExternalField::Swirl { .. })
    ));
    let c = scene::load("cloth", &[]).unwrap();
    assert_eq!(c.system.pinned().iter().filter(|&&p| p).count(), 2);
    assert_eq!(c.config.gravity, DVec3::new(0.0, -98.1, 0.0));
    assert!(c.system.springs().iter().all(|s| s.stiffness == 54.0));
    assert_eq!(c.system.charged_count(), 0);
    let l = scene::load("cloth_large", &[]).unwrap();
    assert_eq!(l.system.len(), 256 * 256);
    assert_eq!(l.system.charged_count(), 0);
    assert_eq!(l.output.frames, FrameFormat::None);
}

fn set(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[test]
fn overrides_change_values() {
    let s = scene::load("torus", &set(&["integrator.dt=0.15"])).unwrap();
    assert_eq!(s.config.dt, 0.15);
    // duration 15 s is kept, so the step count follows dt.
    assert_eq!(s.config.steps, 100);
    assert!(s.resolved_toml.contains("dt = 0.15"));

    // Keys inside the file's inline table `solver = { ... }`.
    let s = scene::load(
        "torus",
        &set(&[
            "integrator.solver.method=cg",
            "integrator.solver.iterations=7",
        ]),
    )
    .unwrap();
    assert_eq!(s.config.solver.method, SolverMethod::Cg);
    assert_eq!(s.config.solver.iterations, 7);
    assert_eq!(s.config.solver.omega, 0.5, "untouched keys stay");
    // An inline table merges into the file's table key by key, as its dotted keys would.
    let s = scene::load(
        "torus",
        &set(&["integrator.solver={ method = \"block_jacobi\", iterations = 3 }"]),
    )
    .unwrap();
    assert_eq!(s.config.solver.method, SolverMethod::BlockJacobi);
    assert_eq!(s.config.solver.iterations, 3);
    // The file's dt and method differ from the defaults (0.015, imex): they stay.
    let verlet = BASE.replace(
        "dt = 0.01\nsteps = 5\nsolver = { method = \"jacobi\", omega = 0.5 }",
        "method = \"verlet\"\ndt = 0.004\nsteps = 5",
    );
    let s = Files::new()
        .load(&verlet, &["integrator={steps=2}"])
        .unwrap();
    assert_eq!(s.config.integrator, Integrator::Verlet, "the file's method");
    assert_eq!(s.config.dt, 0.004, "the file's dt");
    assert_eq!(s.config.steps, 2, "the override's steps");

    let s = scene::load("cloth", &set(&["mesh.resolution=[8, 6]"])).unwrap();
    assert_eq!(s.system.len(), 48);
    let s = scene::load(
        "torus",
        &set(&[
            "integrator.method=verlet",
            "integrator.duration=0.3",
            "external_field.kind=uniform",
            "external_field.value=[0, 0, 5]",
            "external_charges=[{ charge = 1e-6, position = [0, 0, 9] }]",
        ]),
    )
    .unwrap();
    assert_eq!(s.config.integrator, Integrator::Verlet);
    assert_eq!(s.config.steps, 20);
    assert_eq!(
        s.config.external_field,
        Some(ExternalField::Uniform(DVec3::new(0.0, 0.0, 5.0)))
    );
    let s2 = scene::load(
        "torus_orbit",
        &set(&["external_charges[0].charge=-1e-6", "integrator.steps=3"]),
    )
    .unwrap();
    assert_eq!(s2.config.external_charges[0].charge, -1e-6);
    assert_eq!(s2.config.steps, 3);
    // Switching the mesh kind drops the old kind's keys.
    let s = scene::load(
        "swirl",
        &set(&[
            "mesh.kind=grid",
            "mesh.size=[1, 1]",
            "mesh.resolution=[3, 4]",
        ]),
    )
    .unwrap();
    assert_eq!(s.system.len(), 12);
    assert_eq!(
        s.system.positions()[0],
        DVec3::new(-0.5, -0.5, 10.0),
        "center kept"
    );
}

/// An inline table sets what its dotted keys would, nested tables included: the same
/// resolved scene, so the same configuration and system.
#[test]
fn an_inline_table_sets_what_its_dotted_keys_would() {
    let f = Files::new();
    let file = f.write("scene.toml", BASE);
    let cases: [(&str, &[&str], &[&str]); 5] = [
        (&file, &["integrator={steps=2}"], &["integrator.steps=2"]),
        (
            &file,
            &["integrator={dt=0.02, solver={iterations=7, tolerance=0}}"],
            &[
                "integrator.dt=0.02",
                "integrator.solver.iterations=7",
                "integrator.solver.tolerance=0",
            ],
        ),
        (
            "torus_orbit",
            &["external_charges[0]={charge=-1e-6}"],
            &["external_charges[0].charge=-1e-6"],
        ),
        // A kind switched inside a table drops the old kind's keys as a dotted one does.
        (
            "swirl",
            &["mesh={kind=\"grid\", size=[1, 1], resolution=[3, 4]}"],
            &[
                "mesh.kind=grid",
                "mesh.size=[1, 1]",
                "mesh.resolution=[3, 4]",
            ],
        ),
        // Arrays are values: replaced whole either way.
        (
            "torus_orbit",
            &["external_charges=[{charge=1e-6, position=[0, 0, 9]}]"],
            &["external_charges=[{charge=1e-6, position=[0, 0, 9]}]"],
        ),
    ];
    for (scene, table, dotted) in cases {
        let a = scene::load(scene, &set(table)).unwrap();
        let b = scene::load(scene, &set(dotted)).unwrap();
        assert_eq!(a.resolved_toml, b.resolved_toml, "{scene} {table:?}");
        assert_eq!(a.config, b.config, "{scene} {table:?}");
        assert_eq!(
            a.system.positions(),
            b.system.positions(),
            "{scene} {table:?}"
        );
    }
    // A bad key the table leaves out is the file's, named at its line.
    let bad = BASE.replace("dt = 0.01", "dt = -0.01");
    let e = f.err(&bad, &["integrator={steps=2}"]);
    assert_at(&e, "integrator.dt", Some(line_with(&bad, "dt = -0.01")));
}

/// A valid scene file; tests break one thing at a time.
const BASE: &str = r#"name = "base"
[mesh]
kind = "torus"
major_radius = 1.0
minor_radius = 0.3
rings = 8
sides = 4
[material]
charge = 1e-9
[integrator]
dt = 0.01
steps = 5
solver = { method = "jacobi", omega = 0.5 }
"#;

struct Files(tempfile::TempDir);

impl Files {
    fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }
    fn write(&self, name: &str, text: &str) -> String {
        let p = self.0.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    }
    fn load(&self, text: &str, overrides: &[&str]) -> Result<scene::LoadedScene, SceneError> {
        scene::load(&self.write("scene.toml", text), &set(overrides))
    }
    fn err(&self, text: &str, overrides: &[&str]) -> SceneError {
        match self.load(text, overrides) {
            Ok(_) => panic!("expected an error for\n{text}\n{overrides:?}"),
            Err(e) => e,
        }
    }
}

/// 1-based line of the first line containing `needle`.
fn line_with(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

/// Checks the key, the line and that the message shows both.
fn assert_at(e: &SceneError, key: &str, line: Option<usize>) {
    let msg = e.to_string();
    assert_eq!(e.key(), Some(key), "{msg}");
    assert!(msg.contains(key), "'{msg}' does not name {key}");
    assert_eq!(e.line(), line, "{msg}");
    if let Some(l) = line {
        assert!(msg.contains(&format!(":{l}:")), "'{msg}' lacks line {l}");
    }
}

#[test]
fn base_scene_is_valid() {
    let f = Files::new();
    let s = f.load(BASE, &[]).unwrap();
    assert_eq!(s.name, "base");
    assert_eq!(s.system.len(), 32);
    assert_eq!(s.config.steps, 5);
    assert!(s.source.is_some());
    // Defaults.
    assert!(s.system.masses().iter().all(|&m| m == 0.01));
    assert!(s
        .system
        .springs()
        .iter()
        .all(|sp| sp.stiffness == 10.0 && sp.damping == 0.0));
    assert_eq!(s.config.integrator, Integrator::Imex);
    assert_eq!(s.output.every, 10);
    assert_eq!(s.output.frames, FrameFormat::Ply);
    assert!(s.system.pinned().iter().all(|&p| !p));
}

#[test]
fn malformed_toml_names_the_line() {
    let f = Files::new();
    let text = BASE.replace("dt = 0.01", "dt = = 0.01");
    let e = f.err(&text, &[]);
    assert!(matches!(e, SceneError::Syntax { .. }), "{e:?}");
    let line = line_with(&text, "dt = =");
    assert_eq!(e.line(), Some(line));
    assert!(e.to_string().contains(&format!(":{line}:")), "{e}");
    assert_eq!(e.key(), Some("integrator.dt"), "{e}");
    let e = f.err("name = \"x\"\n[mesh\nkind = \"torus\"\n", &[]);
    assert!(matches!(e, SceneError::Syntax { .. }), "{e:?}");
    assert_eq!(e.line(), Some(2), "{e}");
    assert_eq!(e.key(), Some("mesh"), "{e}");
    // Duplicate key, and a bad value inside the second of two [[external_charges]].
    let text = BASE.replace("steps = 5", "steps = 5\ndt = 0.02");
    let e = f.err(&text, &[]);
    assert!(matches!(e, SceneError::Syntax { .. }), "{e:?}");
    assert_eq!(e.line(), Some(line_with(&text, "dt = 0.02")), "{e}");
    assert_eq!(e.key(), Some("integrator.dt"), "{e}");
    let charge = "[[external_charges]]\ncharge = 1e-6\nposition = [0, 0, 5]\n";
    let text = format!("{BASE}{charge}{}", charge.replace("1e-6", "1e-6e"));
    let e = f.err(&text, &[]);
    assert!(matches!(e, SceneError::Syntax { .. }), "{e:?}");
    assert_eq!(e.line(), Some(line_with(&text, "1e-6e")), "{e}");
    assert_eq!(e.key(), Some("external_charges[1].charge"), "{e}");
}

#[test]
fn unknown_keys_are_named() {
    let f = Files::new();
    let text = BASE.replace("steps = 5", "steps = 5\nsubsteps = 3");
    let e = f.err(&text, &[]);
    assert!(matches!(e, SceneError::Schema { .. }), "{e:?}");
    assert_at(
        &e,
        "integrator.substeps",
        Some(line_with(&text, "substeps")),
    );

    // Inside an inline table.
    let text = BASE.replace("omega = 0.5 }", "omega = 0.5, omgea = 1 }");
    let e = f.err(&text, &[]);
    assert_at(
        &e,
        "integrator.solver.omgea",
        Some(line_with(&text, "omgea")),
    );

    // At the top level and in an array of tables.
    let text =
        format!("{BASE}[[external_charges]]\ncharge = 1e-6\nposition = [0, 0, 5]\ncolour = 1\n");
    let e = f.err(&text, &[]);
    assert_at(
        &e,
        "external_charges[0].colour",
        Some(line_with(&text, "colour")),
    );
    let text = BASE.replace("name = \"base\"", "name = \"base\"\ngravitty = [0, 0, 0]");
    assert_at(&f.err(&text, &[]), "gravitty", Some(2));
}

#[test]
fn wrong_types_are_named() {
    let f = Files::new();
    let text = BASE.replace("dt = 0.01", "dt = \"fast\"");
    let e = f.err(&text, &[]);
    assert!(matches!(e, SceneError::Schema { .. }), "{e:?}");
    assert_at(&e, "integrator.dt", Some(line_with(&text, "fast")));
    let text = BASE.replace("rings = 8", "rings = -8");
    assert_at(
        &f.err(&text, &[]),
        "mesh.rings",
        Some(line_with(&text, "rings")),
    );
    let text = BASE.replace("rings = 8", "rings = 8.5");
    assert_at(
        &f.err(&text, &[]),
        "mesh.rings",
        Some(line_with(&text, "rings")),
    );
    let text = format!("{BASE}[[external_charges]]\ncharge = 1e-6\nposition = [0, 0]\n");
    assert_at(
        &f.err(&text, &[]),
        "external_charges[0].position",
        Some(line_with(&text, "position")),
    );
    // A missing required key names it.
    let text = format!("{BASE}[[external_charges]]\nposition = [0, 0, 1]\n");
    let e = f.err(&text, &[]);
    assert_eq!(e.key(), Some("external_charges[0].charge"), "{e}");
    let e = f.err("name = \"x\"\n", &[]);
    assert_eq!(e.key(), Some("mesh"), "{e}");
}

#[test]
fn out_of_range_values_name_key_and_line() {
    let f = Files::new();
    let text = BASE.replace("dt = 0.01", "dt = -1");
    let e = f.err(&text, &[]);
    assert!(matches!(e, SceneError::Invalid { .. }), "{e:?}");
    assert_at(&e, "integrator.dt", Some(line_with(&text, "dt = -1")));
    let text = BASE.replace("omega = 0.5", "omega = 2");
    let e = f.err(&text, &[]);
    assert!(matches!(e, SceneError::Invalid { .. }), "{e:?}");
    assert_at(
        &e,
        "integrator.solver.omega",
        Some(line_with(&text, "omega = 2")),
    );

    for (from, to, key) in [
        ("charge = 1e-9", "charge = 1e-9\nmass = -1", "material.mass"),
        (
            "charge = 1e-9",
            "charge = 1e-9\nstiffness = -3",
            "material.stiffness",
        ),
        (
            "charge = 1e-9",
            "charge = 1e-9\ndamping = nan",
            "material.damping",
        ),
        (
            "charge = 1e-9",
            "charge = 1e-9\ncharged_fraction = 1.5",
            "material.charged_fraction",
        ),
        ("charge = 1e-9", "charge = inf", "material.charge"),
        (
            "charge = 1e-9",
            "charge = 1e-9\nrest_length_scale = 0",
            "material.rest_length_scale",
        ),
        ("steps = 5", "steps = 0", "integrator.steps"),
        (
            "omega = 0.5",
            "omega = 0.5, iterations = 0",
            "integrator.solver.iterations",
        ),
        (
            "omega = 0.5",
            "omega = 0.5, rho = 1.0",
            "integrator.solver.rho",
        ),
        (
            "name = \"base\"",
            "name = \"base\"\ngravity = [0, nan, 0]",
            "gravity[1]",
        ),
        (
            "sides = 4",
            "sides = 4\ncenter = [0, inf, 0]",
            "mesh.center[1]",
        ),
    ] {
        let text = BASE.replace(from, to);
        let e = f.err(&text, &[]);
        assert!(matches!(e, SceneError::Invalid { .. }), "{key}: {e:?}");
        let needle = to.lines().last().unwrap();
        assert_at(&e, key, Some(line_with(&text, needle)));
    }
    let text = format!("{BASE}[coulomb]\nsoftening = -1\n");
    assert_at(
        &f.err(&text, &[]),
        "coulomb.softening",
        Some(line_with(&text, "softening")),
    );
    let text = format!(
        "{BASE}[[external_charges]]\ncharge = 1e-6\nposition = [0, 0, 5]\norbit = {{ axis = [0, 0, 0], angular_velocity = 1 }}\n"
    );
    let e = f.err(&text, &[]);
    assert_eq!(e.key(), Some("external_charges[0].orbit.axis"), "{e}");
    let text = format!("{BASE}[external_field]\nkind = \"swirl\"\nmin_z = 0\n");
    assert_at(
        &f.err(&text, &[]),
        "external_field.min_z",
        Some(line_with(&text, "min_z")),
    );
    let text = format!("{BASE}[external_field]\nkind = \"swirl\"\nvalue = [1, 0, 0]\n");
    assert_at(
        &f.err(&text, &[]),
        "external_field.value",
        Some(line_with(&text, "value")),
    );
    let text = format!("{BASE}[output]\nevery = 0\n");
    assert_at(
        &f.err(&text, &[]),
        "output.every",
        Some(line_with(&text, "every")),
    );
}

#[test]
fn duration_and_steps_conflict() {
    let f = Files::new();
    let text = BASE.replace("steps = 5", "steps = 5\nduration = 1.0");
    let e = f.err(&text, &[]);
    assert!(matches!(e, SceneError::Invalid { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("integrator.duration") && msg.contains("integrator.steps"),
        "{msg}"
    );
    let e = f.err(&BASE.replace("steps = 5", ""), &[]);
    let msg = e.to_string();
    assert!(
        msg.contains("integrator.duration") && msg.contains("integrator.steps"),
        "{msg}"
    );
    // duration -> steps = ceil(duration / dt), without a spurious extra step from rounding.
    let s = f
        .load(&BASE.replace("steps = 5", "duration = 0.15"), &[])
        .unwrap();
    assert_eq!(s.config.steps, 15);
    let s = f
        .load(&BASE.replace("steps = 5", "duration = 0.155"), &[])
        .unwrap();
    assert_eq!(s.config.steps, 16);
    let e = f.err(&BASE.replace("steps = 5", "duration = -2"), &[]);
    assert_eq!(e.key(), Some("integrator.duration"));
}

#[test]
fn mesh_errors_name_the_key() {
    let f = Files::new();
    let text = BASE.replace("kind = \"torus\"", "kind = \"cube\"");
    let e = f.err(&text, &[]);
    assert!(matches!(e, SceneError::Schema { .. }), "{e:?}");
    assert_at(&e, "mesh.kind", Some(line_with(&text, "cube")));
    assert!(e.to_string().contains("cube") && e.to_string().contains("icosphere"));

    let text = BASE.replace("rings = 8", "rings = 2");
    let e = f.err(&text, &[]);
    assert!(matches!(e, SceneError::Mesh { .. }), "{e:?}");
    assert_at(&e, "mesh.rings", Some(line_with(&text, "rings")));
    let text = BASE.replace("minor_radius = 0.3", "minor_radius = 3");
    assert_at(
        &f.err(&text, &[]),
        "mesh.minor_radius",
        Some(line_with(&text, "minor_radius")),
    );
    // A key of another kind, and a missing one.
    let text = BASE.replace("sides = 4", "sides = 4\nradius = 2");
    let e = f.err(&text, &[]);
    assert!(matches!(e, SceneError::Invalid { .. }), "{e:?}");
    assert_at(&e, "mesh.radius", Some(line_with(&text, "radius = 2")));
    let e = f.err(&BASE.replace("sides = 4", ""), &[]);
    assert_eq!(e.key(), Some("mesh.sides"), "{e}");
    let grid =
        "[mesh]\nkind = \"grid\"\nsize = [1, 1, 1]\nresolution = [4, 4]\n[integrator]\nsteps = 1\n";
    assert_at(&f.err(grid, &[]), "mesh.size", Some(3));

    // Missing OBJ file: names the key and the path.
    let text = "[mesh]\nkind = \"obj\"\npath = \"no_such_mesh.obj\"\n[integrator]\nsteps = 1\n";
    let e = f.err(text, &[]);
    assert!(
        matches!(&e, SceneError::Mesh { source, .. } if matches!(**source, MeshError::File { .. })),
        "{e:?}"
    );
    assert_at(&e, "mesh.path", Some(3));
    assert!(e.to_string().contains("no_such_mesh.obj"), "{e}");
}

#[test]
fn obj_scene_is_relative_to_the_file_and_centred() {
    let f = Files::new();
    f.write(
        "quad.obj",
        "v 10 10 0\nv 12 10 0\nv 12 14 0\nv 10 14 0\nf 1 2 3 4\n",
    );
    let text = "[mesh]\nkind = \"obj\"\npath = \"quad.obj\"\nscale = 0.5\ncenter = [0, 0, 3]\n[integrator]\nsteps = 1\n";
    let s = f.load(text, &[]).unwrap();
    assert_eq!(s.system.len(), 4);
    // Four sides and both diagonals (mesh.polygons = "both_diagonals", the default).
    assert_eq!(s.system.springs().len(), 6);
    assert_eq!(s.system.faces().len(), 2);
    let fan = f.load(text, &["mesh.polygons=triangulate"]).unwrap();
    assert_eq!(fan.system.springs().len(), 5);
    let lo = s
        .system
        .positions()
        .iter()
        .fold(DVec3::INFINITY, |a, &p| a.min(p));
    let hi = s
        .system
        .positions()
        .iter()
        .fold(DVec3::NEG_INFINITY, |a, &p| a.max(p));
    assert_eq!(lo, DVec3::new(-0.5, -1.0, 3.0));
    assert_eq!(hi, DVec3::new(0.5, 1.0, 3.0));
}

#[test]
fn scene_names_and_paths() {
    let e = scene::load("no_such_scene", &[]).unwrap_err();
    assert!(matches!(e, SceneError::UnknownScene { .. }), "{e:?}");
    let msg = e.to_string();
    for (b, _) in scene::builtin_names() {
        assert!(msg.contains(b), "'{msg}' does not list {b}");
    }
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let e = scene::load(missing.to_str().unwrap(), &[]).unwrap_err();
    assert!(matches!(e, SceneError::Read { .. }), "{e:?}");
    assert!(e.to_string().contains("missing.toml"), "{e}");
}

#[test]
fn override_errors() {
    let f = Files::new();
    let e = f.err(BASE, &["integrator.dt"]);
    assert!(matches!(e, SceneError::Override { .. }), "{e:?}");
    assert!(e.to_string().contains("integrator.dt"), "{e}");
    let e = f.err(BASE, &["..x=1"]);
    assert!(matches!(e, SceneError::Override { .. }), "{e:?}");
    let e = f.err(BASE, &["integrator.dt.x=1"]);
    assert!(matches!(e, SceneError::Override { .. }), "{e:?}");
    assert!(e.to_string().contains("integrator.dt"), "{e}");
    let e = f.err(BASE, &["external_charges[2].charge=1"]);
    assert!(matches!(e, SceneError::Override { .. }), "{e:?}");

    // A key the schema doesn't know, set from the command line.
    let e = f.err(BASE, &["integrator.solver.omgea=0.3"]);
    assert!(matches!(e, SceneError::Schema { .. }), "{e:?}");
    assert_eq!(e.key(), Some("integrator.solver.omgea"));
    assert!(
        e.to_string().contains("--set integrator.solver.omgea=0.3"),
        "{e}"
    );
    let e = f.err(BASE, &["turbo=true"]);
    assert_eq!(e.key(), Some("turbo"), "{e}");
    // Out of range from the command line: names the key and the --set.
    let e = f.err(BASE, &["integrator.dt=-1"]);
    assert!(matches!(e, SceneError::Invalid { .. }), "{e:?}");
    assert_eq!(e.key(), Some("integrator.dt"));
    assert!(e.to_string().contains("--set integrator.dt=-1"), "{e}");
    // Lines of keys the override did not touch still come from the file.
    let text = BASE.replace("omega = 0.5", "omega = 3");
    let e = f.err(&text, &["integrator.dt=0.02"]);
    assert_at(
        &e,
        "integrator.solver.omega",
        Some(line_with(&text, "omega = 3")),
    );
    let e = f.err(BASE, &["integrator.method=rk4"]);
    assert!(matches!(e, SceneError::Schema { .. }), "{e:?}");
    assert_eq!(e.key(), Some("integrator.method"));
}

#[test]
fn pins_materials_and_charges() {
    let f = Files::new();
    let grid = r#"
[mesh]
kind = "grid"
size = [2.0, 1.0]
resolution = [5, 4]
[material]
total_mass = 2.0
total_charge = 1e-6
charged_fraction = 0.25
rest_length_scale = 0.5
[pin]
where = "corners_max_y"
indices = [0]
velocity = [0.0, 0.0, 1.0]
[integrator]
steps = 1
"#;
    let s = f.load(grid, &[]).unwrap();
    let x = s.system.positions();
    let pinned: Vec<usize> = (0..x.len()).filter(|&i| s.system.pinned()[i]).collect();
    // Particle 0 (bottom-left) from indices, plus the two top corners.
    assert_eq!(pinned.len(), 3);
    for &i in &pinned[1..] {
        assert_eq!(x[i].y, 0.5);
        assert_eq!(x[i].x.abs(), 1.0);
    }
    assert_ne!(x[pinned[1]].x, x[pinned[2]].x);
    for i in 0..x.len() {
        let want = if s.system.pinned()[i] {
            DVec3::Z
        } else {
            DVec3::ZERO
        };
        assert_eq!(s.system.velocities()[i], want);
    }
    assert!(s.system.masses().iter().all(|&m| (m - 0.1).abs() < 1e-15));
    // 20 particles, a quarter charged, the total spread over them.
    assert_eq!(s.system.charged_count(), 5);
    let total: f64 = s.system.charges().iter().sum();
    assert!((total - 1e-6).abs() < 1e-20);
    for sp in s.system.springs() {
        let l = (x[sp.i as usize] - x[sp.j as usize]).length();
        assert!((sp.rest_length - 0.5 * l).abs() < 1e-15);
    }

    // corners_max_y alone: exactly two particles, the top corners.
    let only = grid.replace("indices = [0]\n", "");
    let s = f.load(&only, &[]).unwrap();
    let x = s.system.positions();
    let pinned: Vec<DVec3> = (0..x.len())
        .filter(|&i| s.system.pinned()[i])
        .map(|i| x[i])
        .collect();
    assert_eq!(
        pinned,
        vec![DVec3::new(-1.0, 0.5, 0.0), DVec3::new(1.0, 0.5, 0.0)]
    );
    let s = f
        .load(&only.replace("corners_max_y", "max_y"), &[])
        .unwrap();
    assert_eq!(s.system.pinned().iter().filter(|&&p| p).count(), 5);

    let e = f.err(&grid.replace("indices = [0]", "indices = [0, 20]"), &[]);
    assert!(matches!(e, SceneError::Invalid { .. }), "{e:?}");
    assert_eq!(e.key(), Some("pin.indices[1]"));
    assert!(e.to_string().contains("20"), "{e}");
    let e = f.err(
        &grid.replace("total_mass = 2.0", "total_mass = 2.0\nmass = 1.0"),
        &[],
    );
    assert!(
        e.to_string().contains("material.mass") && e.to_string().contains("material.total_mass")
    );
    let e = f.err(
        &grid.replace("charged_fraction = 0.25", "charged_fraction = 0.0"),
        &[],
    );
    assert_eq!(e.key(), Some("material.total_charge"), "{e}");
}
