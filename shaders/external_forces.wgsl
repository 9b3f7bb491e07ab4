// Per particle, the non-spring forces other than Coulomb: external point charges and
// field at time t, and gravity; the Coulomb potential slot (w) starts at 0.
// coulomb_tiled then adds the all-pairs Coulomb force of the charged particles.
// disp.mode 1 evaluates the external charges at t + h (Verlet's second force).

@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> clock: array<u32>;
@group(0) @binding(4) var<storage, read_write> force: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    if (!is_row(i)) {
        return;
    }
    let W = world(world_of(i));
    let pr = props[i];
    let xi = x[i].xyz;
    let t = f32(clock[0] + disp.mode) * W.dt;
    let f = external_force(W, xi, pr.y, pr.z, t) + pr.x * W.gravity.xyz;
    force[i] = vec4<f32>(f, 0.0);
}
