//! Tests that malformed Gmsh, TetGen, Medit, PLY, OBJ and STL files are refused naming
//! the problem (wrong header counts, data after the end, self-loop edges, duplicated
//! elements, misleading places), not read with data silently dropped.

use super::{
    gmsh, load_bytes, load_file, medit, obj, ply, stl, At, FileOptions, MeshError, MeshFormat,
};
use std::path::Path;

const G41: &str = "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n$Nodes\n1 5 1 5\n3 1 0 5\n1\n2\n3\n4\n5\n\
                   0 0 0\n1 0 0\n0 1 0\n0 0 1\n1 1 1\n$EndNodes\n$Elements\n1 2 1 2\n3 1 4 2\n\
                   1 1 2 3 4\n2 2 3 4 5\n$EndElements\n";

#[test]
fn gmsh41_section_counts_must_match_their_blocks() {
    let ok = gmsh::parse(G41.as_bytes()).unwrap();
    assert_eq!((ok.positions.len(), ok.tets.len()), (5, 2));
    for (from, to, says) in [
        (
            "1 5 1 5\n",
            "1 6 1 5\n",
            "$Nodes: the header gives 6 nodes, but its blocks hold 5",
        ),
        (
            "1 5 1 5\n",
            "1 3 1 5\n",
            "$Nodes: the header gives 3 nodes, but its blocks hold 5",
        ),
        (
            "1 2 1 2\n",
            "1 7 1 2\n",
            "$Elements: the header gives 7 elements, but its blocks hold 2",
        ),
        (
            "1 2 1 2\n",
            "1 1 1 2\n",
            "$Elements: the header gives 1 elements, but its blocks hold 2",
        ),
    ] {
        let e = gmsh::parse(G41.replace(from, to).as_bytes()).unwrap_err();
        assert!(e.message.contains(says), "{to}: {e:?}");
        let line = if says.starts_with("$Nodes") { 5 } else { 19 };
        assert_eq!(e.at, Some(At::Line(line)), "{e:?}");
    }
}

const MEDIT: &str = "MeshVersionFormatted 2\nDimension 3\nVertices\n5\n0 0 0 1\n1 0 0 1\n0 1 0 1\n\
                     0 0 1 1\n1 1 1 1\nTetrahedra\n2\n1 2 3 4 1\n2 3 4 5 1\nEnd\n";

#[test]
fn medit_content_after_end_is_refused() {
    let ok = medit::parse(format!("{MEDIT}\n# a comment\n\n").as_bytes()).unwrap();
    assert_eq!(ok.tets.len(), 2);
    let more = format!("{MEDIT}Tetrahedra\n1\n1 2 3 5 1\n");
    let e = medit::parse(more.as_bytes()).unwrap_err();
    assert!(e.message.contains("`Tetrahedra` after `End`"), "{e:?}");
    assert_eq!(e.at, Some(At::Line(15)), "{e:?}");
}

fn ply_text(elements: &str, body: &str) -> String {
    format!(
        "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n\
         property float z\n{elements}end_header\n0 0 0\n1 0 0\n0 1 0\n{body}"
    )
}

#[test]
fn ply_self_loop_edges_and_a_second_vertex_element_are_refused() {
    let edge = "element edge 2\nproperty int vertex1\nproperty int vertex2\n";
    let ok = ply::parse(ply_text(edge, "0 1\n1 2\n").as_bytes()).unwrap();
    assert_eq!(ok.edges, vec![[0, 1], [1, 2]]);
    let e = ply::parse(ply_text(edge, "0 1\n2 2\n").as_bytes()).unwrap_err();
    assert!(e.message.contains("vertex 2 to itself"), "{e:?}");
    assert!(
        matches!(
            e.at,
            Some(At::Element {
                what: "edge",
                index: 1,
                ..
            })
        ),
        "{e:?}"
    );
    let second = "element vertex 1\nproperty float x\nproperty float y\nproperty float z\n";
    let e = ply::parse(ply_text(second, "1 1 1\n").as_bytes()).unwrap_err();
    assert!(e.message.contains("a second `vertex` element"), "{e:?}");
    assert_eq!(e.at, Some(At::Line(7)), "{e:?}");
}

#[test]
fn obj_self_loop_lines_are_refused() {
    let v = "v 0 0 0\nv 1 0 0\nv 0 1 0\n";
    assert_eq!(
        obj::parse(format!("{v}l 1 2 3\n").as_bytes())
            .unwrap()
            .segments
            .len(),
        2
    );
    for (line, vertex) in [("l 1 1", 1), ("l 1 2 2", 2), ("l 3 -1", 3)] {
        let e = obj::parse(format!("{v}{line}\n").as_bytes()).unwrap_err();
        assert!(
            e.message
                .contains(&format!("from vertex {vertex} to itself")),
            "{line}: {e:?}"
        );
        assert_eq!(e.at, Some(At::Line(4)), "{e:?}");
    }
}

#[test]
fn obj_malformed_texture_and_normal_parts_are_refused() {
    let v = "v 0 0 0\nv 1 0 0\nv 0 1 0\n";
    for ok in [
        "f 1 2 3",
        "f 1/1 2/2 3/3",
        "f 1/1/1 2/2/2 3/3/3",
        "f 1//1 2//2 3//3",
        "f -3/-1 -2 -1",
    ] {
        let soup = obj::parse(format!("{v}{ok}\n").as_bytes());
        assert!(soup.is_ok(), "{ok}: {soup:?}");
    }
    for (line, word) in [
        ("f 1/x 2 3", "1/x"),
        ("f 1 2/1/1/1 3", "2/1/1/1"),
        ("f 1 2 3//n", "3//n"),
        ("l 1/1.5 2", "1/1.5"),
    ] {
        let e = obj::parse(format!("{v}{line}\n").as_bytes()).unwrap_err();
        assert!(
            e.message
                .contains(&format!("`{word}` is not a vertex reference")),
            "{line}: {e:?}"
        );
        assert_eq!(e.at, Some(At::Line(4)), "{e:?}");
    }
}

#[test]
fn tetgen_errors_name_the_file_they_are_in() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("box.node");
    let ele = dir.path().join("box.ele");
    std::fs::write(
        &node,
        "5 3 0 0\n1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n5 1 1 1\n",
    )
    .unwrap();
    let o = FileOptions::default();
    for (ele_text, file, says) in [
        (
            "2 4 0\n1 1 2 3 4\n2 2 3 4 9\n",
            &ele,
            "node 9 is out of range",
        ),
        ("2 4 0\n1 1 2 3 4\n1 1 2 3 4\n", &ele, "tetrahedra 0 and 1"),
    ] {
        std::fs::write(&ele, ele_text).unwrap();
        for given in [&node, &ele] {
            let e = load_file(given, None, &o).unwrap_err();
            let MeshError::File {
                path, at, message, ..
            } = &e
            else {
                panic!("{e:?}")
            };
            assert_eq!(Path::new(path), file.as_path(), "{e}");
            assert!(message.contains(says) && !message.contains(".ele:"), "{e}");
            assert!(matches!(at, Some(At::Element { line: Some(3), .. })), "{e}");
        }
    }
    std::fs::write(&node, "5 3 0 0\n1 0 0 0\n").unwrap();
    let e = load_file(&ele, None, &o).unwrap_err();
    assert!(
        matches!(&e, MeshError::File { path, .. } if Path::new(path) == node),
        "{e}"
    );
}

#[test]
fn binary_ply_end_header_with_trailing_blanks_keeps_its_body() {
    let mut f = b"ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\n\
                  property float y\nproperty float z\nelement face 1\n\
                  property list uchar int vertex_indices\nend_header \t\n"
        .to_vec();
    for v in [0f32, 0., 0., 1., 0., 0., 0., 1., 0.] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.push(3);
    for i in [0i32, 1, 2] {
        f.extend_from_slice(&i.to_le_bytes());
    }
    let d = ply::parse(&f).unwrap();
    assert_eq!(d.positions[1], glam::DVec3::X);
    assert_eq!(d.triangles(), vec![[0, 1, 2]]);
}

#[test]
fn truncated_binary_stl_with_a_solid_header_is_reported_as_binary() {
    let mut f = format!("{:<80}", "solid made by a CAD tool").into_bytes();
    f.extend_from_slice(&2u32.to_le_bytes());
    f.extend_from_slice(&[0; 50]);
    let e = stl::parse(&f).unwrap_err();
    assert!(e.message.contains("the header gives 2 triangles"), "{e:?}");
    assert_eq!(e.at, Some(At::Byte(80)), "{e:?}");
    // ASCII STL still reads as text.
    let text = "solid t\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\n\
                vertex 0 1 0\nendloop\nendfacet\nendsolid t\n";
    assert_eq!(stl::parse(text.as_bytes()).unwrap().positions.len(), 3);
}

#[test]
fn path_errors_name_no_format_and_wrong_formats_take_their_article() {
    let o = FileOptions::default();
    let e = load_file(Path::new("g_ok.txt"), None, &o).unwrap_err();
    assert!(
        matches!(&e, MeshError::BadParameter { param: "path", .. }),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("g_ok.txt: cannot tell the format"),
        "{e}"
    );
    let e = load_file(Path::new(""), Some(MeshFormat::Obj), &o).unwrap_err();
    assert_eq!(e.to_string(), "path: is empty: give the mesh file's path");
    let stl = b"solid t\nfacet normal 0 0 1\n";
    let e = load_bytes("t.msh", stl, MeshFormat::Gmsh, &o).unwrap_err();
    assert!(e.to_string().contains("those of an STL file"), "{e}");
}

fn data(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name),
    )
    .unwrap()
}

/// Where the `count`th LF after the first `marker` in `bytes` is.
fn nth_lf(bytes: &[u8], marker: &str, count: usize) -> usize {
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker.as_bytes())
        .unwrap_or_else(|| panic!("no {marker}"));
    let lfs = (at..bytes.len()).filter(|&k| bytes[k] == b'\n');
    lfs.take(count).last().unwrap_or_else(|| panic!("{marker}"))
}

/// `bytes` with the first `count` lines from `marker` on ending in `end` instead of LF.
fn ends(bytes: &[u8], marker: &str, count: usize, end: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for c in (1..=count).rev() {
        let k = nth_lf(bytes, marker, c);
        out.splice(k..k + 1, end.iter().copied());
    }
    out
}

/// Binary Gmsh files whose text lines end in CRLF read as their LF originals (Gmsh reads
/// those lines whole), as do lines with blanks before the line break. One byte was
/// skipped after each, so a CRLF `$MeshFormat` line was refused ('the byte-order mark is
/// not the int 1') and after a CRLF `$Nodes` or count line every value was a byte off.
/// Other text after the last word is refused, not read as binary data.
#[test]
fn binary_gmsh_text_lines_may_end_in_crlf_or_blanks() {
    for (name, lines) in [
        (
            "box_v22_binary.msh",
            &[("$MeshFormat", 2), ("$Nodes", 2), ("$Elements", 2)][..],
        ),
        (
            "box_v41_binary.msh",
            &[("$MeshFormat", 2), ("$Nodes", 1), ("$Elements", 1)][..],
        ),
    ] {
        let lf = data(name);
        let want = gmsh::parse(&lf).unwrap();
        let same = |bytes: &[u8], how: &str| {
            let got = gmsh::parse(bytes).unwrap_or_else(|e| panic!("{name}, {how}: {e:?}"));
            assert_eq!(got.positions, want.positions, "{name}, {how}");
            assert_eq!(got.tets, want.tets, "{name}, {how}");
        };
        let mut all = lf.clone();
        for &(marker, count) in lines {
            same(
                &ends(&lf, marker, count, b"\r\n"),
                &format!("CRLF after {marker}"),
            );
            all = ends(&all, marker, count, b"\r\n");
            // The line before the binary data: blanks, or a word too many.
            let k = nth_lf(&lf, marker, count);
            same(
                &[&lf[..k], b" \t", &lf[k..]].concat(),
                &format!("blanks after {marker}"),
            );
            let e = gmsh::parse(&[&lf[..k], b" x", &lf[k..]].concat()).unwrap_err();
            assert!(e.message.contains("must end its line"), "{name}: {e:?}");
        }
        same(&all, "every such line CRLF");
    }
}

/// MSH 4.1 ASCII nodes take as few as 8 bytes (`6\n0 0 0\n`) and element blocks as few
/// as 8 (`0 1 15 0\n`): a file of many short ones was refused as 'more than the bytes left
/// in the file can hold' (16 each was assumed).
#[test]
fn gmsh41_short_ascii_nodes_and_blocks_are_not_a_wrong_count() {
    let extra = 200;
    let tags: String = (6..6 + extra).map(|t| format!("{t}\n")).collect();
    let zeros = "0 0 0\n".repeat(extra);
    let points = "0 1 15 0\n".repeat(extra);
    let f = format!(
        "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n$Nodes\n2 {n} 1 {n}\n3 1 0 5\n1\n2\n3\n4\n5\n\
         0 0 0\n1 0 0\n0 1 0\n0 0 1\n1 1 1\n0 1 0 {extra}\n{tags}{zeros}$EndNodes\n\
         $Elements\n{b} 2 1 2\n{points}3 1 4 2\n1 1 2 3 4\n2 2 3 4 5\n$EndElements\n",
        n = 5 + extra,
        b = 1 + extra,
    );
    let t = gmsh::parse(f.as_bytes()).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!((t.positions.len(), t.tets.len()), (5 + extra, 2));
}

/// TetGen and Medit files of lone-CR lines (classic Mac OS) read as their LF originals,
/// comments end at the CR (not at the end of the file), and errors name the same line.
#[test]
fn tetgen_and_medit_lone_cr_lines_read_as_lf_lines() {
    let cr = |b: &[u8]| -> Vec<u8> {
        b.iter()
            .map(|&c| if c == b'\n' { b'\r' } else { c })
            .collect()
    };
    let o = FileOptions::default();
    let dir = tempfile::tempdir().unwrap();
    let tetgen = |node: &[u8], ele: &[u8]| {
        std::fs::write(dir.path().join("b.node"), node).unwrap();
        std::fs::write(dir.path().join("b.ele"), ele).unwrap();
        load_file(&dir.path().join("b.node"), None, &o)
    };
    let (node, ele) = (data("box.node"), data("box.ele"));
    assert!(
        node.starts_with(b"#") && ele.starts_with(b"#"),
        "a comment line first"
    );
    let want = tetgen(&node, &ele).unwrap();
    assert_eq!(tetgen(&cr(&node), &cr(&ele)).unwrap(), want);
    // The third tetrahedron (line 5) names a node past the file's.
    let text = String::from_utf8(ele.clone()).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[4] = format!("{} 999", lines[4].rsplit_once(' ').unwrap().0);
    let bad = lines.join("\n") + "\n";
    for (how, node, ele) in [
        ("LF", node.clone(), bad.clone().into_bytes()),
        ("CR", cr(&node), cr(bad.as_bytes())),
    ] {
        let e = tetgen(&node, &ele).unwrap_err();
        let MeshError::File { at, message, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(message.contains("node 999"), "{how}: {e}");
        assert!(
            matches!(
                at,
                Some(At::Element {
                    index: 2,
                    line: Some(5),
                    ..
                })
            ),
            "{how}: {e}"
        );
    }
    // Medit, with a comment line: it ends at its CR.
    let mesh = [b"# made by hand\n".as_slice(), &data("box.mesh")].concat();
    let m = |b: &[u8]| load_bytes("b.mesh", b, MeshFormat::Medit, &o);
    let want = m(&data("box.mesh")).unwrap();
    assert_eq!(m(&mesh).unwrap(), want);
    assert_eq!(m(&cr(&mesh)).unwrap(), want);
    let text = String::from_utf8(mesh).unwrap();
    let k = text.find("Tetrahedra").unwrap();
    let line = text[..k].matches('\n').count() + 3;
    let bad = format!("{}Tetrahedra\n1\n1 2 3 9999 0\n{}", &text[..k], "End\n");
    for (how, b) in [("LF", bad.clone().into_bytes()), ("CR", cr(bad.as_bytes()))] {
        let e = m(&b).unwrap_err();
        let MeshError::File { at, message, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(message.contains("vertex 9999"), "{how}: {e}");
        assert!(
            matches!(at, Some(At::Element { index: 0, line: Some(l), .. }) if *l == line),
            "{how}: {e}"
        );
    }
}

/// A TetGen .node attribute count the file cannot hold is refused as a wrong count; near
/// 2^64, `attributes + markers` overflowed (a panic in a debug build).
#[test]
fn a_tetgen_attribute_count_past_the_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("a.node");
    std::fs::write(
        &node,
        "4 3 18446744073709551615 1\n1 0 0 0 0\n2 1 0 0 0\n3 0 1 0 0\n4 0 0 1 0\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("a.ele"), "1 4 0\n1 1 2 3 4\n").unwrap();
    let e = load_file(&node, None, &FileOptions::default()).unwrap_err();
    let MeshError::File { path, message, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(Path::new(path), node.as_path(), "{e}");
    assert!(
        message.contains("18446744073709551615 node attributes"),
        "{e}"
    );
}

/// An OBJ's invalid UTF-8 is placed on its line counting lone CRs as line breaks, as the
/// reader does: a classic Mac OS file's error said line 1 (only LFs were counted).
#[test]
fn obj_non_utf8_line_counts_lone_crs() {
    for (text, line) in [
        (&b"v 0 0 0\nv 1 0 0\r\nv \xff 1 0\n"[..], 3),
        (b"v 0 0 0\rv 1 0 0\rv \xff 1 0\r", 3),
        (b"v 0 0 0\r\rv \xff 1 0\r", 3),
    ] {
        let e = obj::parse(text).unwrap_err();
        assert!(e.message.contains("not UTF-8"), "{e:?}");
        assert_eq!(e.at, Some(At::Line(line)), "{text:?}");
    }
}

/// A TetGen .node boundary-marker flag other than 0 or 1 is refused on its line, naming
/// it: a 2 was read as 1.
#[test]
fn a_tetgen_boundary_marker_flag_above_1_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("m.node");
    std::fs::write(dir.path().join("m.ele"), "1 4 0\n1 1 2 3 4\n").unwrap();
    for flag in ["2", "7"] {
        let body = format!("# box\n4 3 0 {flag}\n1 0 0 0 0\n2 1 0 0 0\n3 0 1 0 0\n4 0 0 1 0\n");
        std::fs::write(&node, body).unwrap();
        let e = load_file(&node, None, &FileOptions::default()).unwrap_err();
        let MeshError::File { path, message, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(Path::new(path), node.as_path(), "{e}");
        assert!(
            message.contains(&format!("boundary-marker flag {flag}")),
            "{e}"
        );
        assert!(message.contains("0 or 1"), "{e}");
        assert!(e.to_string().contains("line 2"), "{e}");
    }
    // 0 and 1 still load.
    for flag in ["0", "1"] {
        let tail = if flag == "1" { " 0" } else { "" };
        let body: String = ["1 0 0 0", "2 1 0 0", "3 0 1 0", "4 0 0 1"]
            .iter()
            .map(|l| format!("{l}{tail}\n"))
            .collect();
        std::fs::write(&node, format!("4 3 0 {flag}\n{body}")).unwrap();
        load_file(&node, None, &FileOptions::default()).unwrap();
    }
}
