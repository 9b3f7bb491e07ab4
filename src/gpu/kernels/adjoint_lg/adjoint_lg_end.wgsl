// The end of a local-global step reversed (grad::reverse's reverse_local_global;
// docs/physics.md §5, §9): on free rows x' = z^N and v' = (z^N - x_t) / h, so the
// cotangent of the last iterate, lx + lv / h, goes to bd's right-hand side rows for the
// first adjoint solve (pinned rows are Dirichlet: the solve keeps them at 0), x_t keeps
// -lv / h and v_t nothing yet; the sum of the adjoint solutions (lc, in the dx slot of the
// adjoint's zero direction) starts at 0.

@group(0) @binding(1) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> lx: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> lv: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> lc: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> bd: array<vec4<f32>>;

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
    let h = world_dt(world_of(i));
    let v = lv[i].xyz / h;
    bd[bd_b(i)] = vec4<f32>(lx[i].xyz + v, 0.0);
    lc[i] = vec4<f32>(0.0);
    lx[i] = vec4<f32>(select(-v, vec3<f32>(0.0), is_pinned(props[i])), 0.0);
    lv[i] = vec4<f32>(0.0);
}
