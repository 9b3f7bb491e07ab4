// One world (every solver but a batch): its record is the Params uniform's `world`, every
// particle below params.n is a row, and scalars sit at their slots. The values are read
// through world.wgsl, which follows.

fn world_of(i: u32) -> u32 {
    return 0u;
}

// Whether invocation i holds a particle.
fn is_row(i: u32) -> bool {
    return i < params.n;
}

// Chebyshev's weight omega_{k+1} of the current sweep.
fn cheb_weight(w: u32) -> f32 {
    return disp.weight;
}

// The index of scalar `slot` of world w.
fn scalar_slot(w: u32, slot: u32) -> u32 {
    return slot;
}
