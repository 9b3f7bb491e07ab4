//! Target frames for fitting: PLY files (ASCII or binary, as `msc run` writes them in
//! `frames/frame_NNNNNN.ply`) and run folders, mapped onto the steps of the simulation
//! being fitted by their time.

use super::loss::Target;
use glam::DVec3;
use std::path::{Path, PathBuf};

/// Problems with a target. Each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a readable PLY file: {message}", path.display())]
    Ply { path: PathBuf, message: String },
    #[error("{}: no frames/frame_NNNNNN.ply files in this run folder", path.display())]
    NoFrames { path: PathBuf },
    #[error(
        "{}: target time {time} s is not a whole number of the fit's time steps dt = {dt} s",
        path.display()
    )]
    Time { path: PathBuf, time: f64, dt: f64 },
    #[error("{}: the frames are not in increasing time ({earlier} s, then {later} s)", path.display())]
    Order {
        path: PathBuf,
        earlier: f64,
        later: f64,
    },
}

/// One target frame as read: positions, and the step and time its `msc` header comment
/// gives (absent for PLY files from elsewhere).
#[derive(Clone, Debug, PartialEq)]
pub struct TargetFrame {
    pub path: PathBuf,
    pub step: Option<u64>,
    pub time: Option<f64>,
    pub positions: Vec<DVec3>,
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

/// Reads a PLY file's vertex positions (`x`, `y`, `z`) and its `msc` step/time comment.
pub fn read_ply(path: &Path) -> Result<TargetFrame, TargetError> {
    let bytes = std::fs::read(path).map_err(|source| TargetError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_ply(&bytes)
        .map_err(|message| TargetError::Ply {
            path: path.to_path_buf(),
            message,
        })
        .map(|(step, time, positions)| TargetFrame {
            path: path.to_path_buf(),
            step,
            time,
            positions,
        })
}

type Parsed = (Option<u64>, Option<f64>, Vec<DVec3>);

fn parse_ply(bytes: &[u8]) -> Result<Parsed, String> {
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
    for el in &elements {
        if el.name != "vertex" {
            // Skip elements before the vertices (there are normally none).
            for _ in 0..el.count {
                for p in &el.properties {
                    reader.skip(p)?;
                }
            }
            continue;
        }
        let col = |c: &str| {
            el.properties
                .iter()
                .position(|p| matches!(p, Property::Scalar(_, n) if n == c))
                .ok_or_else(|| format!("the vertex element has no `{c}` property"))
        };
        let (cx, cy, cz) = (col("x")?, col("y")?, col("z")?);
        // Guard the allocation against a corrupt count.
        if el.count > bytes.len() {
            return Err(format!("vertex count {} exceeds the file size", el.count));
        }
        let mut positions = Vec::with_capacity(el.count);
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
            positions.push(x);
        }
        return Ok((step, time, positions));
    }
    Err("no vertex element".into())
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    format: Format,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or("the file ends early")?;
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
            return Err("the file ends early".into());
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

/// Reads a target: a PLY file, or a run folder's `frames/frame_NNNNNN.ply` in name order.
pub fn read_target(path: &Path) -> Result<Vec<TargetFrame>, TargetError> {
    if !path.is_dir() {
        return Ok(vec![read_ply(path)?]);
    }
    let frames_dir = path.join("frames");
    let io = |source| TargetError::Io {
        path: frames_dir.clone(),
        source,
    };
    let entries = match std::fs::read_dir(&frames_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(TargetError::NoFrames {
                path: path.to_path_buf(),
            })
        }
        Err(e) => return Err(io(e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_frame = name
            .strip_prefix("frame_")
            .and_then(|s| s.strip_suffix(".ply"))
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        if is_frame {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Err(TargetError::NoFrames {
            path: path.to_path_buf(),
        });
    }
    // Same-width zero-padded numbers sort as numbers; sort by length first for wider ones.
    names.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    names
        .iter()
        .map(|n| read_ply(&frames_dir.join(n)))
        .collect()
}

/// Maps target frames onto the steps of a simulation with time step `dt`: each frame's time
/// (from its header; `default_time` for a frame without one) must be a whole number of
/// steps (to 1e-6 of a step). Frames at t = 0 are dropped: no parameter moves the initial
/// state, so they add a constant to the loss.
pub fn to_targets(
    frames: &[TargetFrame],
    dt: f64,
    default_time: f64,
) -> Result<Vec<Target>, TargetError> {
    let mut out: Vec<Target> = Vec::new();
    let mut last_time = f64::NEG_INFINITY;
    for f in frames {
        let time = f.time.unwrap_or(default_time);
        let steps = time / dt;
        let step = steps.round();
        if !(step >= 0.0 && (steps - step).abs() <= 1e-6 * step.max(1.0)) {
            return Err(TargetError::Time {
                path: f.path.clone(),
                time,
                dt,
            });
        }
        if time <= last_time {
            return Err(TargetError::Order {
                path: f.path.clone(),
                earlier: last_time,
                later: time,
            });
        }
        last_time = time;
        if step == 0.0 {
            continue;
        }
        out.push(Target {
            step: step as u64,
            positions: f.positions.clone(),
        });
    }
    Ok(out)
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
        let (step, time, p) = parse_ply(ascii).unwrap();
        assert_eq!((step, time), (Some(20), Some(0.1)));
        assert_eq!(
            p,
            vec![DVec3::new(1.0, 2.0, 3.0), DVec3::new(-1.0, 0.25, 4.0)]
        );

        let mut bin = b"ply\nformat binary_big_endian 1.0\nelement vertex 1\n\
            property double z\nproperty uchar tag\nproperty double x\nproperty double y\nend_header\n"
            .to_vec();
        bin.extend(3.5f64.to_be_bytes());
        bin.push(7);
        bin.extend(1.5f64.to_be_bytes());
        bin.extend((-2.0f64).to_be_bytes());
        let (step, time, p) = parse_ply(&bin).unwrap();
        assert_eq!((step, time), (None, None));
        assert_eq!(p, vec![DVec3::new(1.5, -2.0, 3.5)]);

        let short = &bin[..bin.len() - 3];
        assert!(parse_ply(short).unwrap_err().contains("ends early"));
        assert!(parse_ply(b"ply\nformat ascii 1.0\nend_header\n")
            .unwrap_err()
            .contains("no vertex"));
    }

    #[test]
    fn times_map_to_whole_steps_or_fail_naming_both() {
        let frame = |t: f64| TargetFrame {
            path: PathBuf::from("f.ply"),
            step: None,
            time: Some(t),
            positions: vec![DVec3::ZERO],
        };
        let frames = [frame(0.0), frame(0.18), frame(0.36)];
        let t = to_targets(&frames, 0.009, 0.0).unwrap();
        assert_eq!(t.iter().map(|t| t.step).collect::<Vec<_>>(), vec![20, 40]);
        let e = to_targets(&frames, 0.05, 0.0).unwrap_err().to_string();
        assert!(e.contains("0.18") && e.contains("0.05"), "{e}");
        let e = to_targets(&[frame(0.36), frame(0.18)], 0.009, 0.0).unwrap_err();
        assert!(matches!(e, TargetError::Order { .. }));
    }
}
