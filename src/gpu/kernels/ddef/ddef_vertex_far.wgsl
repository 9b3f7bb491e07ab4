// DDEF far values at the four vertices of each occupied tetrahedron ("group"), as its
// targets interpolate them; one invocation per group. `paper`: the grid values as they
// are. `corrected`: minus, at vertex v, the near-list sources whose mask bit v is set
// (they are in that vertex's far field and also summed exactly by ddef_gather), so every
// source is counted once. Mirrors `Ddef::vertex_far` in src/ddef/field.rs. Units: field
// / sqrt(k_c).

@group(0) @binding(1) var<storage, read> counts: DdefCounts;
// Per group: the tetrahedron's four site indices (vertex v of the masks).
@group(0) @binding(2) var<storage, read> group_vertices: array<vec4<u32>>;
// CSR S(tau) per group: words 0..=n_groups are row offsets; entry e is (source, mask) at
// words n_groups + 1 + 2e and n_groups + 2 + 2e.
@group(0) @binding(3) var<storage, read> near: array<u32>;
@group(0) @binding(4) var<storage, read> sites: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> sources: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> far: array<vec4<f32>>;
// Per group, 4 entries: the far value at vertex v.
@group(0) @binding(7) var<storage, read_write> vertex_far: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = flat_index(wid, nwg, lid);
    let ng = counts.n_groups;
    if (g >= ng) {
        return;
    }
    let verts = group_vertices[g];
    var u = array<vec3<f32>, 4>(
        sites[verts.x].xyz,
        sites[verts.y].xyz,
        sites[verts.z].xyz,
        sites[verts.w].xyz,
    );
    // Correction per vertex, accumulated apart and subtracted once, as the reference does.
    var c = array<vec3<f32>, 4>(vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
    if (counts.corrected != 0u) {
        let eps2 = counts.eps2;
        for (var e = near[g]; e < near[g + 1u]; e = e + 1u) {
            let mask = near[ng + 2u + 2u * e];
            if (mask == 0u) {
                continue;
            }
            let sj = sources[near[ng + 1u + 2u * e]];
            for (var v = 0u; v < 4u; v = v + 1u) {
                if ((mask & (1u << v)) != 0u) {
                    let d = u[v] - sj.xyz;
                    let inv = inv_dist_or_zero(dot(d, d) + eps2);
                    c[v] = c[v] + (sj.w * inv * inv * inv) * d;
                }
            }
        }
    }
    vertex_far[4u * g] = vec4<f32>(far[verts.x].xyz - c[0], 0.0);
    vertex_far[4u * g + 1u] = vec4<f32>(far[verts.y].xyz - c[1], 0.0);
    vertex_far[4u * g + 2u] = vec4<f32>(far[verts.z].xyz - c[2], 0.0);
    vertex_far[4u * g + 3u] = vec4<f32>(far[verts.w].xyz - c[3], 0.0);
}
