//! The reverse step against the tangent step it transposes: for a random state tangent
//! u = (dx, dv) (zero on pinned rows), parameter direction dtheta and cotangent
//! w = (lx, lv), <w, J (u, dtheta)> = <J^T w, u> + <theta_bar, dtheta> for every
//! integrator, on a scene with damped springs, pins, gravity, all-pairs Coulomb, an
//! orbiting external charge and a swirl field. Both sides solve their linear systems with
//! CG to 1e-14 (small, well-conditioned systems): they agree to 1e-10 relative to the
//! summed magnitudes, against order-1 errors for a dropped or mis-signed term.

use super::*;
use crate::config::{Config, ExternalCharge, ExternalField, Orbit, SolverConfig, SolverMethod};
use crate::grad::cotangent::Wants;
use crate::grad::params::Direction;
use crate::grad::step::{tangent_step, TangentScratch};
use crate::model::mesh::grid;
use crate::model::{Spring, System, SystemDesc};

struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn vec3(&mut self, s: f64) -> DVec3 {
        (DVec3::new(self.unit(), self.unit(), self.unit()) * 2.0 - DVec3::ONE) * s
    }
}

/// A 5 x 4 charged cloth with shear springs, two pinned corners, varied stiffness,
/// damping, mass and charge (one particle uncharged), random velocities.
fn scene() -> System {
    let mesh = grid([1.0, 0.8], [5, 4], true, false).unwrap();
    let mut rng = Rng(5);
    let n = mesh.positions.len();
    let x: Vec<DVec3> = mesh
        .positions
        .iter()
        .map(|p| DVec3::new(p.x, 0.05 * rng.unit(), p.y))
        .collect();
    let springs = mesh
        .edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness: 20.0 * (0.5 + rng.unit()),
            // Some springs compressed (the clamp acts), some stretched.
            rest_length: (x[j as usize] - x[i as usize]).length() * (0.9 + 0.2 * rng.unit()),
            damping: 0.05 * rng.unit(),
        })
        .collect();
    let mut pinned = vec![false; n];
    pinned[n - 1] = true;
    pinned[n - 5] = true;
    System::new(SystemDesc {
        positions: x,
        velocities: (0..n).map(|_| rng.vec3(0.3)).collect(),
        masses: (0..n).map(|_| 0.01 * (0.5 + rng.unit())).collect(),
        charges: (0..n)
            .map(|i| {
                if i == 3 {
                    0.0
                } else {
                    1e-7 * (rng.unit() - 0.3)
                }
            })
            .collect(),
        pinned,
        springs,
        faces: mesh.faces,
    })
    .unwrap()
}

fn config(integrator: Integrator) -> Config {
    Config {
        integrator,
        dt: 0.01,
        local_global_iterations: 3,
        gravity: DVec3::new(0.0, 0.0, -9.81),
        solver: SolverConfig {
            method: SolverMethod::Chebyshev,
            iterations: 12,
            omega: 0.9,
            tolerance: 0.0,
            rho: None,
        },
        external_charges: vec![ExternalCharge {
            charge: -2e-7,
            position: DVec3::new(1.5, 0.5, 0.4),
            orbit: Some(Orbit {
                center: DVec3::new(0.5, 0.0, 0.4),
                axis: DVec3::Z,
                angular_velocity: 3.0,
            }),
        }],
        external_field: Some(ExternalField::Swirl {
            scale: 200.0,
            min_z: 1e-2,
        }),
        ..Config::default()
    }
    .with_softening(0.02)
}

trait Soft {
    fn with_softening(self, eps: f64) -> Self;
}
impl Soft for Config {
    fn with_softening(mut self, eps: f64) -> Self {
        self.coulomb.softening = eps;
        self
    }
}

fn dot(a: &[DVec3], b: &[DVec3]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x.dot(*y)).sum()
}

fn magnitude(a: &[DVec3], b: &[DVec3]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x.length() * y.length()).sum()
}

const INTEGRATORS: [Integrator; 4] = [
    Integrator::Imex,
    Integrator::LocalGlobal,
    Integrator::SymplecticEuler,
    Integrator::Verlet,
];

#[test]
fn every_reverse_step_is_the_transpose_of_its_tangent_step() {
    for integrator in INTEGRATORS {
        check_reverse_step(&scene(), config(integrator));
    }
}

/// The same through DDEF (lattice grid, both variants): the step's evaluations are
/// rebuilt as the adjoint driver does (`Forward::ddef_for_step`). Every particle charged
/// (a charge tangent on an uncharged one has no derivative under DDEF); masses only where
/// the tangents carry DDEF through them (not the explicit kicks).
#[test]
fn every_reverse_step_is_the_transpose_of_its_tangent_step_through_ddef() {
    use crate::config::{CoulombMethod, DdefConfig, DdefSamples, DdefVariant};
    let mut q = scene().charges().to_vec();
    q[3] = 5e-8;
    let system = scene().with_charges(&q).unwrap();
    for (integrator, variant) in INTEGRATORS.into_iter().zip(
        [DdefVariant::Corrected, DdefVariant::Paper]
            .into_iter()
            .cycle(),
    ) {
        let mut cfg = config(integrator);
        cfg.coulomb.method = CoulombMethod::Ddef(DdefConfig {
            samples: DdefSamples::Count(8),
            variant,
            ..DdefConfig::default()
        });
        check_reverse_step(&system, cfg);
    }
}

fn check_reverse_step(system: &System, cfg: Config) {
    let tight = TangentSolve {
        tolerance: 1e-14,
        max_iterations: 10_000,
    };
    let integrator = cfg.integrator;
    let explicit = matches!(integrator, Integrator::SymplecticEuler | Integrator::Verlet);
    let ddef = cfg.coulomb.method.ddef().is_some();
    {
        let (n, ns) = (system.len(), system.springs().len());
        let mut fwd = Forward::new(system, &cfg).unwrap();
        for _ in 0..3 {
            fwd.step_plain();
        }
        let before = fwd.state().clone();
        let mut rng = Rng(99);
        let pinned = system.pinned().to_vec();
        let free = |v: DVec3, i: usize| if pinned[i] { DVec3::ZERO } else { v };
        let dx0: Vec<DVec3> = (0..n).map(|i| free(rng.vec3(1.0), i)).collect();
        let dv0: Vec<DVec3> = (0..n).map(|i| free(rng.vec3(1.0), i)).collect();
        let dir = Direction {
            dq: Some((0..n).map(|_| rng.unit() * 1e-7).collect()),
            dk: Some((0..ns).map(|_| rng.unit() - 0.5).collect()),
            dm: (!(ddef && explicit)).then(|| (0..n).map(|_| (rng.unit() - 0.5) * 1e-3).collect()),
            dqe: vec![rng.unit() * 1e-7],
            dxe: vec![rng.vec3(0.3)],
        };
        // J u.
        let record = fwd.step().unwrap();
        let (mut dx, mut dv) = (dx0.clone(), dv0.clone());
        let mut tws = TangentScratch::default();
        tangent_step(&fwd, &record, &dir, &mut dx, &mut dv, &tight, &mut tws);
        let lx: Vec<DVec3> = (0..n).map(|_| rng.vec3(1.0)).collect();
        let lv: Vec<DVec3> = (0..n).map(|_| rng.vec3(1.0)).collect();
        let lhs = dot(&lx, &dx) + dot(&lv, &dv);
        let scale = magnitude(&lx, &dx) + magnitude(&lv, &dv);
        // J^T w.
        let after = fwd.state().clone();
        let mut adj = Adjoint {
            lx: lx.clone(),
            lv: lv.clone(),
        };
        let wants = Wants {
            charges: true,
            stiffnesses: true,
            masses: true,
            externals: true,
        };
        let mut cot = Cotangent::zeros(wants, n, ns, 1);
        let mut ws = ReverseScratch::default();
        fwd.ddef_for_step(&record.x0, Some(&after.x)).unwrap();
        reverse_step(
            &fwd,
            &record,
            &after.x,
            &after.v,
            before.step,
            &mut adj,
            &mut cot,
            &tight,
            AdjointSolve::Exact,
            &mut ws,
        );
        let sum = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        let theta = sum(&cot.charges, dir.dq.as_ref().unwrap())
            + sum(&cot.stiffnesses, dir.dk.as_ref().unwrap())
            + dir.dm.as_ref().map_or(0.0, |dm| sum(&cot.masses, dm))
            + cot.external_charges[0] * dir.dqe[0]
            + cot.external_positions[0].dot(dir.dxe[0]);
        let rhs = dot(&adj.lx, &dx0) + dot(&adj.lv, &dv0) + theta;
        assert!(
            (lhs - rhs).abs() <= 1e-10 * scale,
            "{integrator:?}: <w, J u> = {lhs:e}, <J^T w, u> = {rhs:e} (scale {scale:e})"
        );
        // Each group of parameters on its own (a compensating error between groups
        // would pass the sum above).
        for part in (0..5).filter(|&p| p != 2 || dir.dm.is_some()) {
            let mut d = Direction {
                dqe: vec![0.0],
                dxe: vec![DVec3::ZERO],
                ..Default::default()
            };
            match part {
                0 => d.dq = dir.dq.clone(),
                1 => d.dk = dir.dk.clone(),
                2 => d.dm = dir.dm.clone(),
                3 => d.dqe = dir.dqe.clone(),
                _ => d.dxe = dir.dxe.clone(),
            }
            let (mut dx, mut dv) = (vec![DVec3::ZERO; n], vec![DVec3::ZERO; n]);
            tangent_step(&fwd, &record, &d, &mut dx, &mut dv, &tight, &mut tws);
            let lhs = dot(&lx, &dx) + dot(&lv, &dv);
            let scale = magnitude(&lx, &dx) + magnitude(&lv, &dv);
            let rhs = match part {
                0 => sum(&cot.charges, d.dq.as_ref().unwrap()),
                1 => sum(&cot.stiffnesses, d.dk.as_ref().unwrap()),
                2 => sum(&cot.masses, d.dm.as_ref().unwrap()),
                3 => cot.external_charges[0] * d.dqe[0],
                _ => cot.external_positions[0].dot(d.dxe[0]),
            };
            assert!(scale > 0.0, "{integrator:?} part {part}: no effect");
            assert!(
                (lhs - rhs).abs() <= 1e-10 * scale,
                "{integrator:?} part {part}: {lhs:e} vs {rhs:e} (scale {scale:e})"
            );
        }
    }
}
