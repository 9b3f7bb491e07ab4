// The matrix-free row product of A = M + sum_k W_k (blocks.wgsl), written once for every
// kernel that multiplies by A (jacobi_sweep, residual, cg_init, cg_matvec): each binds the
// spring blocks as `sf`, the adjacency as `adj` and the vector A multiplies as `u`.

// (A u)_i = m_i u_i + sum_k W_k (u_i - u_j) over row i's springs, in the adjacency's
// order; `ui` = u[i].xyz, `mass` the row's mass (row_mass).
fn a_row(i: u32, ui: vec3<f32>, mass: f32) -> vec3<f32> {
    var au = mass * ui;
    let row = adj_row(i);
    for (var at = row.at; at < row.end; at = at + row.step) {
        let k = adj_spring(at);
        let other = entry_other(adj_word(row, at));
        au = au + w_mul(sf[k], ui - u[other].xyz);
    }
    return au;
}
