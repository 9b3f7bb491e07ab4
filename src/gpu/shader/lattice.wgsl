// The lattice DDEF's geometry in f32, each function mirroring crate::ddef::plan or
// crate::ddef::stencil: a point's cell, Kuhn type and weights in a world's frame, the path
// vertices and N(tau) slots of a Kuhn type, lattice indices and site positions, and the
// packed entries of the stencil tables (gpu::host::ddef_layout, DdefLayout::tables).

// Kuhn tetrahedra per cell.
const KUHN: u32 = 6u;
// The tables' header: words 1, 2, 3 hold the offsets of the cell offsets, the membership
// table and the scan levels; word 0 the number of cell offsets D. The site stencil
// (48 entries) starts at SITE_STENCIL.
const SITE_STENCIL: u32 = 4u;
const SITE_ENTRIES: u32 = 48u;

// A point's cell, Kuhn type and fractional coordinates in its cell.
struct DdefLoc {
    cell: vec3<u32>,
    kuhn: u32,
    f: vec3<f32>,
}

// The Kuhn type of fractional coordinates f: axes by decreasing f, ties in axis order
// (plan::kuhn_type of the stable sort in Frame::locate).
fn ddef_kuhn(f: vec3<f32>) -> u32 {
    let c01 = f.x >= f.y;
    let c02 = f.x >= f.z;
    let c12 = f.y >= f.z;
    if (c01 && c02) {
        return select(1u, 0u, c12);
    }
    if (!c01 && c12) {
        return select(3u, 2u, c02);
    }
    return select(5u, 4u, c01);
}

// The axis order (a, b, c) of a Kuhn type (plan::ORDERS).
fn ddef_order(kuhn: u32) -> vec3<u32> {
    let a = kuhn / 2u;
    let lo = select(0u, 1u, a == 0u);
    let hi = select(2u, 1u, a == 2u);
    return select(vec3<u32>(a, hi, lo), vec3<u32>(a, lo, hi), kuhn % 2u == 0u);
}

// Frame::locate: cell by a floor (clamped; a NaN goes to cell 0), f clamped to [0, 1].
// Per axis in vector form, without a loop: the adjoint calls it per source of a walk
// (ddef_tet_adjoint), where each loop iteration would count against a CPU adapter's
// loop budget (shader::CPU_LOOP_ITERATIONS).
fn ddef_locate(w: DdefWorld, p: vec3<f32>) -> DdefLoc {
    let last = vec3<f32>(w.dims.xyz - vec3<u32>(2u));
    let u = (p - w.lo.xyz) * w.inv_h.xyz;
    let cell = select(vec3<u32>(0u), vec3<u32>(min(floor(u), last)), u > vec3<f32>(0.0));
    let r = u - vec3<f32>(cell);
    let f = select(vec3<f32>(0.0), clamp(r, vec3<f32>(0.0), vec3<f32>(1.0)), r == r);
    return DdefLoc(cell, ddef_kuhn(f), f);
}

// The weights over the path vertices 0, e_a, e_a + e_b, 1 of (cell, kuhn) at a point
// with fractional coordinates f.
fn ddef_weights(kuhn: u32, f: vec3<f32>) -> vec4<f32> {
    let o = ddef_order(kuhn);
    return vec4<f32>(1.0 - f[o.x], f[o.x] - f[o.y], f[o.y] - f[o.z], f[o.z]);
}

// The derivative of ddef_weights along df (the weights are affine in f:
// lattice_field::weights_jvp).
fn ddef_weights_jvp(kuhn: u32, df: vec3<f32>) -> vec4<f32> {
    let o = ddef_order(kuhn);
    return vec4<f32>(-df[o.x], df[o.x] - df[o.y], df[o.y] - df[o.z], df[o.z]);
}

// The transpose of ddef_weights_jvp: the cotangent of f from the weights' cotangents g
// (lattice_field::weights_vjp, before its 1 / h).
fn ddef_weights_vjp(kuhn: u32, g: vec4<f32>) -> vec3<f32> {
    let o = ddef_order(kuhn);
    var df = vec3<f32>(0.0);
    df[o.x] = g.y - g.x;
    df[o.y] = g.z - g.y;
    df[o.z] = g.w - g.z;
    return df;
}

fn ddef_unit(axis: u32) -> vec3<i32> {
    return vec3<i32>(vec3<u32>(0u, 1u, 2u) == vec3<u32>(axis));
}

// stencil::slot_offsets: path vertices (slots 0..4), then the off-face vertex of the face
// neighbours across faces 0..4.
fn ddef_slot(kuhn: u32, k: u32) -> vec3<i32> {
    let o = ddef_order(kuhn);
    let ea = ddef_unit(o.x);
    let eb = ddef_unit(o.y);
    let ec = ddef_unit(o.z);
    switch k {
        case 0u: { return vec3<i32>(0); }
        case 1u: { return ea; }
        case 2u: { return ea + eb; }
        case 3u: { return vec3<i32>(1); }
        case 4u: { return vec3<i32>(1) + ea; }
        case 5u: { return eb; }
        case 6u: { return ea + ec; }
        default: { return -ec; }
    }
}

// stencil::valid_slots: the slots of N(tau) inside the lattice.
fn ddef_valid_slots(dims: vec3<u32>, cell: vec3<u32>, kuhn: u32) -> u32 {
    var bits = 0u;
    for (var k = 0u; k < 8u; k = k + 1u) {
        let s = vec3<i32>(cell) + ddef_slot(kuhn, k);
        if (all(s >= vec3<i32>(0)) && all(s < vec3<i32>(dims))) {
            bits = bits | (1u << k);
        }
    }
    return bits;
}

// A tables entry's cell offset (each component + 4 in 4 bits) and, at bit 12, a type.
fn ddef_entry_offset(e: u32) -> vec3<i32> {
    return vec3<i32>(vec3<u32>(e, e >> 4u, e >> 8u) & vec3<u32>(15u)) - vec3<i32>(4);
}

// `cell + d` when it is a cell of the lattice (stencil::offset_cell), else x = -1.
fn ddef_offset_cell(dims: vec3<u32>, cell: vec3<u32>, d: vec3<i32>) -> vec3<i32> {
    let c = vec3<i32>(cell) + d;
    if (all(c >= vec3<i32>(0)) && all(c < vec3<i32>(dims) - vec3<i32>(1))) {
        return c;
    }
    return vec3<i32>(-1);
}

// Linear index of a cell (x-fastest) and of a site.
fn ddef_cell_index(dims: vec3<u32>, c: vec3<u32>) -> u32 {
    return (c.z * (dims.y - 1u) + c.y) * (dims.x - 1u) + c.x;
}

fn ddef_site_index(dims: vec3<u32>, p: vec3<u32>) -> u32 {
    return (p.z * dims.y + p.y) * dims.x + p.x;
}

fn ddef_site_point(dims: vec3<u32>, j: u32) -> vec3<u32> {
    return vec3<u32>(j % dims.x, (j / dims.x) % dims.y, j / (dims.x * dims.y));
}

fn ddef_cell_point(dims: vec3<u32>, c: u32) -> vec3<u32> {
    let cx = dims.x - 1u;
    let cy = dims.y - 1u;
    return vec3<u32>(c % cx, (c / cx) % cy, c / (cx * cy));
}

// Frame::site: the position of lattice point p (the last plane at the upper corner).
fn ddef_site(w: DdefWorld, p: vec3<u32>) -> vec3<f32> {
    let x = w.lo.xyz + vec3<f32>(p) * w.h.xyz;
    return select(x, w.hi.xyz, p + vec3<u32>(1u) == w.dims.xyz);
}

// The lattice point of path vertex v of (cell, kuhn).
fn ddef_vertex(cell: vec3<u32>, kuhn: u32, v: u32) -> vec3<u32> {
    return vec3<u32>(vec3<i32>(cell) + ddef_slot(kuhn, v));
}
