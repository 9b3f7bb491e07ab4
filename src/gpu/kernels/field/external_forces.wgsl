// Per particle, the non-spring forces other than Coulomb: external point charges and
// field at time t, and gravity; the Coulomb potential slot (w) starts at 0.
// coulomb_tiled then adds the all-pairs Coulomb force of the charged particles.
// disp.mode AT_T_PLUS_H evaluates the external charges at t + h (Verlet's second force).

// disp.mode (gpu::kernels::field::ForceTime): the time in steps past the clock.
const AT_T: u32 = 0u;
const AT_T_PLUS_H: u32 = 1u;

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
    let w = world_of(i);
    let pr = props[i];
    let xi = x[i].xyz;
    let t = clock_time(clock[0], clock[1], select(0u, 1u, disp.mode == AT_T_PLUS_H), world_dt(w));
    let f = external_force(w, xi, pr.y, pr.z, t) + pr.x * world_gravity(w);
    force[i] = vec4<f32>(f, 0.0);
}
