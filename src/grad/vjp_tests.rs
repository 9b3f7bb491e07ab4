//! Dot-product tests of the transposed kernels: <w, J u> = <J^T w, u> in f64, with J u
//! from the tangent kernels of `super::super::jvp`. Both sides are sums of the same
//! products in another order, so they agree to rounding: 1e-12 relative to the summed
//! magnitudes (a wrong sign, a dropped or transposed term shows at order 1).

use super::*;
use crate::config::{ExternalCharge, ExternalField, Orbit};
use crate::grad::cotangent::Wants;
use crate::grad::jvp::{field_forces_jvp, spring_force_jvp, w_block_jvp};

struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn vec3(&mut self) -> DVec3 {
        DVec3::new(self.unit(), self.unit(), self.unit()) * 2.0 - DVec3::ONE
    }
}

fn agree(a: f64, b: f64, scale: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-12 * scale.max(a.abs()),
        "{what}: <w, J u> = {a:e}, <J^T w, u> = {b:e}"
    );
}

/// Springs stretched, compressed (the clamp at 0), at zero rest length, and degenerate.
fn springs() -> Vec<(DVec3, DVec3, Spring)> {
    let mut rng = Rng(7);
    let mut out = Vec::new();
    for (rest, c) in [(0.5, 0.4), (3.0, 0.0), (0.0, 1.1), (1.0, 0.3)] {
        let xi = rng.vec3();
        let xj = xi + rng.vec3();
        let s = Spring {
            i: 0,
            j: 1,
            stiffness: 1.0 + rng.unit() * 5.0,
            rest_length: rest,
            damping: c,
        };
        out.push((xi, xj, s));
    }
    let p = DVec3::new(0.2, -0.4, 0.9);
    out.push((p, p, out[0].2));
    out
}

#[test]
fn spring_force_vjp_is_the_transpose_of_its_jvp() {
    let mut rng = Rng(11);
    for (xi, xj, s) in springs() {
        let (vi, vj) = (rng.vec3(), rng.vec3());
        let (w, dd, du, dk) = (rng.vec3(), rng.vec3(), rng.vec3(), rng.unit() - 0.5);
        let ju = spring_force_jvp(xi, xj, vi, vj, &s, dd, du, dk);
        let bar = spring_force_vjp(xi, xj, vi, vj, &s, w);
        let lhs = w.dot(ju);
        let rhs = bar.dd.dot(dd) + bar.du.dot(du) + bar.k * dk;
        agree(lhs, rhs, w.length() * ju.length(), "spring force");
    }
}

#[test]
fn w_block_vjp_is_the_transpose_of_its_jvp() {
    let mut rng = Rng(13);
    for h in [1e-3, 0.05, 0.7] {
        for (xi, xj, s) in springs() {
            let (a, b, dd, dk) = (rng.vec3(), rng.vec3(), rng.vec3(), rng.unit() - 0.5);
            let lhs = a.dot(w_block_jvp(xi, xj, &s, h, dd, dk, b));
            let (gd, gk) = w_block_vjp(xi, xj, &s, h, a, b);
            let rhs = gd.dot(dd) + gk * dk;
            let scale = a.length() * b.length() * h * (h * s.stiffness + s.damping) * 10.0;
            agree(lhs, rhs, scale, "W block");
            // Symmetric in (a, b), as W is.
            let (gd2, gk2) = w_block_vjp(xi, xj, &s, h, b, a);
            assert!((gd - gd2).length() <= 1e-14 * scale && (gk - gk2).abs() <= 1e-14 * scale);
        }
    }
}

/// Charged particles (one uncharged), two external charges (one orbiting) and each kind
/// of field, softened so the pairs are O(1).
fn field_scene() -> (Vec<DVec3>, Vec<f64>, Config) {
    let mut rng = Rng(17);
    let x: Vec<DVec3> = (0..23).map(|_| rng.vec3()).collect();
    let q: Vec<f64> = (0..23)
        .map(|i| {
            if i == 5 {
                0.0
            } else {
                (rng.unit() - 0.4) * 1e-6
            }
        })
        .collect();
    let mut config = Config::default();
    config.coulomb.softening = 0.05;
    config.external_charges = vec![
        ExternalCharge {
            charge: -3e-6,
            position: DVec3::new(2.0, 1.0, 0.5),
            orbit: Some(Orbit {
                center: DVec3::new(0.5, 0.0, 0.0),
                axis: DVec3::Z,
                angular_velocity: 0.8,
            }),
        },
        ExternalCharge {
            charge: 1e-6,
            position: DVec3::new(-1.5, 0.3, -2.0),
            orbit: None,
        },
    ];
    (x, q, config)
}

fn fields() -> [Option<ExternalField>; 4] {
    [
        None,
        Some(ExternalField::Swirl {
            scale: 300.0,
            min_z: 1e-3,
        }),
        Some(ExternalField::Vortex {
            scale: -200.0,
            min_z: 1e-3,
        }),
        Some(ExternalField::Uniform(DVec3::new(1e3, -2e3, 5e2))),
    ]
}

#[test]
fn field_position_vjp_is_the_transpose_of_its_jvp() {
    let (x, q, mut config) = field_scene();
    let mut rng = Rng(19);
    let w: Vec<DVec3> = x.iter().map(|_| rng.vec3()).collect();
    let u: Vec<DVec3> = x.iter().map(|_| rng.vec3()).collect();
    for fld in fields() {
        config.external_field = fld;
        let n = x.len();
        let (mut ju, mut jtw) = (vec![DVec3::ZERO; n], vec![DVec3::ZERO; n]);
        field_forces_jvp(
            &x,
            &q,
            &config,
            0.7,
            &u,
            &Direction::default(),
            None,
            &mut ju,
        );
        field_forces_vjp(&x, &q, &config, 0.7, &w, None, &mut jtw);
        let lhs: f64 = w.iter().zip(&ju).map(|(a, b)| a.dot(*b)).sum();
        let rhs: f64 = jtw.iter().zip(&u).map(|(a, b)| a.dot(*b)).sum();
        let scale: f64 = w
            .iter()
            .zip(&ju)
            .map(|(a, b)| a.length() * b.length())
            .sum();
        agree(lhs, rhs, scale, &format!("field positions {fld:?}"));
    }
}

#[test]
fn field_parameter_vjp_is_the_transpose_of_its_jvp() {
    let (x, q, mut config) = field_scene();
    let mut rng = Rng(23);
    let n = x.len();
    let w: Vec<DVec3> = x.iter().map(|_| rng.vec3()).collect();
    let dir = Direction {
        dq: Some((0..n).map(|_| (rng.unit() - 0.5) * 1e-6).collect()),
        dqe: vec![(rng.unit() - 0.5) * 1e-6, (rng.unit() - 0.5) * 1e-6],
        dxe: vec![rng.vec3(), rng.vec3()],
        ..Default::default()
    };
    let wants = Wants {
        charges: true,
        externals: true,
        ..Default::default()
    };
    for fld in fields() {
        config.external_field = fld;
        let zero = vec![DVec3::ZERO; n];
        let mut ju = vec![DVec3::ZERO; n];
        field_forces_jvp(&x, &q, &config, 0.7, &zero, &dir, None, &mut ju);
        let mut cot = Cotangent::zeros(wants, n, 0, 2);
        field_param_vjp(&x, &q, &config, 0.7, &w, None, &mut cot);
        let lhs: f64 = w.iter().zip(&ju).map(|(a, b)| a.dot(*b)).sum();
        let dq = dir.dq.as_ref().unwrap();
        let rhs: f64 = (0..n).map(|i| cot.charges[i] * dq[i]).sum::<f64>()
            + (0..2)
                .map(|e| {
                    cot.external_charges[e] * dir.dqe[e] + cot.external_positions[e].dot(dir.dxe[e])
                })
                .sum::<f64>();
        let scale: f64 = w
            .iter()
            .zip(&ju)
            .map(|(a, b)| a.length() * b.length())
            .sum();
        agree(lhs, rhs, scale, &format!("field parameters {fld:?}"));
    }
}
