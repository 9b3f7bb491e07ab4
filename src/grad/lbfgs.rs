//! Limited-memory BFGS (Nocedal and Wright, Algorithm 7.4 with the two-loop recursion)
//! with a backtracking Armijo line search, on diagonally scaled variables u = x / s: the
//! optimizer for many parameters, where the adjoint gives the gradient and no
//! Gauss-Newton matrix is at hand.
//!
//! Written here rather than taken from a crate: a trial point whose simulation blows up
//! (a recoverable error) must shrink the step instead of ending the fit, the fit must
//! stop cleanly between iterations on an interrupt, and each evaluation carries the run's
//! report along; about 200 lines with their tests.

use std::collections::VecDeque;

/// Settings of [`minimize`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LbfgsOptions {
    /// Correction pairs kept.
    pub memory: usize,
    pub max_iterations: u32,
    /// Converged when an accepted step lowers f by less than `ftol` times f.
    pub ftol: f64,
    /// Converged when a step (in scaled variables) is below `xtol` (|u| + xtol).
    pub xtol: f64,
    /// Converged when f is at most this.
    pub ftarget: f64,
    /// Length of the first step in scaled variables, along the steepest descent.
    pub initial_step: f64,
}

impl Default for LbfgsOptions {
    fn default() -> Self {
        Self {
            memory: 10,
            max_iterations: 100,
            ftol: 1e-10,
            xtol: 1e-9,
            ftarget: 0.0,
            initial_step: 0.02,
        }
    }
}

/// Why [`minimize`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LbfgsStop {
    Target,
    SmallDecrease,
    SmallStep,
    ZeroGradient,
    /// No step along the search direction lowered f.
    LineSearchFailed,
    MaxIterations,
    Interrupted,
}

/// One evaluated point: f, its gradient and what the evaluation reported.
#[derive(Clone, Debug)]
pub struct Point<T> {
    pub x: Vec<f64>,
    pub f: f64,
    pub gradient: Vec<f64>,
    pub report: T,
}

/// Progress of an accepted iteration: (iteration, the point, |step| in x, evaluations).
pub type Progress<'a, T> = dyn FnMut(u32, &Point<T>, f64, u32) + 'a;

/// Minimizes `f` from `start` (already evaluated). `f(x)` returns (value, gradient,
/// report) or an error; `recoverable` errors shrink the step, others end the search.
/// `scale` are the variables' scales (positive). Returns the last accepted point (the
/// best: every accepted step lowers f), why it stopped and the evaluations made.
#[allow(clippy::type_complexity)]
pub fn minimize<T, E>(
    start: Point<T>,
    scale: &[f64],
    options: &LbfgsOptions,
    mut f: impl FnMut(&[f64]) -> Result<(f64, Vec<f64>, T), E>,
    recoverable: impl Fn(&E) -> bool,
    interrupted: impl Fn() -> bool,
    progress: &mut Progress<'_, T>,
) -> Result<(Point<T>, LbfgsStop, u32), E> {
    let n = start.x.len();
    let mut at = start;
    let mut evaluations = 0u32;
    // Scaled gradient: d f / d u = s d f / d x.
    let scaled = |g: &[f64]| -> Vec<f64> { g.iter().zip(scale).map(|(g, s)| g * s).collect() };
    let mut g = scaled(&at.gradient);
    let mut pairs: VecDeque<(Vec<f64>, Vec<f64>, f64)> = VecDeque::new();
    for iteration in 1..=options.max_iterations {
        if at.f <= options.ftarget {
            return Ok((at, LbfgsStop::Target, evaluations));
        }
        if interrupted() {
            return Ok((at, LbfgsStop::Interrupted, evaluations));
        }
        let gmax = g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        if gmax == 0.0 {
            return Ok((at, LbfgsStop::ZeroGradient, evaluations));
        }
        let mut d = direction(&g, &pairs, options.initial_step / gmax);
        let mut slope = dot(&g, &d);
        if slope.is_nan() || slope >= 0.0 {
            // Not a descent direction (curvature information gone stale): restart.
            pairs.clear();
            d = direction(&g, &pairs, options.initial_step / gmax);
            slope = dot(&g, &d);
        }
        let mut alpha = 1.0;
        let mut accepted = None;
        for _ in 0..40 {
            let trial: Vec<f64> = (0..n).map(|k| at.x[k] + alpha * d[k] * scale[k]).collect();
            if trial.iter().any(|x| !x.is_finite()) {
                // A step past f64's range (an absurd first step): shorter, as for a
                // trial that blows up, rather than an evaluation at infinity.
                alpha *= 0.25;
                continue;
            }
            evaluations += 1;
            match f(&trial) {
                Ok((ft, gt, report)) if ft.is_finite() && ft <= at.f + 1e-4 * alpha * slope => {
                    accepted = Some(Point {
                        x: trial,
                        f: ft,
                        gradient: gt,
                        report,
                    });
                    break;
                }
                Ok((ft, _, _)) if ft.is_finite() => {
                    // Minimum of the quadratic through f(0), f'(0) and f(alpha), kept within
                    // [0.1, 0.5] of alpha.
                    let q = -slope * alpha * alpha / (2.0 * (ft - at.f - slope * alpha));
                    alpha = q.clamp(0.1 * alpha, 0.5 * alpha);
                }
                Ok(_) => alpha *= 0.25,
                // Failed on a stop request (a run that checks it): stop at the last point.
                Err(_) if interrupted() => return Ok((at, LbfgsStop::Interrupted, evaluations)),
                Err(e) if recoverable(&e) => alpha *= 0.25,
                Err(e) => return Err(e),
            }
        }
        let Some(next) = accepted else {
            return Ok((at, LbfgsStop::LineSearchFailed, evaluations));
        };
        let s: Vec<f64> = d.iter().map(|v| v * alpha).collect();
        let g_next = scaled(&next.gradient);
        let y: Vec<f64> = g_next.iter().zip(&g).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        if sy > 1e-12 * norm(&s) * norm(&y) {
            pairs.push_back((s.clone(), y, 1.0 / sy));
            if pairs.len() > options.memory {
                pairs.pop_front();
            }
        }
        let decrease = at.f - next.f;
        let old = at.f;
        let u_norm = norm(
            &next
                .x
                .iter()
                .zip(scale)
                .map(|(x, s)| x / s)
                .collect::<Vec<_>>(),
        );
        let step_x = norm(&(0..n).map(|k| s[k] * scale[k]).collect::<Vec<_>>());
        at = next;
        g = g_next;
        progress(iteration, &at, step_x, evaluations);
        if at.f <= options.ftarget {
            return Ok((at, LbfgsStop::Target, evaluations));
        }
        if decrease <= options.ftol * old {
            return Ok((at, LbfgsStop::SmallDecrease, evaluations));
        }
        if norm(&s) <= options.xtol * (u_norm + options.xtol) {
            return Ok((at, LbfgsStop::SmallStep, evaluations));
        }
    }
    Ok((at, LbfgsStop::MaxIterations, evaluations))
}

/// -H g by the two-loop recursion, H0 = gamma I with gamma = s.y / y.y of the newest pair
/// (`first` without pairs).
fn direction(g: &[f64], pairs: &VecDeque<(Vec<f64>, Vec<f64>, f64)>, first: f64) -> Vec<f64> {
    let mut q = g.to_vec();
    let mut a = Vec::with_capacity(pairs.len());
    for (s, y, rho) in pairs.iter().rev() {
        let ai = rho * dot(s, &q);
        q.iter_mut().zip(y).for_each(|(q, y)| *q -= ai * y);
        a.push(ai);
    }
    let gamma = match pairs.back() {
        Some((s, y, _)) => dot(s, y) / dot(y, y),
        None => first,
    };
    q.iter_mut().for_each(|q| *q *= gamma);
    for ((s, y, rho), ai) in pairs.iter().zip(a.iter().rev()) {
        let b = rho * dot(y, &q);
        q.iter_mut().zip(s).for_each(|(q, s)| *q += (ai - b) * s);
    }
    q.iter_mut().for_each(|q| *q = -*q);
    q
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Euclidean norm, finite whenever the components are: where the plain sum of squares
/// overflows (components near 1e155 and up: |grad| printed `inf`, and L-BFGS's step test
/// took an infinite norm for a converged step) or underflows, it is
/// taken of the components scaled by the largest. Elsewhere the plain sum, unchanged.
pub(super) fn norm(v: &[f64]) -> f64 {
    let plain = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let big = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if (plain.is_finite() && (plain > 0.0 || big == 0.0)) || !big.is_finite() {
        return plain;
    }
    big * v.iter().map(|x| (x / big) * (x / big)).sum::<f64>().sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        x0: Vec<f64>,
        scale: &[f64],
        f: impl Fn(&[f64]) -> Result<(f64, Vec<f64>), ()>,
        opts: &LbfgsOptions,
    ) -> (Point<()>, LbfgsStop, u32) {
        let (f0, g0) = f(&x0).unwrap();
        let start = Point {
            x: x0,
            f: f0,
            gradient: g0,
            report: (),
        };
        minimize(
            start,
            scale,
            opts,
            |x| f(x).map(|(v, g)| (v, g, ())),
            |_| true,
            || false,
            &mut |_, _, _, _| {},
        )
        .unwrap()
    }

    /// The Rosenbrock valley from (-1.2, 1) to (1, 1), in well under the iterations
    /// steepest descent would need.
    #[test]
    fn finds_the_rosenbrock_minimum() {
        let f = |x: &[f64]| -> Result<(f64, Vec<f64>), ()> {
            let (a, b) = (1.0 - x[0], x[1] - x[0] * x[0]);
            Ok((
                a * a + 100.0 * b * b,
                vec![-2.0 * a - 400.0 * x[0] * b, 200.0 * b],
            ))
        };
        let opts = LbfgsOptions {
            max_iterations: 200,
            ftol: 0.0,
            ftarget: 1e-18,
            ..Default::default()
        };
        let (p, stop, evals) = run(vec![-1.2, 1.0], &[1.0, 1.0], f, &opts);
        assert_eq!(stop, LbfgsStop::Target, "{p:?}");
        assert!((p.x[0] - 1.0).abs() < 1e-8 && (p.x[1] - 1.0).abs() < 1e-8);
        assert!(evals < 150, "{evals} evaluations");
    }

    /// Parameters near 1e160 in their own units (scale 1): the step test's norm of u stays
    /// finite, so the search goes on to the minimum; a plain sum of squares overflowed to
    /// inf and took the first step, 1e-5 of the way, for converged.
    #[test]
    fn parameters_near_1e160_are_not_converged_by_an_overflowed_norm() {
        let (big, t) = (1e160, [3e160, -2e160]);
        let f = |x: &[f64]| -> Result<(f64, Vec<f64>), ()> {
            let r: Vec<f64> = (0..2).map(|k| (x[k] - t[k]) / big).collect();
            // f of order 1e150, so its gradient (1e-10) leaves the first step finite.
            let g = r.iter().map(|r| 2e150 * r / big).collect();
            Ok((1e150 * r.iter().map(|r| r * r).sum::<f64>(), g))
        };
        let opts = LbfgsOptions {
            ftol: 0.0,
            initial_step: 1e155,
            ..Default::default()
        };
        let (p, stop, _) = run(vec![big, big], &[1.0, 1.0], f, &opts);
        for (x, t) in p.x.iter().zip(t) {
            assert!((x / t - 1.0).abs() < 1e-6, "{stop:?}: {:?}", p.x);
        }
    }

    /// A first step past f64's range (`msc fit --learning-rate 1e300`) shortens the step
    /// like a failed trial: the function, which refuses a non-finite point with an
    /// unrecoverable error (as `ParamSet` does), is never called there.
    #[test]
    fn a_step_past_f64_range_is_shortened_not_evaluated() {
        let f = |x: &[f64]| -> Result<(f64, Vec<f64>, ()), &'static str> {
            if !x[0].is_finite() {
                return Err("non-finite point");
            }
            Ok((x[0] * x[0], vec![2.0 * x[0]], ()))
        };
        let start = Point {
            x: vec![1.0],
            f: 1.0,
            gradient: vec![2.0],
            report: (),
        };
        let opts = LbfgsOptions {
            max_iterations: 5,
            initial_step: 1e300,
            ..Default::default()
        };
        let no_progress = &mut |_: u32, _: &Point<()>, _: f64, _: u32| {};
        let (p, _, _) = minimize(start, &[1e10], &opts, f, |_| false, || false, no_progress)
            .expect("a non-finite trial ended the search");
        assert!(p.f <= 1.0 && p.x[0].is_finite(), "{p:?}");
    }

    /// An ill-scaled 200-dimensional quadratic (scales 1e-7 to 1e2, as charges and
    /// stiffnesses are) converges when each variable's scale is given, and a trial point
    /// where the function fails (a blow-up) shrinks the step instead of ending the search.
    #[test]
    fn minimizes_a_scaled_quadratic_and_backs_off_from_failures() {
        let n = 200;
        let scale: Vec<f64> = (0..n)
            .map(|k| if k % 2 == 0 { 1e-7 } else { 1e2 })
            .collect();
        let c: Vec<f64> = (0..n).map(|k| 1.0 + (k % 7) as f64).collect();
        let target: Vec<f64> = (0..n).map(|k| scale[k] * (1.0 + 0.1 * k as f64)).collect();
        let f = |x: &[f64]| -> Result<(f64, Vec<f64>), ()> {
            let mut v = 0.0;
            let mut g = vec![0.0; n];
            for k in 0..n {
                let u = (x[k] - target[k]) / scale[k];
                if u.abs() > 50.0 {
                    return Err(());
                }
                v += c[k] * u * u;
                g[k] = 2.0 * c[k] * u / scale[k];
            }
            Ok((v, g))
        };
        let x0: Vec<f64> = scale.clone();
        let opts = LbfgsOptions {
            max_iterations: 100,
            ftol: 0.0,
            xtol: 0.0,
            ftarget: 1e-20,
            initial_step: 100.0,
            ..Default::default()
        };
        let (p, stop, _) = run(x0, &scale, f, &opts);
        assert_eq!(stop, LbfgsStop::Target);
        for k in 0..n {
            assert!((p.x[k] - target[k]).abs() <= 1e-8 * scale[k], "{k}");
        }
    }
}
