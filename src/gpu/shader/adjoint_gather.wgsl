// The adjoint's per-particle gather of its per-spring rows (adjoint_gather,
// adjoint_lg_gather): reads its kernel's `adj` and `rows`.

// sum_k sign p_k over row i's springs k (+ where i is the spring's i, - where its j), p_k
// the per-spring kernel's rows[k].xyz, in the adjacency's order (no atomics).
fn gather_rows(i: u32) -> vec3<f32> {
    var acc = vec3<f32>(0.0);
    let row = adj_row(i);
    for (var at = row.at; at < row.end; at = at + row.step) {
        acc = acc + entry_sign(adj_word(row, at)) * rows[adj_spring(at)].xyz;
    }
    return acc;
}
