//! Legacy VTK `.vtk` import: an `UNSTRUCTURED_GRID` in ASCII or binary (big-endian), with
//! the classic `CELLS` list (versions up to 4.2) or the `OFFSETS`/`CONNECTIVITY` arrays
//! (5.1). Tetrahedra (`VTK_TETRA`, 10) are the mesh; vertices, lines and surface cells are
//! skipped; other volume cells are refused by type and count. The VTK cell-type rules
//! are shared with the VTU reader.

use super::text::{capped, fail, line_break, Parsed};
use super::volume::Tets;
use super::At;
use glam::DVec3;

/// Cell types without volume (vertices, lines, polygons and their quadratic kinds).
fn is_surface_cell(t: i64) -> bool {
    matches!(
        t,
        1..=9 | 21 | 22 | 23 | 28 | 30 | 34 | 35 | 36 | 68 | 69 | 70
    )
}

fn cell_name(t: i64) -> String {
    let name = match t {
        11 => "voxels",
        12 => "hexahedra",
        13 => "wedges",
        14 => "pyramids",
        24 => "quadratic tetrahedra",
        25 => "quadratic hexahedra",
        42 => "polyhedra",
        _ => "cells",
    };
    format!("{name} (VTK cell type {t})")
}

/// Tetrahedra from VTK cells: `offsets` has one more entry than `types` (cell k's nodes
/// are `conn[offsets[k]..offsets[k + 1]]`). Refuses other volume cells by type and count.
pub(super) fn cells(
    positions: Vec<DVec3>,
    conn: &[i64],
    offsets: &[i64],
    types: &[i64],
) -> Parsed<Tets> {
    let n = positions.len() as i64;
    let mut refused: Vec<(i64, u64)> = Vec::new();
    let mut tets = Vec::new();
    for (k, &ty) in types.iter().enumerate() {
        let (a, b) = (offsets[k], offsets[k + 1]);
        if !(0 <= a && a <= b && b as usize <= conn.len()) {
            return Err(fail(
                At::Element {
                    what: "cell",
                    index: k as u64,
                    line: None,
                },
                format!(
                    "its offsets {a}..{b} do not fit the {} connectivity entries",
                    conn.len()
                ),
            ));
        }
        let nodes = &conn[a as usize..b as usize];
        if ty == 10 {
            let mut t = [0u32; 4];
            if nodes.len() != 4 {
                return Err(fail(
                    At::Element {
                        what: "cell",
                        index: k as u64,
                        line: None,
                    },
                    format!("a tetrahedron with {} nodes", nodes.len()),
                ));
            }
            for (slot, &v) in t.iter_mut().zip(nodes) {
                if !(0..n).contains(&v) {
                    return Err(fail(
                        At::Element {
                            what: "tetrahedron",
                            index: tets.len() as u64,
                            line: None,
                        },
                        format!("point {v} is out of range (the file has {n} points; cell {k})"),
                    ));
                }
                *slot = v as u32;
            }
            tets.push(t);
        } else if !is_surface_cell(ty) {
            match refused.iter_mut().find(|(t, _)| *t == ty) {
                Some((_, c)) => *c += 1,
                None => refused.push((ty, 1)),
            }
        }
    }
    // Every connectivity entry belongs to a cell: leftovers are a wrong count, not data.
    let (first, last) = (offsets.first().copied(), offsets.last().copied());
    let (first, last) = (first.unwrap_or(0), last.unwrap_or(0));
    if first != 0 || last != conn.len() as i64 {
        return Err(fail(
            None,
            format!(
                "the cells use connectivity entries {first}..{last} of the {}: the others \
                 belong to no cell (wrong count)",
                conn.len()
            ),
        ));
    }
    if !refused.is_empty() {
        refused.sort();
        let all: Vec<String> = refused
            .iter()
            .map(|(t, c)| format!("{c} {}", cell_name(*t)))
            .collect();
        return Err(fail(
            None,
            format!(
                "the grid has {} besides {} tetrahedra: only tetrahedra (VTK_TETRA, 10) are read",
                all.join(", "),
                tets.len()
            ),
        ));
    }
    Ok(Tets {
        positions,
        tets,
        lines: Vec::new(),
    })
}

struct Src<'a> {
    t: super::text::Tokens<'a>,
    binary: bool,
    /// The header's lines end with a lone CR (classic Mac OS).
    cr_lines: bool,
}

impl Src<'_> {
    /// `n` numbers of VTK type `ty`, after the keyword line.
    fn numbers(&mut self, n: usize, ty: &str, what: &str) -> Parsed<Vec<f64>> {
        if !self.binary {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(self.t.f64(what)?);
            }
            return Ok(v);
        }
        let size = match ty {
            "float" | "int" | "unsigned_int" | "vtktypeint32" | "vtktypeuint32" => 4,
            "double" | "long" | "unsigned_long" | "vtktypeint64" | "vtktypeuint64" => 8,
            "short" | "unsigned_short" => 2,
            "char" | "unsigned_char" | "bit" => 1,
            other => return Err(fail(self.t.at(), format!("unknown data type `{other}`"))),
        };
        // The data starts after the keyword line's line break. With lone-CR lines that is
        // its CR, even when the data's first byte is an LF (not a CRLF).
        if self.cr_lines {
            while self.t.pos < self.t.bytes.len() && self.t.bytes[self.t.pos] != b'\r' {
                self.t.pos += 1;
            }
        } else {
            self.t.skip_line();
        }
        let start = self.t.pos + 1;
        let mut r = super::text::Bytes {
            bytes: self.t.bytes,
            pos: start,
            big_endian: true,
        };
        capped(
            At::Byte(start as u64),
            what,
            n as u64,
            size as u64,
            r.left(),
        )?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(match ty {
                "float" => r.f32(what)? as f64,
                "double" => r.f64(what)?,
                "int" | "vtktypeint32" => r.i32(what)? as f64,
                "unsigned_int" | "vtktypeuint32" => r.u32(what)? as f64,
                "long" | "vtktypeint64" => r.i64(what)? as f64,
                "unsigned_long" | "vtktypeuint64" => r.u64(what)? as f64,
                "short" => r.i16(what)? as f64,
                "unsigned_short" => r.u16(what)? as f64,
                "char" => r.i8(what)? as f64,
                _ => r.u8(what)? as f64,
            });
        }
        self.t.pos = r.pos;
        Ok(v)
    }
    fn ints(&mut self, n: usize, ty: &str, what: &str) -> Parsed<Vec<i64>> {
        let at = self.t.at();
        let v = self.numbers(n, ty, what)?;
        v.iter()
            .map(|&x| {
                if x.fract() == 0.0 && x.abs() < 9e15 {
                    Ok(x as i64)
                } else {
                    Err(fail(at.clone(), format!("{what}: {x} is not an integer")))
                }
            })
            .collect()
    }
    fn count(&mut self, what: &str, min: u64) -> Parsed<usize> {
        let n = self.t.u64(what)?;
        capped(self.t.at(), what, n, min, self.t.left())
    }
}

pub(super) fn parse(bytes: &[u8]) -> Parsed<Tets> {
    // Lines end at LF, CRLF or a lone CR.
    let nl = |from: usize| {
        (from..bytes.len())
            .find(|&k| line_break(bytes, k))
            .map(|k| k + 1)
    };
    // Line 1: `# vtk DataFile Version x.y`; line 2: a title; line 3: ASCII or BINARY.
    let l2 = nl(0).ok_or_else(|| fail(At::Line(1), "truncated header"))?;
    let l3 = nl(l2).ok_or_else(|| fail(At::Line(2), "truncated header"))?;
    let mut t = super::text::Tokens::new(bytes, None);
    t.pos = l3;
    t.line = 3;
    let mode = t.word("ASCII or BINARY")?.to_ascii_uppercase();
    let binary = match mode.as_str() {
        "ASCII" => false,
        "BINARY" => true,
        other => {
            return Err(fail(
                t.at(),
                format!("expected ASCII or BINARY, found `{other}`"),
            ))
        }
    };
    let cr_lines = super::text::cr_lines(bytes);
    let mut s = Src {
        t,
        binary,
        cr_lines,
    };
    s.t.expect("DATASET")?;
    let ds = s.t.word("the dataset type")?;
    if !ds.eq_ignore_ascii_case("UNSTRUCTURED_GRID") {
        return Err(fail(
            s.t.at(),
            format!("dataset {ds}: only UNSTRUCTURED_GRID holds tetrahedra"),
        ));
    }
    let (mut points, mut conn, mut offsets, mut types) = (None, None, None, None);
    while let Some(w) = s.t.next() {
        match w.to_ascii_uppercase().as_str() {
            "POINTS" => {
                let n = s.count("points", 6)?;
                let ty = s.t.word("the point data type")?.to_string();
                let v = s.numbers(3 * n, &ty, "point coordinates")?;
                let mut p = Vec::with_capacity(n);
                for (k, c) in v.chunks_exact(3).enumerate() {
                    let x = DVec3::new(c[0], c[1], c[2]);
                    super::text::finite(
                        x,
                        At::Element {
                            what: "point",
                            index: k as u64,
                            line: None,
                        },
                        "the position",
                    )?;
                    p.push(x);
                }
                points = Some(p);
            }
            "CELLS" => {
                let a = s.t.u64("the cell count")?;
                let b = s.count("cell entries", 2)?;
                let save = (s.t.pos, s.t.line);
                if s.t
                    .next()
                    .is_some_and(|w| w.eq_ignore_ascii_case("OFFSETS"))
                {
                    // 5.1: OFFSETS then CONNECTIVITY arrays; `a` offsets, `b` entries.
                    let ty = s.t.word("the offsets type")?.to_string();
                    let a = capped(s.t.at(), "offsets", a, 2, s.t.left())?;
                    offsets = Some(s.ints(a, &ty, "offsets")?);
                    s.t.expect("CONNECTIVITY")?;
                    let ty = s.t.word("the connectivity type")?.to_string();
                    conn = Some(s.ints(b, &ty, "connectivity")?);
                } else {
                    (s.t.pos, s.t.line) = save;
                    let list = s.ints(b, "int", "cells")?;
                    let (mut c, mut o) = (Vec::with_capacity(b), vec![0i64]);
                    let mut i = 0;
                    for k in 0..a {
                        let m = *list.get(i).ok_or_else(|| {
                            fail(
                                None,
                                format!("CELLS: cell {k} is past the {b} entries (wrong count)"),
                            )
                        })?;
                        let end = i + 1 + m.max(0) as usize;
                        if m < 0 || end > list.len() {
                            return Err(fail(None, format!("CELLS: cell {k} has {m} nodes, past the {b} entries (wrong count)")));
                        }
                        c.extend_from_slice(&list[i + 1..end]);
                        o.push(c.len() as i64);
                        i = end;
                    }
                    if i != list.len() {
                        return Err(fail(
                            None,
                            format!("CELLS: {a} cells use {i} of the {b} entries (wrong count)"),
                        ));
                    }
                    conn = Some(c);
                    offsets = Some(o);
                }
            }
            "CELL_TYPES" => {
                let n = s.count("cell types", 2)?;
                types = Some(s.ints(n, "int", "cell types")?);
            }
            "METADATA" => {
                // Until a blank line: two line breaks in a row (LF, CRLF or lone CR).
                while s.t.pos < bytes.len() {
                    if line_break(bytes, s.t.pos) {
                        let next = s.t.pos + 1;
                        if line_break(bytes, next) || bytes[next..].starts_with(b"\r\n") {
                            break;
                        }
                        s.t.line += 1;
                    }
                    s.t.pos += 1;
                }
            }
            "POINT_DATA" | "CELL_DATA" => break,
            other => {
                return Err(fail(
                    s.t.at(),
                    format!("unexpected `{other}` (POINTS, CELLS and CELL_TYPES are read)"),
                ))
            }
        }
    }
    let points = points.ok_or_else(|| fail(None, "no POINTS"))?;
    let (conn, offsets) = conn.zip(offsets).ok_or_else(|| fail(None, "no CELLS"))?;
    let types = types.ok_or_else(|| fail(None, "no CELL_TYPES"))?;
    if offsets.len() != types.len() + 1 {
        return Err(fail(
            None,
            format!(
                "{} cells but {} cell types (wrong count)",
                offsets.len().saturating_sub(1),
                types.len()
            ),
        ));
    }
    cells(points, &conn, &offsets, &types)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VTK 5.1 file of two tetrahedra with the given offsets and connectivity.
    fn v51(offsets: &str, conn: &str) -> String {
        let (a, b) = (offsets.split(' ').count(), conn.split(' ').count());
        format!(
            "# vtk DataFile Version 5.1\nt\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS 5 double\n\
             0 0 0 1 0 0 0 1 0 0 0 1 1 1 1\nCELLS {a} {b}\nOFFSETS vtktypeint64\n{offsets}\n\
             CONNECTIVITY vtktypeint64\n{conn}\nCELL_TYPES 2\n10\n10\n"
        )
    }

    #[test]
    fn connectivity_entries_of_no_cell_are_refused() {
        let ok = parse(v51("0 4 8", "0 1 2 3 1 2 3 4").as_bytes()).unwrap();
        assert_eq!(ok.tets, vec![[0, 1, 2, 3], [1, 2, 3, 4]]);
        for (offsets, conn, range) in [
            ("0 4 8", "0 1 2 3 1 2 3 4 0", "entries 0..8 of the 9:"),
            ("1 5 9", "4 0 1 2 3 1 2 3 4", "entries 1..9 of the 9:"),
        ] {
            let e = parse(v51(offsets, conn).as_bytes()).unwrap_err();
            assert!(e.message.contains(range), "{offsets} / {conn}: {e:?}");
            assert!(e.message.contains("belong to no cell"), "{e:?}");
        }
    }
}
