//! The PLY reader: ASCII and binary (little- and big-endian), any elements and properties
//! (those it does not use are skipped), polygons of any size, `edge` elements. One
//! reader for meshes (`mesh.kind = "ply"`) and for frames and fit targets (the output
//! layer's `ply_read` wraps it), so every consumer accepts the same files.

use super::surface::{vertex_index, Soup};
use super::text::{capped, fail, line_break, Fail, Parsed};
use super::At;
use glam::DVec3;

/// Everything msc uses from a PLY file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlyData {
    /// From an msc header comment `comment msc VERSION step S time T`.
    pub step: Option<u64>,
    pub time: Option<f64>,
    pub positions: Vec<DVec3>,
    /// `vx vy vz`, when the vertex element has them.
    pub velocities: Option<Vec<DVec3>>,
    /// `charge`, when the vertex element has it.
    pub charges: Option<Vec<f64>>,
    /// Polygon k's vertices are `corners[starts[k]..starts[k + 1]]` (`vertex_indices` or
    /// `vertex_index` lists of the `face` element).
    pub corners: Vec<u32>,
    pub starts: Vec<usize>,
    /// `vertex1 vertex2` of the `edge` element.
    pub edges: Vec<[u32; 2]>,
}

impl PlyData {
    /// The polygons as fans of triangles.
    pub fn triangles(&self) -> Vec<[u32; 3]> {
        let mut out = Vec::new();
        for w in self.starts.windows(2) {
            let p = &self.corners[w[0]..w[1]];
            out.extend((2..p.len()).map(|k| [p[0], p[k - 1], p[k]]));
        }
        out
    }
}

/// The soup a PLY mesh file holds.
pub(super) fn soup(bytes: &[u8]) -> Parsed<Soup> {
    let d = read(bytes, true)?;
    Ok(Soup {
        positions: d.positions,
        corners: d.corners,
        starts: d.starts,
        segments: d.edges,
    })
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Format {
    Ascii,
    BinaryLe,
    BinaryBe,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Scalar {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    F32,
    F64,
}

impl Scalar {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "char" | "int8" => Self::I8,
            "uchar" | "uint8" => Self::U8,
            "short" | "int16" => Self::I16,
            "ushort" | "uint16" => Self::U16,
            "int" | "int32" => Self::I32,
            "uint" | "uint32" => Self::U32,
            "float" | "float32" => Self::F32,
            "double" | "float64" => Self::F64,
            _ => return None,
        })
    }
    fn size(self) -> usize {
        match self {
            Self::I8 | Self::U8 => 1,
            Self::I16 | Self::U16 => 2,
            Self::I32 | Self::U32 | Self::F32 => 4,
            Self::F64 => 8,
        }
    }
}

#[derive(Clone, Debug)]
enum Property {
    Scalar(Scalar, String),
    List(Scalar, Scalar, String),
}

#[derive(Clone, Debug)]
struct Element {
    name: String,
    count: u64,
    properties: Vec<Property>,
}

impl Element {
    /// The fewest bytes one row can take: a row of a binary file holds every scalar and
    /// every list's count; an ASCII row at least one digit and a separator per value.
    fn min_row(&self, format: Format) -> u64 {
        let size = |s: &Scalar| {
            if format == Format::Ascii {
                2
            } else {
                s.size() as u64
            }
        };
        self.properties
            .iter()
            .map(|p| match p {
                Property::Scalar(s, _) | Property::List(s, _, _) => size(s),
            })
            .sum::<u64>()
            .max(1)
    }
    fn scalar(&self, name: &str) -> Option<usize> {
        self.properties
            .iter()
            .position(|p| matches!(p, Property::Scalar(_, n) if n == name))
    }
}

/// Parses a whole PLY file. Positions must be finite; indices must name vertices.
pub fn parse(bytes: &[u8]) -> Result<PlyData, Fail> {
    read(bytes, false)
}

/// [`parse`]; with `distinct`, a face naming a vertex twice is refused (a mesh's springs
/// would lose it; a frame or fit target only draws or matches its triangles).
fn read(bytes: &[u8], distinct: bool) -> Result<PlyData, Fail> {
    let bytes = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(bytes);
    let end = b"end_header";
    // At the start of a line: a `comment` that mentions end_header cut the header there.
    let pos = (0..bytes.len().saturating_sub(end.len() - 1))
        .find(|&k| k > 0 && matches!(bytes[k - 1], b'\n' | b'\r') && bytes[k..].starts_with(end))
        .ok_or_else(|| fail(None, "no end_header line"))?;
    let body = super::text::after_line_end(bytes, pos + end.len());
    let header =
        std::str::from_utf8(&bytes[..pos]).map_err(|_| fail(None, "the header is not UTF-8"))?;
    let mut lines = super::text::lines(header);
    if lines.next().map(str::trim) != Some("ply") {
        return Err(fail(At::Line(1), "the file does not start with `ply`"));
    }
    let mut format = None;
    let mut data = PlyData {
        starts: vec![0],
        ..PlyData::default()
    };
    let mut elements: Vec<Element> = Vec::new();
    for (i, line) in lines.enumerate() {
        let at = At::Line(i + 2);
        let t: Vec<&str> = line.split_whitespace().collect();
        match t.first().copied() {
            Some("format") => {
                format = Some(match t.get(1).copied() {
                    Some("ascii") => Format::Ascii,
                    Some("binary_little_endian") => Format::BinaryLe,
                    Some("binary_big_endian") => Format::BinaryBe,
                    other => return Err(fail(at, format!("unknown format {other:?}"))),
                })
            }
            Some("comment") => {
                for w in t.windows(2) {
                    match w[0] {
                        "step" => data.step = w[1].parse().ok().or(data.step),
                        "time" => data.time = w[1].parse().ok().or(data.time),
                        _ => {}
                    }
                }
            }
            Some("element") => {
                let (name, count) = match (t.get(1), t.get(2).and_then(|c| c.parse().ok())) {
                    (Some(n), Some(c)) => (n.to_string(), c),
                    _ => return Err(fail(at, format!("bad element line `{line}`"))),
                };
                if name == "vertex" && elements.iter().any(|e| e.name == "vertex") {
                    return Err(fail(at, "a second `vertex` element: one is read"));
                }
                elements.push(Element {
                    name,
                    count,
                    properties: Vec::new(),
                });
            }
            Some("property") => {
                let el = elements.last_mut().ok_or_else(|| {
                    fail(at.clone(), format!("property before any element: `{line}`"))
                })?;
                let bad = || fail(at.clone(), format!("bad property line `{line}`"));
                let p = if t.get(1) == Some(&"list") {
                    match (
                        t.get(2).and_then(|s| Scalar::parse(s)),
                        t.get(3).and_then(|s| Scalar::parse(s)),
                        t.get(4),
                    ) {
                        (Some(c), Some(i), Some(n)) => Property::List(c, i, n.to_string()),
                        _ => return Err(bad()),
                    }
                } else {
                    match (t.get(1).and_then(|s| Scalar::parse(s)), t.get(2)) {
                        (Some(s), Some(name)) => Property::Scalar(s, name.to_string()),
                        _ => return Err(bad()),
                    }
                };
                el.properties.push(p);
            }
            _ => {}
        }
    }
    let format = format.ok_or_else(|| fail(None, "no format line"))?;
    let mut r = Reader {
        bytes,
        pos: body,
        format,
        // The header's lines, then `end_header`.
        line: super::text::lines(header).count() + 2,
    };
    let mut seen_vertex = false;
    for el in &elements {
        // A count the rest of the file cannot hold is corrupt, and must not reserve memory.
        let count = capped(
            r.at(),
            &format!("{} elements", el.name),
            el.count,
            el.min_row(format),
            r.left(),
        )?;
        match el.name.as_str() {
            "vertex" => {
                seen_vertex = true;
                read_vertices(&mut r, el, count, &mut data)?;
            }
            "face" => read_faces(&mut r, el, count, distinct, &mut data)?,
            "edge" => read_edges(&mut r, el, count, &mut data)?,
            _ => {
                for _ in 0..count {
                    for p in &el.properties {
                        r.skip(p)?;
                    }
                    r.end_row(&el.name)?;
                }
            }
        }
    }
    if !seen_vertex {
        return Err(fail(None, "no vertex element"));
    }
    let rest = &bytes[r.pos..];
    if (format == Format::Ascii && rest.iter().any(|b| !b.is_ascii_whitespace()))
        || (format != Format::Ascii && !rest.is_empty())
    {
        return Err(fail(
            r.at(),
            format!(
                "{} bytes after the last element: the header's counts do not match the data",
                rest.len()
            ),
        ));
    }
    let n = data.positions.len();
    let check = |what: &'static str, k: usize, v: u32| {
        vertex_index(
            At::Element {
                what,
                index: k as u64,
                line: None,
            },
            what,
            v as i64,
            n,
        )
    };
    for (k, w) in data.starts.windows(2).enumerate() {
        for &v in &data.corners[w[0]..w[1]] {
            check("face", k, v)?;
        }
    }
    for (k, e) in data.edges.iter().enumerate() {
        for &v in e {
            check("edge", k, v)?;
        }
    }
    Ok(data)
}

fn read_vertices(r: &mut Reader, el: &Element, count: usize, d: &mut PlyData) -> Parsed<()> {
    let col = |c: &str| el.scalar(c);
    let need = |c: &str| {
        col(c).ok_or_else(|| fail(None, format!("the vertex element has no `{c}` property")))
    };
    let (cx, cy, cz) = (need("x")?, need("y")?, need("z")?);
    let vel = match (col("vx"), col("vy"), col("vz")) {
        (Some(a), Some(b), Some(c)) => Some((a, b, c)),
        _ => None,
    };
    let charge = col("charge");
    d.positions.reserve(count);
    let mut row = vec![0.0; el.properties.len()];
    for v in 0..count {
        for (k, p) in el.properties.iter().enumerate() {
            match p {
                Property::Scalar(s, _) => row[k] = r.scalar(*s)?,
                Property::List(..) => r.skip(p)?,
            }
        }
        let x = DVec3::new(row[cx], row[cy], row[cz]);
        if !x.is_finite() {
            return Err(fail(
                r.element("vertex", v),
                format!("a non-finite position ({}, {}, {})", x.x, x.y, x.z),
            ));
        }
        r.end_row("vertex")?;
        d.positions.push(x);
        if let Some((a, b, c)) = vel {
            let vel = DVec3::new(row[a], row[b], row[c]);
            d.velocities.get_or_insert_with(Vec::new).push(vel);
        }
        if let Some(q) = charge {
            d.charges.get_or_insert_with(Vec::new).push(row[q]);
        }
    }
    Ok(())
}

fn read_faces(
    r: &mut Reader,
    el: &Element,
    count: usize,
    distinct: bool,
    d: &mut PlyData,
) -> Parsed<()> {
    let lists = |n: &str| {
        el.properties
            .iter()
            .position(|p| matches!(p, Property::List(_, _, name) if name == n))
    };
    let Some(which) = lists("vertex_indices").or_else(|| lists("vertex_index")) else {
        return Err(fail(None, "the face element has no `vertex_indices` list"));
    };
    let mut sorted = Vec::new();
    for f in 0..count {
        for (k, p) in el.properties.iter().enumerate() {
            let Property::List(c, i, _) = p else {
                r.skip(p)?;
                continue;
            };
            if k != which {
                r.skip(p)?;
                continue;
            }
            let n = r.count(*c)?;
            if n < 3 {
                return Err(fail(
                    r.element("face", f),
                    format!("a face needs at least 3 vertices, got {n}"),
                ));
            }
            for _ in 0..n {
                let v = r.scalar(*i)?;
                if !(v >= 0.0 && v <= f64::from(u32::MAX) && v.fract() == 0.0) {
                    return Err(fail(
                        r.element("face", f),
                        format!("vertex index {v} is not a vertex"),
                    ));
                }
                d.corners.push(v as u32);
            }
            let face = &d.corners[d.starts[d.starts.len() - 1]..];
            // A repeated vertex gives a spring to itself and a face of no area: both were
            // dropped silently (`3 0 0 1` read as one spring).
            let repeated = distinct.then(|| super::surface::repeated(face, &mut sorted));
            if let Some(v) = repeated.flatten() {
                return Err(fail(
                    r.element("face", f),
                    format!("the face repeats vertex {v}: its vertices must differ"),
                ));
            }
            d.starts.push(d.corners.len());
        }
        r.end_row("face")?;
    }
    Ok(())
}

fn read_edges(r: &mut Reader, el: &Element, count: usize, d: &mut PlyData) -> Parsed<()> {
    let (Some(a), Some(b)) = (el.scalar("vertex1"), el.scalar("vertex2")) else {
        return Err(fail(
            None,
            "the edge element has no `vertex1` and `vertex2` properties",
        ));
    };
    let mut row = vec![0.0; el.properties.len()];
    for e in 0..count {
        for (k, p) in el.properties.iter().enumerate() {
            match p {
                Property::Scalar(s, _) => row[k] = r.scalar(*s)?,
                Property::List(..) => r.skip(p)?,
            }
        }
        let mut pair = [0u32; 2];
        for (slot, v) in pair.iter_mut().zip([row[a], row[b]]) {
            if !(v >= 0.0 && v <= f64::from(u32::MAX) && v.fract() == 0.0) {
                return Err(fail(
                    r.element("edge", e),
                    format!("vertex index {v} is not a vertex"),
                ));
            }
            *slot = v as u32;
        }
        if pair[0] == pair[1] {
            return Err(fail(
                r.element("edge", e),
                format!("vertex {} to itself: an edge needs two vertices", pair[0]),
            ));
        }
        r.end_row("edge")?;
        d.edges.push(pair);
    }
    Ok(())
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    format: Format,
    /// The line of `pos` (ASCII).
    line: usize,
}

impl Reader<'_> {
    fn at(&self) -> At {
        if self.format == Format::Ascii {
            At::Line(self.line)
        } else {
            At::Byte(self.pos as u64)
        }
    }
    fn element(&self, what: &'static str, index: usize) -> At {
        At::Element {
            what,
            index: index as u64,
            line: (self.format == Format::Ascii).then_some(self.line),
        }
    }
    fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }
    fn truncated(&self) -> Fail {
        fail(
            self.at(),
            "the file ends early (truncated file or wrong count in the header)",
        )
    }
    fn take(&mut self, n: usize) -> Parsed<&[u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| self.truncated())?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    /// Skips blanks within the current line (a CR only before its LF: a lone CR ends it).
    fn skip_blanks(&mut self) {
        let b = self.bytes;
        while matches!(b.get(self.pos), Some(b' ' | b'\t' | b'\r')) && !line_break(b, self.pos) {
            self.pos += 1;
        }
    }
    /// One ASCII value, on the current row's line.
    fn token(&mut self) -> Parsed<&str> {
        self.skip_blanks();
        let start = self.pos;
        while self.pos < self.bytes.len() && !self.bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(if self.pos == self.bytes.len() {
                self.truncated()
            } else {
                fail(
                    self.at(),
                    "the row has fewer values than the header's properties",
                )
            });
        }
        std::str::from_utf8(&self.bytes[start..self.pos])
            .map_err(|_| fail(self.at(), "non-UTF-8 data"))
    }
    /// The end of a row: in ASCII, nothing but the line break (or the end of the file)
    /// may follow its last value; blank lines between rows are skipped.
    fn end_row(&mut self, what: &str) -> Parsed<()> {
        if self.format != Format::Ascii {
            return Ok(());
        }
        self.skip_blanks();
        match self.bytes.get(self.pos) {
            None => Ok(()),
            Some(_) if line_break(self.bytes, self.pos) => {
                // Blank lines between rows.
                while let Some(&b) = self.bytes.get(self.pos) {
                    if line_break(self.bytes, self.pos) {
                        self.line += 1;
                    } else if !b.is_ascii_whitespace() {
                        break;
                    }
                    self.pos += 1;
                }
                Ok(())
            }
            Some(_) => Err(fail(
                self.at(),
                format!("a {what} row has more values than the header's properties"),
            )),
        }
    }
    fn scalar(&mut self, s: Scalar) -> Parsed<f64> {
        if self.format == Format::Ascii {
            let t = self.token()?;
            let t = t.to_string();
            return t
                .parse::<f64>()
                .map_err(|_| fail(self.at(), format!("bad number `{t}`")));
        }
        let le = self.format == Format::BinaryLe;
        let b = self.take(s.size())?;
        macro_rules! num {
            ($t:ty) => {{
                let a = b.try_into().expect("sized");
                (if le {
                    <$t>::from_le_bytes(a)
                } else {
                    <$t>::from_be_bytes(a)
                }) as f64
            }};
        }
        Ok(match s {
            Scalar::I8 => num!(i8),
            Scalar::U8 => num!(u8),
            Scalar::I16 => num!(i16),
            Scalar::U16 => num!(u16),
            Scalar::I32 => num!(i32),
            Scalar::U32 => num!(u32),
            Scalar::F32 => num!(f32),
            Scalar::F64 => num!(f64),
        })
    }
    /// A list's length, which the rest of the file must be able to hold.
    fn count(&mut self, c: Scalar) -> Parsed<usize> {
        let n = self.scalar(c)?;
        if !(n >= 0.0 && n.fract() == 0.0 && n <= self.left() as f64) {
            return Err(fail(self.at(), format!("bad list length {n}")));
        }
        Ok(n as usize)
    }
    fn skip(&mut self, p: &Property) -> Parsed<()> {
        match p {
            Property::Scalar(s, _) => self.scalar(*s).map(|_| ()),
            Property::List(c, i, _) => {
                for _ in 0..self.count(*c)? {
                    self.scalar(*i)?;
                }
                Ok(())
            }
        }
    }
}
