//! Reading a run folder's frames back: `frames/frame_NNNNNN.ply` (binary little-endian
//! PLY, as [`crate::output::ply`] writes them) and the springs to draw between them.

use super::camera::Bounds;
use super::RenderError;
use crate::output::ply::is_frame_name;
use crate::output::run_dir::{FRAMES_DIR, SCENE_FILE};
use glam::Vec3;
use std::path::{Path, PathBuf};

/// One frame read from a PLY file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Frame {
    /// The number in the file name.
    pub index: u64,
    /// Step and time from msc's header comment, when present.
    pub step: Option<u64>,
    pub time: Option<f64>,
    /// Positions as (x, y, z, 1): the layout the renderer draws from.
    pub positions: Vec<[f32; 4]>,
    /// Velocities as (vx, vy, vz, 0), when the file has them.
    pub velocities: Option<Vec<[f32; 4]>>,
    pub charges: Option<Vec<f32>>,
    /// Triangles (polygons are split into fans).
    pub faces: Vec<[u32; 3]>,
}

impl Frame {
    pub fn len(&self) -> usize {
        self.positions.len()
    }
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }
    pub fn bounds(&self) -> Option<Bounds> {
        Bounds::of_points(self.positions.iter().map(|p| Vec3::new(p[0], p[1], p[2])))
    }
    /// The largest finite speed (0 without velocities).
    pub fn max_speed(&self) -> f32 {
        self.velocities.as_ref().map_or(0.0, |v| {
            v.iter()
                .map(|v| Vec3::new(v[0], v[1], v[2]).length())
                .filter(|s| s.is_finite())
                .fold(0.0, f32::max)
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    fn parse(name: &str) -> Option<Scalar> {
        Some(match name {
            "char" | "int8" => Scalar::I8,
            "uchar" | "uint8" => Scalar::U8,
            "short" | "int16" => Scalar::I16,
            "ushort" | "uint16" => Scalar::U16,
            "int" | "int32" => Scalar::I32,
            "uint" | "uint32" => Scalar::U32,
            "float" | "float32" => Scalar::F32,
            "double" | "float64" => Scalar::F64,
            _ => return None,
        })
    }
    fn size(self) -> usize {
        match self {
            Scalar::I8 | Scalar::U8 => 1,
            Scalar::I16 | Scalar::U16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::F64 => 8,
        }
    }
    fn read(self, b: &[u8]) -> f64 {
        match self {
            Scalar::I8 => f64::from(b[0] as i8),
            Scalar::U8 => f64::from(b[0]),
            Scalar::I16 => f64::from(i16::from_le_bytes([b[0], b[1]])),
            Scalar::U16 => f64::from(u16::from_le_bytes([b[0], b[1]])),
            Scalar::I32 => f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Scalar::U32 => f64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Scalar::F32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Scalar::F64 => f64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
        }
    }
}

#[derive(Clone, Debug)]
enum Property {
    Scalar(String, Scalar),
    List(String, Scalar, Scalar),
}

impl Property {
    fn name(&self) -> &str {
        match self {
            Property::Scalar(n, _) | Property::List(n, _, _) => n,
        }
    }
}

#[derive(Clone, Debug)]
struct Element {
    name: String,
    count: usize,
    properties: Vec<Property>,
}

/// A byte cursor whose reads fail with "truncated" instead of panicking.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn read(&mut self, ty: Scalar) -> Option<f64> {
        let end = self.pos.checked_add(ty.size())?;
        let v = ty.read(self.data.get(self.pos..end)?);
        self.pos = end;
        Some(v)
    }
}

/// Parses a binary little-endian PLY with a `vertex` element (`x y z`, optional
/// `vx vy vz` and `charge`) and an optional `face` element (`vertex_indices` lists).
pub fn parse_ply(path: &Path, data: &[u8], index: u64) -> Result<Frame, RenderError> {
    let bad = |message: String| RenderError::Malformed {
        path: path.to_path_buf(),
        message,
    };
    const END: &[u8] = b"end_header\n";
    let header_end = data
        .windows(END.len())
        .position(|w| w == END)
        .map(|p| p + END.len())
        .ok_or_else(|| bad("not a PLY file: no end_header line".into()))?;
    let header = std::str::from_utf8(&data[..header_end])
        .map_err(|_| bad("the PLY header is not text".into()))?;
    let mut lines = header.lines();
    if lines.next().map(str::trim) != Some("ply") {
        return Err(bad("not a PLY file: it does not start with \"ply\"".into()));
    }
    let mut elements: Vec<Element> = Vec::new();
    let (mut step, mut time) = (None, None);
    let mut format_ok = false;
    for (no, line) in lines.enumerate() {
        let line_no = no + 2;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["format", "binary_little_endian", _] => format_ok = true,
            ["format", other, ..] => {
                return Err(bad(format!(
                    "PLY format {other} is not supported (only binary_little_endian, as msc writes)"
                )))
            }
            ["comment", rest @ ..] => {
                // msc's own: "comment msc VERSION step S time T".
                for pair in rest.windows(2) {
                    match pair[0] {
                        "step" => step = pair[1].parse().ok(),
                        "time" => time = pair[1].parse().ok(),
                        _ => {}
                    }
                }
            }
            ["obj_info", ..] | ["end_header"] | [] => {}
            ["element", name, count] => {
                let count = count
                    .parse()
                    .map_err(|_| bad(format!("line {line_no}: bad element count {count:?}")))?;
                elements.push(Element {
                    name: name.to_string(),
                    count,
                    properties: Vec::new(),
                });
            }
            ["property", "list", ct, it, name] => {
                let el = elements
                    .last_mut()
                    .ok_or_else(|| bad(format!("line {line_no}: property before any element")))?;
                let (Some(c), Some(i)) = (Scalar::parse(ct), Scalar::parse(it)) else {
                    return Err(bad(format!("line {line_no}: unknown list types {ct} {it}")));
                };
                el.properties.push(Property::List(name.to_string(), c, i));
            }
            ["property", ty, name] => {
                let el = elements
                    .last_mut()
                    .ok_or_else(|| bad(format!("line {line_no}: property before any element")))?;
                let t = Scalar::parse(ty)
                    .ok_or_else(|| bad(format!("line {line_no}: unknown property type {ty}")))?;
                el.properties.push(Property::Scalar(name.to_string(), t));
            }
            _ => return Err(bad(format!("line {line_no}: cannot parse {line:?}"))),
        }
    }
    if !format_ok {
        return Err(bad("no format line in the PLY header".into()));
    }
    let vertex = elements
        .iter()
        .position(|e| e.name == "vertex")
        .ok_or_else(|| bad("no vertex element".into()))?;
    let column = |name: &str| {
        elements[vertex]
            .properties
            .iter()
            .position(|p| p.name() == name && matches!(p, Property::Scalar(..)))
    };
    let [x, y, z] = ["x", "y", "z"].map(column);
    let (Some(x), Some(y), Some(z)) = (x, y, z) else {
        return Err(bad("the vertex element lacks x, y or z".into()));
    };
    let vel = match ["vx", "vy", "vz"].map(column) {
        [Some(a), Some(b), Some(c)] => Some([a, b, c]),
        _ => None,
    };
    let charge = column("charge");

    let mut cur = Cursor {
        data,
        pos: header_end,
    };
    let mut frame = Frame {
        index,
        step,
        time,
        ..Frame::default()
    };
    let truncated = |e: &Element, row: usize| {
        bad(format!(
            "truncated: {} row {row} of {} ends past the end of the file",
            e.name, e.count
        ))
    };
    for (ei, e) in elements.iter().enumerate() {
        // Rows are at least one byte each: a count beyond the file's size is corrupt, and
        // must not be allowed to reserve memory.
        if e.count > data.len() {
            return Err(bad(format!(
                "{} {} elements cannot fit in {} bytes",
                e.count,
                e.name,
                data.len()
            )));
        }
        let is_vertex = ei == vertex;
        let is_face = e.name == "face";
        if is_vertex {
            frame.positions.reserve(e.count);
        }
        let mut row = vec![0.0f64; e.properties.len()];
        let mut list: Vec<u32> = Vec::new();
        for r in 0..e.count {
            for (pi, p) in e.properties.iter().enumerate() {
                match p {
                    Property::Scalar(_, t) => {
                        row[pi] = cur.read(*t).ok_or_else(|| truncated(e, r))?;
                    }
                    Property::List(name, ct, it) => {
                        let n = cur.read(*ct).ok_or_else(|| truncated(e, r))?;
                        if !(n >= 0.0 && n as usize <= data.len()) {
                            return Err(bad(format!("{} row {r}: list length {n}", e.name)));
                        }
                        let wanted =
                            is_face && (name == "vertex_indices" || name == "vertex_index");
                        list.clear();
                        for _ in 0..n as usize {
                            let v = cur.read(*it).ok_or_else(|| truncated(e, r))?;
                            if wanted {
                                if !(v >= 0.0 && v <= f64::from(u32::MAX)) {
                                    return Err(bad(format!("face {r}: vertex index {v}")));
                                }
                                list.push(v as u32);
                            }
                        }
                        for k in 2..list.len() {
                            frame.faces.push([list[0], list[k - 1], list[k]]);
                        }
                    }
                }
            }
            if is_vertex {
                let f = |k: usize| row[k] as f32;
                frame.positions.push([f(x), f(y), f(z), 1.0]);
                if let Some([a, b, c]) = vel {
                    frame
                        .velocities
                        .get_or_insert_with(Vec::new)
                        .push([f(a), f(b), f(c), 0.0]);
                }
                if let Some(q) = charge {
                    frame.charges.get_or_insert_with(Vec::new).push(f(q));
                }
            }
        }
    }
    let n = frame.positions.len();
    if let Some(bad_face) = frame.faces.iter().flatten().find(|&&k| k as usize >= n) {
        return Err(bad(format!(
            "face vertex index {bad_face} out of range for {n} vertices"
        )));
    }
    Ok(frame)
}

/// Reads one PLY file.
pub fn read_ply(path: &Path, index: u64) -> Result<Frame, RenderError> {
    let data = std::fs::read(path).map_err(|source| RenderError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_ply(path, &data, index)
}

/// The frames of a run folder, in order.
#[derive(Clone, Debug)]
pub struct RunFrames {
    /// The run folder.
    pub root: PathBuf,
    /// (frame number, path), sorted by number.
    pub frames: Vec<(u64, PathBuf)>,
}

impl RunFrames {
    /// Lists `RUN_DIR/frames/frame_NNNNNN.ply` (or the frames in `RUN_DIR` itself, when
    /// it is a frames folder).
    pub fn open(run_dir: &Path) -> Result<Self, RenderError> {
        if !run_dir.is_dir() {
            return Err(RenderError::NotFound {
                path: run_dir.to_path_buf(),
            });
        }
        let sub = run_dir.join(FRAMES_DIR);
        let frames = list_frames(&sub)?;
        if !frames.is_empty() {
            return Ok(RunFrames {
                root: run_dir.to_path_buf(),
                frames,
            });
        }
        let here = list_frames(run_dir)?;
        if here.is_empty() {
            return Err(RenderError::NoFrames { dir: sub });
        }
        // A frames folder given directly: its parent is the run folder.
        let root = run_dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        Ok(RunFrames { root, frames: here })
    }
    pub fn len(&self) -> usize {
        self.frames.len()
    }
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
    /// Reads the `k`-th frame of the list.
    pub fn read(&self, k: usize) -> Result<Frame, RenderError> {
        let (index, path) = &self.frames[k];
        read_ply(path, *index)
    }
}

fn list_frames(dir: &Path) -> Result<Vec<(u64, PathBuf)>, RenderError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(RenderError::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut frames = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| RenderError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|n| is_frame_name(n)) else {
            continue;
        };
        if let Ok(index) = name["frame_".len()..name.len() - ".ply".len()].parse::<u64>() {
            frames.push((index, entry.path()));
        }
    }
    frames.sort();
    Ok(frames)
}

/// Where the springs drawn for a run folder came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpringSource {
    /// Rebuilt from the run's `scene.toml`.
    Scene,
    /// The edges of the frames' triangles (`scene.toml` missing or not loadable: the
    /// reason). Grid shear and bending springs and lattice springs are not faces' edges.
    FaceEdges(String),
    /// None: no scene and no faces.
    None(String),
}

/// The springs to draw for a run folder of `n` particles: from its `scene.toml` when that
/// loads and has `n` particles, else the edges of `faces`.
pub fn run_springs(root: &Path, n: usize, faces: &[[u32; 3]]) -> (Vec<[u32; 2]>, SpringSource) {
    let scene = root.join(SCENE_FILE);
    let why = match scene.to_str() {
        None => format!("{} is not a UTF-8 path", scene.display()),
        Some(_) if !scene.is_file() => format!("no {}", scene.display()),
        Some(s) => match crate::scene::load(s, &[]) {
            Ok(loaded) if loaded.system.len() == n => {
                let springs = loaded.system.springs().iter().map(|s| [s.i, s.j]).collect();
                return (springs, SpringSource::Scene);
            }
            Ok(loaded) => format!(
                "{} has {} particles but the frames have {n}",
                scene.display(),
                loaded.system.len()
            ),
            Err(e) => format!("{} does not load: {e}", scene.display()),
        },
    };
    if faces.is_empty() {
        return (Vec::new(), SpringSource::None(why));
    }
    let mut edges: Vec<[u32; 2]> = faces
        .iter()
        .flat_map(|f| [[f[0], f[1]], [f[1], f[2]], [f[2], f[0]]])
        .map(|[a, b]| [a.min(b), a.max(b)])
        .filter(|[a, b]| a != b)
        .collect();
    edges.sort_unstable();
    edges.dedup();
    (edges, SpringSource::FaceEdges(why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::State;
    use glam::DVec3;

    #[test]
    fn reads_back_what_the_writer_wrote() {
        let dir = std::env::temp_dir().join(format!("msc-plyread-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("frame_000003.ply");
        let state = State {
            x: vec![DVec3::new(1.0, 2.0, 3.0), DVec3::ZERO, DVec3::X, DVec3::Y],
            v: vec![DVec3::new(-1.0, 0.5, 0.25), DVec3::ZERO, DVec3::Y, DVec3::Z],
            t: 0.5,
            step: 10,
        };
        crate::output::ply::write_frame(
            &path,
            &state,
            &[1e-6, 0.0, -2e-6, 0.0],
            &[[0, 1, 2], [1, 2, 3]],
        )
        .unwrap();
        let f = read_ply(&path, 3).unwrap();
        assert_eq!(f.index, 3);
        assert_eq!(f.step, Some(10));
        assert_eq!(f.time, Some(0.5));
        assert_eq!(f.positions[0], [1.0, 2.0, 3.0, 1.0]);
        assert_eq!(f.velocities.as_ref().unwrap()[0], [-1.0, 0.5, 0.25, 0.0]);
        assert_eq!(f.charges.as_ref().unwrap(), &[1e-6, 0.0, -2e-6, 0.0]);
        assert_eq!(f.faces, vec![[0, 1, 2], [1, 2, 3]]);
        // The fastest is particle 0, |(-1, 0.5, 0.25)|.
        assert!((f.max_speed() - 1.3125f32.sqrt()).abs() < 1e-6);

        // Truncation anywhere is an error that names the file, never a panic.
        let bytes = std::fs::read(&path).unwrap();
        for cut in [bytes.len() - 1, bytes.len() - 13, 200, 20] {
            let e = parse_ply(&path, &bytes[..cut], 3).unwrap_err();
            assert!(e.to_string().contains("frame_000003.ply"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn other_layouts_and_bad_headers() {
        let p = Path::new("x.ply");
        // Doubles, extra properties, a quad split into two triangles.
        let mut data = b"ply\nformat binary_little_endian 1.0\nelement vertex 4\n\
property double x\nproperty double y\nproperty double z\nproperty uchar red\n\
element face 1\nproperty list uchar uint vertex_indices\nend_header\n"
            .to_vec();
        for k in 0..4 {
            for c in [k as f64, 0.0, 1.0] {
                data.extend_from_slice(&c.to_le_bytes());
            }
            data.push(200);
        }
        data.push(4);
        for k in [0u32, 1, 2, 3] {
            data.extend_from_slice(&k.to_le_bytes());
        }
        let f = parse_ply(p, &data, 0).unwrap();
        assert_eq!(f.positions[3], [3.0, 0.0, 1.0, 1.0]);
        assert!(f.velocities.is_none() && f.charges.is_none());
        assert_eq!(f.faces, vec![[0, 1, 2], [0, 2, 3]]);

        let ascii = b"ply\nformat ascii 1.0\nelement vertex 0\nend_header\n";
        let e = parse_ply(p, ascii, 0).unwrap_err().to_string();
        assert!(e.contains("ascii"), "{e}");
        let huge = b"ply\nformat binary_little_endian 1.0\nelement vertex 99999999999\n\
property float x\nproperty float y\nproperty float z\nend_header\n";
        assert!(parse_ply(p, huge, 0).is_err());
        let nox = b"ply\nformat binary_little_endian 1.0\nelement vertex 0\n\
property float y\nend_header\n";
        let e = parse_ply(p, nox, 0).unwrap_err().to_string();
        assert!(e.contains("x, y or z"), "{e}");
        assert!(parse_ply(p, b"hello", 0).is_err());
    }

    #[test]
    fn face_edges_stand_in_for_a_missing_scene() {
        let dir = std::env::temp_dir().join(format!("msc-springs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (edges, src) = run_springs(&dir, 4, &[[0, 1, 2], [2, 1, 3]]);
        assert_eq!(edges, vec![[0, 1], [0, 2], [1, 2], [1, 3], [2, 3]]);
        assert!(matches!(src, SpringSource::FaceEdges(ref w) if w.contains("scene.toml")));
        let (edges, src) = run_springs(&dir, 4, &[]);
        assert!(edges.is_empty() && matches!(src, SpringSource::None(_)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
