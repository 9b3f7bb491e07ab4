//! What a fit gives back ([`FitOutcome`]): where it stopped and why ([`StopReason`]),
//! and its iterations ([`FitHistoryEntry`]), also while it runs ([`FitOutcome::so_far`]).

use super::loss::FrameReport;
use super::sensitivity::GradStats;

/// Why [`fit`](super::fit) stopped.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The loss reached `loss_tol`.
    LossTolerance,
    /// The relative decrease fell below `ftol`.
    SmallDecrease,
    /// The step fell below `xtol`.
    SmallStep,
    /// The gradient became exactly zero after the fit moved: the loss does not depend on
    /// the parameters there.
    ZeroGradient,
    /// Not converged: the gradient is exactly zero at the start (every component), with
    /// the loss above `loss_tol`, so the start may be a maximum or a saddle as well as a
    /// minimum (a charge of 0 where only charges interact: the loss is even in it). The
    /// fit stops there; a nonzero start is needed.
    NoGradient,
    /// No step lowers the loss (LM's lambda grew past its limit, Adam's step shrank away).
    CannotReduce,
    MaxIterations,
    /// A stop request (SIGINT, SIGTERM) arrived; the best point so far is kept.
    Interrupted,
    /// Not stopped: a record written while the fit runs (`fit.json` after each iteration),
    /// its result the last accepted point so far.
    Running,
    /// An evaluation failed beyond backing off (the error is reported apart); the record
    /// keeps the iterations before it, its result the last accepted point.
    Failed,
}

impl StopReason {
    pub fn converged(&self) -> bool {
        matches!(
            self,
            Self::LossTolerance | Self::SmallDecrease | Self::SmallStep | Self::ZeroGradient
        )
    }
    pub fn describe(&self) -> &'static str {
        match self {
            Self::LossTolerance => "converged: the loss reached its tolerance",
            Self::SmallDecrease => "converged: the loss stopped decreasing (relative change below ftol)",
            Self::SmallStep => "converged: the parameter step fell below xtol",
            Self::ZeroGradient => "stopped: the gradient is zero (the loss does not depend on these parameters here)",
            Self::NoGradient => "not converged: the gradient is exactly zero at the start (the loss does not depend on the parameters at these values, e.g. a charge of 0), so the fit cannot tell which way to go; start from a nonzero --init",
            Self::CannotReduce => "stopped: no step reduces the loss further (a local minimum, or gradients too inexact for this horizon)",
            Self::MaxIterations => "stopped: reached the iteration limit",
            Self::Interrupted => "stopped: interrupted (Ctrl-C or SIGTERM) after an iteration",
            Self::Running => "running: written during the fit, whose last accepted point this is; the fit replaces it when it stops",
            Self::Failed => "failed: an evaluation failed (msc fit printed the error); this is the last accepted point before it",
        }
    }
}

/// One iteration of [`fit`](super::fit).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FitHistoryEntry {
    pub iteration: u32,
    pub loss: f64,
    pub theta: Vec<f64>,
    pub gradient_norm: f64,
    /// LM damping used for the accepted step (None at iteration 0 and for Adam).
    pub lambda: Option<f64>,
    /// |delta theta| of the step that led here.
    pub step_norm: f64,
    /// Loss evaluations so far (rejected LM trials included).
    pub evaluations: u32,
}

/// The result of [`fit`](super::fit).
#[derive(Clone, Debug)]
pub struct FitOutcome {
    pub theta: Vec<f64>,
    /// The objective at the result: the loss plus `penalty`.
    pub loss: f64,
    /// The smoothness penalty's share of `loss`.
    pub penalty: f64,
    pub initial_loss: f64,
    pub reason: StopReason,
    pub history: Vec<FitHistoryEntry>,
    /// Per-frame loss and gradient norms at the result.
    pub frames: Vec<FrameReport>,
    /// Solver statistics of the evaluation at the result.
    pub stats: GradStats,
    pub evaluations: u32,
    /// The parameters (indices into the set) whose every gradient component was exactly
    /// 0 at the start: the loss does not depend on them there, so the fit may leave them
    /// where they started (all of them: [`StopReason::NoGradient`]).
    pub flat_at_start: Vec<usize>,
}

impl FitOutcome {
    /// The outcome so far of a fit that is still running ([`StopReason::Running`]): its
    /// `history` (whose thetas may be left empty: only `theta`, the last accepted point,
    /// is read whole), without per-frame reports or solver statistics. `penalty` is
    /// `None` when the fit has a smoothness penalty (its share is known only at the end).
    pub fn so_far(history: &[FitHistoryEntry], theta: &[f64], penalty: Option<f64>) -> Self {
        let last = history.last();
        Self {
            theta: theta.to_vec(),
            loss: last.map_or(f64::NAN, |h| h.loss),
            penalty: penalty.unwrap_or(f64::NAN),
            initial_loss: history.first().map_or(f64::NAN, |h| h.loss),
            reason: StopReason::Running,
            history: history.to_vec(),
            frames: Vec::new(),
            stats: GradStats::default(),
            evaluations: last.map_or(0, |h| h.evaluations),
            flat_at_start: Vec::new(),
        }
    }
}
