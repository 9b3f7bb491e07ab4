//! VTK XML `.vtu` import: one `UnstructuredGrid` piece, its `Points` and its `Cells`
//! (`connectivity`, `offsets`, `types`) in any of VTK's encodings: `ascii`, inline
//! `binary` (base64) and `appended` (raw or base64), zlib-compressed or not, UInt32 or
//! UInt64 headers, either byte order. A small tag scanner rather than an XML library:
//! appended raw data is not XML.

use super::text::{fail, line_break, Parsed};
use super::volume::Tets;
use super::vtk;
use super::At;
use glam::DVec3;
use std::borrow::Cow;
use std::io::Read;

/// One tag: its name, attributes and (for a `DataArray`) its text content.
struct Tag<'a> {
    name: &'a str,
    attrs: Vec<(&'a str, &'a str)>,
    body: &'a [u8],
    line: usize,
}

impl Tag<'_> {
    fn attr(&self, k: &str) -> Option<&str> {
        self.attrs.iter().find(|(a, _)| *a == k).map(|(_, v)| *v)
    }
}

/// The tags of the XML part (before any appended data), in order.
fn tags(xml: &[u8]) -> Parsed<Vec<Tag<'_>>> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while let Some(k) = xml[i..].iter().position(|&c| c == b'<') {
        // Lines end at LF, CRLF or a lone CR, as in the other text formats.
        line += (i..i + k).filter(|&j| line_break(xml, j)).count();
        i += k + 1;
        // A comment ends at `-->`, not at its first `>`: a tag written inside one is text.
        if xml[i..].starts_with(b"!--") {
            let close = find(&xml[i..], b"-->")
                .ok_or_else(|| fail(At::Line(line), "an unclosed comment (truncated file)"))?;
            line += (i..i + close).filter(|&j| line_break(xml, j)).count();
            i += close + 3;
            continue;
        }
        let end = xml[i..]
            .iter()
            .position(|&c| c == b'>')
            .ok_or_else(|| fail(At::Line(line), "an unclosed tag (truncated file)"))?;
        let inner = std::str::from_utf8(&xml[i..i + end])
            .map_err(|_| fail(At::Line(line), "a tag is not UTF-8"))?;
        line += (i..i + end).filter(|&j| line_break(xml, j)).count();
        let start_body = i + end + 1;
        i = start_body;
        if inner.starts_with('/') || inner.starts_with('?') || inner.starts_with('!') {
            continue;
        }
        // `<DataArray ... />` (appended data, as VTK and ParaView write it) has no body.
        let (inner, self_closing) = match inner.strip_suffix('/') {
            Some(i) => (i, true),
            None => (inner, false),
        };
        let name_end = inner
            .find(|c: char| c.is_whitespace())
            .unwrap_or(inner.len());
        let name = &inner[..name_end];
        let mut attrs = Vec::new();
        let mut rest = &inner[name_end..];
        while let Some(eq) = rest.find('=') {
            let key = rest[..eq].trim();
            let after = rest[eq + 1..].trim_start();
            let q = after.chars().next().filter(|c| *c == '"' || *c == '\'');
            let Some(q) = q else {
                return Err(fail(
                    At::Line(line),
                    format!("attribute {key} of <{name}> is not quoted"),
                ));
            };
            let close = after[1..].find(q).ok_or_else(|| {
                fail(
                    At::Line(line),
                    format!("attribute {key} of <{name}> is not closed"),
                )
            })?;
            attrs.push((key, &after[1..1 + close]));
            rest = &after[close + 2..];
        }
        let mut body: &[u8] = &[];
        if name == "DataArray" && !self_closing {
            let close = find(&xml[i..], b"</DataArray").ok_or_else(|| {
                fail(At::Line(line), "<DataArray> is not closed (truncated file)")
            })?;
            body = &xml[i..i + close];
        }
        out.push(Tag {
            name,
            attrs,
            body,
            line,
        });
        if name == "AppendedData" {
            break;
        }
    }
    Ok(out)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The most bytes a zlib stream inflates to per compressed byte (DEFLATE's 258-byte match
/// in 2 bits).
const ZLIB_MAX_RATIO: u64 = 1032;

/// An empty vector with room for `n` values of array `t`, or a typed error when this
/// process cannot allocate it: a file may declare (and honestly inflate to) more than
/// memory holds, which must not abort the process.
fn room<T>(n: u64, at: &At, t: &Tag) -> Parsed<Vec<T>> {
    let mut v = Vec::new();
    let bytes = n.saturating_mul(std::mem::size_of::<T>() as u64);
    match usize::try_from(n).map(|n| v.try_reserve_exact(n)) {
        Ok(Ok(())) => Ok(v),
        _ => Err(fail(
            at.clone(),
            format!(
                "DataArray {}: cannot allocate the {bytes} bytes it needs (out of memory)",
                t.attr("Name").unwrap_or("")
            ),
        )),
    }
}

/// Standard base64 (whitespace ignored); `None` on a bad character.
fn base64(text: &[u8]) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0);
    for &c in text {
        if c.is_ascii_whitespace() {
            continue;
        }
        if c == b'=' {
            // Padding ends a chunk; VTK concatenates separately padded chunks.
            acc = 0;
            bits = 0;
            continue;
        }
        acc = (acc << 6) | val(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

struct File<'a> {
    big: bool,
    header64: bool,
    zlib: bool,
    /// The appended data after its `_` marker, and whether it is base64.
    appended: Option<(&'a [u8], bool)>,
}

impl File<'_> {
    fn uint(&self, b: &[u8], k: usize) -> Option<u64> {
        let w = if self.header64 { 8 } else { 4 };
        let s = b.get(k * w..(k + 1) * w)?;
        let mut a = [0u8; 8];
        if self.big {
            a[8 - w..].copy_from_slice(s);
            a.reverse();
        } else {
            a[..w].copy_from_slice(s);
        }
        Some(u64::from_le_bytes(a))
    }

    /// The raw bytes of one array: its header (size, or compressed block table) and data.
    /// The header must give `want` bytes (what the Piece's counts need), checked before
    /// anything is inflated, and each block must inflate to its header's size.
    fn decode(&self, t: &Tag, base64_text: bool, bytes: &[u8], want: u64) -> Parsed<Vec<u8>> {
        let at = At::Line(t.line);
        let bad = |m: &str| {
            fail(
                at.clone(),
                format!("DataArray {}: {m}", t.attr("Name").unwrap_or("")),
            )
        };
        let hw = if self.header64 { 8 } else { 4 };
        // In base64, the header is its own padded chunk: decode it first to learn its size.
        let whole: Cow<[u8]> = if base64_text {
            Cow::Owned(base64(bytes).ok_or_else(|| bad("bad base64"))?)
        } else {
            Cow::Borrowed(bytes)
        };
        let mismatch = |n: u64| {
            bad(&format!(
                "its header gives {n} bytes, but the <Piece>'s counts need {want} (wrong count \
                 or corrupt header)"
            ))
        };
        if !self.zlib {
            let n = self
                .uint(&whole, 0)
                .ok_or_else(|| bad("truncated header"))?;
            if n != want {
                return Err(mismatch(n));
            }
            // Checked: a count near 2^64 wrapped (a panic in a debug build).
            let end = usize::try_from(n).ok().and_then(|n| n.checked_add(hw));
            let data = end
                .and_then(|end| whole.get(hw..end))
                .ok_or_else(|| bad("fewer bytes than its header says (truncated file)"))?;
            let mut out = room::<u8>(n, &at, t)?;
            out.extend_from_slice(data);
            return Ok(out);
        }
        let blocks = self
            .uint(&whole, 0)
            .ok_or_else(|| bad("truncated header"))? as usize;
        // Each block has its size in the header: a count the file cannot hold is corrupt.
        if blocks > whole.len() / hw {
            return Err(bad(&format!("a corrupt block count ({blocks})")));
        }
        let head = (3 + blocks) * hw;
        let size = self
            .uint(&whole, 1)
            .ok_or_else(|| bad("truncated header"))?;
        // The last block's size; 0 means it is full.
        let last = match self
            .uint(&whole, 2)
            .ok_or_else(|| bad("truncated header"))?
        {
            0 => size,
            l => l,
        };
        let total = match blocks {
            0 => Some(0),
            b => size
                .checked_mul(b as u64 - 1)
                .and_then(|x| x.checked_add(last)),
        };
        if total != Some(want) {
            return Err(mismatch(total.unwrap_or(u64::MAX)));
        }
        // Every block's place and size, checked before anything is inflated: a header that
        // declares more than its block can inflate to is refused without inflating.
        let mut chunks = Vec::new();
        let mut pos = head;
        for k in 0..blocks {
            let c = self
                .uint(&whole, 3 + k)
                .ok_or_else(|| bad("truncated header"))? as usize;
            let chunk = whole
                .get(pos..pos.saturating_add(c))
                .ok_or_else(|| bad("a compressed block past the end (truncated file)"))?;
            let expect = if k + 1 == blocks { last } else { size };
            if expect > (c as u64).saturating_mul(ZLIB_MAX_RATIO) {
                return Err(bad(&format!(
                    "compressed block {k} holds {c} bytes, which cannot inflate to the \
                     {expect} its header says (zlib inflates at most {ZLIB_MAX_RATIO}-fold; \
                     corrupt header)"
                )));
            }
            chunks.push((chunk, expect));
            pos += c;
        }
        // Room grows with what the blocks inflate to, never ahead of it: a header may
        // declare up to 1032 times the file's bytes, which are then never written.
        let mut out = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        for (k, (chunk, expect)) in chunks.into_iter().enumerate() {
            // One byte more than the header says shows a block that inflates past it.
            let mut z = flate2::read::ZlibDecoder::new(chunk).take(expect.saturating_add(1));
            let mut got = 0u64;
            loop {
                let n = match z.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(bad(&format!("zlib: {e}"))),
                };
                out.try_reserve(n).map_err(|_| {
                    bad(&format!(
                        "cannot allocate the {want} bytes it needs (out of memory)"
                    ))
                })?;
                out.extend_from_slice(&buf[..n]);
                got += n as u64;
            }
            if got != expect {
                return Err(bad(&format!(
                    "compressed block {k} inflates to {}, its header says {expect}",
                    if got > expect {
                        format!("more than {expect} bytes")
                    } else {
                        format!("{got} bytes")
                    }
                )));
            }
        }
        Ok(out)
    }

    /// The values of one DataArray as f64: exactly `count` of them (what the Piece's
    /// NumberOfPoints or NumberOfCells needs), or in ASCII with `text_sized` as many as the
    /// text holds (the caller checks the count).
    fn values(&self, t: &Tag, count: u64, text_sized: bool) -> Parsed<Vec<f64>> {
        let at = At::Line(t.line);
        let name = t.attr("Name").unwrap_or("");
        let ty = t.attr("type").unwrap_or("");
        let format = t.attr("format").unwrap_or("ascii");
        let wrong = |n: usize| {
            fail(
                at.clone(),
                format!(
                    "DataArray {name}: {n} values, but the <Piece>'s counts need {count} \
                     (wrong count)"
                ),
            )
        };
        if format == "ascii" {
            let text =
                std::str::from_utf8(t.body).map_err(|_| fail(at.clone(), "non-UTF-8 data"))?;
            let v: Vec<f64> = text
                .split_ascii_whitespace()
                .map(|w| {
                    w.parse::<f64>().map_err(|_| {
                        fail(
                            at.clone(),
                            format!("DataArray {name}: `{w}` is not a number"),
                        )
                    })
                })
                .collect::<Parsed<_>>()?;
            return if text_sized || v.len() as u64 == count {
                Ok(v)
            } else {
                Err(wrong(v.len()))
            };
        }
        let size: u64 = match ty {
            "Int8" | "UInt8" => 1,
            "Int16" | "UInt16" => 2,
            "Int32" | "UInt32" | "Float32" => 4,
            "Int64" | "UInt64" | "Float64" => 8,
            other => {
                return Err(fail(
                    at,
                    format!("DataArray {name}: unknown type `{other}`"),
                ))
            }
        };
        let want = count.checked_mul(size).ok_or_else(|| wrong(usize::MAX))?;
        let raw = match format {
            "binary" => self.decode(t, true, t.body, want)?,
            "appended" => {
                let (data, b64) = self.appended.ok_or_else(|| {
                    fail(at.clone(), "format=\"appended\" without <AppendedData>")
                })?;
                let off: usize =
                    t.attr("offset")
                        .and_then(|o| o.parse().ok())
                        .ok_or_else(|| {
                            fail(at.clone(), "an appended DataArray without a valid offset")
                        })?;
                let rest = data.get(off..).ok_or_else(|| {
                    fail(
                        at.clone(),
                        format!("offset {off} past the appended data (truncated file)"),
                    )
                })?;
                if b64 {
                    let end = rest.iter().position(|&c| c == b'<').unwrap_or(rest.len());
                    self.decode(t, true, &rest[..end], want)?
                } else {
                    self.decode(t, false, rest, want)?
                }
            }
            other => {
                return Err(fail(
                    at,
                    format!("DataArray {name}: unknown format `{other}`"),
                ))
            }
        };
        let size = size as usize;
        let mut r = super::text::Bytes {
            bytes: &raw,
            pos: 0,
            big_endian: self.big,
        };
        let mut v = room::<f64>((raw.len() / size) as u64, &at, t)?;
        let what = "a value";
        while r.left() >= size {
            v.push(match ty {
                "Int8" => r.i8(what)? as f64,
                "UInt8" => r.u8(what)? as f64,
                "Int16" => r.i16(what)? as f64,
                "UInt16" => r.u16(what)? as f64,
                "Int32" => r.i32(what)? as f64,
                "UInt32" => r.u32(what)? as f64,
                "Float32" => r.f32(what)? as f64,
                "Float64" => r.f64(what)?,
                "Int64" => r.i64(what)? as f64,
                _ => r.u64(what)? as f64,
            });
        }
        Ok(v)
    }
}

pub(super) fn parse(bytes: &[u8]) -> Parsed<Tets> {
    let xml_end = find(bytes, b"<AppendedData").map_or(bytes.len(), |k| k);
    let tags = tags(&bytes[..bytes.len().min(xml_end + 4096)])?;
    let root = tags
        .iter()
        .find(|t| t.name == "VTKFile")
        .ok_or_else(|| fail(None, "no <VTKFile> element"))?;
    if root.attr("type") != Some("UnstructuredGrid") {
        return Err(fail(
            At::Line(root.line),
            format!(
                "VTKFile type {:?}: only UnstructuredGrid holds tetrahedra",
                root.attr("type").unwrap_or("")
            ),
        ));
    }
    // VTK's own values only: `header_type="uint64"` was read as UInt32, the size's low
    // half taken for the size and the data read from its high half on.
    let choice = |t: &Tag, key: &str, no: &str, yes: &str| match t.attr(key) {
        None => Ok(false),
        Some(v) if v == no || v == yes => Ok(v == yes),
        Some(v) => Err(fail(
            At::Line(t.line),
            format!("<{}> {key}=\"{v}\": VTK writes {no} or {yes}", t.name),
        )),
    };
    let appended = match tags.iter().find(|t| t.name == "AppendedData") {
        Some(t) => {
            let after = &bytes[xml_end..];
            let start = after
                .iter()
                .position(|&c| c == b'_')
                .map_or(after.len(), |k| k + 1);
            Some((&after[start..], choice(t, "encoding", "raw", "base64")?))
        }
        None => None,
    };
    let file = File {
        big: choice(root, "byte_order", "LittleEndian", "BigEndian")?,
        header64: choice(root, "header_type", "UInt32", "UInt64")?,
        zlib: match root.attr("compressor") {
            None | Some("") => false,
            Some("vtkZLibDataCompressor") => true,
            Some(other) => {
                return Err(fail(
                    At::Line(root.line),
                    format!("compressor {other}: only zlib (vtkZLibDataCompressor) is read"),
                ))
            }
        },
        appended,
    };
    let pieces: Vec<&Tag> = tags.iter().filter(|t| t.name == "Piece").collect();
    let [piece] = pieces[..] else {
        return Err(fail(
            None,
            format!("{} <Piece> elements: one is read", pieces.len()),
        ));
    };
    // The Piece's counts size every array before any is decoded or inflated.
    let count = |k: &str| -> Parsed<u64> {
        let v = piece.attr(k).unwrap_or("");
        v.trim().parse().map_err(|_| {
            fail(
                At::Line(piece.line),
                format!("<Piece> {k}=\"{v}\" is not a non-negative integer"),
            )
        })
    };
    let (n_points, n_cells) = (count("NumberOfPoints")?, count("NumberOfCells")?);
    // The DataArrays under <Points> and <Cells>, by the section they follow.
    let mut section = "";
    let (mut points, mut conn, mut offsets, mut types) = (None, None, None, None);
    // Each is one array: a second would replace (or be dropped for) the first unseen.
    fn once<'t, 'a>(slot: &mut Option<&'t Tag<'a>>, t: &'t Tag<'a>, what: &str) -> Parsed<()> {
        if let Some(first) = slot {
            return Err(fail(
                At::Line(t.line),
                format!(
                    "a second {what} DataArray (the first at line {})",
                    first.line
                ),
            ));
        }
        *slot = Some(t);
        Ok(())
    }
    for t in &tags {
        match t.name {
            "Points" | "Cells" | "PointData" | "CellData" | "FieldData" => section = t.name,
            "DataArray" => match (section, t.attr("Name")) {
                ("Points", _) => once(&mut points, t, "Points")?,
                ("Cells", Some("connectivity")) => once(&mut conn, t, "connectivity")?,
                ("Cells", Some("offsets")) => once(&mut offsets, t, "offsets")?,
                ("Cells", Some("types")) => once(&mut types, t, "types")?,
                _ => {}
            },
            _ => {}
        }
    }
    fn need<'t, 'a>(t: Option<&'t Tag<'a>>, what: &str) -> Parsed<&'t Tag<'a>> {
        t.ok_or_else(|| fail(None, format!("no {what} DataArray")))
    }
    let (pt, ct, ot, tt) = (
        need(points, "Points")?,
        need(conn, "connectivity")?,
        need(offsets, "offsets")?,
        need(types, "types")?,
    );
    // Points are x y z: VTK writes NumberOfComponents="3" (absent means 1), and any other
    // count was read as triples all the same, its values regrouped into other points.
    let comps = pt.attr("NumberOfComponents");
    if comps.map(str::trim) != Some("3") {
        let name = pt.attr("Name").unwrap_or("");
        let got = comps.map_or("absent (VTK reads 1)".into(), |c| format!("\"{c}\""));
        let m = format!("Points DataArray {name}: NumberOfComponents {got}, expected 3 (x y z)");
        return Err(fail(At::Line(pt.line), m));
    }
    let p = file.values(pt, n_points.saturating_mul(3), false)?;
    let mut positions = room::<DVec3>(p.len() as u64 / 3, &At::Line(pt.line), pt)?;
    for (k, c) in p.chunks_exact(3).enumerate() {
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
        positions.push(x);
    }
    // Indices and types must be whole numbers: `x as i64` would truncate 4.9 to 4.
    let ints = |t: &Tag, count: u64, text_sized: bool| -> Parsed<Vec<i64>> {
        let v = file.values(t, count, text_sized)?;
        v.into_iter()
            .enumerate()
            .map(|(k, x)| {
                if x.is_finite() && x.fract() == 0.0 && x.abs() < 2f64.powi(63) {
                    Ok(x as i64)
                } else {
                    Err(fail(
                        At::Line(t.line),
                        format!(
                            "DataArray {}: value {k} (counting from 0), {}, is not an integer",
                            t.attr("Name").unwrap_or(""),
                            crate::display::num(x)
                        ),
                    ))
                }
            })
            .collect()
    };
    let (o, ty) = (ints(ot, n_cells, false)?, ints(tt, n_cells, false)?);
    // The last offset is the connectivity's length: a binary array is checked against it
    // before it is inflated; ASCII text is bounded by the file, and `cells` reports a bad
    // index in a cell before entries left over after the last cell.
    let c = ints(ct, o.last().map_or(0, |&l| l.max(0) as u64), true)?;
    // VTU offsets are the ends of the cells.
    let mut starts = Vec::with_capacity(o.len() + 1);
    starts.push(0);
    starts.extend_from_slice(&o);
    vtk::cells(positions, &c, &starts, &ty)
}
