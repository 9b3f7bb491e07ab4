//! Mesh files: every format reads a real file of that format (tests/data/, written by Gmsh
//! and meshio, see tests/data/generate.py) into the same mesh, the polygon policy keeps a
//! quad cloth symmetric, OBJ polylines are springs, mesh files load as scenes and as the
//! bench workload. Bad files are in tests/bad_meshes.rs.

use glam::DVec3;
use msc::model::mesh::{self, FileOptions, MeshFormat, Polygons};
use msc::model::Mesh;
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn load(path: &Path, format: Option<MeshFormat>) -> Mesh {
    mesh::load_file(path, format, &FileOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Volume enclosed by the faces (divergence theorem): positive iff they are wound outward.
fn enclosed_volume(m: &Mesh) -> f64 {
    m.faces
        .iter()
        .map(|f| {
            let [a, b, c] = f.map(|i| m.positions[i as usize]);
            a.dot(b.cross(c)) / 6.0
        })
        .sum()
}

/// A position to 1e-12 m: Gmsh's ASCII files print 16 digits, one short of round trip.
fn key(p: DVec3) -> [i64; 3] {
    p.to_array().map(|c| (c * 1e12).round() as i64)
}

fn sorted_positions(m: &Mesh) -> Vec<[i64; 3]> {
    let mut p: Vec<[i64; 3]> = m.positions.iter().map(|&p| key(p)).collect();
    p.sort();
    p
}

/// Edges as position pairs, so meshes numbered differently compare equal.
fn edge_set(m: &Mesh) -> Vec<[[i64; 3]; 2]> {
    let key = |i: u32| key(m.positions[i as usize]);
    let mut e: Vec<_> = m
        .edges
        .iter()
        .map(|&[a, b]| {
            let (a, b) = (key(a), key(b));
            if a < b {
                [a, b]
            } else {
                [b, a]
            }
        })
        .collect();
    e.sort();
    e
}

#[test]
fn every_tetrahedral_format_reads_the_same_gmsh_box() {
    let reference = load(&data("box_v41.msh"), None);
    // 1 x 0.5 x 0.5 box: the boundary encloses its volume, wound outward.
    assert!(
        (enclosed_volume(&reference) - 0.25).abs() < 1e-12,
        "{}",
        enclosed_volume(&reference)
    );
    // The boundary is a closed surface of genus 0: V_b - E_b + F = 2 with E_b = 3F/2.
    let f = reference.faces.len();
    let mut vb: Vec<u32> = reference.faces.iter().flatten().copied().collect();
    vb.sort();
    vb.dedup();
    assert_eq!(vb.len() as i64 - (3 * f / 2) as i64 + f as i64, 2);
    for name in [
        "box_v41_binary.msh",
        "box_v22.msh",
        "box_v22_binary.msh",
        "box_51.vtk",
        "box_51_binary.vtk",
        "box_42.vtk",
        "box_42_binary.vtk",
        "box_ascii.vtu",
        "box_zlib.vtu",
        "box.node",
        "box.ele",
        "box.mesh",
    ] {
        let m = load(&data(name), None);
        assert_eq!(sorted_positions(&m), sorted_positions(&reference), "{name}");
        assert_eq!(edge_set(&m), edge_set(&reference), "{name}");
        assert_eq!(m.faces.len(), reference.faces.len(), "{name}");
        assert!((enclosed_volume(&m) - 0.25).abs() < 1e-12, "{name}");
    }
}

#[test]
fn surface_formats_read_their_real_files() {
    // A quad plate (Gmsh, recombined) as ASCII PLY, binary PLY and OBJ.
    let plate = load(&data("plate_ascii.ply"), Some(MeshFormat::Ply));
    for (name, f) in [
        ("plate_binary.ply", MeshFormat::Ply),
        ("plate.obj", MeshFormat::Obj),
    ] {
        let m = load(&data(name), Some(f));
        assert_eq!(sorted_positions(&m), sorted_positions(&plate), "{name}");
        assert_eq!(edge_set(&m), edge_set(&plate), "{name}");
    }
    // A triangulated sphere: STL repeats each vertex per triangle; merged, it is the
    // PLY's indexed mesh, a closed surface (V - E + F = 2).
    let ply = load(&data("sphere_binary.ply"), Some(MeshFormat::Ply));
    let (v, e, f) = (ply.positions.len(), ply.edges.len(), ply.faces.len());
    assert_eq!(v as i64 - e as i64 + f as i64, 2);
    for name in ["sphere_ascii.stl", "sphere_binary.stl"] {
        let m = load(&data(name), Some(MeshFormat::Stl));
        assert_eq!(
            (m.positions.len(), m.edges.len(), m.faces.len()),
            (v, e, f),
            "{name}"
        );
    }
}

/// A 4 x 4 vertex quad cloth in the x-y plane, each quad starting at a different corner.
fn quad_cloth_obj() -> String {
    let mut s = String::new();
    for j in 0..4 {
        for i in 0..4 {
            s.push_str(&format!("v {i} {j} 0\n"));
        }
    }
    let id = |i: usize, j: usize| j * 4 + i + 1;
    for j in 0..3 {
        for i in 0..3 {
            let q = [id(i, j), id(i + 1, j), id(i + 1, j + 1), id(i, j + 1)];
            let r = (i + j) % 4;
            s.push_str(&format!(
                "f {} {} {} {}\n",
                q[r],
                q[(r + 1) % 4],
                q[(r + 2) % 4],
                q[(r + 3) % 4]
            ));
        }
    }
    s
}

/// The spring set mapped through the mirror x -> 3 - x (which swaps each quad's diagonals).
fn mirrored(m: &Mesh) -> Vec<[[i64; 3]; 2]> {
    let mut mm = m.clone();
    for p in &mut mm.positions {
        p.x = 3.0 - p.x;
    }
    edge_set(&mm)
}

#[test]
fn a_quad_cloth_is_symmetric_under_the_default_polygon_policy() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cloth.obj");
    std::fs::write(&p, quad_cloth_obj()).unwrap();
    let with = |polygons| {
        mesh::load_file(
            &p,
            Some(MeshFormat::Obj),
            &FileOptions {
                scale: 1.0,
                polygons,
            },
        )
        .unwrap()
    };
    let default = with(Polygons::default());
    assert_eq!(Polygons::default(), Polygons::BothDiagonals);
    // 24 structural springs and both diagonals of 9 quads.
    assert_eq!(default.edges.len(), 24 + 18);
    assert_eq!(
        mirrored(&default),
        edge_set(&default),
        "the mirror maps the springs onto themselves"
    );
    // One diagonal per quad (the fan) breaks the symmetry; edges only keep it, unbraced.
    let fan = with(Polygons::Triangulate);
    assert_eq!(fan.edges.len(), 24 + 9);
    assert_ne!(mirrored(&fan), edge_set(&fan));
    let edges = with(Polygons::Edges);
    assert_eq!(edges.edges.len(), 24);
    assert_eq!(mirrored(&edges), edge_set(&edges));
    // Every policy draws the same 18 triangles.
    for m in [&default, &fan, &edges] {
        assert_eq!(m.faces.len(), 18);
    }
    // A hexagon gets every diagonal under the default: 6 sides + 9 diagonals.
    let hex: String = (0..6)
        .map(|k| {
            let a = std::f64::consts::TAU * k as f64 / 6.0;
            format!("v {} {} 0\n", a.cos(), a.sin())
        })
        .collect::<String>()
        + "f 1 2 3 4 5 6\n";
    std::fs::write(&p, hex).unwrap();
    assert_eq!(with(Polygons::BothDiagonals).edges.len(), 15);
    assert_eq!(with(Polygons::Triangulate).edges.len(), 9);
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn obj_lines_are_springs_and_a_bom_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let four = "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\n";
    let m = mesh::obj(
        &write(dir.path(), "l.obj", format!("{four}l 1 2 3 4\n").as_bytes()),
        1.0,
    )
    .unwrap();
    // A chain of 3 springs, not a closed loop, and no face.
    assert_eq!(m.edges, vec![[0, 1], [1, 2], [2, 3]]);
    assert!(m.faces.is_empty());
    // `l 1 2` is one spring between two kept vertices; `l 3/1 4/2` carries texture indices.
    let m = mesh::obj(
        &write(
            dir.path(),
            "l2.obj",
            format!("{four}l 1 2\nl 3/1 4/2\n").as_bytes(),
        ),
        1.0,
    )
    .unwrap();
    assert_eq!((m.positions.len(), m.edges.len()), (4, 2));
    // Lines beside faces add their springs.
    let m = mesh::obj(
        &write(
            dir.path(),
            "lf.obj",
            format!("{four}v 2 0 0\nf 1 2 3\nl 2 5\n").as_bytes(),
        ),
        1.0,
    )
    .unwrap();
    assert_eq!((m.positions.len(), m.edges.len(), m.faces.len()), (4, 4, 1));
    // A UTF-8 byte-order mark: the first vertex is still vertex 1.
    let tri = "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n";
    let mut bom = vec![0xEF, 0xBB, 0xBF];
    bom.extend_from_slice(tri.as_bytes());
    let with_bom = mesh::obj(&write(dir.path(), "bom.obj", &bom), 1.0).unwrap();
    let without = mesh::obj(&write(dir.path(), "nobom.obj", tri.as_bytes()), 1.0).unwrap();
    assert_eq!(with_bom, without);
    assert_eq!(with_bom.positions.len(), 3);
    // UTF-16 is refused by name.
    let e = mesh::obj(&write(dir.path(), "u16.obj", &[0xFF, 0xFE, b'v', 0]), 1.0).unwrap_err();
    assert!(e.to_string().contains("UTF-16"), "{e}");
}

#[test]
fn a_mesh_file_of_each_kind_runs_as_a_scene() {
    let dir = tempfile::tempdir().unwrap();
    for (kind, file, extra) in [
        ("ply", "plate_binary.ply", "polygons = \"edges\"\n"),
        ("stl", "sphere_binary.stl", ""),
        ("tet", "box_v41.msh", ""),
        ("tet", "box.node", ""),
    ] {
        std::fs::copy(data(file), dir.path().join(file)).unwrap();
        if file == "box.node" {
            std::fs::copy(data("box.ele"), dir.path().join("box.ele")).unwrap();
        }
        let scene = format!(
            "[mesh]\nkind = \"{kind}\"\npath = \"{file}\"\nscale = 2.0\ncenter = [1.0, 0.0, 0.0]\n{extra}\
             [integrator]\nsteps = 2\n"
        );
        let p = write(dir.path(), "s.toml", scene.as_bytes());
        let s =
            msc::scene::load(p.to_str().unwrap(), &[]).unwrap_or_else(|e| panic!("{file}: {e}"));
        // Placed at the centre of its bounding box, scaled.
        let (lo, hi) = s
            .system
            .positions()
            .iter()
            .fold((DVec3::INFINITY, DVec3::NEG_INFINITY), |(lo, hi), &p| {
                (lo.min(p), hi.max(p))
            });
        assert!(((lo + hi) / 2.0 - DVec3::X).length() < 1e-12, "{file}");
        // The mesh file(s) are recorded as inputs with their digests.
        let names: Vec<&str> = s.inputs.iter().map(|d| d.path.as_str()).collect();
        assert!(names.iter().any(|n| n.ends_with(file)), "{names:?}");
        if file == "box.node" {
            assert!(names.iter().any(|n| n.ends_with("box.ele")), "{names:?}");
        }
    }
    // A surface file under kind "tet", a polygon policy for STL, a missing built-in mesh.
    let p = write(
        dir.path(),
        "bad.toml",
        b"[mesh]\nkind = \"tet\"\npath = \"plate_binary.ply\"\n[integrator]\nsteps = 1\n",
    );
    let e = msc::scene::load(p.to_str().unwrap(), &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mesh.path") && e.contains("mesh.kind = \"ply\""),
        "{e}"
    );
    let p = write(dir.path(), "bad.toml", b"[mesh]\nkind = \"stl\"\npath = \"sphere_binary.stl\"\npolygons = \"edges\"\n[integrator]\nsteps = 1\n");
    let e = msc::scene::load(p.to_str().unwrap(), &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("mesh.polygons") && e.contains(":4:"), "{e}");
    let p = write(
        dir.path(),
        "bad.toml",
        b"[mesh]\nkind = \"tet\"\npath = \"builtin:nope.msh\"\n[integrator]\nsteps = 1\n",
    );
    let e = msc::scene::load(p.to_str().unwrap(), &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("builtin:beam.msh"), "{e}");
    // A bad file through a scene: the scene's key and the file's line.
    write(
        dir.path(),
        "nan.obj",
        b"v 0 0 0\nv nan 0 0\nv 0 1 0\nf 1 2 3\n",
    );
    let p = write(
        dir.path(),
        "bad.toml",
        b"[mesh]\nkind = \"obj\"\npath = \"nan.obj\"\n[integrator]\nsteps = 1\n",
    );
    let e = msc::scene::load(p.to_str().unwrap(), &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mesh.path") && e.contains("nan.obj, line 2"),
        "{e}"
    );
}

#[test]
fn the_builtin_beam_is_the_generated_gmsh_box() {
    let s = msc::scene::load("beam", &[]).unwrap();
    // 14 x 4 x 3 cubes of 0.1 m, 6 tetrahedra each: 15 x 5 x 4 nodes; edges: 745 along
    // the axes, 614 face diagonals, 168 body diagonals; 2 x 2 x (56 + 42 + 12) boundary
    // triangles.
    assert_eq!(s.system.len(), 300);
    assert_eq!(s.system.springs().len(), 1527);
    assert_eq!(s.system.faces().len(), 440);
    assert_eq!(s.system.pinned().iter().filter(|&&p| p).count(), 20);
}

#[test]
fn msc_bench_takes_a_mesh_file_as_its_workload() {
    let dir = tempfile::tempdir().unwrap();
    let bench = |mesh: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_msc"))
            .args([
                "bench",
                "--backend",
                "cpu",
                "--steps",
                "2",
                "--repeats",
                "1",
            ])
            .args(["--warmup-ms", "0", "--quiet", "--mesh"])
            .arg(mesh)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let o = bench(&data("box_v41_binary.msh"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line = String::from_utf8(o.stdout).unwrap();
    let r: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    let m = load(&data("box_v41.msh"), None);
    assert_eq!(r["workload"], "mesh");
    assert_eq!(r["status"], "ok");
    assert_eq!(r["n"], m.positions.len());
    assert_eq!(r["springs"], m.edges.len());
    assert!(r["mesh_load_seconds"].as_f64().unwrap() > 0.0);
    assert!(r["mesh"].as_str().unwrap().ends_with("box_v41_binary.msh"));
    // A bad file is the row's failure, naming the file and the line.
    let bad = write(
        dir.path(),
        "bad.obj",
        b"v 0 0 0\nv nan 0 0\nv 0 1 0\nf 1 2 3\n",
    );
    let o = bench(&bad);
    let r: serde_json::Value =
        serde_json::from_str(String::from_utf8(o.stdout).unwrap().trim()).unwrap();
    assert_eq!(r["status"], "failed");
    let reason = r["reason"].as_str().unwrap();
    assert!(reason.contains("bad.obj, line 2"), "{reason}");
}
