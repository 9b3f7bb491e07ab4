//! The f32 range check at upload: every value the kernels get, and the products they form
//! that obviously overflow (charge products, squared distances, the Coulomb term of the
//! closest charges), must be a finite, normal f32. Run before anything is allocated, so an
//! input the f64 reference handles but f32 cannot fails naming the value, instead of
//! diverging at step 0.

use crate::config::{Config, CoulombMethod, ExternalField};
use crate::gpu::error::GpuError;
use crate::model::close_pairs::first_close_pair;
use crate::model::{System, COULOMB_K, F32_MAX};
use glam::DVec3;

/// The smallest normal f32 (GPUs may flush smaller values to 0).
pub const F32_MIN_NORMAL: f64 = f32::MIN_POSITIVE as f64;
/// The largest coordinate magnitude: the squared distance of two points in the box
/// [-X, X]^3, (2 X)^2 3 = 12 X^2, stays below [`F32_MAX`].
pub fn max_coordinate() -> f64 {
    (F32_MAX / 12.0).sqrt()
}

fn range_error(what: String, value: f64, limit: String) -> GpuError {
    GpuError::F32Range { what, value, limit }
}

/// `|value| <= max` (and finite).
fn at_most(
    what: impl FnOnce() -> String,
    value: f64,
    max: f64,
    unit: &str,
) -> Result<(), GpuError> {
    if value.abs() <= max {
        Ok(())
    } else {
        Err(range_error(
            what(),
            value,
            format!("|value| <= {max:e}{unit}"),
        ))
    }
}

/// 0, or a normal f32 in magnitude: [`F32_MIN_NORMAL`] <= |value| <= [`F32_MAX`].
pub(in crate::gpu) fn zero_or_normal(
    what: impl FnOnce() -> String,
    value: f64,
    unit: &str,
) -> Result<(), GpuError> {
    if value == 0.0 || (F32_MIN_NORMAL..=F32_MAX).contains(&value.abs()) {
        Ok(())
    } else {
        Err(range_error(
            what(),
            value,
            format!("0 or {F32_MIN_NORMAL:e} <= |value| <= {F32_MAX:e}{unit}"),
        ))
    }
}

fn normal(what: impl FnOnce() -> String, value: f64, unit: &str) -> Result<(), GpuError> {
    if value != 0.0 {
        zero_or_normal(what, value, unit)
    } else {
        Err(range_error(
            what(),
            value,
            format!("{F32_MIN_NORMAL:e} <= |value| <= {F32_MAX:e}{unit}"),
        ))
    }
}

fn vec_at_most(what: &str, index: usize, v: DVec3, max: f64, unit: &str) -> Result<(), GpuError> {
    for (axis, c) in ["x", "y", "z"].iter().zip(v.to_array()) {
        at_most(|| format!("{what} {index} ({axis})"), c, max, unit)?;
    }
    Ok(())
}

/// f64 rounded to f32 and back: the value the GPU sees.
fn f32r(v: DVec3) -> DVec3 {
    v.as_vec3().as_dvec3()
}

/// True when the f32 Coulomb kernels cannot evaluate the pair (`coulomb_tiled`,
/// `external_force`): r^2 + eps^2 in f32 flushed to 0, inv^3 overflowing, or the field
/// q_s inv^3 d, the force q_i q_s inv^3 d or the potential q_i q_s inv overflowing
/// (charges scaled by sqrt(k_c) as uploaded).
fn f32_singular(d: DVec3, eps2: f64, qa: f64, qb: f64) -> bool {
    let r2 = d.length_squared() + eps2;
    if r2 < F32_MIN_NORMAL {
        return true;
    }
    let inv = 1.0 / r2.sqrt();
    let inv3 = inv * inv * inv;
    let (qa, qb) = (qa.abs(), qb.abs());
    let field = qa.max(qb) * inv3;
    let force = qa * qb * inv3 * d.length();
    let potential = qa * qb * inv;
    !(inv3 <= F32_MAX
        && field * d.length().max(1.0) <= F32_MAX
        && force <= F32_MAX
        && potential <= F32_MAX)
}

/// Pairs farther apart than this are never [`f32_singular`] for scaled charges of at most
/// `qs_max` in magnitude.
fn f32_singular_distance(qs_max: f64) -> f64 {
    let r_inv3 = F32_MAX.powf(-1.0 / 3.0);
    let r_field = (qs_max / F32_MAX).cbrt();
    let r_force = qs_max / F32_MAX.sqrt();
    let r_potential = qs_max * qs_max / F32_MAX;
    2.0 * [F32_MIN_NORMAL.sqrt(), r_inv3, r_field, r_force, r_potential]
        .into_iter()
        .fold(0.0, f64::max)
}

/// Checks a state written into a running solver with charges `q`: the positions and
/// velocities bounds of [`check`], and its charged pairs as [`check`] checks the initial
/// ones.
pub fn check_state(x: &[DVec3], v: &[DVec3], q: &[f64], config: &Config) -> Result<(), GpuError> {
    let (x_max, v_max) = (max_coordinate(), (F32_MAX / 3.0).sqrt());
    for (i, (xi, vi)) in x.iter().zip(v).enumerate() {
        vec_at_most("position of particle", i, *xi, x_max, " m")?;
        vec_at_most("velocity of particle", i, *vi, v_max, " m/s")?;
    }
    let qs_max = q.iter().fold(0.0, |m: f64, q| m.max(q.abs())) * COULOMB_K.sqrt();
    check_pairs(x, q, config, qs_max, false)
}

/// Checks every value [`super::GpuSolver`] uploads (see the module comment).
pub fn check(system: &System, config: &Config) -> Result<(), GpuError> {
    let x_max = max_coordinate();
    let sqrt_k = COULOMB_K.sqrt();
    let h = config.dt;
    normal(|| "integrator.dt".into(), h, " s")?;
    normal(|| "integrator.dt squared".into(), h * h, " s^2")?;
    let eps = config.coulomb.softening;
    zero_or_normal(|| "coulomb.softening squared".into(), eps * eps, " m^2")?;
    vec_at_most("gravity", 0, config.gravity, F32_MAX, " m/s^2")?;

    let mut q_max = (0.0, 0usize);
    let mut q_next = (0.0, 0usize);
    let mut m_max = 0.0f64;
    // Sums of m |x| and |q| |x|: bounds of the gravity and uniform-field energies
    // (-m g . x, -q E . x), which the GPU reduces in f32.
    let (mut mx, mut qx) = (0.0f64, 0.0f64);
    for i in 0..system.len() {
        vec_at_most(
            "position of particle",
            i,
            system.positions()[i],
            x_max,
            " m",
        )?;
        let m = system.masses()[i];
        normal(|| format!("mass of particle {i}"), m, " kg")?;
        m_max = m_max.max(m);
        let r = system.positions()[i].length();
        mx += m * r;
        qx += system.charges()[i].abs() * r;
        let v = system.velocities()[i];
        vec_at_most("velocity of particle", i, v, (F32_MAX / 3.0).sqrt(), " m/s")?;
        at_most(
            || format!("kinetic energy of particle {i}"),
            0.5 * m * v.length_squared(),
            F32_MAX,
            " J",
        )?;
        let q = system.charges()[i];
        zero_or_normal(|| format!("charge of particle {i}"), q, " C")?;
        zero_or_normal(
            || format!("charge of particle {i} times sqrt(k_c)"),
            q * sqrt_k,
            " C sqrt(N m^2/C^2)",
        )?;
        let a = q.abs();
        if a > q_max.0 {
            q_next = q_max;
            q_max = (a, i);
        } else if a > q_next.0 {
            q_next = (a, i);
        }
    }
    // The largest pair product the Coulomb kernels form (as q_i sqrt(k_c) q_j sqrt(k_c)).
    if config.coulomb.method != CoulombMethod::None && q_next.0 > 0.0 {
        at_most(
            || {
                format!(
                    "Coulomb product k_c q_i q_j of particles {} and {}",
                    q_max.1.min(q_next.1),
                    q_max.1.max(q_next.1)
                )
            },
            COULOMB_K * q_max.0 * q_next.0,
            F32_MAX,
            " N m^2",
        )?;
    }
    at_most(
        || "gravity force m |g| on the heaviest particle".into(),
        m_max * config.gravity.length(),
        F32_MAX,
        " N",
    )?;
    at_most(
        || "gravity energy bound |g| sum of m |x| over the particles".into(),
        config.gravity.length() * mx,
        F32_MAX,
        " J",
    )?;
    for (k, s) in system.springs().iter().enumerate() {
        zero_or_normal(|| format!("stiffness of spring {k}"), s.stiffness, " N/m")?;
        zero_or_normal(|| format!("rest length of spring {k}"), s.rest_length, " m")?;
        zero_or_normal(|| format!("damping of spring {k}"), s.damping, " N s/m")?;
        at_most(
            || format!("h^2 k + h c of spring {k}"),
            h * h * s.stiffness + h * s.damping,
            F32_MAX,
            " kg",
        )?;
        at_most(
            || format!("energy k L^2 / 2 of spring {k} compressed to a point"),
            0.5 * s.stiffness * s.rest_length * s.rest_length,
            F32_MAX,
            " J",
        )?;
    }
    match config.external_field {
        None => {}
        Some(ExternalField::Uniform(e)) => {
            vec_at_most("external_field.value", 0, e, F32_MAX, " V/m")?;
            at_most(
                || format!("external field force q |E| on particle {}", q_max.1),
                q_max.0 * e.length(),
                F32_MAX,
                " N",
            )?;
            at_most(
                || "external field energy bound |E| sum of |q| |x| over the particles".into(),
                e.length() * qx,
                F32_MAX,
                " J",
            )?;
        }
        Some(ExternalField::Swirl { scale, min_z })
        | Some(ExternalField::Vortex { scale, min_z }) => {
            at_most(|| "external_field.scale".into(), scale, F32_MAX, " V")?;
            normal(|| "external_field.min_z".into(), min_z, " m")?;
            at_most(
                || {
                    format!(
                        "external field force q s |x| / min_z bound on particle {}",
                        q_max.1
                    )
                },
                q_max.0 * scale.abs() * x_max / min_z,
                F32_MAX,
                " N",
            )?;
        }
    }
    let mut qs_max = q_max.0 * sqrt_k;
    for (k, c) in config.external_charges.iter().enumerate() {
        zero_or_normal(|| format!("charge of external charge {k}"), c.charge, " C")?;
        zero_or_normal(
            || format!("charge of external charge {k} times sqrt(k_c)"),
            c.charge * sqrt_k,
            " C sqrt(N m^2/C^2)",
        )?;
        at_most(
            || {
                format!(
                    "Coulomb product k_c q_e q_i of external charge {k} and particle {}",
                    q_max.1
                )
            },
            COULOMB_K * c.charge.abs() * q_max.0,
            F32_MAX,
            " N m^2",
        )?;
        vec_at_most("position of external charge", k, c.position, x_max, " m")?;
        if let Some(o) = c.orbit {
            vec_at_most("orbit center of external charge", k, o.center, x_max, " m")?;
            at_most(
                || format!("orbit angular velocity of external charge {k}"),
                o.angular_velocity,
                F32_MAX,
                " rad/s",
            )?;
            // The orbit's circle must stay inside the coordinate range too.
            let reach = o.center.abs().max_element() + (c.position - o.center).length();
            at_most(
                || format!("orbit reach |center| + radius of external charge {k}"),
                reach,
                x_max,
                " m",
            )?;
        }
        qs_max = qs_max.max(c.charge.abs() * sqrt_k);
    }
    check_pairs(system.positions(), system.charges(), config, qs_max, true)
}

/// Charged pairs of particles at `positions` with charges `charges` (and, with
/// `externals`, external charges with charged particles at t = 0) whose f32 Coulomb term
/// is not finite, at the f32 positions the GPU gets.
fn check_pairs(
    positions: &[DVec3],
    charges: &[f64],
    config: &Config,
    qs_max: f64,
    externals: bool,
) -> Result<(), GpuError> {
    let sqrt_k = COULOMB_K.sqrt();
    let eps2 = f64::from((config.coulomb.softening * config.coulomb.softening) as f32);
    let charged: Vec<usize> = (0..charges.len()).filter(|&i| charges[i] != 0.0).collect();
    let x: Vec<DVec3> = charged.iter().map(|&i| f32r(positions[i])).collect();
    let qs: Vec<f64> = charged
        .iter()
        .map(|&i| f64::from((charges[i] * sqrt_k) as f32))
        .collect();
    let pair_error = |what: String, d: DVec3| GpuError::F32Pair {
        what,
        distance: crate::model::robust_length(d),
        limit: format!(
            "in f32, r^2 + eps^2 must be at least {F32_MIN_NORMAL:e} m^2 and the pair's \
             1/r^3, field, force and potential at most {F32_MAX:e}"
        ),
    };
    if config.coulomb.method != CoulombMethod::None {
        let found = first_close_pair(&x, f32_singular_distance(qs_max), |a, b| {
            f32_singular(x[a] - x[b], eps2, qs[a], qs[b])
        });
        if let Some((a, b)) = found {
            return Err(pair_error(
                format!("charged particles {} and {}", charged[a], charged[b]),
                x[a] - x[b],
            ));
        }
    }
    for (k, c) in config.external_charges.iter().enumerate() {
        if !externals || c.charge == 0.0 {
            continue;
        }
        let xe = f32r(c.position_at(0.0));
        let qe = f64::from((c.charge * sqrt_k) as f32);
        for (a, &i) in charged.iter().enumerate() {
            if f32_singular(x[a] - xe, eps2, qs[a], qe) {
                return Err(pair_error(
                    format!("external charge {k} and charged particle {i} (at t = 0)"),
                    x[a] - xe,
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ExternalCharge;
    use crate::model::SystemDesc;

    fn system(x: Vec<DVec3>, q: Vec<f64>) -> System {
        let n = x.len();
        System::new(SystemDesc {
            positions: x,
            masses: vec![0.01; n],
            charges: q,
            ..Default::default()
        })
        .unwrap()
    }

    fn message(r: Result<(), GpuError>) -> String {
        r.expect_err("out of the f32 range").to_string()
    }

    #[test]
    fn values_out_of_f32_range_are_named() {
        let cfg = Config::default();
        let ok = system(vec![DVec3::ZERO, DVec3::X], vec![1e-6, 2e-6]);
        check(&ok, &cfg).unwrap();
        let m = message(check(
            &system(vec![DVec3::ZERO, DVec3::X * 1e30], vec![0.0; 2]),
            &cfg,
        ));
        assert!(
            m.contains("position of particle 1 (x)") && m.contains("1e30"),
            "{m}"
        );
        // A charge of 1e15 C fits f32 (scaled: 9.5e19) but k_c q_i q_j = 9e39 does not.
        let m = message(check(
            &system(vec![DVec3::ZERO, DVec3::X], vec![1e15; 2]),
            &cfg,
        ));
        assert!(
            m.contains("Coulomb product k_c q_i q_j of particles 0 and 1"),
            "{m}"
        );
        let tiny_dt = Config {
            dt: 1e-20,
            ..Config::default()
        };
        let m = message(check(&ok, &tiny_dt));
        assert!(m.contains("integrator.dt squared"), "{m}");
        let soft = Config {
            coulomb: crate::config::CoulombConfig {
                softening: 1e-25,
                ..Default::default()
            },
            ..Config::default()
        };
        assert!(message(check(&ok, &soft)).contains("coulomb.softening squared"));
    }

    #[test]
    fn gravity_and_field_energies_beyond_f32_are_refused() {
        // 100 particles of 0.01 kg and 1e-6 C at |x| = 10 m: each term fits f32 (force
        // m |g| = 1e36 N, energy m |g| |x| = 1e37 J), their sum (1e39 J) does not.
        let x: Vec<DVec3> = (0..100)
            .map(|i| DVec3::X * 10.0 + DVec3::Z * f64::from(i) * 1e-3)
            .collect();
        let s = system(x, vec![1e-6; 100]);
        let g = |g: f64| Config {
            gravity: DVec3::new(0.0, 0.0, -g),
            ..Config::default()
        };
        check(&s, &g(1e35)).unwrap();
        let m = message(check(&s, &g(1e38)));
        assert!(m.contains("gravity energy bound"), "{m}");
        // The same for a uniform field: 100 charges of 1e-3 C at |x| = 100 m, |E| = 1e38
        // V/m: each force q |E| = 1e35 N fits, the energy sum 1e39 J does not.
        let x: Vec<DVec3> = (0..100)
            .map(|i| DVec3::X * 100.0 + DVec3::Z * f64::from(i) * 1e-3)
            .collect();
        let s = system(x, vec![1e-3; 100]);
        let e = |e: f64| Config {
            external_field: Some(ExternalField::Uniform(DVec3::X * e)),
            ..Config::default()
        };
        check(&s, &e(1e36)).unwrap();
        let m = message(check(&s, &e(1e38)));
        assert!(m.contains("external field energy bound"), "{m}");
    }

    #[test]
    fn charges_that_coincide_only_in_f32_are_refused() {
        let cfg = Config::default();
        // Distinct in f64 (the CPU reference runs them), one point in f32.
        let s = system(vec![DVec3::X, DVec3::X * (1.0 + 1e-9)], vec![1e-6, 1e-6]);
        s.check_coulomb(0.0, true, &[]).unwrap();
        let m = message(check(&s, &cfg));
        assert!(m.contains("charged particles 0 and 1"), "{m}");
        // 1e-15 m apart: 1/r^3 overflows f32.
        let s = system(vec![DVec3::ZERO, DVec3::X * 1e-15], vec![1e-6, 1e-6]);
        assert!(message(check(&s, &cfg)).contains("charged particles 0 and 1"));
        // Uncharged ones may coincide; the Coulomb method `none` sums no pairs.
        check(&system(vec![DVec3::X, DVec3::X], vec![0.0, 1e-6]), &cfg).unwrap();
        let none = Config {
            coulomb: crate::config::CoulombConfig {
                method: CoulombMethod::None,
                softening: 0.0,
            },
            ..Config::default()
        };
        check(&system(vec![DVec3::X, DVec3::X], vec![1e-6; 2]), &none).unwrap();
        // An external charge on a particle (in f32) at t = 0.
        let ext = Config {
            external_charges: vec![ExternalCharge {
                charge: 1e-6,
                position: DVec3::X * (1.0 + 1e-9),
                orbit: None,
            }],
            ..Config::default()
        };
        let s = system(vec![DVec3::X, DVec3::Y], vec![1e-6, 0.0]);
        let m = message(check(&s, &ext));
        assert!(
            m.contains("external charge 0 and charged particle 0"),
            "{m}"
        );
    }
}
