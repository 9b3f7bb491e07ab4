//! Bad mesh files, format by format: truncated files, wrong counts, indices out of range,
//! NaN and inf, degenerate and inverted tetrahedra (named by index), another format under
//! the wrong extension, a 2 GB header count that must not allocate. Each must be a typed
//! `MeshError::File` naming the file and the line or element.

use msc::model::mesh::{self, At, FileOptions, MeshFormat};
use msc::model::MeshError;
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Loads `bytes` saved as `name` and returns the error, which must be a `MeshError::File`
/// naming the file.
fn refused(name: &str, bytes: &[u8], format: Option<MeshFormat>) -> (String, Option<At>) {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), name, bytes);
    match mesh::load_file(&p, format, &FileOptions::default()) {
        Err(e @ MeshError::File { .. }) => {
            let s = e.to_string();
            assert!(s.contains(name), "'{s}' does not name {name}");
            let MeshError::File { at, .. } = e else {
                unreachable!()
            };
            (s, at)
        }
        Err(e) => panic!("{name}: expected MeshError::File, got {e:?}"),
        Ok(m) => panic!("{name}: loaded {} vertices", m.positions.len()),
    }
}

fn says(name: &str, bytes: &[u8], format: Option<MeshFormat>, needles: &[&str]) {
    let (s, _) = refused(name, bytes, format);
    for n in needles {
        assert!(s.contains(n), "{name}: '{s}' does not say '{n}'");
    }
}

const TRI_OBJ: &str = "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n";

#[test]
fn bad_obj_files() {
    #[rustfmt::skip]
    let cases: [(&str, &[u8], &[&str]); 12] = [
        ("idx.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9\n", &["line 4", "index 9", "3 vertices"]),
        ("rel.obj", b"v 0 0 0\nf -1 -2 -3\n", &["line 2", "-2"]),
        ("zero.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 0 1 2\n", &["line 4", "start at 1"]),
        ("nan.obj", b"v 0 0 0\nv nan 0 0\nv 0 1 0\nf 1 2 3\n", &["line 2", "not finite"]),
        ("inf.obj", b"v 0 0 0\nv 1 inf 0\nv 0 1 0\nf 1 2 3\n", &["line 2", "not finite"]),
        ("short.obj", b"v 0 0\nf 1 1 1\n", &["line 1", "2 coordinates"]),
        ("word.obj", b"v 0 zero 0\n", &["line 1", "zero"]),
        ("twoface.obj", b"v 0 0 0\nv 1 0 0\nf 1 2\n", &["line 3", "at least 3"]),
        ("oneline.obj", b"v 0 0 0\nl 1\n", &["line 2", "at least 2"]),
        ("empty.obj", b"# nothing\n", &["no vertices"]),
        // Truncated mid-record.
        ("cut.obj", &TRI_OBJ.as_bytes()[..22], &["line 3", "2 coordinates"]),
        // Another format under .obj.
        ("ply.obj", b"ply\nformat ascii 1.0\nend_header\n", &["PLY", "mesh.kind = \"ply\""]),
    ];
    for (name, bytes, needles) in cases {
        says(name, bytes, Some(MeshFormat::Obj), needles);
    }
}

const PLY_HEAD: &str =
    "ply\nformat ascii 1.0\nelement vertex 3\nproperty double x\nproperty double y\n\
    property double z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n";

#[test]
fn bad_ply_files() {
    let ply = Some(MeshFormat::Ply);
    let good = format!("{PLY_HEAD}0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n");
    mesh::load_bytes(
        "good.ply",
        good.as_bytes(),
        MeshFormat::Ply,
        &FileOptions::default(),
    )
    .unwrap();
    says(
        "idx.ply",
        format!("{PLY_HEAD}0 0 0\n1 0 0\n0 1 0\n3 0 1 7\n").as_bytes(),
        ply,
        &["face 0", "index 7"],
    );
    says(
        "neg.ply",
        format!("{PLY_HEAD}0 0 0\n1 0 0\n0 1 0\n3 0 -1 2\n").as_bytes(),
        ply,
        &["face 0", "-1"],
    );
    says(
        "nan.ply",
        format!("{PLY_HEAD}0 0 0\n1 nan 0\n0 1 0\n3 0 1 2\n").as_bytes(),
        ply,
        &["vertex 1", "line 11", "non-finite"],
    );
    says(
        "inf.ply",
        format!("{PLY_HEAD}0 0 0\n1 0 -inf\n0 1 0\n3 0 1 2\n").as_bytes(),
        ply,
        &["vertex 1", "non-finite"],
    );
    // Wrong counts: a vertex row with an extra value, a missing row, rows left over.
    says(
        "extra.ply",
        format!("{PLY_HEAD}0 0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n").as_bytes(),
        ply,
        &["line 10", "more values"],
    );
    // The face row read as a vertex row.
    says(
        "fewer.ply",
        format!("{PLY_HEAD}0 0 0\n1 0 0\n3 0 1 2\n").as_bytes(),
        ply,
        &["line 12", "more values"],
    );
    says(
        "more.ply",
        format!("{PLY_HEAD}0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n3 0 1 2\n").as_bytes(),
        ply,
        &["after the last element"],
    );
    says(
        "cut.ply",
        &good.as_bytes()[..good.len() - 4],
        ply,
        &["ends early"],
    );
    // Binary: truncated, and a 2 GB vertex count in a small file (no allocation).
    let mut bin = b"ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\n\
        property float y\nproperty float z\nend_header\n"
        .to_vec();
    for v in [0f32, 0., 0., 1., 0., 0., 0., 1., 0.] {
        bin.extend(v.to_le_bytes());
    }
    says(
        "cut_bin.ply",
        &bin[..bin.len() - 2],
        ply,
        &["34 bytes left", "truncated"],
    );
    let huge = String::from_utf8_lossy(&bin).replace("vertex 3", "vertex 2147483648");
    says(
        "huge.ply",
        huge.as_bytes(),
        ply,
        &["2147483648 vertex", "bytes left"],
    );
    says(
        "huge_face.ply",
        good.replace("face 1", "face 4000000000").as_bytes(),
        ply,
        &["4000000000 face"],
    );
    says(
        "noheader.ply",
        b"ply\nformat ascii 1.0\n",
        ply,
        &["end_header"],
    );
    says("stl.ply", b"solid x\nfacet normal 0 0 1\n", ply, &["STL"]);
    says(
        "twoverts.ply",
        format!("{PLY_HEAD}0 0 0\n1 0 0\n0 1 0\n2 0 1\n").as_bytes(),
        ply,
        &["face 0", "at least 3"],
    );
}

fn binary_stl(tris: &[[[f32; 3]; 3]], count: u32) -> Vec<u8> {
    let mut b = vec![0u8; 80];
    b.extend(count.to_le_bytes());
    for t in tris {
        b.extend([0u8; 12]);
        for v in t {
            for c in v {
                b.extend(c.to_le_bytes());
            }
        }
        b.extend([0u8; 2]);
    }
    b
}

#[test]
fn bad_stl_files() {
    let stl = Some(MeshFormat::Stl);
    let tri = [[0.0f32, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]];
    let good = binary_stl(&[tri, [tri[0], tri[2], [0.0, 0.0, 1.0]]], 2);
    let m = mesh::load_bytes("g.stl", &good, MeshFormat::Stl, &FileOptions::default()).unwrap();
    assert_eq!(
        (m.positions.len(), m.edges.len(), m.faces.len()),
        (4, 5, 2),
        "shared vertices merged"
    );
    says(
        "cut.stl",
        &good[..good.len() - 7],
        stl,
        &["2 triangles", "truncated"],
    );
    says("count.stl", &binary_stl(&[tri], 3), stl, &["3 triangles"]);
    says(
        "huge.stl",
        &binary_stl(&[tri], 2_000_000_000),
        stl,
        &["2000000000 triangles"],
    );
    says(
        "nan.stl",
        &binary_stl(&[tri, [tri[0], [f32::NAN, 0.0, 0.0], tri[2]]], 2),
        stl,
        &["triangle 1", "not finite"],
    );
    says(
        "inf.stl",
        &binary_stl(&[[tri[0], tri[1], [0.0, f32::INFINITY, 0.0]]], 1),
        stl,
        &["triangle 0", "not finite"],
    );
    let ascii = "solid t\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nvertex 0 1 0\nendloop\nendfacet\nendsolid t\n";
    mesh::load_bytes(
        "a.stl",
        ascii.as_bytes(),
        MeshFormat::Stl,
        &FileOptions::default(),
    )
    .unwrap();
    says(
        "acut.stl",
        &ascii.as_bytes()[..60],
        stl,
        &["line 5", "truncated"],
    );
    says(
        "anan.stl",
        ascii.replace("vertex 1 0 0", "vertex 1 nan 0").as_bytes(),
        stl,
        &["line 5", "not finite"],
    );
    says(
        "afour.stl",
        ascii.replace("endloop", "vertex 1 1 0\nendloop").as_bytes(),
        stl,
        &["line 7", "endloop"],
    );
    says(
        "aword.stl",
        ascii.replace("vertex 0 1 0", "vertex 0 one 0").as_bytes(),
        stl,
        &["line 6", "one"],
    );
    says("obj.stl", TRI_OBJ.as_bytes(), stl, &["84"]);
    says(
        "msh.stl",
        b"$MeshFormat\n4.1 0 8\n$EndMeshFormat\n",
        stl,
        &["Gmsh", "mesh.kind = \"tet\""],
    );
}

/// A Gmsh 4.1 ASCII file with the given nodes and tetrahedra (node tags from 1).
fn msh(nodes: &[[f64; 3]], tets: &[[usize; 4]]) -> String {
    let n = nodes.len();
    let mut s = format!("$MeshFormat\n4.1 0 8\n$EndMeshFormat\n$Nodes\n1 {n} 1 {n}\n3 1 0 {n}\n");
    for k in 1..=n {
        s += &format!("{k}\n");
    }
    for p in nodes {
        s += &format!("{} {} {}\n", p[0], p[1], p[2]);
    }
    let m = tets.len();
    s += &format!("$EndNodes\n$Elements\n1 {m} 1 {m}\n3 1 4 {m}\n");
    for (e, t) in tets.iter().enumerate() {
        s += &format!("{} {} {} {} {}\n", e + 1, t[0], t[1], t[2], t[3]);
    }
    s + "$EndElements\n"
}

const NODES: [[f64; 3]; 5] = [
    [0., 0., 0.],
    [1., 0., 0.],
    [0., 1., 0.],
    [0., 0., 1.],
    [1., 1., 1.],
];

#[test]
fn bad_gmsh_files() {
    let tet = None;
    let good = msh(&NODES, &[[1, 2, 3, 4], [2, 3, 4, 5]]);
    let m = mesh::load_bytes(
        "g.msh",
        good.as_bytes(),
        MeshFormat::Gmsh,
        &FileOptions::default(),
    )
    .unwrap();
    assert_eq!((m.positions.len(), m.edges.len(), m.faces.len()), (5, 9, 6));
    // Degenerate (flat) and inverted tetrahedra, named by index and line.
    let (s, at) = refused(
        "flat.msh",
        msh(
            &[[0., 0., 0.], [1., 0., 0.], [0., 1., 0.], [1., 1., 0.]],
            &[[1, 2, 3, 4]],
        )
        .as_bytes(),
        tet,
    );
    assert!(
        s.contains("degenerate") && s.contains("tetrahedron 0"),
        "{s}"
    );
    assert_eq!(
        at,
        Some(At::Element {
            what: "tetrahedron",
            index: 0,
            line: Some(19)
        })
    );
    let (s, at) = refused(
        "inv.msh",
        msh(&NODES, &[[1, 2, 3, 4], [2, 3, 4, 5], [1, 3, 2, 5]]).as_bytes(),
        tet,
    );
    assert!(s.contains("inverted") && s.contains("tetrahedron 2"), "{s}");
    assert!(matches!(at, Some(At::Element { index: 2, .. })), "{at:?}");
    says(
        "rep.msh",
        msh(&NODES, &[[1, 2, 3, 3]]).as_bytes(),
        tet,
        &["tetrahedron 0", "degenerate"],
    );
    says(
        "idx.msh",
        msh(&NODES, &[[1, 2, 3, 9]]).as_bytes(),
        tet,
        &["tetrahedron 0", "node tag 9"],
    );
    let nan = msh(
        &[[0., 0., 0.], [1., f64::NAN, 0.], [0., 1., 0.], [0., 0., 1.]],
        &[[1, 2, 3, 4]],
    );
    says("nan.msh", nan.as_bytes(), tet, &["node 2", "not finite"]);
    let inf = msh(
        &[
            [0., 0., 0.],
            [1., 0., 0.],
            [0., 1., 0.],
            [0., 0., f64::INFINITY],
        ],
        &[[1, 2, 3, 4]],
    );
    says("inf.msh", inf.as_bytes(), tet, &["node 4", "not finite"]);
    // Wrong counts and truncation.
    says(
        "count.msh",
        good.replace("3 1 4 2\n", "3 1 4 3\n").as_bytes(),
        tet,
        &["$EndElements"],
    );
    says(
        "fewer.msh",
        good.replace("3 1 4 2\n", "3 1 4 1\n").as_bytes(),
        tet,
        &["expected $EndElements"],
    );
    says(
        "cut.msh",
        &good.as_bytes()[..good.len() - 30],
        tet,
        &["truncated"],
    );
    says(
        "huge.msh",
        good.replace("1 5 1 5\n3 1 0 5", "1 2147483648 1 5\n3 1 0 5")
            .as_bytes(),
        tet,
        &["2147483648 nodes", "bytes left"],
    );
    // Other volume elements: named by type and count.
    let hex = good.replace(
        "1 2 1 2\n3 1 4 2\n1 1 2 3 4\n2 2 3 4 5\n",
        "2 3 1 3\n3 1 4 2\n1 1 2 3 4\n2 2 3 4 5\n3 1 5 1\n3 1 2 3 4 5 1 2 3\n",
    );
    says(
        "hex.msh",
        hex.as_bytes(),
        tet,
        &["1 8-node hexahedra (Gmsh type 5)"],
    );
    // Points, lines and triangles (Gmsh writes them beside the volume) are skipped.
    let tri = good.replace("1 2 1 2\n3 1 4 2\n", "2 3 1 3\n2 1 2 1\n3 1 2 3\n3 1 4 2\n");
    let m = mesh::load_bytes(
        "t.msh",
        tri.as_bytes(),
        MeshFormat::Gmsh,
        &FileOptions::default(),
    )
    .unwrap();
    assert_eq!(m.edges.len(), 9);
    says(
        "v3.msh",
        good.replace("4.1 0 8", "3.0 0 8").as_bytes(),
        tet,
        &["version 3.0"],
    );
    says(
        "vtk.msh",
        b"# vtk DataFile Version 3.0\nx\nASCII\n",
        tet,
        &["legacy VTK", ".vtk"],
    );
    // A surface mesh given to kind "tet" by its extension is a scene error (see below).
}

#[test]
fn bad_vtk_vtu_tetgen_and_medit_files() {
    let tet = None;
    let vtk = |points: &str, cells: &str, types: &str| {
        format!("# vtk DataFile Version 4.2\nt\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS 5 double\n{points}\nCELLS {cells}\nCELL_TYPES {types}\n")
    };
    let pts = "0 0 0 1 0 0 0 1 0 0 0 1 1 1 1";
    let good = vtk(pts, "2 10\n4 0 1 2 3\n4 1 2 3 4", "2\n10 10");
    mesh::load_bytes(
        "g.vtk",
        good.as_bytes(),
        MeshFormat::Vtk,
        &FileOptions::default(),
    )
    .unwrap();
    says(
        "idx.vtk",
        vtk(pts, "1 5\n4 0 1 2 7", "1\n10").as_bytes(),
        tet,
        &["tetrahedron 0", "point 7"],
    );
    says(
        "nan.vtk",
        vtk(
            &pts.replace("0 0 1 1", "0 0 nan 1"),
            "1 5\n4 0 1 2 3",
            "1\n10",
        )
        .as_bytes(),
        tet,
        &["point 3", "not finite"],
    );
    says(
        "count.vtk",
        vtk(pts, "2 9\n4 0 1 2 3\n4 1 3 2", "2\n10 10").as_bytes(),
        tet,
        &["CELLS"],
    );
    says(
        "types.vtk",
        vtk(pts, "2 10\n4 0 1 2 3\n4 1 2 3 4", "1\n10").as_bytes(),
        tet,
        &["2 cells but 1 cell types"],
    );
    says(
        "hex.vtk",
        vtk(pts, "2 10\n4 0 1 2 3\n4 1 2 3 4", "2\n10 12").as_bytes(),
        tet,
        &["1 hexahedra (VTK cell type 12)"],
    );
    says(
        "inv.vtk",
        vtk(pts, "2 10\n4 0 1 2 3\n4 0 2 1 4", "2\n10 10").as_bytes(),
        tet,
        &["tetrahedron 1", "inverted"],
    );
    says(
        "cut.vtk",
        &good.as_bytes()[..good.len() - 3],
        tet,
        &["line 11", "truncated"],
    );
    says(
        "huge.vtk",
        good.replace("POINTS 5", "POINTS 2147483648").as_bytes(),
        tet,
        &["2147483648 points"],
    );
    // VTU: the real file with its data cut, and a bad index.
    let vtu = std::fs::read_to_string(data("box_ascii.vtu")).unwrap();
    says(
        "cut.vtu",
        &vtu.as_bytes()[..vtu.len() / 2],
        tet,
        &["truncated"],
    );
    let zlib = std::fs::read(data("box_zlib.vtu")).unwrap();
    says("zcut.vtu", &zlib[..zlib.len() - 200], tet, &["VTU"]);
    let conn = vtu.find("Name=\"connectivity\"").unwrap();
    let body = conn + vtu[conn..].find('>').unwrap() + 1;
    let bad = format!("{}\n99999 {}", &vtu[..body], &vtu[body..]);
    says("idx.vtu", bad.as_bytes(), tet, &["point"]);
    // TetGen: .node and .ele beside each other.
    let dir = tempfile::tempdir().unwrap();
    let node = "5 3 0 0\n1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n5 1 1 1\n";
    write(dir.path(), "t.node", node.as_bytes());
    let tetgen = |ele: &str| {
        write(dir.path(), "t.ele", ele.as_bytes());
        mesh::load_file(&dir.path().join("t.ele"), None, &FileOptions::default())
    };
    assert_eq!(
        tetgen("2 4 0\n1 1 2 3 4\n2 2 3 4 5\n").unwrap().edges.len(),
        9
    );
    for (ele, needles) in [
        (
            "1 4 0\n1 1 2 3 9\n",
            &["tetrahedron 0", "line 2", "node 9"][..],
        ),
        ("2 4 0\n1 1 2 3 4\n", &["t.ele", "truncated"]),
        ("1 4 0\n1 1 2 3 4\n2 2 3 4 5\n", &["wrong count"]),
        (
            "1 10 0\n1 1 2 3 4 5 6 7 8 9 10\n",
            &["10 nodes per tetrahedron"],
        ),
        (
            "2 4 0\n1 1 2 3 4\n2 1 3 2 5\n",
            &["tetrahedron 1", "inverted"],
        ),
        ("2147483648 4 0\n1 1 2 3 4\n", &["2147483648 tetrahedra"]),
    ] {
        let s = tetgen(ele).unwrap_err().to_string();
        for n in needles {
            assert!(s.contains(n), "{ele:?}: '{s}' does not say '{n}'");
        }
    }
    write(
        dir.path(),
        "t.node",
        node.replace("4 0 0 1", "4 0 inf 1").as_bytes(),
    );
    let s = tetgen("1 4 0\n1 1 2 3 4\n").unwrap_err().to_string();
    assert!(
        s.contains("t.node") && s.contains("line 5") && s.contains("not finite"),
        "{s}"
    );
    // Medit.
    let medit = "MeshVersionFormatted 2\nDimension 3\nVertices\n5\n0 0 0 0\n1 0 0 0\n0 1 0 0\n0 0 1 0\n1 1 1 0\nTetrahedra\n2\n1 2 3 4 0\n2 3 4 5 0\nEnd\n";
    mesh::load_bytes(
        "g.mesh",
        medit.as_bytes(),
        MeshFormat::Medit,
        &FileOptions::default(),
    )
    .unwrap();
    says(
        "idx.mesh",
        medit.replace("2 3 4 5 0", "2 3 4 6 0").as_bytes(),
        tet,
        &["tetrahedron 1", "line 13", "vertex 6"],
    );
    says(
        "cut.mesh",
        medit.replace("End\n", "").as_bytes(),
        tet,
        &["End"],
    );
    says(
        "nan.mesh",
        medit.replace("1 1 1 0", "1 nan 1 0").as_bytes(),
        tet,
        &["line 9", "not finite"],
    );
    says(
        "hex.mesh",
        medit
            .replace("End", "Hexahedra\n1\n1 2 3 4 5 1 2 3 0\nEnd")
            .as_bytes(),
        tet,
        &["1 Hexahedra"],
    );
    says(
        "huge.mesh",
        medit
            .replace("Vertices\n5", "Vertices\n2147483648")
            .as_bytes(),
        tet,
        &["2147483648 vertices"],
    );
}

/// A vertex beyond what the solver holds (f32), in the file or after `mesh.scale`, is
/// refused by index: it loaded as inf, or its overflowing edge lengths read as a
/// "degenerate" tetrahedron.
#[test]
fn far_vertices_are_refused_by_index() {
    let far = "v 1e300 0 0\nv 0 1 0\nv 0 0 1\nf 1 2 3\n";
    let (s, at) = refused("far.obj", far.as_bytes(), Some(MeshFormat::Obj));
    assert!(s.contains("vertex 0") && s.contains("1e300"), "{s}");
    assert!(matches!(
        at,
        Some(At::Element {
            what: "vertex",
            index: 0,
            ..
        })
    ));
    // Finite in the file, infinite once scaled.
    let scaled = "v 0 0 0\nv 1 0 0\nv 0 1e300 0\nf 1 2 3\n";
    let o = FileOptions {
        scale: 1e10,
        ..FileOptions::default()
    };
    let e = mesh::load_bytes("s.obj", scaled.as_bytes(), MeshFormat::Obj, &o).unwrap_err();
    let s = e.to_string();
    assert!(s.contains("vertex 2") && s.contains("scale 1e10"), "{s}");
    let vtk = "# vtk DataFile Version 4.2\nt\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS 4 double\n\
               0 0 0 1e300 0 0 0 1 0 0 0 1\nCELLS 1 5\n4 0 1 2 3\nCELL_TYPES 1\n10\n";
    let s = refused("far.vtk", vtk.as_bytes(), None).0;
    assert!(s.contains("node 1") && !s.contains("degenerate"), "{s}");
    let e = mesh::load_bytes(
        "s.vtk",
        vtk.replace("1e300", "1e30").as_bytes(),
        MeshFormat::Vtk,
        &o,
    )
    .unwrap_err();
    assert!(e.to_string().contains("node 1"), "{e}");
}

/// One polygon's diagonals grow as n^2 / 2: a 40000-vertex face (a 2 MB OBJ) asked for
/// 8e8 springs and aborted the process allocating them. Past the limit the face is named
/// under the default policy; "triangulate" reads it.
#[test]
fn a_polygon_with_too_many_diagonals_is_named() {
    let n = 2000u64;
    assert!(n * (n - 3) / 2 > mesh::MAX_POLYGON_DIAGONALS);
    let mut obj = String::new();
    for i in 0..n {
        let a = i as f64 * std::f64::consts::TAU / n as f64;
        obj.push_str(&format!("v {} {} 0\n", a.cos(), a.sin()));
    }
    obj.push_str("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 2001 2002 2003\nf");
    for i in 1..=n {
        obj.push_str(&format!(" {i}"));
    }
    obj.push('\n');
    let (s, at) = refused("poly.obj", obj.as_bytes(), Some(MeshFormat::Obj));
    assert!(
        s.contains("2000 vertices") && s.contains("triangulate"),
        "{s}"
    );
    assert!(
        matches!(
            at,
            Some(At::Element {
                what: "face",
                index: 1,
                ..
            })
        ),
        "{at:?}"
    );
    let o = FileOptions {
        polygons: mesh::Polygons::Triangulate,
        ..FileOptions::default()
    };
    let m = mesh::load_bytes("poly.obj", obj.as_bytes(), MeshFormat::Obj, &o).unwrap();
    assert_eq!(m.edges.len() as u64, 3 + n + (n - 3));
}

/// Polygons under the limit each, repeated over the same vertices: their springs merge
/// only at the end, so 538 copies of a 1000-vertex face (a 2.6 MB OBJ) asked for 2.7e8
/// springs (2 GB) first. The total is now bounded before any is pushed.
#[test]
fn repeated_polygons_past_the_spring_limit_are_refused() {
    let n = 1000u64;
    let mut obj = String::new();
    for i in 0..n {
        let a = i as f64 * std::f64::consts::TAU / n as f64;
        obj.push_str(&format!("v {} {} 0\n", a.cos(), a.sin()));
    }
    let mut face = String::from("f");
    for i in 1..=n {
        face.push_str(&format!(" {i}"));
    }
    face.push('\n');
    let copies = mesh::MAX_FILE_SPRINGS / (n + n * (n - 3) / 2) + 1;
    obj.push_str(&face.repeat(copies as usize));
    let s = refused("many.obj", obj.as_bytes(), Some(MeshFormat::Obj)).0;
    assert!(
        s.contains("springs before merging") && s.contains("limit"),
        "{s}"
    );
    // One copy is read.
    let one = obj[..obj.len() - face.len() * (copies as usize - 1)].to_string();
    let m = mesh::load_bytes(
        "one.obj",
        one.as_bytes(),
        MeshFormat::Obj,
        &FileOptions::default(),
    )
    .unwrap();
    assert_eq!(m.edges.len() as u64, n * (n - 1) / 2);
}

/// A face that names one vertex twice (`f 1 1 2`) gave a spring from the vertex to itself
/// and a face of no area, both dropped silently: the file loaded as one spring.
#[test]
fn a_face_repeating_a_vertex_is_refused() {
    let obj = Some(MeshFormat::Obj);
    for (face, vertex) in [("f 1 1 2", 1), ("f 1 2 3 2", 2), ("f 1 2 -3", 1)] {
        let text = format!("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n{face}\n");
        let (s, at) = refused("rep.obj", text.as_bytes(), obj);
        assert!(
            s.contains(&format!("repeats vertex {vertex}")),
            "{face}: {s}"
        );
        assert_eq!(at, Some(At::Line(5)), "{face}: {s}");
    }
    let ply = Some(MeshFormat::Ply);
    let text = format!("{PLY_HEAD}0 0 0\n1 0 0\n0 1 0\n3 2 0 2\n");
    let (s, at) = refused("rep.ply", text.as_bytes(), ply);
    assert!(s.contains("repeats vertex 2"), "{s}");
    assert_eq!(
        at,
        Some(At::Element {
            what: "face",
            index: 0,
            line: Some(13)
        })
    );
    // Binary, the same face.
    let mut bin = PLY_HEAD
        .replace("ascii", "binary_little_endian")
        .into_bytes();
    for v in [0f64, 0., 0., 1., 0., 0., 0., 1., 0.] {
        bin.extend(v.to_le_bytes());
    }
    bin.push(3);
    for i in [2i32, 0, 2] {
        bin.extend(i.to_le_bytes());
    }
    says("rep_bin.ply", &bin, ply, &["face 0", "repeats vertex 2"]);
}

/// A triangle whose corners all merge into one point (an STL triangle of three equal
/// vertices) has no springs; its point was kept as a particle no spring holds.
#[test]
fn a_face_collapsing_to_a_lone_point_is_refused() {
    let stl = Some(MeshFormat::Stl);
    let tri = [[0.0f32, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]];
    let point = [[5.0f32, 5.0, 5.0]; 3];
    let (s, at) = refused("point.stl", &binary_stl(&[tri, point], 2), stl);
    assert!(s.contains("(5, 5, 5)") && s.contains("no springs"), "{s}");
    assert!(
        matches!(
            at,
            Some(At::Element {
                what: "face",
                index: 1,
                ..
            })
        ),
        "{at:?}"
    );
    // Collapsed onto a vertex other triangles hold: nothing is lost, it loads.
    let on_corner = [[1.0f32, 0.0, 0.0]; 3];
    let m = mesh::load_bytes(
        "c.stl",
        &binary_stl(&[tri, on_corner], 2),
        MeshFormat::Stl,
        &FileOptions::default(),
    )
    .unwrap();
    assert_eq!((m.positions.len(), m.edges.len()), (3, 3));
    // An OBJ line between two vertices at one point, used by nothing else.
    let text = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 2 2 2\nv 2 2 2\nf 1 2 3\nl 4 5\n";
    let (s, at) = refused("l.obj", text.as_bytes(), Some(MeshFormat::Obj));
    assert!(s.contains("(2, 2, 2)"), "{s}");
    assert!(
        matches!(at, Some(At::Element { what: "vertex", .. })),
        "{at:?}"
    );
}

/// OBJ lines may end in LF, CRLF or a lone CR, mixed: a lone CR was kept inside the
/// line, so `v 0 0 0\rv 5 5 5` read as one vertex (extra values ignored) and every later
/// index pointed one vertex off.
#[test]
fn obj_lone_cr_line_breaks_end_lines() {
    let text = "v 0 0 0\rv 5 5 5\nv 1 0 0\r\nv 0 1 0\nf 1 2 3\n";
    let m = mesh::load_bytes(
        "cr.obj",
        text.as_bytes(),
        MeshFormat::Obj,
        &FileOptions::default(),
    )
    .unwrap();
    let p: Vec<[f64; 3]> = m.positions.iter().map(|p| p.to_array()).collect();
    assert_eq!(p, [[0., 0., 0.], [5., 5., 5.], [1., 0., 0.]]);
    // Lines are counted at each break.
    let (s, at) = refused(
        "cr.obj",
        b"v 0 0 0\rv 1 nan 0\rv 0 1 0\r",
        Some(MeshFormat::Obj),
    );
    assert_eq!(at, Some(At::Line(2)), "{s}");
}

/// A `\` continuing the last line into the end of the file: that record was dropped
/// silently (the rest of the file loaded).
#[test]
fn an_obj_line_continued_into_the_end_of_the_file_is_refused() {
    let cut = format!("{TRI_OBJ}f 1 2 \\\n");
    let (s, at) = refused("cont.obj", cut.as_bytes(), Some(MeshFormat::Obj));
    assert!(s.contains("continued"), "{s}");
    assert_eq!(at, Some(At::Line(5)));
}

/// A `.node` file of no nodes: the range in the message underflowed (`first + 0 - 1`), a
/// panic in a debug build and "nodes 0 to 18446744073709551615" in a release one.
#[test]
fn a_tetgen_node_file_of_no_nodes_is_named() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "t.node", b"0 3 0 0\n");
    let ele = write(dir.path(), "t.ele", b"1 4 0\n1 1 2 3 4\n");
    let e = mesh::load_file(&ele, None, &FileOptions::default()).unwrap_err();
    let s = e.to_string();
    assert!(s.contains("t.ele") && s.contains("has no nodes"), "{s}");
}

/// VTU Piece counts near 2^64 with a header that agrees: the end of the array
/// (`header + n`) and the inflate limit (`size + 1`) overflowed, a panic in a debug build.
#[test]
fn vtu_counts_near_two_to_the_64_are_refused() {
    let b64 = |b: &[u8]| {
        const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut s = String::new();
        for c in b.chunks(3) {
            let mut a = [0u8; 3];
            a[..c.len()].copy_from_slice(c);
            let v = (a[0] as u32) << 16 | (a[1] as u32) << 8 | a[2] as u32;
            for k in 0..4 {
                let ch = T[(v >> (18 - 6 * k) & 63) as usize] as char;
                s.push(if k <= c.len() { ch } else { '=' });
            }
        }
        s
    };
    let n = u64::MAX;
    for (compressor, header) in [
        ("", n.to_le_bytes().to_vec()),
        // One block of n bytes (0: the last block is full), compressed to 0 bytes.
        (
            " compressor=\"vtkZLibDataCompressor\"",
            [1, n, 0, 0].iter().flat_map(|w| w.to_le_bytes()).collect(),
        ),
    ] {
        let vtu = format!(
            "<?xml version=\"1.0\"?>\n<VTKFile type=\"UnstructuredGrid\" version=\"1.0\" \
             byte_order=\"LittleEndian\" header_type=\"UInt64\"{compressor}>\n<UnstructuredGrid>\n\
             <Piece NumberOfPoints=\"0\" NumberOfCells=\"{n}\">\n<Points>\n<DataArray \
             type=\"Float64\" NumberOfComponents=\"3\" format=\"ascii\">\n</DataArray>\n</Points>\n\
             <Cells>\n<DataArray type=\"UInt8\" Name=\"offsets\" format=\"binary\">\n{}\n\
             </DataArray>\n<DataArray type=\"UInt8\" Name=\"connectivity\" format=\"ascii\">\n\
             </DataArray>\n<DataArray type=\"UInt8\" Name=\"types\" format=\"ascii\">\n\
             </DataArray>\n</Cells>\n</Piece>\n</UnstructuredGrid>\n</VTKFile>\n",
            b64(&header)
        );
        let (s, at) = refused("huge.vtu", vtu.as_bytes(), None);
        assert!(s.contains("DataArray offsets"), "{s}");
        assert_eq!(at, Some(At::Line(10)), "{s}");
    }
}

/// A Gmsh 2.2 binary element block larger than what the header's count leaves was read
/// whole: the file loaded though its count was wrong.
#[test]
fn gmsh22_binary_blocks_must_fit_the_header_count() {
    let file = |count: i32, block: i32| {
        let mut b = b"$MeshFormat\n2.2 1 8\n".to_vec();
        b.extend(1i32.to_le_bytes());
        b.extend(b"\n$EndMeshFormat\n$Nodes\n5\n");
        for (t, p) in NODES.iter().enumerate() {
            b.extend((t as i32 + 1).to_le_bytes());
            p.iter().for_each(|c| b.extend(c.to_le_bytes()));
        }
        b.extend(format!("\n$EndNodes\n$Elements\n{count}\n").as_bytes());
        for v in [4, block, 0] {
            b.extend(v.to_le_bytes());
        }
        for (e, t) in [[1, 2, 3, 4], [2, 3, 4, 5]].iter().enumerate() {
            b.extend((e as i32 + 1).to_le_bytes());
            t.iter().for_each(|v: &i32| b.extend(v.to_le_bytes()));
        }
        b.extend(b"\n$EndElements\n");
        b
    };
    let m = mesh::load_bytes(
        "g.msh",
        &file(2, 2),
        MeshFormat::Gmsh,
        &FileOptions::default(),
    );
    assert_eq!(m.unwrap().edges.len(), 9);
    says(
        "over.msh",
        &file(1, 2),
        None,
        &["block of 2 elements", "count of 1", "wrong count"],
    );
}

/// Two nodes of a tetrahedral mesh at one position: no tetrahedron joins them, so the
/// solid loaded split along a crack (and two charges sat at one point).
#[test]
fn tetrahedra_on_duplicated_nodes_are_refused() {
    let mut nodes = NODES.to_vec();
    // Node 6 (index 5) duplicates node 4; the second tetrahedron is (2, 3, 4, 5) with
    // node 4 replaced by its duplicate.
    nodes.push(NODES[3]);
    let cracked = msh(&nodes, &[[1, 2, 3, 4], [2, 3, 6, 5]]);
    let (s, at) = refused("crack.msh", cracked.as_bytes(), None);
    assert!(
        s.contains("nodes 3 and 5") && s.contains("(0, 0, 1)"),
        "{s}"
    );
    assert_eq!(
        at,
        Some(At::Element {
            what: "node",
            index: 5,
            line: None
        })
    );
    // A duplicate no tetrahedron uses is dropped with the other unused nodes.
    let unused = msh(&nodes, &[[1, 2, 3, 4], [2, 3, 4, 5]]);
    let m = mesh::load_bytes(
        "u.msh",
        unused.as_bytes(),
        MeshFormat::Gmsh,
        &FileOptions::default(),
    )
    .unwrap();
    assert_eq!((m.positions.len(), m.edges.len()), (5, 9));
}

/// A UTF-8 byte-order mark before `$MeshFormat` is skipped, as in the other text formats
/// (the guide says so); it read as part of the first word.
#[test]
fn a_gmsh_file_with_a_byte_order_mark_reads() {
    let good = msh(&NODES, &[[1, 2, 3, 4], [2, 3, 4, 5]]);
    let bom = [&[0xEF, 0xBB, 0xBF], good.as_bytes()].concat();
    let o = FileOptions::default();
    let m = mesh::load_bytes("b.msh", &bom, MeshFormat::Gmsh, &o).unwrap();
    assert_eq!(
        m,
        mesh::load_bytes("g.msh", good.as_bytes(), MeshFormat::Gmsh, &o).unwrap()
    );
}

/// A PLY `comment` that mentions end_header ended the header there.
#[test]
fn a_ply_comment_naming_end_header_is_a_comment() {
    let good = format!("{PLY_HEAD}0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n");
    let commented = good.replacen("ply\n", "ply\ncomment exported before end_header\n", 1);
    let o = FileOptions::default();
    let m = mesh::load_bytes("c.ply", commented.as_bytes(), MeshFormat::Ply, &o).unwrap();
    assert_eq!(
        m,
        mesh::load_bytes("g.ply", good.as_bytes(), MeshFormat::Ply, &o).unwrap()
    );
}

/// PLY, legacy VTK and ASCII STL files whose lines end with a lone CR (classic Mac OS)
/// were refused: PLY 'does not start with `ply`', VTK 'truncated header', STL 'the file
/// ends where `facet` or `endsolid` was expected'. They read as their LF versions, and
/// lines are counted at each CR.
#[test]
fn ply_vtk_and_stl_lone_cr_lines_read_as_lf_lines() {
    let o = FileOptions::default();
    for (name, format) in [
        ("plate_ascii.ply", MeshFormat::Ply),
        ("box_42.vtk", MeshFormat::Vtk),
        ("box_51.vtk", MeshFormat::Vtk),
        ("sphere_ascii.stl", MeshFormat::Stl),
    ] {
        let lf = std::fs::read(data(name)).unwrap();
        assert!(!lf.contains(&b'\r'), "{name} is an LF file");
        let cr: Vec<u8> = lf
            .iter()
            .map(|&b| if b == b'\n' { b'\r' } else { b })
            .collect();
        let want = mesh::load_bytes(name, &lf, format, &o).unwrap();
        match mesh::load_bytes(name, &cr, format, &o) {
            Ok(m) => assert_eq!(m, want, "{name} with lone-CR lines"),
            Err(e) => panic!("{name} with lone-CR lines: {e}"),
        }
    }
    let cr = |s: &str| s.replace('\n', "\r").into_bytes();
    let ply = format!("{PLY_HEAD}0 0 0\n1 0 0\n0 nan 0\n3 0 1 2\n");
    let (s, at) = refused("cr.ply", &cr(&ply), Some(MeshFormat::Ply));
    assert_eq!(
        at,
        Some(At::Element {
            what: "vertex",
            index: 2,
            line: Some(12)
        }),
        "{s}"
    );
    let vtk = "# vtk DataFile Version 4.2\nt\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS 5 double\n\
               0 0 0 1 0 0\n0 1 0 0 0 1\n1 1 x\n";
    let (s, at) = refused("cr.vtk", &cr(vtk), Some(MeshFormat::Vtk));
    assert_eq!(at, Some(At::Line(8)), "{s}");
    let stl = "solid s\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nvertex 0 1\n\
               endloop\nendfacet\nendsolid s\n";
    let (s, at) = refused("cr.stl", &cr(stl), Some(MeshFormat::Stl));
    assert_eq!(at, Some(At::Line(7)), "{s}");
}

/// Binary PLY and VTK with lone-CR header lines: the body starts right after the CR,
/// even when its first byte is an LF (a CRLF would have eaten it, shifting every value).
#[test]
fn binary_bodies_after_lone_cr_header_lines_start_after_the_cr() {
    let o = FileOptions::default();
    // PLY: the first coordinate's first (little-endian) byte is 0x0A.
    let head = "ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\n\
                property float y\nproperty float z\nelement face 1\n\
                property list uchar int vertex_indices\nend_header\n";
    let mut body: Vec<u8> = [f32::from_bits(0x3F80_000A), 0., 0., 0., 1., 0., 0., 0., 1.]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    body.push(3);
    body.extend([0i32, 1, 2].iter().flat_map(|i| i.to_le_bytes()));
    let lf = [head.as_bytes(), &body].concat();
    let cr = [head.replace('\n', "\r").as_bytes(), &body].concat();
    let want = mesh::load_bytes("lf.ply", &lf, MeshFormat::Ply, &o).unwrap();
    assert_eq!(want.positions[0].x, f32::from_bits(0x3F80_000A) as f64);
    assert_eq!(
        mesh::load_bytes("cr.ply", &cr, MeshFormat::Ply, &o).unwrap(),
        want
    );
    // VTK (big-endian): the first coordinate's first byte is 0x0A.
    let vtk = |eol: &str| {
        let be = |v: &[f32]| v.iter().flat_map(|x| x.to_be_bytes()).collect::<Vec<u8>>();
        let ints = |v: &[i32]| v.iter().flat_map(|x| x.to_be_bytes()).collect::<Vec<u8>>();
        let line = |s: &str| format!("{s}{eol}").into_bytes();
        [
            line("# vtk DataFile Version 4.2"),
            line("t"),
            line("BINARY"),
            line("DATASET UNSTRUCTURED_GRID"),
            line("POINTS 5 float"),
            be(&[f32::from_bits(0x0A00_0000), 0., 0., 1., 0., 0., 0., 1., 0.]),
            be(&[0., 0., 1., 1., 1., 1.]),
            line(""),
            line("CELLS 2 10"),
            ints(&[4, 0, 1, 2, 3, 4, 1, 2, 3, 4]),
            line(""),
            line("CELL_TYPES 2"),
            ints(&[10, 10]),
            line(""),
        ]
        .concat()
    };
    let want = mesh::load_bytes("lf.vtk", &vtk("\n"), MeshFormat::Vtk, &o).unwrap();
    assert_eq!(want.positions[0].x, f32::from_bits(0x0A00_0000) as f64);
    assert_eq!(
        mesh::load_bytes("cr.vtk", &vtk("\r"), MeshFormat::Vtk, &o).unwrap(),
        want
    );
}

/// A Gmsh file of lone-CR lines reads as its LF twin, and an error in it names the same
/// line (the line count took only LF, so every such error said line 1).
#[test]
fn gmsh_lone_cr_lines_read_and_are_counted_as_lf_lines() {
    let o = FileOptions::default();
    let lf = std::fs::read(data("box_v22.msh")).unwrap();
    assert!(!lf.contains(&b'\r'), "box_v22.msh is an LF file");
    let cr = |b: &[u8]| -> Vec<u8> {
        b.iter()
            .map(|&c| if c == b'\n' { b'\r' } else { c })
            .collect()
    };
    let want = mesh::load_bytes("box.msh", &lf, MeshFormat::Gmsh, &o).unwrap();
    let got = mesh::load_bytes("box.msh", &cr(&lf), MeshFormat::Gmsh, &o).unwrap();
    assert_eq!(got, want);
    // The last element names a node that does not exist.
    let text = String::from_utf8(lf).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let end = lines.iter().position(|l| *l == "$EndElements").unwrap();
    let mut bad: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let last = bad[end - 1].rsplit_once(' ').unwrap().0.to_string();
    bad[end - 1] = format!("{last} 9999");
    let bad = bad.join("\n");
    let (s_lf, at_lf) = refused("lf.msh", bad.as_bytes(), Some(MeshFormat::Gmsh));
    let (s_cr, at_cr) = refused("cr.msh", &cr(bad.as_bytes()), Some(MeshFormat::Gmsh));
    assert!(
        s_lf.contains("9999") && s_cr.contains("9999"),
        "{s_lf} / {s_cr}"
    );
    // 1-based: the element's line is `end` (the line before $EndElements).
    assert!(s_lf.contains(&format!("line {end}")), "{s_lf}");
    assert_eq!(at_cr, at_lf, "{s_cr}");
}
