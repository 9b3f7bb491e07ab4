// Forward sensitivities of a local-global step (grad::step::tangent_step, local_global),
// step start for direction disp.iter, before lg_prepare moves x to y: the tangent of the
// iteration-independent part of the global right-hand side
//   a = M dy + h C_L dx + h^2 d f_field,  dy = dx + h dv,
// (C_L dx)_i = sum_k c_k (dx_i - dx_j), into tana[d n + i]; the tangent iterate starts at
// dz = dy, kept in the dv slot of tstate until tangent_integrate (mode 2) ends the step.
// d f_field_i is in bd[bd_b(i)].xyz (tangent_coulomb at x_t) when i is active (q_i != 0 or
// dq_i != 0) and disp.mode has TANGENT_FIELD, else 0. Pinned rows: dx = dv = 0, so dz = 0.
// Bank layouts: see tangent_coulomb.wgsl.

// disp.mode bits (gpu::kernels::tangents::TangentBit).
const TANGENT_FIELD: u32 = 1u;
const TANGENT_KICK: u32 = 2u;

@group(0) @binding(1) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> adj: array<u32>;
@group(0) @binding(3) var<storage, read> tdir: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> bd: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> tstate: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> tana: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    let n = params.n;
    if (i >= n) {
        return;
    }
    let sbase = disp.iter * 2u * n;
    let dbase = disp.iter * (n + params.n_springs + params.world.n_ext);
    let pr = props[i];
    let dxi = tstate[sbase + i].xyz;
    let dy = dxi + params.world.dt * tstate[sbase + n + i].xyz;
    // Reads only dx of the neighbours, writes only this row's dv slot: no race.
    var cl = vec3<f32>(0.0);
    let row = adj_row(i);
    for (var at = row.at; at < row.end; at = at + row.step) {
        let k = adj_spring(at);
        let j = entry_other(adj_word(row, at));
        cl = cl + tdir[dbase + n + k].z * (dxi - tstate[sbase + j].xyz);
    }
    var ff = vec3<f32>(0.0);
    if ((disp.mode & TANGENT_FIELD) != 0u && (pr.y != 0.0 || tdir[dbase + i].x != 0.0)) {
        ff = bd[bd_b(i)].xyz;
    }
    tana[disp.iter * n + i] = vec4<f32>(pr.x * dy + params.world.dt * cl + params.world.dt2 * ff, 0.0);
    tstate[sbase + n + i] = vec4<f32>(dy, 0.0);
}
