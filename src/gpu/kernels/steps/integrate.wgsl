// End of an implicit step: x' = x + h v' (IMEX) or v' = (x' - x_t) / h (local-global),
// then the step clock advances. Pinned particles keep their prescribed velocity.

// disp.mode (gpu::kernels::steps::IntegrateMode).
// IMEX, v' already in v; IMEX, v' in sol.
const INTEGRATE_IMEX: u32 = 0u;
const INTEGRATE_IMEX_SOLUTION: u32 = 1u;
// Local-global, x' already in x; local-global, x' in sol.
const INTEGRATE_LG: u32 = 2u;
const INTEGRATE_LG_SOLUTION: u32 = 3u;

@group(0) @binding(1) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> v: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> sol: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> xt: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> clock: array<u32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    if (i == 0u) {
        let c = clock_tick(clock[0], clock[1]);
        clock[0] = c.x;
        clock[1] = c.y;
    }
    if (!is_row(i)) {
        return;
    }
    let dt = world_dt(world_of(i));
    let pinned = is_pinned(props[i]);
    let mode = disp.mode;
    if (mode == INTEGRATE_IMEX || mode == INTEGRATE_IMEX_SOLUTION) {
        var vi = v[i].xyz;
        if (mode == INTEGRATE_IMEX_SOLUTION && !pinned) {
            vi = sol[i].xyz;
            v[i] = vec4<f32>(vi, 0.0);
        }
        x[i] = vec4<f32>(x[i].xyz + dt * vi, 1.0);
    } else {
        var xi = x[i].xyz;
        if (mode == INTEGRATE_LG_SOLUTION) {
            xi = sol[i].xyz;
            x[i] = vec4<f32>(xi, 1.0);
        }
        if (!pinned) {
            v[i] = vec4<f32>((xi - xt[i].xyz) / dt, 0.0);
        }
    }
}
