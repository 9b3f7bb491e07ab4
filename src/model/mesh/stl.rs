//! STL import, ASCII and binary: every triangle repeats its three vertices, so the surface
//! builder merges coincident ones (within [`super::STL_MERGE_TOLERANCE`] of the
//! bounding-box diagonal). Own reader rather than a crate, so ASCII coordinates are
//! parsed in f64 and every error names its line or triangle.

use super::surface::Soup;
use super::text::{fail, finite, Bytes, Parsed, Tokens};
use super::At;
use glam::DVec3;

/// A binary STL is 80 header bytes, a u32 triangle count n and 50 bytes per triangle.
pub(super) fn is_binary(bytes: &[u8]) -> bool {
    bytes.len() >= 84 && bytes.len() as u64 == 84 + 50 * binary_count(bytes) as u64
}

/// Whether the bytes can be ASCII STL: no control bytes but whitespace. Many binary
/// files start their 80-byte header with `solid`; their counts and floats hold zeros, so
/// a truncated one is reported as a binary file, not as text.
fn is_text(bytes: &[u8]) -> bool {
    !bytes
        .iter()
        .any(|&b| (b < 0x20 && !b.is_ascii_whitespace()) || b == 0x7F)
}

fn binary_count(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes[80..84].try_into().expect("4 bytes"))
}

pub(super) fn parse(bytes: &[u8]) -> Parsed<Soup> {
    let text = super::text::strip_bom(bytes)?;
    let start = text
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(text.len());
    let ascii = text[start..].len() >= 5
        && text[start..start + 5].eq_ignore_ascii_case(b"solid")
        && is_text(text);
    if is_binary(bytes) || !ascii {
        binary(bytes)
    } else {
        self::ascii(text)
    }
}

fn binary(bytes: &[u8]) -> Parsed<Soup> {
    if bytes.len() < 84 {
        return Err(fail(
            None,
            format!(
                "{} bytes: a binary STL has at least 84 (an ASCII one starts with `solid`)",
                bytes.len()
            ),
        ));
    }
    let n = binary_count(bytes) as u64;
    if bytes.len() as u64 != 84 + 50 * n {
        return Err(fail(
            At::Byte(80),
            format!(
                "the header gives {n} triangles, which take {} bytes, but the file has {} \
                 (truncated file or wrong count)",
                84 + 50 * n,
                bytes.len()
            ),
        ));
    }
    let mut r = Bytes {
        bytes,
        pos: 84,
        big_endian: false,
    };
    let mut soup = Soup::new();
    soup.positions.reserve(3 * n as usize);
    for k in 0..n as usize {
        r.take(12, "a normal")?;
        for _ in 0..3 {
            let p = DVec3::new(
                r.f32("a vertex")? as f64,
                r.f32("a vertex")? as f64,
                r.f32("a vertex")? as f64,
            );
            let at = At::Element {
                what: "triangle",
                index: k as u64,
                line: None,
            };
            finite(p, at, "a vertex")?;
            soup.corners.push(soup.positions.len() as u32);
            soup.positions.push(p);
        }
        soup.close_polygon();
        r.take(2, "an attribute")?;
    }
    Ok(soup)
}

fn ascii(text: &[u8]) -> Parsed<Soup> {
    let mut t = Tokens::new(text, None);
    let mut soup = Soup::new();
    let mut solids = 0;
    while let Some(w) = t.next() {
        if !w.eq_ignore_ascii_case("solid") {
            return Err(fail(t.at(), format!("expected `solid`, found `{w}`")));
        }
        t.skip_line();
        solids += 1;
        loop {
            let w = t.word("`facet` or `endsolid`")?;
            if w.eq_ignore_ascii_case("endsolid") {
                t.skip_line();
                break;
            }
            if !w.eq_ignore_ascii_case("facet") {
                return Err(fail(
                    t.at(),
                    format!("expected `facet` or `endsolid`, found `{w}`"),
                ));
            }
            t.expect("normal")?;
            t.point("the normal").or_else(|e| {
                // A NaN normal is harmless (it is not used); a malformed one is not.
                if e.message.contains("not finite") {
                    Ok(DVec3::ZERO)
                } else {
                    Err(e)
                }
            })?;
            t.expect("outer")?;
            t.expect("loop")?;
            for k in 0..3 {
                let w = t.word("`vertex`")?;
                if !w.eq_ignore_ascii_case("vertex") {
                    return Err(fail(
                        t.at(),
                        format!("expected `vertex` (a facet has 3), found `{w}` after {k}"),
                    ));
                }
                let p = t.point("a vertex")?;
                soup.corners.push(soup.positions.len() as u32);
                soup.positions.push(p);
            }
            let w = t.word("`endloop`")?;
            if !w.eq_ignore_ascii_case("endloop") {
                return Err(fail(
                    t.at(),
                    format!("expected `endloop` (a facet has 3 vertices), found `{w}`"),
                ));
            }
            t.expect("endfacet")?;
            soup.close_polygon();
        }
    }
    if solids == 0 {
        return Err(fail(At::Line(1), "the file is empty"));
    }
    Ok(soup)
}
