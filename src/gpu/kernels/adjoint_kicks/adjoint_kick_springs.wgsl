// Per spring, the transposed damped spring force of an explicit kick (grad::reverse's
// kick_vjp; docs/physics.md §6, §9) at the state (x, v) the kick read, for the force
// cotangent w = h (mu_i - mu_j) (mu from adjoint_kick): physics.wgsl's spring_force_vjp,
// its dd cotangent in rows[k].xyz and its du cotangent along n in rows[k].w, gathered by
// adjoint_kick_gather (no atomics); with ADJ_STIFFNESS kbar_k += its k cotangent, one
// writer per spring.

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
@group(0) @binding(4) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> mu: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> rows: array<vec4<f32>>;
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
    let sp = sparams[k];
    let d = x[ij.y].xyz - x[ij.x].xyz;
    let l = length(d);
    var n = vec3<f32>(0.0);
    if (l > 0.0) {
        n = d / l;
    }
    let u = v[ij.y].xyz - v[ij.x].xyz;
    let w = world_dt(world_of(ij.x)) * (mu[ij.x].xyz - mu[ij.y].xyz);
    let bar = spring_force_vjp(n, l, sp.x, sp.y, sp.z, u, w);
    rows[k] = vec4<f32>(bar.dd, bar.du);
    if ((disp.mode & ADJ_STIFFNESS) != 0u) {
        kbar[k] = kbar[k] + bar.k;
    }
}
