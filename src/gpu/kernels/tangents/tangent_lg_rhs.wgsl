// Forward sensitivities of one local-global alternation (grad::step::tangent_step,
// local_global; paper eq. 11): the forward solved P z' = c + h^2 J(k) d(z) from the
// iterate z, so for direction disp.iter
//   P dz' = a + h^2 (J(dk) d + J(k) dd) - dP z',  dP = h^2 L(dk),
// per row i over its springs (each term odd under swapping the ends, so seen from the
// row's own side, as the reference's +/- gather):
//   h^2 [dk L e + k L (I - e e^T)(dz_i - dz_j) / l - dk (z'_i - z'_j)],
// (physics.wgsl's local_projection_jvp),
// e = (z_i - z_j) / l, l = |z_i - z_j| (the projection terms are 0 when l = 0).
// z is the iterate the forward's local step used (copied to `z` by tangent_copy before
// its lg_rhs), z' = `z1` the forward's solution, a = tana (tangent_lg_prepare), dz the
// tangent iterate in the dv slot of tstate. Writes the right-hand side to bd[bd_b(i)] (the
// inverse diagonal of P in its other rows is the forward's) and dz to u, the tangent
// solve's warm start. Bank layouts: see tangent_coulomb.wgsl.

@group(0) @binding(1) var<storage, read> adj: array<u32>;
@group(0) @binding(2) var<storage, read> tdir: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> z: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> z1: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> tana: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> tstate: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> u: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read_write> bd: array<vec4<f32>>;

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
    let zi = z[i].xyz;
    let z1i = z1[i].xyz;
    let dzi = tstate[sbase + n + i].xyz;
    var s = vec3<f32>(0.0);
    let row = adj_row(i);
    for (var at = row.at; at < row.end; at = at + row.step) {
        let k = adj_spring(at);
        let j = entry_other(adj_word(row, at));
        let sp = tdir[dbase + n + k];
        let dk = sp.w;
        let d = zi - z[j].xyz;
        let l = length(d);
        if (l > 0.0) {
            let ax = d / l;
            let db = dzi - tstate[sbase + n + j].xyz;
            s = s + (dk * sp.y) * ax + sp.x * local_projection_jvp(ax, l, sp.y, db);
        }
        s = s - dk * (z1i - z1[j].xyz);
    }
    bd[bd_b(i)] = vec4<f32>(tana[disp.iter * n + i].xyz + params.world.dt2 * s, 0.0);
    u[i] = vec4<f32>(dzi, 0.0);
}
