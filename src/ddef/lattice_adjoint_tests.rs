//! The lattice DDEF adjoint against the tangent it transposes (dot-product tests), and its
//! bookkeeping: it adds to what is there, skips uncharged particles, is linear in w.

use super::*;
use crate::ddef::lattice_field::TARGETS_PER_TASK;
use crate::ddef::lattice_tangent::tests::cloud;
use crate::ddef::{DdefConfig, DdefSamples, DdefSolver};

const EVALS: [Evaluation; 4] = [
    Evaluation::Ddef(DdefVariant::Paper),
    Evaluation::Ddef(DdefVariant::Corrected),
    Evaluation::TextNearSet,
    Evaluation::NearOnly,
];

fn evaluation(x: &[DVec3], q: &[f64], samples: u32, eps: f64) -> LatticeDdef {
    let config = DdefConfig {
        samples: DdefSamples::Count(samples),
        ..DdefConfig::default()
    };
    DdefSolver::reference_for(config, x, q, eps).unwrap()
}

fn norm(v: &[DVec3]) -> f64 {
    v.iter().map(|a| a.length_squared()).sum::<f64>().sqrt()
}

/// (<w, J u>, <J^T w, u>, |w| |J u|) for the tangent u = (dx, dq).
fn both_sides(
    l: &LatticeDdef,
    eval: Evaluation,
    w: &[DVec3],
    dx: &[DVec3],
    dq: &[f64],
) -> (f64, f64, f64) {
    let n = w.len();
    let mut ju = vec![DVec3::ZERO; n];
    l.forces_jvp(eval, dx, dq, &mut ju);
    let lhs: f64 = w.iter().zip(&ju).map(|(a, b)| a.dot(*b)).sum();
    let (mut xbar, mut qbar) = (vec![DVec3::ZERO; n], vec![0.0; n]);
    l.forces_vjp(eval, w, &mut xbar, Some(&mut qbar));
    let rhs: f64 = xbar.iter().zip(dx).map(|(a, b)| a.dot(*b)).sum::<f64>()
        + qbar.iter().zip(dq).map(|(a, b)| a * b).sum::<f64>();
    (lhs, rhs, norm(w) * norm(&ju))
}

/// The dot-product test <w, J u> = <J^T w, u> against the tangent of
/// `lattice_tangent`, on random sets and an exactly coplanar one (a thin lattice axis),
/// every evaluation, with and without softening; position and charge tangents apart (so
/// neither part hides behind the other's magnitude) and together. Tolerance 1e-12 of
/// |w| |J u| (the Cauchy-Schwarz bound of both sides): the two sides sum the same f64
/// pair terms in different orders, about 1e-15 relative apart; a wrong sign or a dropped
/// term (a missing corrected vertex term, the weights' transpose, the far gather) is O(1).
#[test]
fn forces_vjp_is_the_transpose_of_forces_jvp() {
    let (mut x, q, dx, dq) = cloud(300, 21);
    let (w, _, _, _) = cloud(300, 22);
    let mut sets = vec![(x.clone(), q.clone(), 64)];
    x.iter_mut().for_each(|p| p.z = 0.4);
    sets.push((x, q.clone(), 64));
    let (cx, cq, _, _) = cloud(150, 23);
    sets.push((cx, cq, 27));
    let zx = vec![DVec3::ZERO; dx.len()];
    let zq = vec![0.0; dq.len()];
    let mut worst: f64 = 0.0;
    for (set, (x, q, m)) in sets.iter().enumerate() {
        let n = x.len();
        for eps in [0.0, 0.02] {
            let l = evaluation(x, q, *m, eps);
            for eval in EVALS {
                for (what, dx, dq) in [
                    ("positions", &dx[..n], &zq[..n]),
                    ("charges", &zx[..n], &dq[..n]),
                    ("both", &dx[..n], &dq[..n]),
                ] {
                    let (lhs, rhs, scale) = both_sides(&l, eval, &w[..n], dx, dq);
                    let err = (lhs - rhs).abs() / scale;
                    worst = worst.max(err);
                    assert!(
                        err <= 1e-12,
                        "set {set} eps {eps} {eval:?} {what}: {lhs} vs {rhs} ({err:e})"
                    );
                    assert!(scale > 0.0, "a test that could fail: {what}");
                }
            }
        }
    }
    eprintln!("worst |<w, Ju> - <J^T w, u>| / (|w| |Ju|): {worst:e}");
}

/// The vjp adds to what is there, touches no uncharged particle, and is linear in w.
#[test]
fn forces_vjp_accumulates_and_skips_uncharged_particles() {
    let (x, mut q, _, _) = cloud(120, 31);
    let (w, _, _, _) = cloud(120, 32);
    q[5] = 0.0;
    q[77] = 0.0;
    let l = evaluation(&x, &q, 40, 0.01);
    let eval = Evaluation::Ddef(DdefVariant::Corrected);
    let run = |w: &[DVec3], x0: DVec3, q0: f64| {
        let (mut xb, mut qb) = (vec![x0; 120], vec![q0; 120]);
        l.forces_vjp(eval, w, &mut xb, Some(&mut qb));
        (xb, qb)
    };
    let (xb, qb) = run(&w, DVec3::ZERO, 0.0);
    let (xb1, qb1) = run(&w, DVec3::ONE, 1.0);
    for i in 0..120 {
        assert_eq!(xb1[i], xb[i] + DVec3::ONE, "{i}");
        assert_eq!(qb1[i], qb[i] + 1.0, "{i}");
    }
    for i in [5, 77] {
        assert_eq!((xb[i], qb[i]), (DVec3::ZERO, 0.0));
    }
    let w2: Vec<DVec3> = w.iter().map(|a| *a * -2.5).collect();
    let (xb2, qb2) = run(&w2, DVec3::ZERO, 0.0);
    let sx = xb.iter().map(|a| a.length()).fold(0.0, f64::max);
    let sq = qb.iter().map(|a| a.abs()).fold(0.0, f64::max);
    for i in 0..120 {
        assert!((xb2[i] + xb[i] * 2.5).length() <= 1e-13 * sx, "{i}");
        assert!((qb2[i] + qb[i] * 2.5).abs() <= 1e-13 * sq, "{i}");
    }
}

/// A tetrahedron crowded past one work unit's rows (its rows split over parallel tasks):
/// the dot-product test as above (same tolerance, same reason), and the same bits from
/// one thread as from three.
#[test]
fn forces_vjp_splits_a_crowded_tetrahedron_and_does_not_depend_on_threads() {
    let (mut x, q, dx, dq) = cloud(700, 41);
    let (w, _, _, _) = cloud(700, 42);
    // 600 charges in a ball 1e-3 across around a point of the box: one tetrahedron.
    let at = DVec3::new(0.31, 0.22, 0.47);
    for p in &mut x[..600] {
        *p = at + (*p - DVec3::new(0.5, 0.35, 0.65)) * 1e-3;
    }
    let l = evaluation(&x, &q, 27, 0.01);
    let crowded = l.tets().iter().map(|t| t.end - t.begin).max().unwrap();
    assert!(
        crowded > 2 * TARGETS_PER_TASK as usize,
        "{crowded} rows in the most crowded"
    );
    for eval in EVALS {
        let (lhs, rhs, scale) = both_sides(&l, eval, &w, &dx, &dq);
        assert!(
            (lhs - rhs).abs() <= 1e-12 * scale && scale > 0.0,
            "{eval:?}: {lhs} vs {rhs}"
        );
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let (mut xb, mut qb) = (vec![DVec3::ZERO; 700], vec![0.0; 700]);
            pool.install(|| l.forces_vjp(eval, &w, &mut xb, Some(&mut qb)));
            (xb, qb)
        };
        assert_eq!(run(1), run(3), "{eval:?}");
    }
}
