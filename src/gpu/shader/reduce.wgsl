// Workgroup reductions: the shared scratch arrays and a deterministic sum in three
// barriers (was a tree of ten): WG / 8 invocations each sum 8 consecutive values, then one
// invocation sums those WG / 8 partials, each in a fixed pairwise order.

const RED_GROUP: u32 = 8u;

var<workgroup> red: array<vec4<f32>, WG>;
var<workgroup> red_part: array<vec4<f32>, WG / RED_GROUP>;
var<workgroup> red_total: vec4<f32>;

// (a0 + a1) + (a2 + a3) + ... in pairs, over 8 consecutive values.
fn sum8(a: array<vec4<f32>, 8>) -> vec4<f32> {
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// Sum of `v` over the workgroup (fixed order: deterministic). Every invocation must call
// it (uniform control flow); all get the total.
fn wg_sum(lid: u32, v: vec4<f32>) -> vec4<f32> {
    red[lid] = v;
    workgroupBarrier();
    if (lid < WG / RED_GROUP) {
        let b = lid * RED_GROUP;
        red_part[lid] = sum8(array<vec4<f32>, 8>(
            red[b], red[b + 1u], red[b + 2u], red[b + 3u],
            red[b + 4u], red[b + 5u], red[b + 6u], red[b + 7u],
        ));
    }
    workgroupBarrier();
    if (lid == 0u) {
        var s = array<vec4<f32>, 4>();
        for (var q = 0u; q < 4u; q = q + 1u) {
            let b = q * 8u;
            s[q] = sum8(array<vec4<f32>, 8>(
                red_part[b], red_part[b + 1u], red_part[b + 2u], red_part[b + 3u],
                red_part[b + 4u], red_part[b + 5u], red_part[b + 6u], red_part[b + 7u],
            ));
        }
        red_total = (s[0] + s[1]) + (s[2] + s[3]);
    }
    workgroupBarrier();
    return red_total;
}
