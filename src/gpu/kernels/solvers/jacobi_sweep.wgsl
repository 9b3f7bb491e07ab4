// One (block) Jacobi sweep, optionally Chebyshev-accelerated (seed 000 eqs. 41-49;
// Wang 2015): vhat = u + omega D^-1 (b - A u), D the diagonal or 3x3 block in `bd`, A u
// matrix-free (operator.wgsl). disp.mode SWEEP_PLAIN: u_out = vhat. SWEEP_CHEBYSHEV
// (iteration >= 2): u_out = w (vhat - u_prev) + u_prev, where u_prev is u_out's old
// content (v_{k-1}). Pinned rows keep their value (Dirichlet).

// disp.mode (gpu::kernels::solvers::SweepMode).
const SWEEP_PLAIN: u32 = 0u;
const SWEEP_CHEBYSHEV: u32 = 1u;

@group(0) @binding(1) var<storage, read> sf: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> adj: array<u32>;
@group(0) @binding(3) var<storage, read> bd: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> u: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> u_out: array<vec4<f32>>;

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
    let d = bd[bd_diag(i)];
    let ui = u[i];
    if (row_pinned(d)) {
        u_out[i] = ui;
        return;
    }
    let w = world_of(i);
    let r = bd[bd_b(i)].xyz - a_row(i, ui.xyz, row_mass(d));
    var off = vec4<f32>(0.0);
    if (blocks_stored()) {
        off = bd[bd_off(i)];
    }
    let vhat = ui.xyz + world_omega(w) * inv_mul(d, off, r);
    var out = vhat;
    if (disp.mode == SWEEP_CHEBYSHEV) {
        let prev = u_out[i].xyz;
        out = cheb_weight(w) * (vhat - prev) + prev;
    }
    u_out[i] = vec4<f32>(out, ui.w);
}
