//! How large a scene is before its mesh is built: particle, spring and triangle counts
//! from the mesh parameters, an estimate of the host memory a run needs, and the check
//! against the memory available, so a mesh too large fails with its size instead of
//! aborting on a failed allocation.

use super::schema::{MeshKind, MeshSpec};
use crate::model::MeshCounts;
use std::fmt;

/// Host bytes per particle of a run: the mesh (24), the loaded system and the backend's
/// copy of it (2 x 65), and the CPU reference's working set (state, forces, right-hand
/// side, iterate, diagonal blocks and solver vectors, about 400), the larger of the two
/// backends' host needs (the GPU backend's staging arrays take about half as much).
pub const BYTES_PER_PARTICLE: u64 = 600;
/// Host bytes per spring: the mesh edge (8), two copies of the spring (2 x 32), the
/// per-spring force (24), the 3x3 block of the operator (72) and two adjacency entries
/// with the block's endpoints (32).
pub const BYTES_PER_SPRING: u64 = 200;
/// Host bytes per triangle: the mesh's and the system's two copies (3 x 12).
pub const BYTES_PER_FACE: u64 = 36;

/// A scene's size, known before its mesh is built (mesh files: after reading the file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SceneSize {
    /// The mesh kind (`grid`, `torus`, ...).
    pub mesh: &'static str,
    /// The dotted key that sets the size (`mesh.resolution`, `mesh.subdivisions`, ...).
    pub key: &'static str,
    pub particles: u64,
    pub springs: u64,
    pub faces: u64,
}

impl SceneSize {
    pub(super) fn new(kind: MeshKind, c: MeshCounts) -> Self {
        Self {
            mesh: kind.name(),
            key: match kind {
                MeshKind::Torus => "mesh.rings",
                MeshKind::Icosphere => "mesh.subdivisions",
                MeshKind::Grid | MeshKind::Lattice => "mesh.resolution",
                MeshKind::Obj | MeshKind::Ply | MeshKind::Stl | MeshKind::Tet => "mesh.path",
            },
            particles: c.vertices,
            springs: c.edges,
            faces: c.faces,
        }
    }

    /// Estimated host bytes of a run of this scene (see `BYTES_PER_PARTICLE`).
    pub fn host_bytes(&self) -> u64 {
        let b = self.particles as u128 * BYTES_PER_PARTICLE as u128
            + self.springs as u128 * BYTES_PER_SPRING as u128
            + self.faces as u128 * BYTES_PER_FACE as u128;
        u64::try_from(b).unwrap_or(u64::MAX)
    }
}

/// The counts of a procedural mesh from its parameters; `None` for a mesh file or when a
/// parameter is missing or malformed (the mesh builder then reports it).
pub(super) fn estimate(m: &MeshSpec) -> Option<SceneSize> {
    let counts = match m.kind {
        MeshKind::Torus => MeshCounts::torus(m.rings?, m.sides?),
        MeshKind::Icosphere => MeshCounts::icosphere(m.subdivisions?),
        MeshKind::Grid => {
            let r = m.resolution.as_deref()?;
            MeshCounts::grid(
                <[u32; 2]>::try_from(r).ok()?,
                m.shear.unwrap_or(true),
                m.bending.unwrap_or(false),
            )
        }
        MeshKind::Lattice => {
            MeshCounts::lattice(<[u32; 3]>::try_from(m.resolution.as_deref()?).ok()?)
        }
        MeshKind::Obj | MeshKind::Ply | MeshKind::Stl | MeshKind::Tet => return None,
    };
    Some(SceneSize::new(m.kind, counts))
}

/// Which kind of resource runs short: callers tell a machine without the memory from a
/// device without the buffer by this, not by the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// The host's memory (`MemAvailable`).
    HostMemory,
    /// A device's limit, e.g. a GPU adapter's largest buffer.
    Device,
}

/// A resource a scene needs more of than there is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shortfall {
    pub resource: Resource,
    /// What runs short, e.g. "host memory (MemAvailable)" or a GPU buffer and its limit.
    pub what: String,
    pub needed: u64,
    pub available: u64,
}

impl fmt::Display for Shortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} needs {} bytes ({}), more than the {} bytes ({}) available",
            self.what,
            self.needed,
            human(self.needed),
            self.available,
            human(self.available)
        )
    }
}

/// Bytes in decimal units, 3 significant digits.
pub fn human(bytes: u64) -> String {
    let units = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < units.len() {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.3} {}", units[u])
    }
}

/// Memory available to a new process, in bytes: `MemAvailable` of `/proc/meminfo` on
/// Linux; `None` where it cannot be read (the estimate is then not checked, and the mesh
/// builders' fallible allocations are the only guard).
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&text)
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let value: u64 = words.next()?.parse().ok()?;
    let scale = match words.next() {
        Some("kB") => 1024,
        None => 1,
        Some(_) => return None,
    };
    value.checked_mul(scale)
}

/// [`SceneSize::host_bytes`] against `available` bytes (None: unknown, not checked).
pub fn check_host(size: &SceneSize, available: Option<u64>) -> Result<(), Shortfall> {
    let needed = size.host_bytes();
    match available {
        Some(available) if needed > available => Err(Shortfall {
            resource: Resource::HostMemory,
            what: "host memory (MemAvailable) for the mesh, the system and the solver".into(),
            needed,
            available,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   22000000 kB\n";
        assert_eq!(parse_mem_available(text), Some(22_000_000 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: x kB\n"), None);
    }

    #[test]
    fn a_huge_grid_is_refused_and_a_small_one_is_not() {
        let size = SceneSize::new(MeshKind::Grid, MeshCounts::grid([40000, 40000], true, true));
        assert_eq!(size.particles, 1_600_000_000);
        let e = check_host(&size, Some(64 << 30)).unwrap_err();
        assert!(e.needed > 1_000_000_000_000, "{e}");
        assert!(e.to_string().contains("host memory"), "{e}");
        assert_eq!(e.resource, Resource::HostMemory);
        let small = SceneSize::new(MeshKind::Grid, MeshCounts::grid([21, 21], true, true));
        assert!(check_host(&small, Some(64 << 30)).is_ok());
        // Unknown available memory: not checked.
        assert!(check_host(&size, None).is_ok());
        assert_eq!(human(1_234_000), "1.234 MB");
        assert_eq!(human(12), "12 B");
    }
}
