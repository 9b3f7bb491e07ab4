// End of a tangent step (direction disp.iter): dv_{t+1} = dv' (the solve's result) and
// dx_{t+1} = dx_t + h dv'. Pinned rows: dv' stays 0 (the solvers keep the warm start 0).
// disp.mode TANGENT_DV_ONLY (Verlet's second kick; a local-global alternation that is not
// the last): the dv slot = sol only (dx already drifted; the tangent iterate dz).
// disp.mode TANGENT_LG_END (the last local-global alternation): dz = sol,
// dv_{t+1} = (dz - dx_t) / h, dx_{t+1} = dz; pinned rows have dz = dx = 0 and stay 0.
// Bank layout: see tangent_coulomb.wgsl.

// disp.mode (gpu::kernels::tangents::TangentEnd).
const TANGENT_STEP: u32 = 0u;
const TANGENT_DV_ONLY: u32 = 1u;
const TANGENT_LG_END: u32 = 2u;

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
    if (disp.mode == TANGENT_LG_END) {
        let dz = sol[i].xyz;
        let dx = tstate[sbase + i].xyz;
        tstate[sbase + n + i] = vec4<f32>((dz - dx) / params.world.dt, 0.0);
        tstate[sbase + i] = vec4<f32>(dz, 0.0);
        return;
    }
    let dv = sol[i].xyz;
    tstate[sbase + n + i] = vec4<f32>(dv, 0.0);
    if (disp.mode == TANGENT_STEP) {
        tstate[sbase + i] = vec4<f32>(tstate[sbase + i].xyz + params.world.dt * dv, 0.0);
    }
}
