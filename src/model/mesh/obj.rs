//! OBJ import: `v` vertices, `f` polygons and `l` polylines to a surface soup, read line by
//! line so every error names its line.

use super::file::{load_file, FileOptions, MeshFormat};
use super::surface::Soup;
use super::text::{fail, finite, lines, Parsed};
use super::{At, Mesh, MeshError};
use glam::DVec3;
use std::path::Path;

/// Loads an OBJ file with the default options and positions multiplied by `scale`; see
/// [`load_file`] and the reader's rules below.
///
/// `f` records are polygons (springs by [`super::Polygons`], drawn as fans of triangles);
/// `l` records are polylines: a chain of springs between consecutive vertices, never a
/// face (`l 1 2` is one spring). `p`, texture and normal records, groups, materials and
/// smoothing are ignored (`mtllib` is not opened). Indices may be negative (relative) and
/// carry `/vt/vn` parts (not read, but each an integer or empty). Coordinates are parsed as f64 (correctly rounded), so distinct
/// values in the file stay distinct particles. Vertices not used by any face or line are
/// dropped, and vertices with equal positions (e.g. repeated by separate `o`/`g` groups;
/// -0 equals 0) are merged into one particle, because two charged particles at one point
/// would feel an infinite Coulomb force. A UTF-8 byte-order mark is skipped.
pub fn obj(path: &Path, scale: f64) -> Result<Mesh, MeshError> {
    let options = FileOptions {
        scale,
        ..FileOptions::default()
    };
    load_file(path, Some(MeshFormat::Obj), &options)
}

/// The polygons and polylines of an OBJ text (without its byte-order mark).
pub(super) fn parse(bytes: &[u8]) -> Parsed<Soup> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        // Lines end at LF, CRLF or a lone CR, as where the text is read.
        let ends = (0..e.valid_up_to()).filter(|&k| super::text::line_break(bytes, k));
        let line = ends.count() + 1;
        fail(At::Line(line), "the file is not UTF-8 text")
    })?;
    let mut soup = Soup::new();
    // The largest positive index and its line: checked once all vertices are read.
    let mut max_index: Option<(u64, usize)> = None;
    let mut pending = String::new();
    let mut start_line = 0;
    let mut poly: Vec<u32> = Vec::new();
    let mut sorted: Vec<u32> = Vec::new();
    for (i, raw) in lines(text).enumerate() {
        // A trailing backslash joins the next line.
        if pending.is_empty() {
            start_line = i + 1;
        }
        if let Some(head) = raw.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(raw);
        let line = std::mem::take(&mut pending);
        let at = At::Line(start_line);
        let content = line.split('#').next().unwrap_or("");
        let mut words = content.split_whitespace();
        let Some(keyword) = words.next() else {
            continue;
        };
        match keyword {
            "v" => {
                let mut c = [0.0; 3];
                for (k, slot) in c.iter_mut().enumerate() {
                    let w = words.next().ok_or_else(|| {
                        fail(at.clone(), format!("`v` has {k} coordinates, expected 3"))
                    })?;
                    *slot = w.parse().map_err(|_| {
                        fail(
                            at.clone(),
                            format!("vertex coordinate `{w}` is not a number"),
                        )
                    })?;
                }
                let p = DVec3::from_array(c);
                finite(p, at, &format!("vertex {}", soup.positions.len() + 1))?;
                soup.positions.push(p);
            }
            "f" | "l" => {
                poly.clear();
                for w in words {
                    let (first, rest) = w.split_once('/').unwrap_or((w, ""));
                    let ix: i64 = first
                        .parse()
                        .map_err(|_| fail(at.clone(), format!("`{w}` is not a vertex index")))?;
                    // The texture and normal parts are not read, but a malformed one (`1/x`,
                    // `1/2/3/4`) means the file is not what it claims: refused, not skipped.
                    let parts = if w.contains('/') {
                        rest.split('/').count()
                    } else {
                        0
                    };
                    if parts > 2
                        || rest
                            .split('/')
                            .any(|p| !p.is_empty() && p.parse::<i64>().is_err())
                    {
                        return Err(fail(
                            at,
                            format!("`{w}` is not a vertex reference (v, v/vt, v/vt/vn or v//vn)"),
                        ));
                    }
                    let n = soup.positions.len() as i64;
                    let v = match ix {
                        0 => return Err(fail(at, "vertex index 0: OBJ indices start at 1")),
                        i if i > 0 => {
                            if max_index.is_none_or(|(m, _)| i as u64 > m) {
                                max_index = Some((i as u64, start_line));
                            }
                            i - 1
                        }
                        i if n + i >= 0 => n + i,
                        i => {
                            return Err(fail(
                                at,
                                format!("relative vertex index {i} reaches before the first vertex ({n} defined so far)"),
                            ))
                        }
                    };
                    poly.push(u32::try_from(v).map_err(|_| {
                        fail(at.clone(), format!("vertex index {ix} is out of range"))
                    })?);
                }
                if keyword == "f" {
                    if poly.len() < 3 {
                        return Err(fail(
                            at,
                            format!("a face needs at least 3 vertices, got {}", poly.len()),
                        ));
                    }
                    // A repeated vertex gives a spring to itself and a face of no area: both
                    // were dropped silently (`f 1 1 2` read as one spring).
                    if let Some(v) = super::surface::repeated(&poly, &mut sorted) {
                        return Err(fail(
                            at,
                            format!(
                                "the face repeats vertex {}: its vertices must differ",
                                v + 1
                            ),
                        ));
                    }
                    soup.corners.extend_from_slice(&poly);
                    soup.close_polygon();
                } else {
                    if poly.len() < 2 {
                        return Err(fail(
                            at,
                            format!("a line needs at least 2 vertices, got {}", poly.len()),
                        ));
                    }
                    // A spring from a vertex to itself would vanish silently.
                    if let Some(w) = poly.windows(2).find(|w| w[0] == w[1]) {
                        return Err(fail(
                            at,
                            format!("the line goes from vertex {} to itself", w[0] + 1),
                        ));
                    }
                    soup.segments.extend(poly.windows(2).map(|w| [w[0], w[1]]));
                }
            }
            _ => {}
        }
    }
    // A `\` on the last line continued into nothing: that record was dropped silently.
    if !pending.is_empty() {
        return Err(fail(
            At::Line(start_line),
            "the file ends in a line continued by `\\` (truncated file)",
        ));
    }
    if let Some((m, line)) = max_index {
        if m > soup.positions.len() as u64 {
            return Err(fail(
                At::Line(line),
                format!(
                    "vertex index {m} is out of range (the file has {} vertices)",
                    soup.positions.len()
                ),
            ));
        }
    }
    Ok(soup)
}
