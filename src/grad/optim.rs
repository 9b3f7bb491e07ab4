//! Optimizers for the fitting loss: Levenberg-Marquardt on the Gauss-Newton matrix J^T J
//! (few parameters, forward gradients), L-BFGS ([`super::lbfgs`]) and Adam (many
//! parameters, typically with the adjoint's gradients). The objective is the loss plus
//! the optional smoothness penalty of [`super::smooth`].

use super::dense::solve_dense;
use super::lbfgs::{minimize, norm, LbfgsOptions, LbfgsStop, Point};
use super::loss::{Evaluation, Target};
use super::objective::evaluate;
pub use super::outcome::{FitHistoryEntry, FitOutcome, StopReason};
use super::params::ParamSet;
use super::sensitivity::GradOptions;
use super::smooth::Smoothness;
use super::GradError;

/// Which optimizer [`fit`](super::fit) runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Optimizer {
    /// Levenberg-Marquardt with Marquardt's diagonal scaling: solves
    /// (J^T J + lambda diag(J^T J)) delta = -J^T r; a step that does not lower the loss is
    /// rejected and lambda grows tenfold. Builds the P x P matrix: for few parameters.
    LevenbergMarquardt,
    /// Adam on theta_p / s_p, s_p = |theta_p(initial)| (1 when that is 0), so
    /// `learning_rate` is a relative step. For many parameters.
    Adam { learning_rate: f64 },
    /// L-BFGS on the same scaled variables, first step `initial_step` (relative).
    /// For many parameters.
    Lbfgs { initial_step: f64 },
}

impl Optimizer {
    /// Levenberg-Marquardt for up to [`Self::LM_MAX_COMPONENTS`] components with forward
    /// gradients (it needs J^T J), else L-BFGS with first step `step`.
    pub fn auto(mode: super::GradMode, components: usize, step: f64) -> Self {
        if mode == super::GradMode::Forward && components <= Self::LM_MAX_COMPONENTS {
            Self::LevenbergMarquardt
        } else {
            Self::Lbfgs { initial_step: step }
        }
    }

    /// The most components `auto` gives Levenberg-Marquardt (its P x P solve).
    pub const LM_MAX_COMPONENTS: usize = 16;

    pub fn name(&self) -> &'static str {
        match self {
            Self::LevenbergMarquardt => "levenberg_marquardt",
            Self::Adam { .. } => "adam",
            Self::Lbfgs { .. } => "lbfgs",
        }
    }
}

/// Settings of [`fit`](super::fit).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FitOptions {
    pub optimizer: Optimizer,
    pub max_iterations: u32,
    pub grad: GradOptions,
    /// Converged when an accepted step lowers the loss by less than `ftol` times the loss.
    pub ftol: f64,
    /// Converged when a step changes theta by less than `xtol` (|theta| + xtol).
    pub xtol: f64,
    /// Converged when the loss is at most this (m^2).
    pub loss_tol: f64,
    /// Weight of the smoothness penalty over neighbouring elements of per-element
    /// parameters ([`super::smooth::Smoothness`], m^2); 0 = none.
    pub smoothness: f64,
    /// With a penalty: this many stages with its weight lowered tenfold each time, then
    /// one without it, each from the last result and up to `max_iterations`
    /// (the `continuation` module); 0 = one stage with the weight as given.
    pub smoothness_continuation: u32,
    /// The continuation's last stage runs without the penalty (else with the weight
    /// lowered once more).
    pub smoothness_release: bool,
}

impl Default for FitOptions {
    fn default() -> Self {
        Self {
            optimizer: Optimizer::LevenbergMarquardt,
            max_iterations: 50,
            grad: GradOptions::default(),
            ftol: 1e-10,
            xtol: 1e-9,
            loss_tol: 0.0,
            smoothness: 0.0,
            smoothness_continuation: 0,
            smoothness_release: false,
        }
    }
}

/// An evaluation that failed because of where theta went (a negative stiffness, a run
/// or its adjoint that blew up, a value the GPU's f32 cannot hold) rather than because of
/// the inputs: the optimizer backs off instead. The GPU backend reports the values it
/// refuses as `GradError::Gpu`, the adjoint its blow-up as `NonFiniteAdjoint` or
/// `NonFiniteGradient`: these ended the fit as `failed` where the CPU's forward mode
/// backed off.
fn recoverable(e: &GradError) -> bool {
    use crate::gpu::GpuError;
    matches!(
        e,
        GradError::Model(_)
            | GradError::Config(_)
            | GradError::NonFiniteState { .. }
            | GradError::NonFiniteTangent { .. }
            | GradError::NonFiniteLoss
            | GradError::NonFiniteAdjoint { .. }
            | GradError::NonFiniteGradient
            | GradError::Gpu(
                GpuError::Model(_)
                    | GpuError::Config(_)
                    | GpuError::F32Range { .. }
                    | GpuError::F32Pair { .. }
            )
    )
}

/// One stage of `grad::fit` (`smoothness_continuation` ignored).
pub(crate) fn fit_once(
    set: &ParamSet,
    theta0: &[f64],
    targets: &[Target],
    options: &FitOptions,
    mut progress: impl FnMut(&FitHistoryEntry),
) -> Result<FitOutcome, GradError> {
    if targets.is_empty() {
        return Err(GradError::Frames("no target frame after t = 0".into()));
    }
    let lm = options.optimizer == Optimizer::LevenbergMarquardt;
    let smooth = Smoothness::new(set, options.smoothness);
    if lm && !smooth.is_off() {
        return Err(GradError::Param(
            "the smoothness penalty needs L-BFGS or Adam (Levenberg-Marquardt fits the \
             frames alone)"
                .into(),
        ));
    }
    let grad = &options.grad;
    let evaluations = 1u32;
    let current = objective(set, theta0, targets, grad, lm, &smooth)?;
    let theta = theta0.to_vec();
    let initial_loss = current.loss;
    let history = vec![FitHistoryEntry {
        iteration: 0,
        loss: current.loss,
        theta: theta.clone(),
        gradient_norm: norm(&current.gradient),
        lambda: None,
        step_norm: 0.0,
        evaluations,
    }];
    progress(&history[0]);
    // A gradient exactly 0 at the start is a stationary point the fit cannot leave, not
    // evidence of a minimum (issue: `--init 0` on a charge "converged" at once).
    let flat_at_start: Vec<usize> = (0..set.params().len())
        .filter(|&a| current.gradient[set.range(a)].iter().all(|&g| g == 0.0))
        .collect();
    let stationary = current.loss > options.loss_tol && flat_at_start.len() == set.params().len();
    let mut state = State {
        theta,
        current,
        history,
        evaluations,
        progress,
    };
    let reason = if stationary {
        StopReason::NoGradient
    } else {
        let problem = Problem {
            set,
            targets,
            options,
            smooth: &smooth,
        };
        optimize(&problem, &mut state)?
    };
    let State {
        theta,
        current,
        history,
        evaluations,
        ..
    } = state;
    Ok(FitOutcome {
        theta,
        loss: current.loss,
        penalty: current.penalty,
        initial_loss,
        reason,
        history,
        frames: current.frames,
        stats: current.stats,
        evaluations,
        flat_at_start,
    })
}

/// What one stage fits: fixed while its optimizer runs.
struct Problem<'a> {
    set: &'a ParamSet,
    targets: &'a [Target],
    options: &'a FitOptions,
    smooth: &'a Smoothness,
}

/// Where the optimizer stands: the point it returns and its evaluation, the steps so far
/// (each also handed to `progress`) and the evaluations spent.
struct State<P> {
    theta: Vec<f64>,
    current: Evaluation,
    history: Vec<FitHistoryEntry>,
    evaluations: u32,
    progress: P,
}

impl<P: FnMut(&FitHistoryEntry)> State<P> {
    /// Adds a step to the history and reports it.
    fn record(&mut self, entry: FitHistoryEntry) {
        self.history.push(entry);
        (self.progress)(self.history.last().expect("just pushed"));
    }
}

/// Runs `options.optimizer` from the evaluated start `state.current`.
fn optimize(
    problem: &Problem,
    state: &mut State<impl FnMut(&FitHistoryEntry)>,
) -> Result<StopReason, GradError> {
    match problem.options.optimizer {
        Optimizer::LevenbergMarquardt => levenberg_marquardt(problem, state),
        Optimizer::Adam { learning_rate } => adam(problem, state, learning_rate),
        Optimizer::Lbfgs { initial_step } => lbfgs(problem, state, initial_step),
    }
}

/// The loss at theta plus the smoothness penalty (folded into `loss` and `gradient`;
/// `penalty` says how much of the loss it is).
fn objective(
    set: &ParamSet,
    theta: &[f64],
    targets: &[Target],
    grad: &GradOptions,
    with_jtj: bool,
    smooth: &Smoothness,
) -> Result<Evaluation, GradError> {
    let mut e = evaluate(set, theta, targets, grad, true, with_jtj)?;
    let penalty = smooth.add(theta, Some(&mut e.gradient));
    e.loss += penalty;
    e.penalty = penalty;
    Ok(e)
}

fn lbfgs(
    problem: &Problem,
    state: &mut State<impl FnMut(&FitHistoryEntry)>,
    initial_step: f64,
) -> Result<StopReason, GradError> {
    let Problem {
        set,
        targets,
        options,
        smooth,
    } = *problem;
    let scale = variable_scales(set, &state.theta);
    let start = Point {
        x: state.theta.clone(),
        f: state.current.loss,
        gradient: state.current.gradient.clone(),
        report: state.current.clone(),
    };
    let opts = LbfgsOptions {
        max_iterations: options.max_iterations,
        ftol: options.ftol,
        xtol: options.xtol,
        ftarget: options.loss_tol,
        initial_step,
        ..LbfgsOptions::default()
    };
    let base = state.evaluations;
    let mut on_step = |iteration: u32, p: &Point<Evaluation>, step: f64, evals: u32| {
        state.record(FitHistoryEntry {
            iteration,
            loss: p.f,
            theta: p.x.clone(),
            gradient_norm: norm(&p.gradient),
            lambda: None,
            step_norm: step,
            evaluations: base + evals,
        });
    };
    let (best, stop, evals) = minimize(
        start,
        &scale,
        &opts,
        |x| {
            let e = objective(set, x, targets, &options.grad, false, smooth)?;
            Ok((e.loss, e.gradient.clone(), e))
        },
        recoverable,
        crate::interrupt::requested,
        &mut on_step,
    )?;
    state.evaluations = base + evals;
    state.theta = best.x;
    state.current = best.report;
    Ok(match stop {
        LbfgsStop::Target => StopReason::LossTolerance,
        LbfgsStop::SmallDecrease => StopReason::SmallDecrease,
        LbfgsStop::SmallStep => StopReason::SmallStep,
        LbfgsStop::ZeroGradient => StopReason::ZeroGradient,
        LbfgsStop::LineSearchFailed => StopReason::CannotReduce,
        LbfgsStop::MaxIterations => StopReason::MaxIterations,
        LbfgsStop::Interrupted => StopReason::Interrupted,
    })
}

/// Per component: the scale the first-order optimizers step in, |theta_p(initial)| (1
/// when that is 0, and for a log parameter, whose theta is already relative).
fn variable_scales(set: &ParamSet, theta: &[f64]) -> Vec<f64> {
    let mut scale: Vec<f64> = theta
        .iter()
        .map(|t| if *t != 0.0 { t.abs() } else { 1.0 })
        .collect();
    for a in 0..set.params().len() {
        if set.is_log(a) {
            scale[set.range(a)].iter_mut().for_each(|s| *s = 1.0);
        }
    }
    scale
}

/// Largest LM damping tried before giving up.
const LAMBDA_MAX: f64 = 1e12;

fn levenberg_marquardt(
    problem: &Problem,
    state: &mut State<impl FnMut(&FitHistoryEntry)>,
) -> Result<StopReason, GradError> {
    let Problem {
        set,
        targets,
        options,
        ..
    } = *problem;
    let p = state.theta.len();
    let mut lambda = 1e-3;
    for iteration in 1..=options.max_iterations {
        if state.current.loss <= options.loss_tol {
            return Ok(StopReason::LossTolerance);
        }
        if crate::interrupt::requested() {
            return Ok(StopReason::Interrupted);
        }
        if state.current.jtr.iter().all(|&g| g == 0.0) {
            return Ok(StopReason::ZeroGradient);
        }
        let diag: Vec<f64> = (0..p).map(|a| state.current.jtj[a * p + a]).collect();
        let floor = diag.iter().cloned().fold(0.0, f64::max) * 1e-12;
        // The undamped Gauss-Newton step's model decrease,
        // L - |r + J delta|^2 = -2 delta.J^T r - delta^T J^T J delta: when even that is
        // negligible the loss is at its minimum to working precision.
        let mut m = state.current.jtj.clone();
        for a in 0..p {
            m[a * p + a] += floor.max(f64::MIN_POSITIVE);
        }
        let rhs: Vec<f64> = state.current.jtr.iter().map(|g| -g).collect();
        let mut gauss_newton_step = f64::INFINITY;
        if let Some(delta) = solve_dense(&mut m, rhs, p) {
            gauss_newton_step = norm(&delta);
            let quad: f64 = (0..p)
                .map(|a| {
                    delta[a]
                        * (0..p)
                            .map(|b| state.current.jtj[a * p + b] * delta[b])
                            .sum::<f64>()
                })
                .sum();
            let lin: f64 = delta
                .iter()
                .zip(&state.current.jtr)
                .map(|(d, g)| d * g)
                .sum();
            if -2.0 * lin - quad <= options.ftol * state.current.loss {
                return Ok(StopReason::SmallDecrease);
            }
        }
        let small = options.xtol * (norm(&state.theta) + options.xtol);
        // After rejected trials the damped step shrinks with lambda whatever the loss does:
        // that is convergence only if the undamped step is small too (the minimum to
        // 1e3 xtol; trials fail there on the loss's rounding noise). Otherwise the loss
        // does not follow its gradient (a blown-up or chaotic run): say so.
        let stuck = || {
            if gauss_newton_step <= 1e3 * small {
                StopReason::SmallStep
            } else {
                StopReason::CannotReduce
            }
        };
        let mut rejected = 0u32;
        let accepted = loop {
            if lambda > LAMBDA_MAX {
                return Ok(stuck());
            }
            let mut m = state.current.jtj.clone();
            for a in 0..p {
                m[a * p + a] += lambda * diag[a].max(floor).max(f64::MIN_POSITIVE);
            }
            let rhs: Vec<f64> = state.current.jtr.iter().map(|g| -g).collect();
            let Some(delta) =
                solve_dense(&mut m, rhs, p).filter(|d| d.iter().all(|v| v.is_finite()))
            else {
                lambda *= 10.0;
                continue;
            };
            if norm(&delta) <= small {
                return Ok(if rejected == 0 {
                    StopReason::SmallStep
                } else {
                    stuck()
                });
            }
            let trial: Vec<f64> = state.theta.iter().zip(&delta).map(|(t, d)| t + d).collect();
            state.evaluations += 1;
            match evaluate(set, &trial, targets, &options.grad, true, true) {
                Ok(e) if e.loss < state.current.loss => break (trial, delta, e),
                Ok(_) => lambda *= 10.0,
                // A stop request during the trial's run: the last accepted point stands.
                Err(GradError::Interrupted) => return Ok(StopReason::Interrupted),
                Err(e) if recoverable(&e) => lambda *= 10.0,
                Err(e) => return Err(e),
            }
            rejected += 1;
        };
        let (trial, delta, e) = accepted;
        let decrease = state.current.loss - e.loss;
        let old_loss = state.current.loss;
        state.theta = trial;
        state.current = e;
        let step_norm = norm(&delta);
        state.record(FitHistoryEntry {
            iteration,
            loss: state.current.loss,
            theta: state.theta.clone(),
            gradient_norm: norm(&state.current.gradient),
            lambda: Some(lambda),
            step_norm,
            evaluations: state.evaluations,
        });
        lambda = (lambda / 10.0).max(1e-12);
        if state.current.loss <= options.loss_tol {
            return Ok(StopReason::LossTolerance);
        }
        if decrease <= options.ftol * old_loss {
            return Ok(StopReason::SmallDecrease);
        }
        if step_norm <= options.xtol * (norm(&state.theta) + options.xtol) {
            return Ok(StopReason::SmallStep);
        }
    }
    Ok(StopReason::MaxIterations)
}

fn adam(
    problem: &Problem,
    state: &mut State<impl FnMut(&FitHistoryEntry)>,
    learning_rate: f64,
) -> Result<StopReason, GradError> {
    let Problem {
        set,
        targets,
        options,
        smooth,
    } = *problem;
    let (b1, b2, eps) = (0.9, 0.999, 1e-12);
    let scale = variable_scales(set, &state.theta);
    let p = state.theta.len();
    let (mut m, mut v) = (vec![0.0; p], vec![0.0; p]);
    let mut lr = learning_rate;
    let mut t = 0i32;
    // Adam does not decrease monotonically: keep the best point.
    let mut best = (state.theta.clone(), state.current.clone());
    let mut x = state.theta.clone();
    let mut at_x = state.current.clone();
    for iteration in 1..=options.max_iterations {
        if best.1.loss <= options.loss_tol {
            break;
        }
        if crate::interrupt::requested() {
            state.theta = best.0;
            state.current = best.1;
            return Ok(StopReason::Interrupted);
        }
        if at_x.gradient.iter().all(|&g| g == 0.0) {
            state.theta = best.0;
            state.current = best.1;
            return Ok(StopReason::ZeroGradient);
        }
        t += 1;
        let mut step = vec![0.0; p];
        for a in 0..p {
            let g = at_x.gradient[a] * scale[a];
            m[a] = b1 * m[a] + (1.0 - b1) * g;
            v[a] = b2 * v[a] + (1.0 - b2) * g * g;
            let mh = m[a] / (1.0 - b1.powi(t));
            let vh = v[a] / (1.0 - b2.powi(t));
            step[a] = -lr * mh / (vh.sqrt() + eps) * scale[a];
        }
        let trial: Vec<f64> = x.iter().zip(&step).map(|(x, d)| x + d).collect();
        // A step past f64's range (an absurd learning rate) backs off as a blown-up run
        // does, rather than ending the fit with an error about a non-finite theta.
        let result = if trial.iter().all(|v| v.is_finite()) {
            state.evaluations += 1;
            objective(set, &trial, targets, &options.grad, false, smooth)
        } else {
            Err(GradError::NonFiniteLoss)
        };
        match result {
            Ok(e) => {
                x = trial;
                at_x = e;
            }
            Err(GradError::Interrupted) => {
                state.theta = best.0;
                state.current = best.1;
                return Ok(StopReason::Interrupted);
            }
            Err(e) if recoverable(&e) => {
                // Back off: restart from the best point with half the step.
                lr *= 0.5;
                m.iter_mut().chain(v.iter_mut()).for_each(|z| *z = 0.0);
                t = 0;
                x = best.0.clone();
                at_x = best.1.clone();
                if lr < learning_rate * 1e-6 {
                    break;
                }
                continue;
            }
            Err(e) => return Err(e),
        }
        if at_x.loss < best.1.loss {
            best = (x.clone(), at_x.clone());
        }
        state.record(FitHistoryEntry {
            iteration,
            loss: at_x.loss,
            theta: x.clone(),
            gradient_norm: norm(&at_x.gradient),
            lambda: None,
            step_norm: norm(&step),
            evaluations: state.evaluations,
        });
        if norm(&step) <= options.xtol * (norm(&x) + options.xtol) {
            state.theta = best.0;
            state.current = best.1;
            return Ok(StopReason::SmallStep);
        }
    }
    let reached = best.1.loss <= options.loss_tol;
    let gave_up = lr < learning_rate * 1e-6;
    state.theta = best.0;
    state.current = best.1;
    Ok(if reached {
        StopReason::LossTolerance
    } else if gave_up {
        StopReason::CannotReduce
    } else {
        StopReason::MaxIterations
    })
}

#[cfg(test)]
#[path = "optim_tests.rs"]
mod tests;
