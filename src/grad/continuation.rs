//! The fit's entry point, [`fit`]: one stage, or the smoothness continuation for
//! per-element fits ([`FitOptions::smoothness_continuation`]): fits with the smoothness penalty's weight lowered tenfold stage by stage, then one
//! without it, each from the previous stage's result.
//!
//! From a uniform guess, an unpenalized L-BFGS fit of every spring stiffness can follow a
//! valley in which a poorly observed spring (and its neighbours) drift far from the truth
//! while the loss keeps falling: on a 16 x 16 cloth one soft spring is driven ~25x too
//! stiff over 300 iterations (82% RMS). The penalty keeps each element near its
//! neighbours while the well-observed ones settle, which puts the fit in the right basin;
//! but it also biases sharp changes (a stiff band's edges). The later stages, with less
//! penalty and finally none, remove that bias from starts that already explain the frames.

use super::loss::Target;
use super::optim::{fit_once, FitHistoryEntry, FitOptions, FitOutcome, StopReason};
use super::params::ParamSet;
use super::GradError;

/// Minimizes the mean squared position error against `targets` from `theta0`;
/// `progress` sees every iteration (iteration 0 is the start).
pub fn fit(
    set: &ParamSet,
    theta0: &[f64],
    targets: &[Target],
    options: &FitOptions,
    progress: impl FnMut(&FitHistoryEntry),
) -> Result<FitOutcome, GradError> {
    if options.smoothness_continuation > 0 && options.smoothness > 0.0 {
        return fit_continued(set, theta0, targets, options, progress);
    }
    fit_once(set, theta0, targets, options, progress)
}

/// The stages (see the module documentation): weights lambda, lambda / 10, ... (
/// `options.smoothness_continuation` of them), then 0, each up to
/// `options.max_iterations`. `progress` sees each stage's iterations numbered after the
/// previous stage's (a boundary twice: with the old weight, then with the new). The
/// outcome is the last stage's (no penalty), with the first stage's initial loss and the
/// evaluations and history of all; an interrupted stage, or a first stage without a
/// gradient at its start, ends the fit there.
pub(crate) fn fit_continued(
    set: &ParamSet,
    theta0: &[f64],
    targets: &[Target],
    options: &FitOptions,
    mut progress: impl FnMut(&FitHistoryEntry),
) -> Result<FitOutcome, GradError> {
    let stages = options.smoothness_continuation;
    let mut done: Option<FitOutcome> = None;
    for stage in 0..=stages {
        let release = stage == stages && options.smoothness_release;
        let weight = stage_weight(options.smoothness, stage, release);
        let staged = FitOptions {
            smoothness: weight,
            ..*options
        };
        let (offset, evaluations) = done.as_ref().map_or((0, 0), |d| {
            (d.history.last().map_or(0, |h| h.iteration), d.evaluations)
        });
        let renumber = |h: &FitHistoryEntry| FitHistoryEntry {
            iteration: h.iteration + offset,
            evaluations: h.evaluations + evaluations,
            ..h.clone()
        };
        let start = done.as_ref().map_or(theta0, |d| &d.theta);
        let out = fit_once(set, start, targets, &staged, |h| progress(&renumber(h)))?;
        let out = match done.take() {
            None => out,
            Some(before) => {
                let mut history = before.history;
                history.extend(out.history.iter().map(renumber));
                FitOutcome {
                    initial_loss: before.initial_loss,
                    flat_at_start: before.flat_at_start,
                    history,
                    evaluations: evaluations + out.evaluations,
                    ..out
                }
            }
        };
        let stop = matches!(out.reason, StopReason::Interrupted | StopReason::NoGradient);
        done = Some(out);
        if stop {
            break;
        }
    }
    Ok(done.expect("at least one stage"))
}

/// Stage `stage`'s penalty weight: `smoothness / 10^stage`, or 0 for the released last
/// stage. A stage past `i32::MAX` (where `as i32` wrapped to a negative power, an
/// infinite weight) is 0: the factor underflows long before.
fn stage_weight(smoothness: f64, stage: u32, release: bool) -> f64 {
    if release {
        return 0.0;
    }
    i32::try_from(stage).map_or(0.0, |s| smoothness * 0.1f64.powi(s))
}

#[cfg(test)]
mod tests {
    use super::stage_weight;

    #[test]
    fn a_stage_past_i32_max_has_no_weight_and_every_weight_is_finite() {
        for stage in [0, 1, 400, i32::MAX as u32, 1 << 31, u32::MAX] {
            let w = stage_weight(2.5, stage, false);
            assert!(w.is_finite() && w >= 0.0, "stage {stage}: weight {w}");
            assert!(
                w <= 2.5,
                "stage {stage}: weight {w} above the first stage's"
            );
        }
        assert_eq!(stage_weight(2.5, 1 << 31, false), 0.0);
        assert_eq!(stage_weight(2.5, 0, false), 2.5);
        assert_eq!(stage_weight(2.5, 3, true), 0.0);
    }
}
