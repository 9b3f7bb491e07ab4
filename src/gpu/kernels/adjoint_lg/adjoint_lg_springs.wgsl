// Per spring, the transposed local step of local-global alternation a = disp.iter
// (grad::reverse's reverse_local_global; docs/physics.md §5, §9). The alternation solved
// P z' = c + h^2 J(k) d(z), d_k = L (z_i - z_j) / |z_i - z_j| (lg_rhs), so for its adjoint
// solution mu and w = mu_i - mu_j: the cotangent of z through d_k,
//   p_k = h^2 k L (I - n n^T) w / l   (physics.wgsl's local_projection_jvp, symmetric),
// into rows[k] (adjoint_lg_gather: i +p_k, j -p_k), and with ADJ_STIFFNESS
//   kbar_k += h^2 [w . d_k - w . (z'_i - z'_j)]   (k in J(k) d and in P's h^2 L(k) z'),
// one writer per spring. z^a and z^{a+1} are the recomputed iterates in z (n each).

// disp.mode bits (gpu::kernels::adjoint::AdjointBit).
const ADJ_STIFFNESS: u32 = 1u;
const ADJ_MASSES: u32 = 2u;
const ADJ_CHARGES: u32 = 4u;
const ADJ_EXTERNALS: u32 = 8u;
const ADJ_FIELD: u32 = 16u;
const ADJ_HALF_KICK: u32 = 32u;
const ADJ_LATER: u32 = 64u;

@group(0) @binding(1) var<storage, read> springs: array<vec2<u32>>;
// (k, L, c, 0)
@group(0) @binding(2) var<storage, read> sparams: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> z: array<vec4<f32>>;
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
    let ij = springs[k];
    let sp = sparams[k];
    let h2 = world_dt2(world_of(ij.x));
    let za = disp.iter * params.n;
    let zb = za + params.n;
    let d = z[za + ij.y].xyz - z[za + ij.x].xyz;
    let l = length(d);
    var n = vec3<f32>(0.0);
    if (l > 0.0) {
        n = d / l;
    }
    let w = mu[ij.x].xyz - mu[ij.y].xyz;
    rows[k] = vec4<f32>((h2 * sp.x) * local_projection_jvp(n, l, sp.y, w), 0.0);
    if ((disp.mode & ADJ_STIFFNESS) != 0u) {
        let z1 = z[zb + ij.x].xyz - z[zb + ij.y].xyz;
        kbar[k] = kbar[k] + h2 * (-sp.y * dot(w, n) - dot(w, z1));
    }
}
