// One world (every solver but a batch): its parameters are the Params uniform's, every
// particle below params.n is a row, and scalars sit at their slots. A batch composes
// worlds.wgsl instead, with the same functions (src/gpu/shaders.rs). World w's values are
// read one field at a time (no copy of the whole World struct per invocation).

fn world_of(i: u32) -> u32 {
    return 0u;
}

// Whether invocation i holds a particle.
fn is_row(i: u32) -> bool {
    return i < params.n;
}

fn world_dt(w: u32) -> f32 {
    return params.world.dt;
}

fn world_dt2(w: u32) -> f32 {
    return params.world.dt2;
}

fn world_omega(w: u32) -> f32 {
    return params.world.omega;
}

fn world_eps2(w: u32) -> f32 {
    return params.world.eps2;
}

fn world_gravity(w: u32) -> vec3<f32> {
    return params.world.gravity.xyz;
}

fn world_field(w: u32) -> vec4<f32> {
    return params.world.field;
}

fn world_field_kind(w: u32) -> u32 {
    return params.world.field_kind;
}

fn world_n_ext(w: u32) -> u32 {
    return params.world.n_ext;
}

fn world_ext(w: u32, k: u32) -> ExtCharge {
    return params.world.ext[k];
}

// Its Coulomb source slots [x, y).
fn world_charged(w: u32) -> vec2<u32> {
    return vec2<u32>(params.world.charged_begin, params.world.charged_end);
}

// Its workgroups [x, y) of a per-particle dispatch.
fn world_groups(w: u32) -> vec2<u32> {
    return vec2<u32>(params.world.wg_begin, params.world.wg_end);
}

// Chebyshev's weight omega_{k+1} of the current sweep.
fn cheb_weight(w: u32) -> f32 {
    return disp.weight;
}

// The index of scalar `slot` of world w.
fn scalar_slot(w: u32, slot: u32) -> u32 {
    return slot;
}
