//! `#[repr(C)]` mirrors of the WGSL structs in `shader/layout.wgsl` (`World` is declared
//! here only and written into it), and the constants both sides share.
//!
//! They MUST match the WGSL declarations field for field (sizes, offsets, padding);
//! `tests/shaders.rs` checks them, and every constant, against naga's reflection of the
//! shader source.

use bytemuck::{Pod, Zeroable};

/// Number of external point charges the kernels support (`MAX_EXT_CHARGES` in WGSL).
pub const MAX_EXT_CHARGES: usize = 8;
/// Invocations per workgroup of the 1D kernels (`WG` in WGSL).
pub const WORKGROUP_SIZE: u32 = 256;
/// Coulomb sources per workgroup-memory tile (`TILE` in WGSL).
pub const TILE: u32 = 256;
/// Bytes of workgroup memory the kernels need at most (Coulomb tile + reduction array).
pub const WORKGROUP_MEMORY: u32 = (TILE + WORKGROUP_SIZE) * 16;
/// Storage buffers bound by the widest kernel (the WebGPU default limit is 8).
pub const MAX_STORAGE_BUFFERS: u32 = 8;

/// Scalar slots of the `scalars` buffer (`SLOT_*` in WGSL).
pub const SLOT_PQ: u32 = 0;
pub const SLOT_RZ: u32 = 1;
pub const SLOT_RESIDUAL: u32 = 3;
pub const SLOT_ENERGY: u32 = 4;
pub const SCALAR_SLOTS: u32 = 8;
/// A padding slot of a batch of worlds: in the world table (`NO_WORLD` in WGSL) and
/// among the Coulomb source slots (`NO_RANK`).
pub const NO_WORLD: u32 = u32::MAX;
pub const NO_RANK: u32 = u32::MAX;

/// WGSL `ExtCharge`: an external point charge.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct ExtCharge {
    /// xyz: position at t = 0; w: charge * sqrt(k_c).
    pub pos0: [f32; 4],
    /// xyz: orbit center; w: angular velocity (rad/s).
    pub center: [f32; 4],
    /// xyz: unit orbit axis; w: 1 when orbiting, 0 when static.
    pub axis: [f32; 4],
}

wgsl_enum! {
    /// `World.field_kind`: which external field acts (`physics.wgsl`'s `field_at`).
    pub enum FieldKind {
        None = "FIELD_NONE" = 0,
        /// `World.field` xyz = E.
        Uniform = "FIELD_UNIFORM" = 1,
        /// `World.field` x = scale, y = min_z.
        Swirl = "FIELD_SWIRL" = 2,
        /// As the swirl.
        Vortex = "FIELD_VORTEX" = 3,
    }
}

/// `World` and its WGSL declaration from one list, each field with its WGSL type: the
/// composer writes `struct World` into `layout.wgsl` (at its `{World}`) and an accessor
/// `world_<field>(w)` for each plain field into `world.wgsl`, so a new per-world value is
/// one line here and its value in `host::params::world`.
macro_rules! world_struct {
    (
        $(#[$meta:meta])*
        pub struct World {
            $($(#[$fmeta:meta])* pub $field:ident: $ty:ty = $wgsl:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
        pub struct World {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl World {
            /// Every field as WGSL declares it, (name, WGSL type), in order.
            pub const WGSL_FIELDS: &'static [(&'static str, &'static str)] =
                &[$((stringify!($field), $wgsl)),*];

            fn offsets() -> Vec<(&'static str, usize)> {
                vec![$((stringify!($field), std::mem::offset_of!(World, $field))),*]
            }
        }
    };
}

world_struct! {
    /// WGSL `World`: one world's parameters (a scene: time step, softening, fields,
    /// external charges, gravity, drag, relaxation) and its ranges in the packed buffers. One
    /// system's is `Params.world`; a batch of worlds reads them from a storage array.
    pub struct World {
        /// Time step h and h^2 (s, s^2).
        pub dt: f32 = "f32",
        pub dt2: f32 = "f32",
        /// Jacobi relaxation omega.
        pub omega: f32 = "f32",
        /// Softening eps^2 (m^2).
        pub eps2: f32 = "f32",
        /// xyz: gravity (m/s^2).
        pub gravity: [f32; 4] = "vec4<f32>",
        /// Uniform field: xyz = E (V/m); swirl and vortex: x = scale, y = min_z.
        pub field: [f32; 4] = "vec4<f32>",
        /// A [`FieldKind`].
        pub field_kind: u32 = "u32",
        pub n_ext: u32 = "u32",
        /// Its Coulomb source slots [charged_begin, charged_end) (whole tiles apart).
        pub charged_begin: u32 = "u32",
        pub charged_end: u32 = "u32",
        /// The workgroups of a per-particle dispatch holding its particles.
        pub wg_begin: u32 = "u32",
        pub wg_end: u32 = "u32",
        /// Linear drag coefficient c (kg/s): f = -c v (`kernels/field/drag.wgsl`).
        pub drag: f32 = "f32",
        pub _pad1: u32 = "u32",
        pub ext: [ExtCharge; MAX_EXT_CHARGES] = "array<ExtCharge, MAX_EXT_CHARGES>",
    }
}

/// The WGSL declaration of [`World`], from [`World::WGSL_FIELDS`].
pub fn world_wgsl() -> String {
    let mut s = String::from("struct World {\n");
    for (name, ty) in World::WGSL_FIELDS {
        s.push_str(&format!("    {name}: {ty},\n"));
    }
    s.push_str("}\n");
    s
}

/// WGSL `Params`: constant over a run, written once at setup.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Params {
    pub n: u32,
    pub n_springs: u32,
    pub n_charged: u32,
    /// Workgroups of a per-particle dispatch (partial sums per reduction block).
    pub n_wg: u32,
    pub _pad0: u32,
    /// A batch: Chebyshev weights per world in the world table.
    pub cheb_stride: u32,
    pub n_worlds: u32,
    /// log2 of the adjacency's rows per slice: 5 (SELL-32) or 0 (CSR), `gpu::adjacency`.
    pub adj_shift: u32,
    /// One world's parameters (a batch reads its world table's instead).
    pub world: World,
}

/// WGSL `Dispatch`: per-dispatch values selected with a dynamic uniform offset.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Dispatch {
    pub iter: u32,
    pub mode: u32,
    pub slot: u32,
    pub block: u32,
    pub weight: f32,
    pub _pad0: u32,
    pub _pad1: u32,
    pub _pad2: u32,
}

/// WGSL `DdefWorld`: one world's DDEF lattice plan (host-written: the first six fields)
/// and the frame of its last evaluation (written by `ddef_frame`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct DdefWorld {
    /// Sites per axis; w: the thin axes (bit a).
    pub dims: [u32; 4],
    /// log2 Q, log2 of the fine quantum, thin box width (quanta); w: 1 = `corrected`.
    pub quanta: [i32; 4],
    /// The planned extents (quanta); w: far-field source chunks.
    pub planned: [i32; 4],
    /// First tetrahedron, cell, site and Coulomb source slot.
    pub base: [u32; 4],
    /// Tetrahedra, cells and sites reserved; w: end of its Coulomb source slots.
    pub cap: [u32; 4],
    /// x: eps^2.
    pub eps2: [f32; 4],
    pub lo: [f32; 4],
    pub hi: [f32; 4],
    pub h: [f32; 4],
    pub inv_h: [f32; 4],
    pub lo_q: [i32; 4],
    pub hi_q: [i32; 4],
    pub ext_q: [i32; 4],
    /// x: drifted since the last plan (sticky); on a CPU adapter, past its loop budget
    /// (`shader::CPU_WALK_BUDGET`), y: the charges of a crowded tetrahedron
    /// (`ddef_rank`), z: the sources around a cell (`ddef_gather`).
    pub flags: [u32; 4],
}

/// Bytes of a [`DdefWorld`]'s plan part (the fields the host writes).
pub const DDEF_PLAN_BYTES: u64 = 6 * 16;

/// Size and field offsets of a mirror struct, for the layout test.
pub struct MirrorLayout {
    pub name: &'static str,
    pub size: usize,
    pub fields: Vec<(&'static str, usize)>,
}

/// The constants `shader/layout.wgsl` declares, by WGSL name, with the host's values.
pub fn layout_constants() -> Vec<(&'static str, u32)> {
    let mut c = vec![
        ("WG", WORKGROUP_SIZE),
        ("TILE", TILE),
        ("MAX_EXT_CHARGES", MAX_EXT_CHARGES as u32),
        ("SLOT_PQ", SLOT_PQ),
        ("SLOT_RZ", SLOT_RZ),
        ("SLOT_RESIDUAL", SLOT_RESIDUAL),
        ("SLOT_ENERGY", SLOT_ENERGY),
        ("SCALAR_SLOTS", SCALAR_SLOTS),
        ("NO_WORLD", NO_WORLD),
        ("NO_RANK", NO_RANK),
    ];
    c.extend_from_slice(FieldKind::WGSL);
    c
}

/// The layout of every mirror struct.
pub fn mirror_layouts() -> Vec<MirrorLayout> {
    use std::mem::{offset_of, size_of};
    vec![
        MirrorLayout {
            name: "ExtCharge",
            size: size_of::<ExtCharge>(),
            fields: vec![
                ("pos0", offset_of!(ExtCharge, pos0)),
                ("center", offset_of!(ExtCharge, center)),
                ("axis", offset_of!(ExtCharge, axis)),
            ],
        },
        MirrorLayout {
            name: "World",
            size: size_of::<World>(),
            fields: World::offsets(),
        },
        MirrorLayout {
            name: "Params",
            size: size_of::<Params>(),
            fields: vec![
                ("n", offset_of!(Params, n)),
                ("n_springs", offset_of!(Params, n_springs)),
                ("n_charged", offset_of!(Params, n_charged)),
                ("n_wg", offset_of!(Params, n_wg)),
                ("_pad0", offset_of!(Params, _pad0)),
                ("cheb_stride", offset_of!(Params, cheb_stride)),
                ("n_worlds", offset_of!(Params, n_worlds)),
                ("adj_shift", offset_of!(Params, adj_shift)),
                ("world", offset_of!(Params, world)),
            ],
        },
        MirrorLayout {
            name: "Dispatch",
            size: size_of::<Dispatch>(),
            fields: vec![
                ("iter", offset_of!(Dispatch, iter)),
                ("mode", offset_of!(Dispatch, mode)),
                ("slot", offset_of!(Dispatch, slot)),
                ("block", offset_of!(Dispatch, block)),
                ("weight", offset_of!(Dispatch, weight)),
                ("_pad0", offset_of!(Dispatch, _pad0)),
                ("_pad1", offset_of!(Dispatch, _pad1)),
                ("_pad2", offset_of!(Dispatch, _pad2)),
            ],
        },
        MirrorLayout {
            name: "DdefWorld",
            size: size_of::<DdefWorld>(),
            fields: vec![
                ("dims", offset_of!(DdefWorld, dims)),
                ("quanta", offset_of!(DdefWorld, quanta)),
                ("planned", offset_of!(DdefWorld, planned)),
                ("base", offset_of!(DdefWorld, base)),
                ("cap", offset_of!(DdefWorld, cap)),
                ("eps2", offset_of!(DdefWorld, eps2)),
                ("lo", offset_of!(DdefWorld, lo)),
                ("hi", offset_of!(DdefWorld, hi)),
                ("h", offset_of!(DdefWorld, h)),
                ("inv_h", offset_of!(DdefWorld, inv_h)),
                ("lo_q", offset_of!(DdefWorld, lo_q)),
                ("hi_q", offset_of!(DdefWorld, hi_q)),
                ("ext_q", offset_of!(DdefWorld, ext_q)),
                ("flags", offset_of!(DdefWorld, flags)),
            ],
        },
    ]
}
