// The physics formulas the kernels share, in f32, each mirroring a Rust function of the
// f64 reference line for line (named above each): the spring's transverse factor, an
// orbiting charge's position, the external field, the point-charge distance factor, and
// the external force and potential on a particle.

// Mirrors physics::spring::transverse_factor_and_derivative (src/physics/spring.rs):
// (1 - L/l, d/dl (1 - L/l) = L / l^2) (docs/physics.md (2.3)); a zero-rest-length spring is
// linear (factor 1), a degenerate one (l = 0, L > 0) gets 0, derivative 0 in both.
fn transverse_factor_and_derivative(l: f32, rest: f32) -> vec2<f32> {
    if (rest == 0.0) {
        return vec2<f32>(1.0, 0.0);
    }
    if (l > 0.0) {
        return vec2<f32>(1.0 - rest / l, rest / (l * l));
    }
    return vec2<f32>(0.0, 0.0);
}

// Mirrors grad::jvp::spring_elastic_jvp (src/grad/jvp.rs): d/dtheta of the elastic force
// on i, k (l - L) n, for dd = dx_j - dx_i and dk: K dd + dk (l - L) n with
// K = k [n n^T + (1 - L/l)(I - n n^T)] (n = 0 for a degenerate spring, whose K is k g I).
// K is symmetric: the adjoint applies it to its cotangent as is.
fn spring_elastic_jvp(n: vec3<f32>, l: f32, k: f32, rest: f32, dd: vec3<f32>, dk: f32) -> vec3<f32> {
    let g = transverse_factor_and_derivative(l, rest).x;
    let along = n * dot(n, dd);
    return k * (along + g * (dd - along)) + (dk * (l - rest)) * n;
}

// Mirrors grad::vjp::w_block_vjp (src/grad/vjp.rs): the gradient of a^T W b in the
// spring's direction d = x_j - x_i (xyz) and in k (w), W = alpha n n^T + beta (I - n n^T),
// alpha = h^2 k + h c, beta = h^2 k max(0, 1 - L/l), the clamp differentiated on the side
// it is evaluated on.
fn w_block_vjp(
    n: vec3<f32>,
    l: f32,
    k: f32,
    rest: f32,
    c: f32,
    h: f32,
    h2: f32,
    a: vec3<f32>,
    b: vec3<f32>,
) -> vec4<f32> {
    let factor = transverse_factor_and_derivative(l, rest);
    var g = 0.0;
    var dg = 0.0;
    if (factor.x > 0.0) {
        g = factor.x;
        dg = factor.y;
    }
    if (l == 0.0) {
        return vec4<f32>(0.0, 0.0, 0.0, h2 * g * dot(a, b));
    }
    let alpha = h2 * k + h * c;
    let beta = h2 * k * g;
    let an = dot(a, n);
    let bn = dot(b, n);
    let transverse = dot(a, b) - an * bn;
    let mixed = a * bn + b * an;
    let dd = (h2 * k * dg * transverse) * n + ((alpha - beta) / l) * (mixed - dot(mixed, n) * n);
    return vec4<f32>(dd, h2 * (an * bn + g * transverse));
}

// Mirrors grad::vjp::spring_force_vjp (src/grad/vjp.rs; docs/physics.md §6, §9): the
// transpose of the damped spring force's jvp for a cotangent w of the force on i,
// [k (l - L) + c (u . n)] n, u = v_j - v_i: the cotangents of dd = dx_j - dx_i (dd), of
// du = dv_j - dv_i (n times du) and of k. The elastic block is symmetric (its jvp on w);
// a degenerate spring (l = 0) keeps only that.
struct SpringBar {
    dd: vec3<f32>,
    du: f32,
    k: f32,
}

fn spring_force_vjp(n: vec3<f32>, l: f32, k: f32, rest: f32, c: f32, u: vec3<f32>, w: vec3<f32>) -> SpringBar {
    let elastic = spring_elastic_jvp(n, l, k, rest, w, 0.0);
    if (l == 0.0) {
        return SpringBar(elastic, 0.0, 0.0);
    }
    let wn = dot(w, n);
    let un = dot(u, n);
    let pu = u - n * un;
    let pw = w - n * wn;
    return SpringBar(elastic + (pu * wn + pw * un) * (c / l), c * wn, wn * (l - rest));
}

// Mirrors grad::jvp::local_projection_jvp (src/grad/jvp.rs; docs/physics.md §5): the
// tangent of the local projection d_k = L (x_i - x_j) / |x_i - x_j| for db = dx_i - dx_j,
// L (I - n n^T) db / l, n the unit axis (either sign); 0 for coincident ends. Symmetric:
// the adjoint applies it to its cotangent as is.
fn local_projection_jvp(n: vec3<f32>, l: f32, rest: f32, db: vec3<f32>) -> vec3<f32> {
    if (l == 0.0) {
        return vec3<f32>(0.0);
    }
    return (db - n * dot(n, db)) * (rest / l);
}

// Mirrors ExternalCharge::position_vjp (src/physics/orbit.rs): R(t)^T w, the transpose of
// an orbiting charge's d x_e(t) = R(t) d x_e(0) (Rodrigues: R^T rotates by -omega t).
fn ext_position_vjp(e: ExtCharge, t: f32, w: vec3<f32>) -> vec3<f32> {
    if (e.axis.w == 0.0) {
        return w;
    }
    let a = e.center.w * t;
    let c = cos(a);
    let s = sin(a);
    let k = e.axis.xyz;
    return w * c - cross(k, w) * s + k * dot(k, w) * (1.0 - c);
}

// Mirrors ExternalCharge::position_at (src/physics/orbit.rs).
fn ext_position(e: ExtCharge, t: f32) -> vec3<f32> {
    if (e.axis.w == 0.0) {
        return e.pos0.xyz;
    }
    let r = e.pos0.xyz - e.center.xyz;
    let a = e.center.w * t;
    let c = cos(a);
    let s = sin(a);
    let k = e.axis.xyz;
    return e.center.xyz + r * c + cross(k, r) * s + k * dot(k, r) * (1.0 - c);
}

// Mirrors ExternalField::at (src/physics/external_field.rs); the clamp of z is its clamp_z.
fn field_at(w: u32, x: vec3<f32>) -> vec3<f32> {
    if (world_field_kind(w) == FIELD_UNIFORM) {
        return world_field(w).xyz;
    }
    if (world_field_kind(w) == FIELD_SWIRL) {
        let min_z = world_field(w).y;
        var z = x.z;
        if (abs(z) < min_z) {
            z = select(min_z, -min_z, z < 0.0);
        }
        return vec3<f32>(world_field(w).x * x.y / z, world_field(w).x * x.x / z, 0.0);
    }
    if (world_field_kind(w) == FIELD_VORTEX) {
        let min_z = world_field(w).y;
        var z = x.z;
        if (abs(z) < min_z) {
            z = select(min_z, -min_z, z < 0.0);
        }
        return vec3<f32>(-world_field(w).x * x.y / z, world_field(w).x * x.x / z, 0.0);
    }
    return vec3<f32>(0.0);
}

// +inf as an f32 (a bit pattern: WGSL has no infinite constants).
fn f32_inf() -> f32 {
    return bitcast<f32>(0x7f800000u);
}

// The 1 / sqrt(r^2 + eps^2) of physics::point_charge::field (src/physics/point_charge.rs)
// for a pair of charges, +inf when r^2 + eps^2 is 0 or flushed to 0:
// coincident charges are never dropped (the CPU reference does the same), so the pair's
// force (inf * 0 = NaN) and energy turn non-finite and the run stops as diverged. The
// host refuses such pairs at t = 0 (src/gpu/host/range.rs); callers exclude the self pair by
// index, never by distance.
fn inv_dist(r2: f32) -> f32 {
    return select(inverseSqrt(r2), f32_inf(), r2 < 1.17549435e-38);
}

// inv_dist without its test, for the pair loops (all-pairs, DDEF near, far and corrected
// sums): the test was 2 of about 21 issue slots per pair, 9.5% of the all-pairs kernel on
// an H100 (BENCHMARKS.md). A coincident pair's pull q r^-3 d stays non-finite, never
// dropped: at r2 = 0 inverseSqrt gives +inf (IEEE rsqrt; D3D defines it; NVIDIA and
// llvmpipe do it), times d = 0 NaN; at a nonzero r2 below 2^-126, +inf (flushed) or at
// least 2^63, whose cube overflows f32 for any charge over 5e-24 C. Only the potential
// q / r of a subnormal r2 may stay finite (and huge). tests/gpu_ddef.rs checks both on
// the adapter at hand. The far and corrected sums never meet r2 = 0 (ddef_far.wgsl).
fn pair_inv_dist(r2: f32) -> f32 {
    return inverseSqrt(r2);
}

// r^2 + eps^2 of a pair's separation d, the additions fused: 3 issue slots where
// dot(d, d) + eps2 takes 4 (a compiler may not reassociate the final add), for the pair
// loops that feed pair_inv_dist: 9% of the all-pairs kernel and 5.5% of a 1M-charge
// DDEF step on an H200 (BENCHMARKS.md).
fn soft_r2(d: vec3<f32>, eps2: f32) -> f32 {
    return fma(d.z, d.z, fma(d.y, d.y, fma(d.x, d.x, eps2)));
}

// The same factor, 0 at r2 = 0: for a DDEF grid site in the tangent and adjoint walks
// (not a charge; the CPU reference's grid fields do the same), and for tangents (tangent_coulomb), whose self
// pair is masked by a multiplication with 0 and whose coincident pairs already made the
// forward run non-finite.
fn inv_dist_or_zero(r2: f32) -> f32 {
    return select(inverseSqrt(r2), 0.0, r2 == 0.0);
}

// Mirrors physics::point_charge::field: the field qs d / r^3 at separation d = x - x_s of a
// source of (scaled) charge qs, given inv = 1 / sqrt(r^2 + eps^2) by one of the inverse
// distances above (the caller's case: a charge, a pair loop, a site). Its derivatives are
// point_field_jvp and point_field_vjp below.
fn point_field(d: vec3<f32>, qs: f32, inv: f32) -> vec3<f32> {
    return (qs * inv * inv * inv) * d;
}

// Mirrors physics::point_charge::field_jvp: the derivative of the field of a source of
// (scaled) charge qs at d = x - x_s along a displacement delta of d and a change dqs of
// its charge, dqs phi + qs G delta (phi = d / r2^(3/2), G delta = (delta - 3 d (d . delta)
// / r2) / r2^(3/2)); 0 at r2 = 0 as inv_dist_or_zero (DDEF tangents: a site, or a pair
// whose forward force already went non-finite).
fn point_field_jvp(d: vec3<f32>, delta: vec3<f32>, qs: f32, dqs: f32, eps2: f32) -> vec3<f32> {
    let inv = inv_dist_or_zero(dot(d, d) + eps2);
    let inv3 = inv * inv * inv;
    return (dqs * inv3) * d + (qs * inv3) * (delta - (3.0 * dot(d, delta) * inv * inv) * d);
}

// Mirrors physics::point_charge::field_vjp: the transpose of point_field_jvp for a
// cotangent c of the field: xyz = qs G c (the cotangent of d; G is symmetric), w = phi . c
// (the cotangent of qs); 0 at r2 = 0 as point_field_jvp.
fn point_field_vjp(d: vec3<f32>, c: vec3<f32>, qs: f32, eps2: f32) -> vec4<f32> {
    let inv = inv_dist_or_zero(dot(d, d) + eps2);
    let inv3 = inv * inv * inv;
    let dc = dot(d, c);
    return vec4<f32>((qs * inv3) * (c - (3.0 * dc * inv * inv) * d), inv3 * dc);
}

// External point charges and field on a particle with scaled charge qs and charge q.
// Mirrors the per-particle kernel of cpu::forces::external_forces_into.
fn external_force(w: u32, x: vec3<f32>, qs: f32, q: f32, t: f32) -> vec3<f32> {
    var f = vec3<f32>(0.0);
    if (qs == 0.0) {
        return f;
    }
    for (var k = 0u; k < world_n_ext(w); k = k + 1u) {
        let e = world_ext(w, k);
        // A 0 C external charge exerts nothing, even on a particle it sits on.
        if (e.pos0.w == 0.0) {
            continue;
        }
        let d = x - ext_position(e, t);
        let inv = inv_dist(dot(d, d) + world_eps2(w));
        f = f + point_field(d, qs * e.pos0.w, inv);
    }
    return f + q * field_at(w, x);
}

// Potential energy of a particle in the external charges and a uniform field (a swirl
// field has no potential). Mirrors the per-particle term of cpu::energy::external_energy.
fn external_potential(w: u32, x: vec3<f32>, qs: f32, q: f32, t: f32) -> f32 {
    var u = 0.0;
    if (qs == 0.0) {
        return u;
    }
    for (var k = 0u; k < world_n_ext(w); k = k + 1u) {
        let e = world_ext(w, k);
        if (e.pos0.w == 0.0) {
            continue;
        }
        let d = x - ext_position(e, t);
        u = u + qs * e.pos0.w * inv_dist(dot(d, d) + world_eps2(w));
    }
    if (world_field_kind(w) == FIELD_UNIFORM) {
        u = u - q * dot(world_field(w).xyz, x);
    }
    return u;
}
