// IMEX right-hand side and preconditioner per particle (paper eq. 10, seeds 000/004):
// b_i = m_i v_i + h (f_elastic_i + f_other_i) and the inverse of the diagonal of
// A = M + sum_k W_k: the 3x3 block (block Jacobi, Chebyshev) or its diagonal entries
// (Jacobi, CG). Gathers the springs through the CSR adjacency: no atomics.
// bd rows as blocks.wgsl lays them out (the off-diagonal row only when blocks_stored()),
// the mass (0 on a pinned row) beside the inverse diagonal (row_mass).

@group(0) @binding(1) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> force: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> sf: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> adj: array<u32>;
@group(0) @binding(6) var<storage, read_write> bd: array<vec4<f32>>;

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
    let mass = pr.x;
    var f = force[i].xyz;
    // A_ii = m I + sum_k (s I + t n n^T): (xx, yy, zz, xy), (xz, yz)
    var a0 = vec4<f32>(mass, mass, mass, 0.0);
    var a1 = vec4<f32>(0.0);
    let row = adj_row(i);
    for (var at = row.at; at < row.end; at = at + row.step) {
        let k = adj_spring(at);
        let word = adj_word(row, at);
        let nf = sf[params.n_springs + k];
        f = f + (entry_sign(word) * nf.w) * nf.xyz;
        // W_k = s I + m m^T (see w_mul)
        let wk = sf[k];
        let m = wk.xyz;
        let s = wk.w;
        a0 = a0 + vec4<f32>(s + m.x * m.x, s + m.y * m.y, s + m.z * m.z, m.x * m.y);
        a1 = a1 + vec4<f32>(m.x * m.z, m.y * m.z, 0.0, 0.0);
    }
    let b = mass * v[i].xyz + world_dt(world_of(i)) * f;
    var inv0 = vec4<f32>(1.0 / a0.x, 1.0 / a0.y, 1.0 / a0.z, 0.0);
    var inv1 = vec4<f32>(0.0);
    if (blocks_stored()) {
        // Symmetric inverse by cofactors: a = xx, b = yy, c = zz, d = xy, e = xz, f = yz.
        let cxx = a0.y * a0.z - a1.y * a1.y;
        let cyy = a0.x * a0.z - a1.x * a1.x;
        let czz = a0.x * a0.y - a0.w * a0.w;
        let cxy = a1.x * a1.y - a0.w * a0.z;
        let cxz = a0.w * a1.y - a0.y * a1.x;
        let cyz = a0.w * a1.x - a0.x * a1.y;
        let rdet = 1.0 / (a0.x * cxx + a0.w * cxy + a1.x * cxz);
        inv0 = vec4<f32>(cxx, cyy, czz, cxy) * rdet;
        inv1 = vec4<f32>(cxz, cyz, 0.0, 0.0) * rdet;
    }
    bd[bd_b(i)] = vec4<f32>(b, 0.0);
    bd[bd_diag(i)] = vec4<f32>(inv0.xyz, select(mass, 0.0, is_pinned(pr)));
    if (blocks_stored()) {
        bd[bd_off(i)] = vec4<f32>(inv0.w, inv1.x, inv1.y, 0.0);
    }
}
