//! The mesh of a scene (`[mesh]`): the generated kinds and mesh files (OBJ, PLY, STL and
//! the tetrahedral formats), placed at `mesh.center`, with each kind's keys checked.

use super::ctx::{finite3, Ctx};
use super::schema::{MeshKind, MeshSpec};
use super::SceneError;
use crate::display::num;
use crate::model::{mesh, Mesh};
use glam::DVec3;
use std::path::Path;

pub(super) fn build_mesh(m: &MeshSpec, ctx: &Ctx, base_dir: &Path) -> Result<Mesh, SceneError> {
    let kind = m.kind;
    let used = kind.keys();
    let given = [
        ("major_radius", m.major_radius.is_some()),
        ("minor_radius", m.minor_radius.is_some()),
        ("rings", m.rings.is_some()),
        ("sides", m.sides.is_some()),
        ("radius", m.radius.is_some()),
        ("subdivisions", m.subdivisions.is_some()),
        ("size", m.size.is_some()),
        ("resolution", m.resolution.is_some()),
        ("shear", m.shear.is_some()),
        ("bending", m.bending.is_some()),
        ("path", m.path.is_some()),
        ("scale", m.scale.is_some()),
        ("polygons", m.polygons.is_some()),
    ];
    for (k, set) in given {
        if set && !used.contains(&k) {
            return Err(ctx.invalid(
                format!("mesh.{k}"),
                format!(
                    "not used by kind = \"{}\" (it reads {})",
                    kind.name(),
                    used.join(", ")
                ),
            ));
        }
    }
    fn req<T: Clone>(ctx: &Ctx, kind: MeshKind, key: &str, v: &Option<T>) -> Result<T, SceneError> {
        v.clone().ok_or_else(|| {
            ctx.invalid(
                format!("mesh.{key}"),
                format!("required by kind = \"{}\"", kind.name()),
            )
        })
    }
    fn fixed<T: Copy, const N: usize>(
        ctx: &Ctx,
        key: &str,
        v: Vec<T>,
        what: &str,
    ) -> Result<[T; N], SceneError> {
        let len = v.len();
        <[T; N]>::try_from(v).map_err(|_| {
            ctx.invalid(
                format!("mesh.{key}"),
                format!("expected {N} values ({what}), got {len}"),
            )
        })
    }
    let center = finite3(ctx, "mesh.center", m.center.unwrap_or([0.0; 3]))?;
    super::initial::within_f32(ctx, "mesh.center", center.to_array())?;
    let mut mesh = match kind {
        MeshKind::Torus => mesh::torus(
            req(ctx, kind, "major_radius", &m.major_radius)?,
            req(ctx, kind, "minor_radius", &m.minor_radius)?,
            req(ctx, kind, "rings", &m.rings)?,
            req(ctx, kind, "sides", &m.sides)?,
        ),
        MeshKind::Icosphere => mesh::icosphere(
            req(ctx, kind, "radius", &m.radius)?,
            req(ctx, kind, "subdivisions", &m.subdivisions)?,
        ),
        MeshKind::Grid => mesh::grid(
            fixed(ctx, "size", req(ctx, kind, "size", &m.size)?, "[w, h]")?,
            fixed(
                ctx,
                "resolution",
                req(ctx, kind, "resolution", &m.resolution)?,
                "[nx, ny]",
            )?,
            m.shear.unwrap_or(true),
            m.bending.unwrap_or(false),
        ),
        MeshKind::Lattice => mesh::lattice(
            fixed(ctx, "size", req(ctx, kind, "size", &m.size)?, "[x, y, z]")?,
            fixed(
                ctx,
                "resolution",
                req(ctx, kind, "resolution", &m.resolution)?,
                "[nx, ny, nz]",
            )?,
        ),
        MeshKind::Obj | MeshKind::Ply | MeshKind::Stl | MeshKind::Tet => {
            let path = req(ctx, kind, "path", &m.path)?;
            if path.trim().is_empty() {
                // Joined to the scene's folder, "" would name the folder itself.
                return Err(ctx.invalid("mesh.path", "is empty: give the mesh file's path"));
            }
            let options = mesh::FileOptions {
                scale: m.scale.unwrap_or(1.0),
                polygons: m.polygons.unwrap_or_default(),
            };
            let format = kind.file_format().expect("a file kind");
            match embedded(ctx, &path)? {
                Some((name, bytes)) => {
                    let format = format
                        .or_else(|| mesh::MeshFormat::from_extension(Path::new(name)))
                        .expect("a built-in asset has a known extension");
                    mesh::load_bytes(name, bytes, format, &options)
                }
                None => {
                    let full = base_dir.join(&path);
                    if kind == MeshKind::Tet {
                        check_volume_extension(ctx, &full)?;
                    }
                    mesh::load_file(&full, format, &options)
                }
            }
        }
    }
    .map_err(|e| ctx.mesh(e))?;
    let from_file = kind.file_format().is_some();
    let shift = if from_file {
        let lo = mesh
            .positions
            .iter()
            .fold(DVec3::INFINITY, |a, &p| a.min(p));
        let hi = mesh
            .positions
            .iter()
            .fold(DVec3::NEG_INFINITY, |a, &p| a.max(p));
        center - 0.5 * (lo + hi)
    } else {
        center
    };
    for p in &mut mesh.positions {
        *p += shift;
    }
    check_extent(&mesh, ctx, if from_file { "mesh.scale" } else { "mesh" })?;
    Ok(mesh)
}

/// The embedded mesh a `builtin:NAME` path names.
pub(super) fn embedded(
    ctx: &Ctx,
    path: &str,
) -> Result<Option<(&'static str, &'static [u8])>, SceneError> {
    if !path.starts_with("builtin:") {
        return Ok(None);
    }
    match super::builtin::ASSETS
        .iter()
        .find(|(name, _)| *name == path)
    {
        Some(&asset) => Ok(Some(asset)),
        None => Err(ctx.invalid(
            "mesh.path",
            format!(
                "no built-in mesh '{path}' (built-in meshes: {})",
                super::builtin::ASSETS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// `mesh.kind = "tet"` reads the volume formats only: a surface file is named as such.
fn check_volume_extension(ctx: &Ctx, path: &Path) -> Result<(), SceneError> {
    match mesh::MeshFormat::from_extension(path) {
        Some(f) if !f.is_volume() => Err(ctx.invalid(
            "mesh.path",
            format!(
                "{} is {} {f} surface mesh: read it with mesh.kind = \"{}\" (kind \"tet\" \
                 reads .msh, .vtk, .vtu, .node/.ele and .mesh)",
                path.display(),
                f.article(),
                f.kind()
            ),
        )),
        _ => Ok(()),
    }
}

/// A mesh whose coordinates or edge lengths overflow f64 (`mesh.scale = 1e300`) is the
/// mesh's fault, named at `key`, not the rest lengths' that derive from it.
fn check_extent(mesh: &Mesh, ctx: &Ctx, key: &str) -> Result<(), SceneError> {
    let p = &mesh.positions;
    let shown = |x: DVec3| format!("[{}, {}, {}]", num(x.x), num(x.y), num(x.z));
    if let Some(i) = p.iter().position(|x| !x.is_finite()) {
        return Err(ctx.invalid(
            key,
            format!(
                "vertex {i} is not finite once scaled and placed ({})",
                shown(p[i])
            ),
        ));
    }
    for (k, &[a, b]) in mesh.edges.iter().enumerate() {
        let length = (p[b as usize] - p[a as usize]).length();
        if !length.is_finite() {
            return Err(ctx.invalid(
                key,
                format!(
                    "edge {k} (vertices {a} and {b}) is longer than f64 can hold: the mesh is too large"
                ),
            ));
        }
    }
    // After the f64 checks: a mesh f64 cannot hold is named as such first.
    let f32_max = crate::model::F32_MAX;
    if let Some(i) = p.iter().position(|x| x.abs().max_element() > f32_max) {
        return Err(ctx.invalid(
            key,
            format!(
                "vertex {i} is beyond {} in magnitude once scaled and placed ({}): f32, the \
                 frames' and the GPU's precision, cannot hold it",
                num(f32_max),
                shown(p[i])
            ),
        ));
    }
    Ok(())
}
