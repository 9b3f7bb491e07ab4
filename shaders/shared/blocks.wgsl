// Products with the 3x3 blocks of A = M + sum_k W_k as the kernels store them: a
// spring's W_k from its factors (spring_assemble) and a symmetric diagonal block or its
// inverse (rhs).

// W_k = s I + t n n^T (DESIGN section 2 with s = h^2 k max(0, 1 - L/l),
// t = h^2 k (1 - max(0, 1 - L/l)) + h c >= 0) stored in one vec4 as wk = (m, s) with
// m = sqrt(t) n: W_k d = s d + (m . d) m. Springs' blocks are sf[0..n_springs]; their
// (n, fmag) follow in sf[n_springs..2 n_springs].
fn w_mul(wk: vec4<f32>, d: vec3<f32>) -> vec3<f32> {
    return wk.w * d + dot(wk.xyz, d) * wk.xyz;
}

// The row's mass, kept in the spare slot d1.z of its inverse diagonal (rhs writes it, the
// host for local-global): the solver kernels read no `props`. 0 on a pinned row.
fn row_mass(d1: vec4<f32>) -> f32 {
    return d1.z;
}

fn row_pinned(d1: vec4<f32>) -> bool {
    return d1.z == 0.0;
}

// Symmetric 3x3 matrix stored as d0 = (xx, yy, zz, xy), d1 = (xz, yz, mass, 0), times r.
fn sym_mul(d0: vec4<f32>, d1: vec4<f32>, r: vec3<f32>) -> vec3<f32> {
    return vec3<f32>(
        d0.x * r.x + d0.w * r.y + d1.x * r.z,
        d0.w * r.x + d0.y * r.y + d1.y * r.z,
        d1.x * r.x + d1.y * r.y + d0.z * r.z,
    );
}
