// Forward sensitivities of a step (grad::step::tangent_step). IMEX: differentiating
// A(x_t, k) v' = b(x_t, v_t, theta) gives, for direction disp.iter,
//   A dv' = M dv + h (d f_elastic + d f_field) - dA v'.
// Per particle i, gathered over its springs through the CSR adjacency (no atomics):
//   d f_elastic_i = sum_k K_k dd + dk (l - L) n, K_k = k [n n^T + (1 - L/l)(I - n n^T)],
//   (dA v')_i = sum_k dW_k (v'_i - v'_j), dW_k the tangent of the clamped block W_k,
// each from the row's own side (both are odd under swapping the ends, so this equals the
// reference's +/- gather), dd = dx_j - dx_i, with the reference's conventions for a
// degenerate spring (grad::jvp). d f_field_i is in bd[bd_b(i)].xyz (tangent_coulomb)
// when i is active (q_i != 0 or dq_i != 0) and disp.mode has TANGENT_FIELD, else 0. Writes
// the right-hand side to bd[bd_b(i)] (the inverse diagonal in its other rows is the
// forward step's: same matrix) and dv to u, the solve's warm start. Bank layouts: see
// tangent_coulomb.wgsl.
// Explicit integrators (disp.mode has TANGENT_KICK; grad::step's total_force_jvp and kick): the
// damped spring-force JVP (grad::jvp::spring_force_jvp) at the forward's current (x, v),
// vnew bound to v, adds c [n (du . n + u . dn) + dn (u . n)], u = v_j - v_i,
// du = dv_j - dv_i; then u = dv + (disp.weight / m_i) (d f_spring + d f_field) on free rows
// (the kick, disp.weight = h or h/2), u = dv on pinned rows; bd is not written.

// disp.mode bits (gpu::kernels::tangents::TangentBit).
const TANGENT_FIELD: u32 = 1u;
const TANGENT_KICK: u32 = 2u;

@group(0) @binding(1) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
// v' of the forward solve
@group(0) @binding(3) var<storage, read> vnew: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> adj: array<u32>;
@group(0) @binding(5) var<storage, read> tdir: array<vec4<f32>>;
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
    let pr = props[i];
    let xi = x[i].xyz;
    let dxi = tstate[sbase + i].xyz;
    let dvi = tstate[sbase + n + i].xyz;
    let vi = vnew[i].xyz;
    let h = params.world.dt;
    let h2 = params.world.dt2;
    let kicks = (disp.mode & TANGENT_KICK) != 0u;
    var fe = vec3<f32>(0.0);
    var dav = vec3<f32>(0.0);
    let row = adj_row(i);
    for (var at = row.at; at < row.end; at = at + row.step) {
        let k = adj_spring(at);
        let j = entry_other(adj_word(row, at));
        let sp = tdir[dbase + n + k];
        let stiff = sp.x;
        let rest = sp.y;
        let dk = sp.w;
        let d = x[j].xyz - xi;
        let l = length(d);
        let dd = tstate[sbase + j].xyz - dxi;
        let w = vi - vnew[j].xyz;
        // The transverse factor 1 - L/l and its derivative in l.
        let factor = transverse_factor_and_derivative(l, rest);
        let g = factor.x;
        let dg = factor.y;
        if (l == 0.0) {
            // No axis: K = k g I; W = h^2 k g I with g constant in x.
            fe = fe + (stiff * g) * dd;
            dav = dav + (h2 * dk * g) * w;
            continue;
        }
        let nn = d / l;
        let dl = dot(nn, dd);
        let along = nn * dl;
        let dn = (dd - along) / l;
        fe = fe + stiff * (along + g * (dd - along)) + (dk * (l - rest)) * nn;
        if (kicks) {
            let uv = -w;
            let du = tstate[sbase + n + j].xyz - dvi;
            fe = fe + sp.z * ((dot(du, nn) + dot(uv, dn)) * nn + dot(uv, nn) * dn);
            continue;
        }
        // dW w = da n (n.w) + db (w - n (n.w)) + (a - b)(dn (n.w) + n (dn.w)), with the
        // clamp max(0, g) differentiated on the side it is evaluated on.
        var gc = 0.0;
        var dgc = 0.0;
        if (g > 0.0) {
            gc = g;
            dgc = dg;
        }
        let a = h2 * stiff + h * sp.z;
        let b = h2 * stiff * gc;
        let nw = dot(nn, w);
        let da = h2 * dk;
        let db = h2 * (dk * gc + stiff * dgc * dl);
        dav = dav + da * nw * nn + db * (w - nw * nn) + (a - b) * (nw * dn + dot(dn, w) * nn);
    }
    var ff = vec3<f32>(0.0);
    if ((disp.mode & TANGENT_FIELD) != 0u && (pr.y != 0.0 || tdir[dbase + i].x != 0.0)) {
        ff = bd[bd_b(i)].xyz;
    }
    if (kicks) {
        var kicked = dvi;
        if (!is_pinned(pr)) {
            kicked = dvi + (disp.weight / pr.x) * (fe + ff);
        }
        u[i] = vec4<f32>(kicked, 0.0);
        return;
    }
    let rhs = pr.x * dvi + h * (fe + ff) - dav;
    bd[bd_b(i)] = vec4<f32>(rhs, 0.0);
    u[i] = vec4<f32>(dvi, 0.0);
}
