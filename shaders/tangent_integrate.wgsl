// End of a tangent step (direction disp.iter): dv_{t+1} = dv' (the solve's result) and
// dx_{t+1} = dx_t + h dv'. Pinned rows: dv' stays 0 (the solvers keep the warm start 0).
// disp.mode 1 (Verlet's second kick): dv_{t+1} = sol only, dx was already drifted.
// Bank layout: see tangent_coulomb.wgsl.

@group(0) @binding(1) var<storage, read> sol: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> tstate: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    let n = params.n;
    if (i >= n) {
        return;
    }
    let sbase = disp.iter * 2u * n;
    let dv = sol[i].xyz;
    tstate[sbase + n + i] = vec4<f32>(dv, 0.0);
    if (disp.mode == 0u) {
        tstate[sbase + i] = vec4<f32>(tstate[sbase + i].xyz + params.dt * dv, 0.0);
    }
}
