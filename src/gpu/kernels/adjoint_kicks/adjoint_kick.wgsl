// The start of an explicit kick's reversal (grad::reverse's kick_vjp; docs/physics.md §6,
// §9). The kick is v_out = v_in + s M^-1 F(x, v_in, t) on free rows; with KICK_DRIFT the
// drift x' = x + h v_out that follows it is reversed first: lv += h lx. Then
// mu = (s / h) lv / m on free rows, 0 on pinned rows (never kicked), into the dx slot of
// the adjoint's zero direction: h mu is the cotangent of the force F, as the IMEX
// adjoint's solution is of h f, so the transposed field and parameter kernels serve both.
// disp.weight = s / h (1, or 1/2 for Verlet's half kicks).

// disp.mode (gpu::kernels::adjoint_kicks::KickAdjoint).
const KICK_ONLY: u32 = 0u;
const KICK_DRIFT: u32 = 1u;

@group(0) @binding(1) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> lx: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> lv: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> mu: array<vec4<f32>>;

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
    let pr = props[i];
    var l = lv[i].xyz;
    if (disp.mode == KICK_DRIFT) {
        l = l + world_dt(world_of(i)) * lx[i].xyz;
        lv[i] = vec4<f32>(l, 0.0);
    }
    var m = vec3<f32>(0.0);
    if (!is_pinned(pr)) {
        m = (disp.weight / pr.x) * l;
    }
    mu[i] = vec4<f32>(m, 0.0);
}
