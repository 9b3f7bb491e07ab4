// The blocks of A = M + sum_k W_k as the kernels store them, and products with them: a
// spring's W_k from its factors (spring_assemble), and per particle its `bd` rows (rhs;
// the host for local-global): the right-hand side, the inverse of the diagonal (its 3x3
// block or its diagonal entries) and the mass.

// W_k = s I + t n n^T (DESIGN section 2 with s = h^2 k max(0, 1 - L/l),
// t = h^2 k (1 - max(0, 1 - L/l)) + h c >= 0) stored in one vec4 as wk = (m, s) with
// m = sqrt(t) n: W_k d = s d + (m . d) m. Springs' blocks are sf[0..n_springs]; their
// (n, fmag) follow in sf[n_springs..2 n_springs].
fn w_mul(wk: vec4<f32>, d: vec3<f32>) -> vec3<f32> {
    return wk.w * d + dot(wk.xyz, d) * wk.xyz;
}

// `bd` per particle i, bd_stride() vec4 from bd_stride() * i (the layout lives here only):
//   bd[bd_b(i)]    = (b, 0), the right-hand side;
//   bd[bd_diag(i)] = (inverse xx, yy, zz, mass), the mass 0 on a pinned row: the solver
//                    kernels read no `props`;
//   bd[bd_off(i)]  = (inverse xy, xz, yz, 0), only when blocks_stored().
// A diagonal solver (Jacobi, CG's Jacobi preconditioner, and every solver of
// local-global, whose P has no off-diagonal entries in a block) reads 32 bytes per row.
// Fixed when the pipeline is created (gpu::shader::Specialization, from the solver
// method), so the branches on it compile away: a uniform here made lavapipe recompile a
// batch's jacobi_sweep at every dispatch (BENCHMARKS.md).
override BLOCK_DIAG: bool = false;

fn blocks_stored() -> bool {
    return BLOCK_DIAG;
}

fn bd_stride() -> u32 {
    return select(2u, 3u, BLOCK_DIAG);
}

fn bd_b(i: u32) -> u32 {
    return bd_stride() * i;
}

fn bd_diag(i: u32) -> u32 {
    return bd_stride() * i + 1u;
}

// Read only when blocks_stored() (stride 3).
fn bd_off(i: u32) -> u32 {
    return 3u * i + 2u;
}

fn row_mass(d: vec4<f32>) -> f32 {
    return d.w;
}

fn row_pinned(d: vec4<f32>) -> bool {
    return d.w == 0.0;
}

// The inverse diagonal times r: d = bd[bd_diag(i)], off = bd[bd_off(i)] when
// blocks_stored() (the symmetric 3x3 block), else unused (the diagonal entries alone:
// the products the stored zero off-diagonals added were exact zeros).
fn inv_mul(d: vec4<f32>, off: vec4<f32>, r: vec3<f32>) -> vec3<f32> {
    if (!blocks_stored()) {
        return d.xyz * r;
    }
    return vec3<f32>(
        d.x * r.x + off.x * r.y + off.y * r.z,
        off.x * r.x + d.y * r.y + off.z * r.z,
        off.y * r.x + off.z * r.y + d.z * r.z,
    );
}

