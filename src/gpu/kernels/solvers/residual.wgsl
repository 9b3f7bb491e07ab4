// Final residual of a solve over the free rows: partial sums of |b - A u|^2 and |b|^2 per
// workgroup (reduced by dot_reduce). Run only when the stats are asked for.

@group(0) @binding(1) var<storage, read> sf: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> adj: array<u32>;
@group(0) @binding(3) var<storage, read> bd: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> u: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> partials: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    var sums = vec4<f32>(0.0);
    if (is_row(i)) {
        let d = bd[bd_diag(i)];
        if (!row_pinned(d)) {
            let ui = u[i].xyz;
            let b = bd[bd_b(i)].xyz;
            let r = b - a_row(i, ui, row_mass(d));
            sums = vec4<f32>(dot(r, r), dot(b, b), 0.0, 0.0);
        }
    }
    let total = wg_sum(lid, sums);
    if (lid == 0u) {
        partials[group_index(wid, nwg)] = total;
    }
}
