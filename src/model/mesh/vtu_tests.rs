//! Tests of the VTU reader on hostile input: non-integer indices, arrays whose sizes
//! disagree with the <Piece>'s counts, compressed blocks that inflate past their header,
//! the self-closing appended arrays VTK and ParaView write, and <VTKFile> attributes
//! (header_type, byte_order) and an encoding VTK does not write, tags inside comments, a
//! second Points or Cells array.
use super::vtu::parse;

/// Two tetrahedra on five points, every array inline ASCII.
fn ascii(conn: &str, offsets: &str, types: &str) -> String {
    format!(
        r#"<?xml version="1.0"?>
<VTKFile type="UnstructuredGrid" version="0.1" byte_order="LittleEndian">
<UnstructuredGrid><Piece NumberOfPoints="5" NumberOfCells="2">
<Points><DataArray type="Float64" Name="Points" NumberOfComponents="3" format="ascii">
0 0 0 1 0 0 0 1 0 0 0 1 1 1 1</DataArray></Points>
<Cells>
<DataArray type="Int64" Name="connectivity" format="ascii">{conn}</DataArray>
<DataArray type="Int64" Name="offsets" format="ascii">{offsets}</DataArray>
<DataArray type="UInt8" Name="types" format="ascii">{types}</DataArray>
</Cells></Piece></UnstructuredGrid></VTKFile>
"#
    )
}

#[test]
fn fractional_and_non_finite_indices_are_refused_by_array_and_value() {
    let ok = parse(ascii("0 1 2 3 1 2 3 4", "4 8", "10 10").as_bytes()).unwrap();
    assert_eq!(ok.tets, vec![[0, 1, 2, 3], [1, 2, 3, 4]]);
    for (conn, offsets, types, array, value) in [
        ("0 1 2 3 1 2 3 4.9", "4 8", "10 10", "connectivity", "4.9"),
        ("0 1 2 3 1 2 3 nan", "4 8", "10 10", "connectivity", "NaN"),
        (
            "0 1 2 3 1 2 3 1e300",
            "4 8",
            "10 10",
            "connectivity",
            "1e300",
        ),
        ("0 1 2 3 1 2 3 4", "4 inf", "10 10", "offsets", "inf"),
        ("0 1 2 3 1 2 3 4", "4 8", "10 10.7", "types", "10.7"),
    ] {
        let e = parse(ascii(conn, offsets, types).as_bytes()).unwrap_err();
        assert!(
            e.message.contains(&format!("DataArray {array}:"))
                && e.message.contains(&format!(", {value}, is not an integer")),
            "{conn} / {offsets} / {types}: {e:?}"
        );
    }
}

const POINTS: [f64; 15] = [0., 0., 0., 1., 0., 0., 0., 1., 0., 0., 0., 1., 1., 1., 1.];

fn b64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in bytes.chunks(3) {
        let n = c
            .iter()
            .enumerate()
            .fold(0u32, |a, (i, &b)| a | (b as u32) << (16 - 8 * i));
        for i in 0..4 {
            s.push(if i <= c.len() {
                A[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    s
}

fn le<T: Copy, const N: usize, const W: usize>(v: [T; N], f: impl Fn(T) -> [u8; W]) -> Vec<u8> {
    v.into_iter().flat_map(f).collect()
}

/// One zlib block of `data` under a UInt32 header giving `size` uncompressed bytes.
fn zlib(data: &[u8], size: u32) -> String {
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(data).unwrap();
    let c = z.finish().unwrap();
    b64(&le([1, size, size, c.len() as u32], u32::to_le_bytes)) + &b64(&c)
}

/// The two tetrahedra with inline binary arrays: `points` is the Points array's text;
/// the cells are encoded as `cells` does (zlib or a plain UInt32 size).
fn binary(points: &str, compressed: bool) -> String {
    let cells = |d: Vec<u8>| {
        if compressed {
            zlib(&d, d.len() as u32)
        } else {
            b64(&(d.len() as u32).to_le_bytes()) + &b64(&d)
        }
    };
    // Points carry NumberOfComponents="3", as VTK writes them.
    let array = |ty: &str, name: &str, body: String| {
        let comps = if name == "Points" {
            " NumberOfComponents=\"3\""
        } else {
            ""
        };
        format!(
            "<DataArray type=\"{ty}\" Name=\"{name}\"{comps} format=\"binary\">{body}</DataArray>\n"
        )
    };
    format!(
        "<?xml version=\"1.0\"?>\n<VTKFile type=\"UnstructuredGrid\" version=\"0.1\" \
         byte_order=\"LittleEndian\"{}>\n<UnstructuredGrid><Piece NumberOfPoints=\"5\" \
         NumberOfCells=\"2\">\n<Points>{}</Points>\n<Cells>\n{}{}{}</Cells></Piece>\
         </UnstructuredGrid></VTKFile>\n",
        if compressed {
            " compressor=\"vtkZLibDataCompressor\""
        } else {
            ""
        },
        array("Float64", "Points", points.to_string()),
        array(
            "Int64",
            "connectivity",
            cells(le([0i64, 1, 2, 3, 1, 2, 3, 4], i64::to_le_bytes))
        ),
        array("Int64", "offsets", cells(le([4i64, 8], i64::to_le_bytes))),
        array("UInt8", "types", cells(vec![10, 10])),
    )
}

#[test]
fn compressed_blocks_must_match_their_header_and_the_piece() {
    let p = le(POINTS, f64::to_le_bytes);
    let ok = parse(binary(&zlib(&p, 120), true).as_bytes()).unwrap();
    assert_eq!(ok.tets, vec![[0, 1, 2, 3], [1, 2, 3, 4]]);
    // A zlib bomb: 4 MiB of zeros after the points, header honest or lying.
    let mut bomb = p.clone();
    bomb.resize(p.len() + (4 << 20), 0);
    for (points, says) in [
        (
            zlib(&p, 8),
            "its header gives 8 bytes, but the <Piece>'s counts need 120",
        ),
        (
            zlib(&bomb, bomb.len() as u32),
            "its header gives 4194424 bytes, but",
        ),
        (
            zlib(&bomb, 120),
            "block 0 inflates to more than 120 bytes, its header says 120",
        ),
        (
            zlib(&p[..112], 120),
            "block 0 inflates to 112 bytes, its header says 120",
        ),
    ] {
        let e = parse(binary(&points, true).as_bytes()).unwrap_err();
        assert!(e.message.starts_with("DataArray Points: "), "{e:?}");
        assert!(e.message.contains(says), "{says}: {e:?}");
    }
    // Uncompressed: the size header must agree with the Piece too.
    let plain = |n: u32| b64(&n.to_le_bytes()) + &b64(&p);
    assert!(parse(binary(&plain(120), false).as_bytes()).is_ok());
    let e = parse(binary(&plain(96), false).as_bytes()).unwrap_err();
    assert!(e.message.contains("header gives 96 bytes"), "{e:?}");
}

#[test]
fn ascii_arrays_must_match_the_piece_counts() {
    let six = ascii("0 1 2 3 1 2 3 4", "4 8", "10 10")
        .replace("NumberOfPoints=\"5\"", "NumberOfPoints=\"6\"");
    let e = parse(six.as_bytes()).unwrap_err();
    assert!(
        e.message
            .contains("DataArray Points: 15 values, but the <Piece>'s counts need 18"),
        "{e:?}"
    );
    // Connectivity entries no offset reaches are not silently dropped.
    let e = parse(ascii("0 1 2 3 1 2 3 4 0", "4 8", "10 10").as_bytes()).unwrap_err();
    assert!(
        e.message
            .contains("entries 0..8 of the 9: the others belong to no cell"),
        "{e:?}"
    );
    let e = parse(ascii("0 1 2 3 1 2 3 4", "4 8", "10").as_bytes()).unwrap_err();
    assert!(e.message.contains("DataArray types: 1 values"), "{e:?}");
}

/// The two tetrahedra as VTK and ParaView write them: every DataArray `<... />`, its size
/// (`header64`: 8 bytes, else 4) and data after `_`, raw or (`encoding` any case of
/// base64) base64; `root` is the <VTKFile> attributes after `type`.
fn appended(root: &str, header64: bool, encoding: &str) -> Vec<u8> {
    let base64 = encoding.eq_ignore_ascii_case("base64");
    let block = |d: Vec<u8>| {
        let n = d.len() as u64;
        let head = if header64 {
            n.to_le_bytes().to_vec()
        } else {
            (n as u32).to_le_bytes().to_vec()
        };
        if base64 {
            (b64(&head) + &b64(&d)).into_bytes()
        } else {
            [head, d].concat()
        }
    };
    let arrays = [
        ("Float64", "Points", block(le(POINTS, f64::to_le_bytes))),
        (
            "Int64",
            "connectivity",
            block(le([0i64, 1, 2, 3, 1, 2, 3, 4], i64::to_le_bytes)),
        ),
        ("Int64", "offsets", block(le([4i64, 8], i64::to_le_bytes))),
        ("UInt8", "types", block(vec![10, 10])),
    ];
    let mut offset = 0;
    let mut tag = Vec::new();
    for (ty, name, data) in &arrays {
        tag.push(format!(
            "<DataArray type=\"{ty}\" Name=\"{name}\" NumberOfComponents=\"{}\" \
             format=\"appended\" offset=\"{offset}\"/>",
            if *name == "Points" { 3 } else { 1 }
        ));
        offset += data.len();
    }
    let mut file = format!(
        "<?xml version=\"1.0\"?>\n<VTKFile type=\"UnstructuredGrid\" version=\"0.1\" \
         {root}>\n<UnstructuredGrid><Piece NumberOfPoints=\"5\" NumberOfCells=\"2\">\n\
         <Points>\n{}\n</Points>\n<Cells>\n{}\n{}\n{}\n</Cells>\n</Piece>\n\
         </UnstructuredGrid>\n<AppendedData encoding=\"{encoding}\">\n_",
        tag[0], tag[1], tag[2], tag[3]
    )
    .into_bytes();
    for (_, _, data) in &arrays {
        file.extend_from_slice(data);
    }
    file.extend_from_slice(b"\n</AppendedData>\n</VTKFile>\n");
    file
}

#[test]
fn self_closing_appended_raw_arrays_load() {
    let root = r#"byte_order="LittleEndian" header_type="UInt32""#;
    let m = parse(&appended(root, false, "raw")).unwrap();
    assert_eq!(m.tets, vec![[0, 1, 2, 3], [1, 2, 3, 4]]);
    assert_eq!(m.positions[4], glam::DVec3::ONE);
}

/// `header_type`, `byte_order` and `encoding` take VTK's values, any other is refused by
/// name: `header_type="uint64"` was read as UInt32 (the 8-byte size's low half taken for
/// the size, the data read from its high half on, every value 4 bytes early), an
/// `encoding="Base64"` as raw.
#[test]
fn unknown_header_type_byte_order_and_encoding_are_refused() {
    let ok = |root: &str, h64: bool, enc: &str| {
        let m = parse(&appended(root, h64, enc)).unwrap_or_else(|e| panic!("{root} {enc}: {e:?}"));
        assert_eq!(m.tets, vec![[0, 1, 2, 3], [1, 2, 3, 4]], "{root} {enc}");
        assert_eq!(m.positions[4], glam::DVec3::ONE, "{root} {enc}");
    };
    ok(r#"header_type="UInt64""#, true, "raw");
    ok(r#"byte_order="LittleEndian""#, false, "base64");
    for (root, h64, enc, says) in [
        (
            r#"header_type="uint64""#,
            true,
            "raw",
            r#"<VTKFile> header_type="uint64""#,
        ),
        (
            r#"byte_order="littleendian""#,
            false,
            "raw",
            r#"<VTKFile> byte_order="littleendian""#,
        ),
        ("", false, "Base64", r#"<AppendedData> encoding="Base64""#),
    ] {
        let e = parse(&appended(root, h64, enc)).unwrap_err();
        assert!(e.message.contains(says), "{root} {enc}: {e:?}");
    }
}

/// Errors in a VTU of lone-CR lines (classic Mac OS) name the line they name in its LF
/// twin: only LFs were counted, so every such error said line 1.
#[test]
fn vtu_lone_cr_lines_are_counted() {
    let lf = ascii("0 1 2 3 1 2 3 4.9", "4 8", "10 10");
    let want = parse(lf.as_bytes()).unwrap_err();
    assert!(want.message.contains("DataArray connectivity"), "{want:?}");
    assert_eq!(want.at, Some(super::At::Line(7)), "{want:?}");
    for eol in ["\r", "\r\n"] {
        let e = parse(lf.replace('\n', eol).as_bytes()).unwrap_err();
        assert_eq!(
            (e.at, e.message),
            (want.at.clone(), want.message.clone()),
            "{eol:?}"
        );
    }
}

/// A tag inside a comment is text: a comment holding a `>` before an old connectivity
/// array took that array for a real one (the last one read won).
#[test]
fn tags_inside_comments_are_not_read() {
    let commented = ascii("0 1 2 3 1 2 3 4", "4 8", "10 10").replace(
        "<Cells>\n",
        "<Cells>\n<!-- was > before: <DataArray type=\"Int64\" Name=\"connectivity\" \
         format=\"ascii\">0 1 2 3 0 1 2 3</DataArray> -->\n",
    );
    let ok = parse(commented.as_bytes()).unwrap();
    assert_eq!(ok.tets, vec![[0, 1, 2, 3], [1, 2, 3, 4]]);
    let open = ascii("0 1 2 3 1 2 3 4", "4 8", "10 10").replace("<Cells>", "<Cells><!-- x");
    let e = parse(open.as_bytes()).unwrap_err();
    assert!(e.message.contains("unclosed comment"), "{e:?}");
}

/// Points, connectivity, offsets and types are one array each: a second one was taken
/// over the first (Cells) or dropped (Points) without a word.
#[test]
fn a_second_points_or_cells_array_is_refused_naming_both_lines() {
    let base = ascii("0 1 2 3 1 2 3 4", "4 8", "10 10");
    let second_conn = base.replace(
        "<DataArray type=\"Int64\" Name=\"offsets\"",
        "<DataArray type=\"Int64\" Name=\"connectivity\" format=\"ascii\">0 1 2 3 0 1 2 3</DataArray>\n<DataArray type=\"Int64\" Name=\"offsets\"",
    );
    let e = parse(second_conn.as_bytes()).unwrap_err();
    assert!(
        e.message
            .contains("a second connectivity DataArray (the first at line 7)"),
        "{e:?}"
    );
    assert_eq!(e.at, Some(super::At::Line(8)), "{e:?}");
    let second_points = base.replace(
        "</DataArray></Points>",
        "</DataArray>\n<DataArray type=\"Float64\" Name=\"P2\" NumberOfComponents=\"3\" format=\"ascii\">0 0 0 1 0 0 0 1 0 0 0 1 1 1 1</DataArray></Points>",
    );
    let e = parse(second_points.as_bytes()).unwrap_err();
    assert!(e.message.contains("a second Points DataArray"), "{e:?}");
}

/// The Points DataArray must hold 3 components (x y z) as VTK writes it; another count,
/// or none (VTK's default, 1), is refused naming the array, the value and its line: the
/// values were read as triples whatever the count said.
#[test]
fn points_with_other_than_3_components_are_refused() {
    let base = ascii("0 1 2 3 1 2 3 4", "4 8", "10 10");
    let with = |attr: &str| base.replace(" NumberOfComponents=\"3\"", attr);
    assert!(parse(with(" NumberOfComponents=\"3\"").as_bytes()).is_ok());
    for (attr, said) in [
        (" NumberOfComponents=\"1\"", "NumberOfComponents \"1\""),
        (" NumberOfComponents=\"2\"", "NumberOfComponents \"2\""),
        (" NumberOfComponents=\"x\"", "NumberOfComponents \"x\""),
        ("", "NumberOfComponents absent (VTK reads 1)"),
    ] {
        let e = parse(with(attr).as_bytes()).unwrap_err();
        assert!(
            e.message.contains("Points DataArray Points"),
            "{attr}: {e:?}"
        );
        assert!(e.message.contains(said), "{attr}: {e:?}");
        assert!(e.message.contains("expected 3"), "{attr}: {e:?}");
        assert_eq!(e.at, Some(super::At::Line(4)), "{attr}: {e:?}");
    }
}
