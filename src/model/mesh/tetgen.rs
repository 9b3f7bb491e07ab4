//! TetGen `.node` + `.ele` import: the nodes of the one file, the tetrahedra of the other
//! (either path may be given; the other is beside it). Node numbers may start at 0 or 1,
//! as the first node says; `#` starts a comment.

use super::text::{capped, fail, strip_bom, Fail, Parsed, Tokens};
use super::volume::{self, Tets};
use super::{At, Mesh};
use std::path::{Path, PathBuf};

fn inside(p: &Path) -> impl Fn(Fail) -> (PathBuf, Fail) + '_ {
    move |f| (p.to_path_buf(), f)
}

/// The mesh, or the failure with the file it is in (its lines and tetrahedra are the
/// `.node`'s or the `.ele`'s, so the error must name that file, not the one given).
pub(super) fn load(path: &Path, scale: f64) -> Result<Mesh, (PathBuf, Fail)> {
    let node = path.with_extension("node");
    let ele = path.with_extension("ele");
    let read =
        |p: &Path| crate::files::read(p).map_err(|e| (p.to_path_buf(), fail(None, e.to_string())));
    let (nb, eb) = (read(&node)?, read(&ele)?);
    let nb = strip_bom(&nb).map_err(inside(&node))?;
    let (positions, first) = nodes(nb).map_err(inside(&node))?;
    let eb = strip_bom(&eb).map_err(inside(&ele))?;
    let t = elements(eb, positions, first).map_err(inside(&ele))?;
    // Its errors name tetrahedra by index and .ele line.
    volume::build(t, scale).map_err(inside(&ele))
}

/// The node positions and the number of the first node (0 or 1).
fn nodes(bytes: &[u8]) -> Parsed<(Vec<glam::DVec3>, u64)> {
    let mut t = Tokens::new(bytes, Some(b'#'));
    let n = t.u64("the node count")?;
    let dim = t.u64("the dimension")?;
    if dim != 3 {
        return Err(fail(
            t.at(),
            format!("dimension {dim}: only 3D nodes make tetrahedra"),
        ));
    }
    let attrs = t.u64("the attribute count")?;
    let markers = t.u64("the boundary-marker flag")?;
    // TetGen allows 0 or 1: a 2 was read as 1, silently shifting each node line's fields
    // if the file meant two markers.
    if markers > 1 {
        return Err(fail(
            t.at(),
            format!("boundary-marker flag {markers}: TetGen allows 0 or 1"),
        ));
    }
    // Each node line holds at least an index and three coordinates; a count past what the
    // file holds is refused (`attrs + 1` overflowed near 2^64, a panic in a debug build).
    let n = capped(t.at(), "nodes", n, 8, t.left())?;
    let attrs = capped(t.at(), "node attributes", attrs, 2, t.left())? as u64;
    let mut p = Vec::with_capacity(n);
    let mut first = 0;
    for k in 0..n {
        let id = t.u64("a node number")?;
        if k == 0 {
            if id > 1 {
                return Err(fail(
                    t.at(),
                    format!("the first node is numbered {id}: TetGen numbers from 0 or 1"),
                ));
            }
            first = id;
        } else if id != first + k as u64 {
            return Err(fail(
                t.at(),
                format!(
                    "node number {id}, expected {} (nodes are numbered in order)",
                    first + k as u64
                ),
            ));
        }
        p.push(t.point(&format!("node {id}"))?);
        for _ in 0..attrs + markers {
            t.f64("a node attribute")?;
        }
    }
    if let Some(w) = t.next() {
        return Err(fail(
            t.at(),
            format!("`{w}` after the last of {n} nodes (wrong count)"),
        ));
    }
    Ok((p, first))
}

fn elements(bytes: &[u8], positions: Vec<glam::DVec3>, first: u64) -> Parsed<Tets> {
    let mut t = Tokens::new(bytes, Some(b'#'));
    let n = t.u64("the tetrahedron count")?;
    let per = t.u64("the nodes per tetrahedron")?;
    if per != 4 {
        return Err(fail(
            t.at(),
            format!(
                "{per} nodes per tetrahedron: only linear (4-node) tetrahedra are read; \
                     {n} elements of {per} nodes refused"
            ),
        ));
    }
    let attrs = t.u64("the attribute count")?;
    let n = capped(t.at(), "tetrahedra", n, 10, t.left())?;
    let mut out = Tets {
        positions,
        tets: Vec::with_capacity(n),
        lines: Vec::with_capacity(n),
    };
    let nodes = out.positions.len() as u64;
    for k in 0..n {
        t.u64("a tetrahedron number")?;
        let mut tet = [0u32; 4];
        for slot in &mut tet {
            let v = t.u64("a node number")?;
            if v < first || v - first >= nodes {
                return Err(fail(
                    At::Element {
                        what: "tetrahedron",
                        index: k as u64,
                        line: Some(t.line),
                    },
                    // `first + nodes - 1` underflowed for a .node file of no nodes.
                    match nodes {
                        0 => format!("node {v} is out of range (the .node file has no nodes)"),
                        _ => format!(
                            "node {v} is out of range (the .node file has nodes {first} to {})",
                            first + nodes - 1
                        ),
                    },
                ));
            }
            *slot = (v - first) as u32;
        }
        for _ in 0..attrs {
            t.f64("a tetrahedron attribute")?;
        }
        out.tets.push(tet);
        out.lines.push(t.line as u32);
    }
    if let Some(w) = t.next() {
        return Err(fail(
            t.at(),
            format!("`{w}` after the last of {n} tetrahedra (wrong count)"),
        ));
    }
    Ok(out)
}
