// Per spring, the transposed spring terms of the IMEX step (grad::reverse::reverse_imex)
// for the adjoint solution mu at x_t: the row vector
//   p_k = h K_k (mu_j - mu_i) + d(a^T W_k b)/dd,  a = mu_i - mu_j, b = v'_i - v'_j,
// (K_k symmetric: its jvp applied to mu; the W_k direction derivative: physics.wgsl's
// w_block_vjp), gathered by adjoint_gather (i: +p_k, j: -p_k); and with ADJ_STIFFNESS
// the stiffness cotangent
//   kbar_k += h a . n (l - L) - d(a^T W_k b)/dk,
// one writer per spring (no atomics).

// bindings 1-3: adjoint_spring's springs, sparams and positions (x)
// mu in the first n entries (the tangent bank's dx slot)
@group(0) @binding(4) var<storage, read> mu: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> v1: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> kbar: array<f32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let k = flat_index(wid, nwg, lid);
    if (k >= params.n_springs) {
        return;
    }
    let s = adjoint_spring(k, 0u);
    let w = world_of(s.ij.x);
    let h = world_dt(w);
    let mi = mu[s.ij.x].xyz;
    let mj = mu[s.ij.y].xyz;
    let a = mi - mj;
    let b = v1[s.ij.x].xyz - v1[s.ij.y].xyz;
    let elastic = spring_elastic_jvp(s.n, s.l, s.sp.x, s.sp.y, mj - mi, 0.0);
    let wv = w_block_vjp(s.n, s.l, s.sp.x, s.sp.y, s.sp.z, h, world_dt2(w), a, b);
    out[k] = vec4<f32>(h * elastic + wv.xyz, 0.0);
    if ((disp.mode & ADJ_STIFFNESS) != 0u) {
        kbar[k] = kbar[k] + h * dot(a, s.n) * (s.l - s.sp.y) - wv.w;
    }
}
