//! Mesh files: which format a file is (its extension, checked against its first bytes so
//! a file of another format under the wrong name is refused by name), reading it, and
//! turning each reader's failure into a [`MeshError::File`] naming the file and place.

use super::surface::{self, Merge, Polygons};
use super::text::{strip_bom, Fail};
use super::{gmsh, medit, obj, ply, positive, stl, tetgen, volume, vtk, vtu, Mesh, MeshError};
use std::fmt;
use std::path::Path;

/// The mesh file formats msc reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeshFormat {
    Obj,
    Ply,
    Stl,
    /// Gmsh `.msh`, versions 2.2 and 4.1, ASCII and binary.
    Gmsh,
    /// Legacy VTK `.vtk` unstructured grid, ASCII and binary.
    Vtk,
    /// VTK XML `.vtu` unstructured grid.
    Vtu,
    /// TetGen `.node` + `.ele`.
    TetGen,
    /// Medit / INRIA `.mesh` (ASCII).
    Medit,
}

impl MeshFormat {
    pub fn name(self) -> &'static str {
        match self {
            Self::Obj => "OBJ",
            Self::Ply => "PLY",
            Self::Stl => "STL",
            Self::Gmsh => "Gmsh MSH",
            Self::Vtk => "legacy VTK",
            Self::Vtu => "VTU",
            Self::TetGen => "TetGen",
            Self::Medit => "Medit",
        }
    }

    /// `a` or `an`, as the name is spoken (an OBJ, an STL, a PLY).
    pub fn article(self) -> &'static str {
        match self {
            Self::Obj | Self::Stl => "an",
            _ => "a",
        }
    }

    /// Tetrahedral (volume) formats, read by `mesh.kind = "tet"`.
    pub fn is_volume(self) -> bool {
        matches!(
            self,
            Self::Gmsh | Self::Vtk | Self::Vtu | Self::TetGen | Self::Medit
        )
    }

    /// The `mesh.kind` that reads this format.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Obj => "obj",
            Self::Ply => "ply",
            Self::Stl => "stl",
            _ => "tet",
        }
    }

    /// The format a file name's extension names.
    pub fn from_extension(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "obj" => Self::Obj,
            "ply" => Self::Ply,
            "stl" => Self::Stl,
            "msh" => Self::Gmsh,
            "vtk" => Self::Vtk,
            "vtu" => Self::Vtu,
            "node" | "ele" => Self::TetGen,
            "mesh" => Self::Medit,
            _ => return None,
        })
    }

    /// The format the first bytes show, for the formats that have a signature.
    pub fn sniff(bytes: &[u8]) -> Option<Self> {
        let b = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(bytes);
        let start = b
            .iter()
            .position(|c| !c.is_ascii_whitespace())
            .unwrap_or(b.len());
        let t = &b[start..];
        let head = |s: &str| t.len() >= s.len() && t[..s.len()].eq_ignore_ascii_case(s.as_bytes());
        if t.starts_with(b"ply") && t.get(3).is_some_and(|c| c.is_ascii_whitespace()) {
            Some(Self::Ply)
        } else if head("$MeshFormat") {
            Some(Self::Gmsh)
        } else if head("# vtk DataFile") {
            Some(Self::Vtk)
        } else if head("<?xml") || head("<VTKFile") {
            Some(Self::Vtu)
        } else if head("MeshVersionFormatted") {
            Some(Self::Medit)
        } else if stl::is_binary(bytes) || (head("solid") && contains(t, b"facet")) {
            Some(Self::Stl)
        } else {
            None
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).take(4096).any(|w| w == needle)
}

impl fmt::Display for MeshFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where in a mesh file an error is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum At {
    /// A 1-based line of a text file.
    Line(usize),
    /// A byte offset in a binary file.
    Byte(u64),
    /// An element (`tetrahedron`, `face`, `vertex`) by 0-based index in file order, with
    /// the line it was read from in a text file.
    Element {
        what: &'static str,
        index: u64,
        line: Option<usize>,
    },
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Line(l) => write!(f, "line {l}"),
            Self::Byte(b) => write!(f, "byte {b}"),
            Self::Element { what, index, line } => {
                write!(f, "{what} {index} (counting from 0)")?;
                if let Some(l) = line {
                    write!(f, " at line {l}")?;
                }
                Ok(())
            }
        }
    }
}

/// How a mesh file becomes particles and springs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FileOptions {
    /// Positions are multiplied by this.
    pub scale: f64,
    /// Springs of polygons with 4 or more vertices (OBJ, PLY).
    pub polygons: Polygons,
}

impl Default for FileOptions {
    fn default() -> Self {
        Self {
            scale: 1.0,
            polygons: Polygons::default(),
        }
    }
}

/// STL vertices closer than this fraction of the bounding-box diagonal (in every
/// coordinate) are one particle: STL repeats each vertex once per triangle.
pub const STL_MERGE_TOLERANCE: f64 = 1e-6;

/// Reads the mesh file at `path` as `format` (for the volume formats, `None` picks one
/// from the extension). The file's first bytes must agree: a PLY file named `.obj` is
/// refused, naming the format it is.
pub fn load_file(
    path: &Path,
    format: Option<MeshFormat>,
    options: &FileOptions,
) -> Result<Mesh, MeshError> {
    positive("scale", options.scale)?;
    if path.as_os_str().is_empty() {
        return Err(MeshError::BadParameter {
            param: "path",
            message: "is empty: give the mesh file's path".into(),
        });
    }
    let named = path.display().to_string();
    // No format was read yet, so the error is the path's, not a format's.
    let format = match format.or_else(|| MeshFormat::from_extension(path)) {
        Some(f) => f,
        None => {
            return Err(MeshError::BadParameter {
                param: "path",
                message: format!(
                    "{named}: cannot tell the format from the extension: use .msh (Gmsh), \
                     .vtk, .vtu, .node/.ele (TetGen) or .mesh (Medit)"
                ),
            })
        }
    };
    let err = |f: Fail| MeshError::File {
        format,
        path: named.clone(),
        at: f.at,
        message: f.message,
    };
    if format == MeshFormat::TetGen {
        return tetgen::load(path, options.scale).map_err(|(file, f)| MeshError::File {
            format,
            path: file.display().to_string(),
            at: f.at,
            message: f.message,
        });
    }
    let bytes =
        crate::files::read(path).map_err(|e| err(super::text::fail(None, e.to_string())))?;
    load_bytes(&named, &bytes, format, options)
}

/// [`load_file`] for a file already in memory (`name` is what errors call it), in any
/// format but TetGen, which is two files.
pub fn load_bytes(
    name: &str,
    bytes: &[u8],
    format: MeshFormat,
    options: &FileOptions,
) -> Result<Mesh, MeshError> {
    positive("scale", options.scale)?;
    parse(bytes, format, options).map_err(|f| MeshError::File {
        format,
        path: name.to_string(),
        at: f.at,
        message: f.message,
    })
}

fn parse(bytes: &[u8], format: MeshFormat, options: &FileOptions) -> Result<Mesh, Fail> {
    if let Some(other) = MeshFormat::sniff(bytes).filter(|&f| f != format) {
        return Err(super::text::fail(
            None,
            format!(
                "the file is not {format}: its first bytes are those of {} {other} file (read \
                 it with mesh.kind = \"{}\"{})",
                other.article(),
                other.kind(),
                if other.is_volume() {
                    format!(" and a .{} extension", extension(other))
                } else {
                    String::new()
                }
            ),
        ));
    }
    let scale = options.scale;
    match format {
        MeshFormat::Obj => surface::build(
            obj::parse(strip_bom(bytes)?)?,
            options.polygons,
            Merge::Exact,
            scale,
        ),
        MeshFormat::Ply => surface::build(ply::soup(bytes)?, options.polygons, Merge::Exact, scale),
        MeshFormat::Stl => {
            let soup = stl::parse(bytes)?;
            let tol = STL_MERGE_TOLERANCE * scale * diagonal(&soup.positions);
            let merge = if tol > 0.0 {
                Merge::Within(tol)
            } else {
                Merge::Exact
            };
            surface::build(soup, Polygons::Triangulate, merge, scale)
        }
        MeshFormat::Gmsh => volume::build(gmsh::parse(strip_bom(bytes)?)?, scale),
        MeshFormat::Vtk => volume::build(vtk::parse(bytes)?, scale),
        MeshFormat::Vtu => volume::build(vtu::parse(bytes)?, scale),
        MeshFormat::Medit => volume::build(medit::parse(strip_bom(bytes)?)?, scale),
        MeshFormat::TetGen => Err(super::text::fail(
            None,
            "TetGen meshes are read from a .node and an .ele file by path",
        )),
    }
}

fn extension(f: MeshFormat) -> &'static str {
    match f {
        MeshFormat::Gmsh => "msh",
        MeshFormat::Vtk => "vtk",
        MeshFormat::Vtu => "vtu",
        MeshFormat::Medit => "mesh",
        MeshFormat::TetGen => "node",
        MeshFormat::Obj => "obj",
        MeshFormat::Ply => "ply",
        MeshFormat::Stl => "stl",
    }
}

fn diagonal(p: &[glam::DVec3]) -> f64 {
    let lo = p.iter().fold(glam::DVec3::INFINITY, |a, &b| a.min(b));
    let hi = p.iter().fold(glam::DVec3::NEG_INFINITY, |a, &b| a.max(b));
    let d = (hi - lo).length();
    if d.is_finite() {
        d
    } else {
        0.0
    }
}
