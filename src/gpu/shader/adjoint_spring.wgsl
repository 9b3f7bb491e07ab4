// The header of the adjoint's per-spring kernels (adjoint_springs, adjoint_kick_springs,
// adjoint_lg_springs): their first three bindings (the springs, their parameters, the
// positions a spring is measured at) and spring k at those positions.

@group(0) @binding(1) var<storage, read> springs: array<vec2<u32>>;
// (k, L, c, 0)
@group(0) @binding(2) var<storage, read> sparams: array<vec4<f32>>;
// x, or local-global's recomputed iterates (n each)
@group(0) @binding(3) var<storage, read> positions: array<vec4<f32>>;

// A spring's endpoints ij, its (k, L, c, 0) sp, and its length l and unit axis n (0 for a
// spring of zero length) along d = x_j - x_i.
struct AdjSpring {
    ij: vec2<u32>,
    sp: vec4<f32>,
    l: f32,
    n: vec3<f32>,
}

// Spring k at the positions from `first` on.
fn adjoint_spring(k: u32, first: u32) -> AdjSpring {
    let ij = springs[k];
    let d = positions[first + ij.y].xyz - positions[first + ij.x].xyz;
    let l = length(d);
    var n = vec3<f32>(0.0);
    if (l > 0.0) {
        n = d / l;
    }
    return AdjSpring(ij, sparams[k], l, n);
}
