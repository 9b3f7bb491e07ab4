//! Medit / INRIA `.mesh` import (ASCII): the `Vertices` and `Tetrahedra` sections, each
//! entry with its reference number; other sections are skipped by their counts, and other
//! volume cells (`Hexahedra`, `Prisms`, `Pyramids`) are refused by type and count.

use super::text::{capped, fail, Parsed, Tokens};
use super::volume::Tets;
use super::At;

/// Section keyword, numbers per entry.
const SURFACE_SECTIONS: [(&str, u64); 6] = [
    ("Edges", 3),
    ("Triangles", 4),
    ("Quadrilaterals", 5),
    ("Corners", 1),
    ("Ridges", 1),
    ("RequiredVertices", 1),
];
const VOLUME_CELLS: [&str; 4] = ["Hexahedra", "Prisms", "Pyramids", "TetrahedraP2"];

pub(super) fn parse(bytes: &[u8]) -> Parsed<Tets> {
    let mut t = Tokens::new(bytes, Some(b'#'));
    t.expect("MeshVersionFormatted")?;
    t.u64("the version")?;
    let mut out = Tets::default();
    let mut have_vertices = false;
    while let Some(w) = t.next() {
        let section_line = t.line;
        match w {
            "Dimension" => {
                let d = t.u64("the dimension")?;
                if d != 3 {
                    return Err(fail(t.at(), format!("dimension {d}: tetrahedra need 3")));
                }
            }
            "Vertices" => {
                let n = t.u64("the vertex count")?;
                let n = capped(t.at(), "vertices", n, 8, t.left())?;
                out.positions.reserve(n);
                for k in 0..n {
                    out.positions.push(t.point(&format!("vertex {}", k + 1))?);
                    t.i64("a vertex reference")?;
                }
                have_vertices = true;
            }
            "Tetrahedra" => {
                let n = t.u64("the tetrahedron count")?;
                let n = capped(t.at(), "tetrahedra", n, 10, t.left())?;
                out.tets.reserve(n);
                out.lines.reserve(n);
                for k in 0..n {
                    let mut tet = [0u32; 4];
                    for slot in &mut tet {
                        let v = t.u64("a vertex number")?;
                        let nv = out.positions.len() as u64;
                        if v == 0 || v > nv || !have_vertices {
                            return Err(fail(
                                At::Element {
                                    what: "tetrahedron",
                                    index: out.tets.len() as u64,
                                    line: Some(t.line),
                                },
                                format!(
                                    "vertex {v} is out of range (vertices are numbered 1 to {nv})"
                                ),
                            ));
                        }
                        *slot = (v - 1) as u32;
                    }
                    t.i64("a tetrahedron reference")?;
                    let _ = k;
                    out.tets.push(tet);
                    out.lines.push(t.line as u32);
                }
            }
            "End" => {
                // Anything after `End` would be silently ignored: refuse it.
                return match t.next() {
                    None => Ok(out),
                    Some(w) => Err(fail(
                        t.at(),
                        format!("`{w}` after `End`: the mesh ends at `End`"),
                    )),
                };
            }
            w if VOLUME_CELLS.contains(&w) => {
                let n = t.u64("the count")?;
                if n > 0 {
                    return Err(fail(
                        At::Line(section_line),
                        format!("{n} {w}: only tetrahedra (4 vertices) are read; split them into tetrahedra first"),
                    ));
                }
            }
            w => match SURFACE_SECTIONS.iter().find(|(s, _)| *s == w) {
                Some(&(_, per)) => {
                    let n = t.u64("the count")?;
                    capped(t.at(), w, n, 2 * per, t.left())?;
                    for _ in 0..n * per {
                        t.word(w)?;
                    }
                }
                None => {
                    return Err(fail(
                        At::Line(section_line),
                        format!(
                            "unknown section `{w}` (its size is unknown, so it cannot be skipped)"
                        ),
                    ))
                }
            },
        }
    }
    Err(fail(t.at(), "the file ends without `End` (truncated file)"))
}
