// Layout shared by every kernel (prepended to each, see src/gpu/shader/mod.rs): the
// constants, the uniform structs and their bindings as the host writes them, and the
// indexing of a 1D dispatch. The structs MUST match the #[repr(C)] mirrors in
// src/gpu/layout.rs; tests/shaders.rs compares their sizes, field offsets and the
// constants through naga.

// Invocations per workgroup of every 1D kernel (WebGPU default limit: 256).
const WG: u32 = 256u;
// Coulomb sources per workgroup-memory tile (one per invocation): 4 KiB.
const TILE: u32 = 256u;
const MAX_EXT_CHARGES: u32 = 8u;
const NO_RANK: u32 = 0xffffffffu;
// A padding particle of a batch (no world) in the world table.
const NO_WORLD: u32 = 0xffffffffu;

// Scalar slots (vec4 each) of the `scalars` buffer.
const SLOT_PQ: u32 = 0u;
const SLOT_RZ: u32 = 1u; // and 2u: ping-pong by iteration parity
const SLOT_RESIDUAL: u32 = 3u;
const SLOT_ENERGY: u32 = 4u; // and 5u
const SCALAR_SLOTS: u32 = 8u;

// World.field_kind (gpu::layout::FieldKind).
const FIELD_NONE: u32 = 0u;
const FIELD_UNIFORM: u32 = 1u;
const FIELD_SWIRL: u32 = 2u;
const FIELD_VORTEX: u32 = 3u;

// An external point charge. Position at time t: pos0 rotated about `axis` through
// `center` by angular velocity * t (Rodrigues), as ExternalCharge::position_at
// (src/physics/orbit.rs).
struct ExtCharge {
    // xyz: position at t = 0 (m); w: charge * sqrt(k_c)
    pos0: vec4<f32>,
    // xyz: orbit center; w: angular velocity (rad/s)
    center: vec4<f32>,
    // xyz: unit orbit axis; w: 1 when orbiting, 0 when static
    axis: vec4<f32>,
}

// The parameters of one world (a scene: dt, softening, fields, external charges,
// gravity, relaxation) and its ranges in the packed buffers: `struct World`, written here
// by the composer from its Rust declaration (gpu::layout::World, one line per field). One
// world's come from `Params.world`; a batch of worlds reads them from a storage array
// (see world.wgsl).
{World}
// Constant over a run; written once at setup.
struct Params {
    // particles (a batch: padded to whole workgroups per world), springs, Coulomb source
    // slots (a batch: padded to whole tiles per world)
    n: u32,
    n_springs: u32,
    n_charged: u32,
    // workgroups of a per-particle dispatch = number of partial sums per block
    n_wg: u32,
    _pad0: u32,
    // a batch: Chebyshev weights per world in the world table
    cheb_stride: u32,
    n_worlds: u32,
    // log2 of the adjacency's rows per slice: 5 (SELL-32) or 0 (CSR); adjacency.wgsl
    adj_shift: u32,
    // one world's parameters (a batch reads its worlds' instead)
    world: World,
}

// Per-dispatch values, selected with a dynamic uniform offset so that a whole batch of
// steps is recorded without writing any buffer between dispatches.
struct Dispatch {
    // solver iteration index (CG: only its parity is used)
    iter: u32,
    // kernel-specific mode
    mode: u32,
    // target slot of a reduction
    slot: u32,
    // source block of a reduction
    block: u32,
    // Chebyshev weight omega_{k+1}
    weight: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// One world's DDEF lattice (crate::ddef::plan; gpu::kernels::ddef): its plan, written by
// the host at set-up and at a re-plan (the first six fields), and the frame of the last
// evaluation, written by ddef_frame (the rest).
struct DdefWorld {
    // sites per axis; w: the thin axes (bit a)
    dims: vec4<u32>,
    // log2 of the box quantum Q, of the fine quantum, the thin box width in quanta;
    // w: 1 for the `corrected` variant
    quanta: vec4<i32>,
    // the planned box extents in quanta; w: far-field source chunks
    planned: vec4<i32>,
    // first tetrahedron (6 per cell), first cell, first site, first Coulomb source slot
    base: vec4<u32>,
    // tetrahedra, cells and sites reserved; w: the end of its Coulomb source slots
    cap: vec4<u32>,
    // x: softening eps^2
    eps2: vec4<f32>,
    // the frame: box corners, cell edge and its inverse per axis
    lo: vec4<f32>,
    hi: vec4<f32>,
    h: vec4<f32>,
    inv_h: vec4<f32>,
    // the charges' bounds rounded outward to quanta, and the box extents in quanta
    lo_q: vec4<i32>,
    hi_q: vec4<i32>,
    ext_q: vec4<i32>,
    // x: a frame drifted from the plan since the host last re-planned (sticky)
    flags: vec4<u32>,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(1) @binding(0) var<uniform> disp: Dispatch;

// Linear invocation index of a 1D kernel dispatched as a 2D grid of workgroups
// (more than 65535 workgroups need the second dimension).
fn flat_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.y * nwg.x + wid.x) * WG + lid;
}

fn group_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// The step clock, a 16-byte storage `array<u32>` the step kernels advance: [0] the steps
// modulo 2^32, [1] its carries, so a run past 2^32 steps keeps its time (the time-dependent
// external charges and field).
fn clock_tick(lo: u32, hi: u32) -> vec2<u32> {
    return vec2<u32>(lo + 1u, hi + select(0u, 1u, lo == 0xffffffffu));
}

// The time (s) of step lo + 2^32 hi + `later` at step `dt`; below 2^32 steps
// f32(steps) dt, bit for bit.
fn clock_time(lo: u32, hi: u32, later: u32, dt: f32) -> f32 {
    let s = lo + later;
    let carry = select(0u, 1u, s < lo);
    return (f32(s) + 4294967296.0 * f32(hi + carry)) * dt;
}

// props = (mass, charge * sqrt(k_c), charge, pinned ? 1 : 0)
fn is_pinned(p: vec4<f32>) -> bool {
    return p.w != 0.0;
}
