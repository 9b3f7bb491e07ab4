// One (block) Jacobi sweep, optionally Chebyshev-accelerated (seed 000 eqs. 41-49;
// Wang 2015): vhat = u + omega D^-1 (b - A u), D the diagonal or 3x3 block in `bd`.
// disp.mode 0: u_out = vhat. disp.mode 1 (Chebyshev, iteration >= 2):
// u_out = w (vhat - u_prev) + u_prev, where u_prev is u_out's old content (v_{k-1}).
// A u = M u + sum_k W_k (u_i - u_j) matrix-free over the CSR adjacency. Pinned rows keep
// their value (Dirichlet).

@group(0) @binding(1) var<storage, read> sf: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> adj: array<u32>;
@group(0) @binding(3) var<storage, read> bd: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> u_in: array<vec4<f32>>;
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
    let ui = u_in[i];
    if (row_pinned(d)) {
        u_out[i] = ui;
        return;
    }
    let w = world_of(i);
    var au = row_mass(d) * ui.xyz;
    let row = adj_row(i);
    for (var at = row.at; at < row.end; at = at + row.step) {
        let k = adj_spring(at);
        let other = entry_other(adj_word(row, at));
        au = au + w_mul(sf[k], ui.xyz - u_in[other].xyz);
    }
    let r = bd[bd_b(i)].xyz - au;
    var off = vec4<f32>(0.0);
    if (blocks_stored()) {
        off = bd[bd_off(i)];
    }
    let vhat = ui.xyz + world_omega(w) * inv_mul(d, off, r);
    var out = vhat;
    if (disp.mode == 1u) {
        let prev = u_out[i].xyz;
        out = cheb_weight(w) * (vhat - prev) + prev;
    }
    u_out[i] = vec4<f32>(out, ui.w);
}
