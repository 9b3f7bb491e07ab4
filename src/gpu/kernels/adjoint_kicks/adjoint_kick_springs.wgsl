// Per spring, the transposed damped spring force of an explicit kick (grad::reverse's
// kick_vjp; docs/physics.md §6, §9) at the state (x, v) the kick read, for the force
// cotangent w = h (mu_i - mu_j) (mu from adjoint_kick): physics.wgsl's spring_force_vjp,
// its dd cotangent in rows[k].xyz and its du cotangent along n in rows[k].w, gathered by
// adjoint_kick_gather (no atomics); with ADJ_STIFFNESS kbar_k += its k cotangent, one
// writer per spring.

// bindings 1-3: adjoint_spring's springs, sparams and positions (x)
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
    let s = adjoint_spring(k, 0u);
    let u = v[s.ij.y].xyz - v[s.ij.x].xyz;
    let w = world_dt(world_of(s.ij.x)) * (mu[s.ij.x].xyz - mu[s.ij.y].xyz);
    let bar = spring_force_vjp(s.n, s.l, s.sp.x, s.sp.y, s.sp.z, u, w);
    rows[k] = vec4<f32>(bar.dd, bar.du);
    if ((disp.mode & ADJ_STIFFNESS) != 0u) {
        kbar[k] = kbar[k] + bar.k;
    }
}
