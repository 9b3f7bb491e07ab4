// Per particle, the end of local-global alternation a = disp.iter reversed
// (grad::reverse's reverse_local_global; docs/physics.md §5, §9), for its adjoint solution
// mu: the spring rows of adjoint_lg_springs gathered through the adjacency (no atomics)
// are the cotangent of the iterate z^a, the next solve's right-hand side (bd); the
// constant right-hand side c collects h mu (lc = h sum mu, in the dx slot of the adjoint's
// zero direction: h lc is then the cotangent of h^2 f_field, as the IMEX adjoint's h mu is
// of h f); with ADJ_MASSES, mbar_i -= mu_i . z^{a+1}_i (P's M z'), and after the first
// alternation (a = 0, lc complete) mbar_i += (lc_i / h) . (y_i + h^2 g) (c's M y + h^2 M g).

@group(0) @binding(1) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> adj: array<u32>;
@group(0) @binding(3) var<storage, read> rows: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> mu: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> z: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> lc: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> bd: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read_write> part: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    if (!is_row(i)) {
        return;
    }
    bd[bd_b(i)] = vec4<f32>(gather_rows(i), 0.0);
    let w = world_of(i);
    let h = world_dt(w);
    let m = mu[i].xyz;
    let c = lc[i].xyz + h * m;
    lc[i] = vec4<f32>(c, 0.0);
    if ((disp.mode & ADJ_MASSES) != 0u) {
        let a = disp.iter;
        var p = part[i];
        p.y = p.y - dot(m, z[(a + 1u) * params.n + i].xyz);
        if (a == 0u) {
            p.y = p.y + dot(c / h, z[i].xyz + world_dt2(w) * world_gravity(w));
        }
        part[i] = p;
    }
}
