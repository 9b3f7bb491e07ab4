// Local-global step start (Liu 2013; paper eqs. 3-7, 11): x_t is saved, the iterate starts
// at y = x_t + h v_t, and the iteration-independent part of the global right-hand side is
// b0 = M y + h^2 (f_coulomb(x_t) + f_ext(x_t, t) + M g) (`force` holds that sum).
// Pinned particles: y = x_t + h v_pinned, fixed through the iterations.

@group(0) @binding(1) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> force: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> xt: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> b0: array<vec4<f32>>;

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
    let xi = x[i];
    xt[i] = xi;
    let y = xi.xyz + world_dt(w) * v[i].xyz;
    x[i] = vec4<f32>(y, 1.0);
    b0[i] = vec4<f32>(props[i].x * y + world_dt2(w) * force[i].xyz, 0.0);
}
