// Per spring, the transposed spring terms of the IMEX step (grad::reverse::reverse_imex)
// for the adjoint solution mu at x_t: the row vector
//   p_k = h K_k (mu_j - mu_i) + d(a^T W_k b)/dd,  a = mu_i - mu_j, b = v'_i - v'_j,
// (K_k symmetric: its jvp applied to mu; the W_k direction derivative: physics.wgsl's
// w_block_vjp), gathered by adjoint_gather (i: +p_k, j: -p_k); and with ADJ_STIFFNESS
// the stiffness cotangent
//   kbar_k += h a . n (l - L) - d(a^T W_k b)/dk,
// one writer per spring (no atomics).

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
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
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
    let ij = springs[k];
    let w = world_of(ij.x);
    let sp = sparams[k];
    let h = world_dt(w);
    let d = x[ij.y].xyz - x[ij.x].xyz;
    let l = length(d);
    let mi = mu[ij.x].xyz;
    let mj = mu[ij.y].xyz;
    let a = mi - mj;
    let b = v1[ij.x].xyz - v1[ij.y].xyz;
    var n = vec3<f32>(0.0);
    if (l > 0.0) {
        n = d / l;
    }
    let elastic = spring_elastic_jvp(n, l, sp.x, sp.y, mj - mi, 0.0);
    let wv = w_block_vjp(n, l, sp.x, sp.y, sp.z, h, world_dt2(w), a, b);
    out[k] = vec4<f32>(h * elastic + wv.xyz, 0.0);
    if ((disp.mode & ADJ_STIFFNESS) != 0u) {
        kbar[k] = kbar[k] + h * dot(a, n) * (l - sp.y) - wv.w;
    }
}
