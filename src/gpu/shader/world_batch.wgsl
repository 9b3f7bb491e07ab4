// A batch of worlds (src/gpu/batch/worlds.rs): each world's record in `worlds`, and the
// world table: the world of each particle slot (NO_WORLD for padding), then per world its
// Chebyshev weights (f32 bits, params.cheb_stride each). Worlds are whole workgroups and
// whole Coulomb tiles apart, so a workgroup never mixes worlds. The values are read
// through world.wgsl, which follows.

@group(2) @binding(0) var<storage, read> worlds: array<World>;
@group(2) @binding(1) var<storage, read> world_table: array<u32>;

fn world_of(i: u32) -> u32 {
    return world_table[i];
}

// Whether invocation i holds a particle (padding between worlds does not).
fn is_row(i: u32) -> bool {
    return i < params.n && world_table[i] != NO_WORLD;
}

// Chebyshev's weight omega_{k+1} of the current sweep.
fn cheb_weight(w: u32) -> f32 {
    return bitcast<f32>(world_table[params.n + w * params.cheb_stride + disp.iter]);
}

// The index of scalar `slot` of world w.
fn scalar_slot(w: u32, slot: u32) -> u32 {
    return w * SCALAR_SLOTS + slot;
}
