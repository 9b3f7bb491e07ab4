// Per particle, the parameter cotangents of a reversed IMEX step that need no pair sum
// (grad::reverse::reverse_imex, grad::vjp::field_param_vjp), for the adjoint solution mu
// at (x_t, v_t, t), v' the step's end velocity:
//   ADJ_MASSES:    mbar_i += r mu_i . (v_i + (h / r) g - v'_i)                 (part.y)
//                  (r = 1; an explicit kick by s = h / r: v' - v = s (F / m + g), so
//                  this is -h mu . F / m, h mu the force's cotangent; ADJ_HALF_KICK: r = 2)
//   ADJ_CHARGES:   qbar_i += h mu_i . sum_e qs_e phi(x_i - x_e(t))  (x sqrt(k_c): part.x)
//                          + h mu_i . E(x_i)                                  (part.z)
//   ADJ_EXTERNALS: per external e, ext[i n_ext + e] +=
//                  (R(t)^T [-h qs_e qs_i G(x_i - x_e(t)) mu_i], h qs_i mu_i . phi),
//                  the position's and (x sqrt(k_c)) the charge's share of particle i,
//                  summed over particles on the host.
// t is the step clock's time, or t + h with ADJ_LATER (Verlet's second kick).
// qs = q sqrt(k_c) as in props; the host applies the missing sqrt(k_c) factors. One
// writer per particle.

@group(0) @binding(1) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> v1: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> mu: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> clock: array<u32>;
@group(0) @binding(7) var<storage, read_write> part: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read_write> ext: array<vec4<f32>>;

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
    let w = world_of(i);
    let pr = props[i];
    let h = world_dt(w);
    let m = mu[i].xyz;
    let xi = x[i].xyz;
    let t = clock_time(clock[0], clock[1], select(0u, 1u, (disp.mode & ADJ_LATER) != 0u), h);
    var p = part[i];
    if ((disp.mode & ADJ_MASSES) != 0u) {
        let r = select(1.0, 2.0, (disp.mode & ADJ_HALF_KICK) != 0u);
        p.y = p.y + r * dot(m, v[i].xyz + (h / r) * world_gravity(w) - v1[i].xyz);
    }
    let n_ext = world_n_ext(w);
    for (var e = 0u; e < n_ext; e = e + 1u) {
        let ec = world_ext(w, e);
        let d = xi - ext_position(ec, t);
        let r2 = dot(d, d) + world_eps2(w);
        let inv = inv_dist_or_zero(r2);
        let inv3 = inv * inv * inv;
        let phi = d * inv3;
        if ((disp.mode & ADJ_CHARGES) != 0u) {
            p.x = p.x + h * ec.pos0.w * dot(m, phi);
        }
        if ((disp.mode & ADJ_EXTERNALS) != 0u && pr.y != 0.0) {
            let gm = (m - (3.0 * dot(d, m) * inv * inv) * d) * inv3;
            let xbar = ext_position_vjp(ec, t, (-h * ec.pos0.w * pr.y) * gm);
            let at = i * n_ext + e;
            ext[at] = ext[at] + vec4<f32>(xbar, h * pr.y * dot(m, phi));
        }
    }
    if ((disp.mode & ADJ_CHARGES) != 0u) {
        p.z = p.z + h * dot(m, field_at(w, xi));
    }
    part[i] = p;
}
