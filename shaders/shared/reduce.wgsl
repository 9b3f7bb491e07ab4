// Workgroup reductions: the shared scratch array and a deterministic tree sum.

var<workgroup> red: array<vec4<f32>, WG>;

// Sum of `v` over the workgroup (fixed tree order: deterministic). Every invocation
// must call it (uniform control flow); all get the total.
fn wg_sum(lid: u32, v: vec4<f32>) -> vec4<f32> {
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            red[lid] = red[lid] + red[lid + s];
        }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}
