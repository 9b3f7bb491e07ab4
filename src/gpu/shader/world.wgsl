// World w's values, written once for both compositions (src/gpu/shader/mod.rs): `{world}`
// stands for the world's record, `params.world` for one system and `worlds[w]` for a batch
// of worlds. What a world is (the world of a particle, which invocations are rows, the
// Chebyshev weight, scalar slots) comes first, from world_one.wgsl or world_batch.wgsl.
// Each value is read one field at a time (no copy of the whole World struct per
// invocation). A new per-world value: a field of `World` (layout.wgsl and its mirror in
// gpu::layout), then its accessor here.

fn world_dt(w: u32) -> f32 {
    return {world}.dt;
}

fn world_dt2(w: u32) -> f32 {
    return {world}.dt2;
}

fn world_omega(w: u32) -> f32 {
    return {world}.omega;
}

fn world_eps2(w: u32) -> f32 {
    return {world}.eps2;
}

fn world_gravity(w: u32) -> vec3<f32> {
    return {world}.gravity.xyz;
}

fn world_field(w: u32) -> vec4<f32> {
    return {world}.field;
}

fn world_field_kind(w: u32) -> u32 {
    return {world}.field_kind;
}

fn world_n_ext(w: u32) -> u32 {
    return {world}.n_ext;
}

fn world_ext(w: u32, k: u32) -> ExtCharge {
    return {world}.ext[k];
}

// Its Coulomb source slots [x, y).
fn world_charged(w: u32) -> vec2<u32> {
    return vec2<u32>({world}.charged_begin, {world}.charged_end);
}

// Its workgroups [x, y) of a per-particle dispatch.
fn world_groups(w: u32) -> vec2<u32> {
    return vec2<u32>({world}.wg_begin, {world}.wg_end);
}
