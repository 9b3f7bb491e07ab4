// A batch of worlds (src/gpu/worlds.rs): each world's parameters in `worlds`, and the
// world table: the world of each particle slot (NO_WORLD for padding), then per world its
// Chebyshev weights (f32 bits, params.cheb_stride each). Worlds are whole workgroups and
// whole Coulomb tiles apart, so a workgroup never mixes worlds. Same functions as
// world.wgsl, each reading one field (no copy of the whole World struct).

@group(2) @binding(0) var<storage, read> worlds: array<World>;
@group(2) @binding(1) var<storage, read> world_table: array<u32>;

fn world_of(i: u32) -> u32 {
    return world_table[i];
}

// Whether invocation i holds a particle (padding between worlds does not).
fn is_row(i: u32) -> bool {
    return i < params.n && world_table[i] != NO_WORLD;
}

fn world_dt(w: u32) -> f32 {
    return worlds[w].dt;
}

fn world_dt2(w: u32) -> f32 {
    return worlds[w].dt2;
}

fn world_omega(w: u32) -> f32 {
    return worlds[w].omega;
}

fn world_eps2(w: u32) -> f32 {
    return worlds[w].eps2;
}

fn world_gravity(w: u32) -> vec3<f32> {
    return worlds[w].gravity.xyz;
}

fn world_field(w: u32) -> vec4<f32> {
    return worlds[w].field;
}

fn world_field_kind(w: u32) -> u32 {
    return worlds[w].field_kind;
}

fn world_n_ext(w: u32) -> u32 {
    return worlds[w].n_ext;
}

fn world_ext(w: u32, k: u32) -> ExtCharge {
    return worlds[w].ext[k];
}

// Its Coulomb source slots [x, y).
fn world_charged(w: u32) -> vec2<u32> {
    return vec2<u32>(worlds[w].charged_begin, worlds[w].charged_end);
}

// Its workgroups [x, y) of a per-particle dispatch.
fn world_groups(w: u32) -> vec2<u32> {
    return vec2<u32>(worlds[w].wg_begin, worlds[w].wg_end);
}

// Chebyshev's weight omega_{k+1} of the current sweep.
fn cheb_weight(w: u32) -> f32 {
    return bitcast<f32>(world_table[params.n + w * params.cheb_stride + disp.iter]);
}

// The index of scalar `slot` of world w.
fn scalar_slot(w: u32, slot: u32) -> u32 {
    return w * SCALAR_SLOTS + slot;
}
