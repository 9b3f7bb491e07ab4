//! Reading PLY frames back: the binary files `msc run` writes (see [`super::ply`]) and
//! PLY from elsewhere (ASCII, binary little- or big-endian), for `msc fit` targets and
//! `msc render`. One reader, so every consumer accepts the same files.

use glam::DVec3;
use std::path::{Path, PathBuf};

/// A PLY file that could not be read. Each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlyReadError {
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a readable PLY file: {message}", path.display())]
    Malformed { path: PathBuf, message: String },
}

/// The vertex data and triangles of one PLY file, with the step and time of an `msc`
/// header comment (`comment msc VERSION step S time T`) when present.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlyFrame {
    pub step: Option<u64>,
    pub time: Option<f64>,
    pub positions: Vec<DVec3>,
    /// `vx vy vz`, when the file has them.
    pub velocities: Option<Vec<DVec3>>,
    /// `charge`, when the file has it.
    pub charges: Option<Vec<f64>>,
    /// Faces (`vertex_indices` or `vertex_index` lists), polygons split into fans.
    pub faces: Vec<[u32; 3]>,
}

/// Reads and parses one PLY file.
pub fn read_ply(path: &Path) -> Result<PlyFrame, PlyReadError> {
    let bytes = std::fs::read(path).map_err(|source| PlyReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_ply(&bytes).map_err(|message| PlyReadError::Malformed {
        path: path.to_path_buf(),
        message,
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
    List(Scalar, Scalar),
}

#[derive(Clone, Debug)]
struct Element {
    name: String,
    count: usize,
    properties: Vec<Property>,
}

/// Parses PLY bytes. Positions must be finite; face indices must name vertices.
pub fn parse_ply(bytes: &[u8]) -> Result<PlyFrame, String> {
    let end = b"end_header";
    let pos = bytes
        .windows(end.len())
        .position(|w| w == end)
        .ok_or("no end_header line")?;
    let mut body = pos + end.len();
    // The header line ends with \n (or \r\n).
    while body < bytes.len() && (bytes[body] == b'\r' || bytes[body] == b'\n') {
        body += 1;
        if bytes[body - 1] == b'\n' {
            break;
        }
    }
    let header = std::str::from_utf8(&bytes[..pos]).map_err(|_| "the header is not UTF-8")?;
    let mut lines = header.lines();
    if lines.next().map(str::trim) != Some("ply") {
        return Err("the file does not start with `ply`".into());
    }
    let mut format = None;
    let (mut step, mut time) = (None, None);
    let mut elements: Vec<Element> = Vec::new();
    for line in lines {
        let t: Vec<&str> = line.split_whitespace().collect();
        match t.first().copied() {
            Some("format") => {
                format = Some(match t.get(1).copied() {
                    Some("ascii") => Format::Ascii,
                    Some("binary_little_endian") => Format::BinaryLe,
                    Some("binary_big_endian") => Format::BinaryBe,
                    other => return Err(format!("unknown format {other:?}")),
                })
            }
            Some("comment") => {
                for w in t.windows(2) {
                    match w[0] {
                        "step" => step = w[1].parse().ok().or(step),
                        "time" => time = w[1].parse().ok().or(time),
                        _ => {}
                    }
                }
            }
            Some("element") => {
                let (name, count) = match (t.get(1), t.get(2).and_then(|c| c.parse().ok())) {
                    (Some(n), Some(c)) => (n.to_string(), c),
                    _ => return Err(format!("bad element line `{line}`")),
                };
                elements.push(Element {
                    name,
                    count,
                    properties: Vec::new(),
                });
            }
            Some("property") => {
                let el = elements
                    .last_mut()
                    .ok_or_else(|| format!("property before any element: `{line}`"))?;
                let bad = || format!("bad property line `{line}`");
                let p = if t.get(1) == Some(&"list") {
                    match (
                        t.get(2).and_then(|s| Scalar::parse(s)),
                        t.get(3).and_then(|s| Scalar::parse(s)),
                    ) {
                        (Some(c), Some(i)) => Property::List(c, i),
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
    let format = format.ok_or("no format line")?;
    let mut reader = Reader {
        bytes,
        pos: body,
        format,
    };
    let mut frame = PlyFrame {
        step,
        time,
        ..PlyFrame::default()
    };
    let mut seen_vertex = false;
    for el in &elements {
        // Rows are at least one byte each: a count beyond the file's size is corrupt, and
        // must not reserve memory.
        if el.count > bytes.len() {
            return Err(format!(
                "{} {} elements cannot fit in {} bytes",
                el.count,
                el.name,
                bytes.len()
            ));
        }
        match el.name.as_str() {
            "vertex" if !seen_vertex => {
                seen_vertex = true;
                read_vertices(&mut reader, el, &mut frame)?;
            }
            "face" => read_faces(&mut reader, el, &mut frame)?,
            _ => {
                for _ in 0..el.count {
                    for p in &el.properties {
                        reader.skip(p)?;
                    }
                }
            }
        }
    }
    if !seen_vertex {
        return Err("no vertex element".into());
    }
    let n = frame.positions.len();
    if let Some(k) = frame.faces.iter().flatten().find(|&&k| k as usize >= n) {
        return Err(format!(
            "face vertex index {k} out of range for {n} vertices"
        ));
    }
    Ok(frame)
}

fn read_vertices(reader: &mut Reader, el: &Element, frame: &mut PlyFrame) -> Result<(), String> {
    let col = |c: &str| {
        el.properties
            .iter()
            .position(|p| matches!(p, Property::Scalar(_, n) if n == c))
    };
    let need = |c: &str| col(c).ok_or_else(|| format!("the vertex element has no `{c}` property"));
    let (cx, cy, cz) = (need("x")?, need("y")?, need("z")?);
    let vel = match (col("vx"), col("vy"), col("vz")) {
        (Some(a), Some(b), Some(c)) => Some((a, b, c)),
        _ => None,
    };
    let charge = col("charge");
    frame.positions.reserve(el.count);
    let mut row = vec![0.0; el.properties.len()];
    for v in 0..el.count {
        for (k, p) in el.properties.iter().enumerate() {
            match p {
                Property::Scalar(s, _) => row[k] = reader.scalar(*s)?,
                Property::List(..) => reader.skip(p)?,
            }
        }
        let x = DVec3::new(row[cx], row[cy], row[cz]);
        if !x.is_finite() {
            return Err(format!("vertex {v} has a non-finite position"));
        }
        frame.positions.push(x);
        if let Some((a, b, c)) = vel {
            let vel = DVec3::new(row[a], row[b], row[c]);
            frame.velocities.get_or_insert_with(Vec::new).push(vel);
        }
        if let Some(q) = charge {
            frame.charges.get_or_insert_with(Vec::new).push(row[q]);
        }
    }
    Ok(())
}

fn read_faces(reader: &mut Reader, el: &Element, frame: &mut PlyFrame) -> Result<(), String> {
    let mut list: Vec<u32> = Vec::new();
    for r in 0..el.count {
        for p in &el.properties {
            let Property::List(c, i) = p else {
                reader.skip(p)?;
                continue;
            };
            let n = reader.scalar(*c)?;
            if !(n >= 0.0 && n <= reader.bytes.len() as f64) {
                return Err(format!("face {r}: bad list length {n}"));
            }
            list.clear();
            for _ in 0..n as usize {
                let v = reader.scalar(*i)?;
                if !(v >= 0.0 && v <= f64::from(u32::MAX)) {
                    return Err(format!("face {r}: vertex index {v}"));
                }
                list.push(v as u32);
            }
            for k in 2..list.len() {
                frame.faces.push([list[0], list[k - 1], list[k]]);
            }
        }
    }
    Ok(())
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    format: Format,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or("truncated: the file ends early")?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn token(&mut self) -> Result<&str, String> {
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        let start = self.pos;
        while self.pos < self.bytes.len() && !self.bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        if start == self.pos {
            return Err("truncated: the file ends early".into());
        }
        std::str::from_utf8(&self.bytes[start..self.pos]).map_err(|_| "non-UTF-8 data".into())
    }
    fn scalar(&mut self, s: Scalar) -> Result<f64, String> {
        if self.format == Format::Ascii {
            let t = self.token()?;
            return t.parse::<f64>().map_err(|_| format!("bad number `{t}`"));
        }
        let le = self.format == Format::BinaryLe;
        let b = self.take(s.size())?;
        macro_rules! num {
            ($t:ty) => {{
                let a = b.try_into().map_err(|_| "short read")?;
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
    fn skip(&mut self, p: &Property) -> Result<(), String> {
        match p {
            Property::Scalar(s, _) => self.scalar(*s).map(|_| ()),
            Property::List(c, i) => {
                let count = self.scalar(*c)?;
                if !(count >= 0.0 && count <= self.bytes.len() as f64) {
                    return Err(format!("bad list length {count}"));
                }
                for _ in 0..count as usize {
                    self.scalar(*i)?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_and_binary_ply_read_the_same_positions() {
        let ascii = b"ply\nformat ascii 1.0\ncomment msc 0.1.0 step 20 time 1e-1\n\
            element vertex 2\nproperty float x\nproperty float y\nproperty float z\n\
            property float charge\nelement face 1\nproperty list uchar int vertex_indices\n\
            end_header\n1 2 3 0.5\n-1 0.25 4 0\n3 0 1 1\n";
        let f = parse_ply(ascii).unwrap();
        assert_eq!((f.step, f.time), (Some(20), Some(0.1)));
        assert_eq!(
            f.positions,
            vec![DVec3::new(1.0, 2.0, 3.0), DVec3::new(-1.0, 0.25, 4.0)]
        );
        assert_eq!(f.charges, Some(vec![0.5, 0.0]));
        assert_eq!(f.velocities, None);
        assert_eq!(f.faces, vec![[0, 1, 1]]);
        // A face naming a vertex that does not exist is refused.
        let bad_face = String::from_utf8(ascii.to_vec())
            .unwrap()
            .replace("3 0 1 1", "3 0 1 5");
        assert!(parse_ply(bad_face.as_bytes())
            .unwrap_err()
            .contains("out of range"));

        let mut bin = b"ply\nformat binary_big_endian 1.0\nelement vertex 1\n\
            property double z\nproperty uchar tag\nproperty double x\nproperty double y\nend_header\n"
            .to_vec();
        bin.extend(3.5f64.to_be_bytes());
        bin.push(7);
        bin.extend(1.5f64.to_be_bytes());
        bin.extend((-2.0f64).to_be_bytes());
        let f = parse_ply(&bin).unwrap();
        assert_eq!((f.step, f.time), (None, None));
        assert_eq!(f.positions, vec![DVec3::new(1.5, -2.0, 3.5)]);

        let short = &bin[..bin.len() - 3];
        assert!(parse_ply(short).unwrap_err().contains("ends early"));
        assert!(parse_ply(b"ply\nformat ascii 1.0\nend_header\n")
            .unwrap_err()
            .contains("no vertex"));
    }
}
