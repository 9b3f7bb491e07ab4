// The linear drag on every particle, f = -c v with its world's coefficient c (kg/s)
// (docs/physics.md (3.4)), added to the forces external_forces wrote (the host records it
// only when some world has a drag). Mirrors the drag of the CPU reference's field forces
// (cpu::integrators::CpuSimulation::eval_field). Dissipative: no energy term.

@group(0) @binding(1) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> force: array<vec4<f32>>;

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
    let c = world_drag(world_of(i));
    if (c != 0.0) {
        let f = force[i];
        force[i] = vec4<f32>(f.xyz - c * v[i].xyz, f.w);
    }
}
