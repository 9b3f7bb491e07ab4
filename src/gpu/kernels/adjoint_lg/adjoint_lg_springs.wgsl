// Per spring, the transposed local step of local-global alternation a = disp.iter
// (grad::reverse's reverse_local_global; docs/physics.md §5, §9). The alternation solved
// P z' = c + h^2 J(k) d(z), d_k = L (z_i - z_j) / |z_i - z_j| (lg_rhs), so for its adjoint
// solution mu and w = mu_i - mu_j: the cotangent of z through d_k,
//   p_k = h^2 k L (I - n n^T) w / l   (physics.wgsl's local_projection_jvp, symmetric),
// into rows[k] (adjoint_lg_gather: i +p_k, j -p_k), and with ADJ_STIFFNESS
//   kbar_k += h^2 [w . d_k - w . (z'_i - z'_j)]   (k in J(k) d and in P's h^2 L(k) z'),
// one writer per spring. z^a and z^{a+1} are the recomputed iterates in `positions`
// (n each).

// bindings 1-3: adjoint_spring's springs, sparams and positions (the iterates z)
@group(0) @binding(4) var<storage, read> mu: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> rows: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> kbar: array<f32>;

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
    let za = disp.iter * params.n;
    let zb = za + params.n;
    let s = adjoint_spring(k, za);
    let h2 = world_dt2(world_of(s.ij.x));
    let w = mu[s.ij.x].xyz - mu[s.ij.y].xyz;
    rows[k] = vec4<f32>((h2 * s.sp.x) * local_projection_jvp(s.n, s.l, s.sp.y, w), 0.0);
    if ((disp.mode & ADJ_STIFFNESS) != 0u) {
        let z1 = positions[zb + s.ij.x].xyz - positions[zb + s.ij.y].xyz;
        kbar[k] = kbar[k] + h2 * (-s.sp.y * dot(w, s.n) - dot(w, z1));
    }
}
