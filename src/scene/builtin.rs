//! Built-in scenes: the files in `scenes/`, embedded so `msc run torus` works anywhere.

pub(super) struct Builtin {
    pub name: &'static str,
    pub description: &'static str,
    pub text: &'static str,
}

/// Mesh files embedded in the program, read by any scene as `mesh.path = "builtin:NAME"`
/// (so a built-in scene's resolved TOML loads anywhere).
pub(super) const ASSETS: &[(&str, &[u8])] = &[(
    "builtin:beam.msh",
    include_bytes!("../../assets/meshes/beam.msh"),
)];

pub(super) const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "torus",
        description: "charged torus (145 particles, 6 uC each) released freely, h = 0.015 s (paper Figs. 4a, 12)",
        text: include_str!("../../scenes/torus.toml"),
    },
    Builtin {
        name: "torus_dt003",
        description: "the torus at h = 0.03 s (paper Fig. 4b)",
        text: include_str!("../../scenes/torus_dt003.toml"),
    },
    Builtin {
        name: "torus_dt015",
        description: "the torus at h = 0.15 s, where explicit Verlet fails (paper Fig. 4c)",
        text: include_str!("../../scenes/torus_dt015.toml"),
    },
    Builtin {
        name: "torus_reference",
        description: "the torus by Verlet at h = 0.0015 s: the reference of Fig. 4's errors",
        text: include_str!("../../scenes/torus_reference.toml"),
    },
    Builtin {
        name: "torus_orbit",
        description: "charged torus steered by an orbiting -42 uC external charge (paper Fig. 8)",
        text: include_str!("../../scenes/torus_orbit.toml"),
    },
    Builtin {
        name: "swirl",
        description: "charged sphere turned about z by the vortex field s [-y/z, x/z, 0] (paper Fig. 13)",
        text: include_str!("../../scenes/swirl.toml"),
    },
    Builtin {
        name: "cloth",
        description: "cloth pinned at two corners under 10x gravity, k = 54 N/m (paper Fig. 10)",
        text: include_str!("../../scenes/cloth.toml"),
    },
    Builtin {
        name: "cloth_large",
        description: "256 x 256 uncharged cloth for benchmarks",
        text: include_str!("../../scenes/cloth_large.toml"),
    },
    Builtin {
        name: "beam",
        description: "soft tetrahedral beam (Gmsh mesh, 1,008 tetrahedra) clamped at one end, sagging under gravity",
        text: include_str!("../../scenes/beam.toml"),
    },
];

pub(super) fn find(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}
