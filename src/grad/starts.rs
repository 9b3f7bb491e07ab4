//! Multi-start: start points spread around a given parameter vector, and the loss of each
//! from forward runs of all of them as worlds of one batch ([`Worlds`]: the CPU reference
//! world by world, or one GPU batch), so a fit can begin at the best of them.
//!
//! Start 0 is the given theta; start s >= 1 multiplies component p by
//! f^(2 u - 1), u = frac(1/2 + s a_p), where a_p are the steps of the R_d low-discrepancy
//! sequence for the d components (a_p = phi_d^-(p+1), phi_d^(d+1) = phi_d + 1): log-uniform
//! in [theta_p / f, theta_p f], evenly spread for any count. A component at 0 stays 0.

use super::loss::{check_targets, frame_loss, Target};
use super::params::ParamSet;
use super::sensitivity::{check_frames, forward_config, GradBackend, GradOptions};
use super::GradError;
use crate::config::Config;
use crate::cpu::CpuSimulation;
use crate::gpu::{GpuWorlds, HeadlessOptions};
use crate::model::System;
use crate::simulator::{CpuWorlds, GpuBatch, SimError, Worlds};

/// The default spread factor f of `msc fit --starts`.
pub const DEFAULT_START_FACTOR: f64 = 4.0;

/// phi_d: the positive root of x^(d+1) = x + 1 (Newton from 2).
fn phi(d: usize) -> f64 {
    let mut x: f64 = 2.0;
    for _ in 0..64 {
        let f = x.powi(d as i32 + 1) - x - 1.0;
        let df = (d as f64 + 1.0) * x.powi(d as i32) - 1.0;
        x -= f / df;
    }
    x
}

/// `count` start points around `theta0` (start 0 is `theta0` itself), spread by `factor`.
pub fn spread(theta0: &[f64], count: usize, factor: f64) -> Vec<Vec<f64>> {
    let g = phi(theta0.len().max(1));
    let steps: Vec<f64> = (0..theta0.len()).map(|p| g.powi(-(p as i32 + 1))).collect();
    (0..count)
        .map(|s| {
            if s == 0 {
                return theta0.to_vec();
            }
            theta0
                .iter()
                .zip(&steps)
                .map(|(t, a)| {
                    let u = (0.5 + s as f64 * a).fract();
                    t * factor.powf(2.0 * u - 1.0)
                })
                .collect()
        })
        .collect()
}

fn sim_error(e: SimError) -> GradError {
    match e {
        SimError::Gpu(g) => GradError::Gpu(g),
        SimError::Config(c) => GradError::Config(c),
        SimError::Ddef(d) => GradError::Gpu(crate::gpu::GpuError::Ddef(d)),
        SimError::Model(m) => GradError::Model(m),
        SimError::Unsupported(u) => GradError::Gpu(crate::gpu::GpuError::Unsupported(u)),
        // A start runs as a batch of one world: the loss is already the start's own.
        SimError::World { source, .. } => sim_error(*source),
    }
}

/// Steps between two looks at a stop request while the starts run: a batch of thousands
/// of starts must still stop within a few seconds of SIGTERM (Slurm's grace is 30 s).
pub const STOP_CHECK_STEPS: u64 = 8;

/// The loss at every theta of `thetas` (forward runs only, no tangents), computed as
/// [`super::evaluate`] computes it, from one run of all of them as worlds of a batch on
/// `options.backend`: the CPU reference ([`CpuWorlds`], world after world) or one GPU
/// batch ([`GpuBatch`]). A start whose system cannot be built, whose values the GPU
/// cannot hold, whose run fails or leaves f64/f32 range gets its own error; the others go
/// on. A stop request ends the runs within [`STOP_CHECK_STEPS`] steps: the starts not
/// evaluated by then get [`GradError::Interrupted`].
pub fn batch_losses(
    set: &ParamSet,
    thetas: &[Vec<f64>],
    targets: &[Target],
    options: &GradOptions,
) -> Result<Vec<Result<f64, GradError>>, GradError> {
    let thetas = thetas.iter().cloned().map(Ok).collect();
    batch_losses_of(set, thetas, targets, options)
}

/// [`batch_losses`] of starts some of which have no theta (their error is their loss's):
/// every start keeps its index, in the results and in the GPU batch's error names.
pub(crate) fn batch_losses_of(
    set: &ParamSet,
    thetas: Vec<Result<Vec<f64>, GradError>>,
    targets: &[Target],
    options: &GradOptions,
) -> Result<Vec<Result<f64, GradError>>, GradError> {
    let steps = check_targets(set, targets)?;
    check_frames(&steps)?;
    let n = set.base_system().len();
    if options.exact_forward && matches!(options.backend, GradBackend::Gpu { .. }) {
        return Err(GradError::Param(
            "exact forward solves (CG to a tolerance) are not supported by the GPU, which runs \
             a fixed iteration count (use --backend cpu)"
                .into(),
        ));
    }
    let mut out: Vec<Result<f64, GradError>> = Vec::with_capacity(thetas.len());
    let mut built: Vec<(usize, System, Config)> = Vec::new();
    for (s, theta) in thetas.into_iter().enumerate() {
        let start = theta.and_then(|theta| set.instantiate(&theta));
        let start = start.and_then(|(system, config)| {
            let config = forward_config(&config, options);
            // What one world's batch would refuse (a value f32 cannot hold) is this
            // start's error, not the batch's.
            if matches!(options.backend, GradBackend::Gpu { .. }) {
                GpuWorlds::check_world(&system, &config)?;
            }
            Ok((system, config))
        });
        match start {
            Ok((system, config)) => {
                built.push((s, system, config));
                out.push(Ok(0.0));
            }
            Err(e) => out.push(Err(e)),
        }
    }
    if built.is_empty() {
        return Ok(out);
    }
    let scale = 1.0 / (targets.len() * n) as f64;
    match options.backend {
        GradBackend::Cpu => {
            for (s, system, config) in &built {
                out[*s] = cpu_loss(system, config, targets, scale);
            }
        }
        GradBackend::Gpu { allow_software } => {
            let pairs: Vec<(&System, &Config)> = built.iter().map(|(_, s, c)| (s, c)).collect();
            // The batch numbers only the starts built: an error names its start by the
            // start's own index ("world 2 (start 3)").
            let names: Vec<_> = (built.iter())
                .map(|(s, _, _)| Some(format!("start {s}")))
                .collect();
            let options = HeadlessOptions { allow_software };
            let batch = GpuWorlds::headless_named(&pairs, &names, &options)?;
            let mut worlds = GpuBatch::new(batch);
            let mut done = 0;
            for target in targets {
                while done < target.step {
                    if crate::interrupt::requested() {
                        for (s, _, _) in &built {
                            if out[*s].is_ok() {
                                out[*s] = Err(GradError::Interrupted);
                            }
                        }
                        return Ok(out);
                    }
                    let k = (target.step - done).min(STOP_CHECK_STEPS);
                    worlds.step(k).map_err(sim_error)?;
                    done += k;
                }
                for (w, (s, _, _)) in built.iter().enumerate() {
                    let Ok(loss) = out[*s] else { continue };
                    let state = worlds.state(w).map_err(sim_error)?;
                    out[*s] = if state.is_finite() {
                        Ok(loss + frame_loss(&state.x, &target.positions, scale))
                    } else {
                        Err(GradError::NonFiniteState {
                            step: state.step,
                            time: state.t,
                        })
                    };
                }
            }
        }
    }
    for r in out.iter_mut() {
        if matches!(r, Ok(l) if !l.is_finite()) {
            *r = Err(GradError::NonFiniteLoss);
        }
    }
    Ok(out)
}

/// One start's loss on the CPU reference, stepped alone; `Interrupted` on a stop request.
fn cpu_loss(
    system: &System,
    config: &Config,
    targets: &[Target],
    scale: f64,
) -> Result<f64, GradError> {
    let mut world = CpuWorlds::new(vec![CpuSimulation::new(system, config)?]);
    let mut loss = 0.0;
    let mut done = 0;
    for target in targets {
        while done < target.step {
            if crate::interrupt::requested() {
                return Err(GradError::Interrupted);
            }
            let k = (target.step - done).min(STOP_CHECK_STEPS);
            if let Err(e) = world.step(k) {
                // The steps run on from a non-finite state until something refuses it
                // (DDEF locates every charge: "particle 0: position is not finite"):
                // the divergence, reported below with its step, is the start's error.
                if world.state(0).is_ok_and(|s| !s.is_finite()) {
                    break;
                }
                return Err(sim_error(e));
            }
            done += k;
        }
        let state = world.state(0).map_err(sim_error)?;
        if !state.is_finite() {
            return Err(GradError::NonFiniteState {
                step: state.step,
                time: state.t,
            });
        }
        loss += frame_loss(&state.x, &target.positions, scale);
    }
    Ok(loss)
}

/// How many starts' errors [`no_start`] names; the rest are counted.
const FAILURES_NAMED: usize = 4;

/// The error when no start has a loss: [`GradError::Interrupted`] if a stop request
/// stopped one, else [`GradError::NoStart`] naming the first starts' errors by index
/// (the first start's alone was reported, naming no start, and the others were lost).
pub fn no_start(losses: Vec<Result<f64, GradError>>) -> GradError {
    let count = losses.len();
    let mut errors: Vec<(usize, GradError)> = (losses.into_iter().enumerate())
        .filter_map(|(s, l)| Some((s, l.err()?)))
        .collect();
    if errors
        .iter()
        .any(|(_, e)| matches!(e, GradError::Interrupted))
    {
        return GradError::Interrupted;
    }
    if errors.is_empty() {
        return GradError::Param("no start point to evaluate".into());
    }
    let failures = crate::display::first_of(
        errors.iter().map(|(s, e)| format!("start {s}: {e}")),
        FAILURES_NAMED,
        "; ",
    );
    GradError::NoStart {
        count,
        failures,
        first: Box::new(errors.swap_remove(0).1),
    }
}

/// The index of the lowest loss (the first of equals), if any start has one.
pub fn best(losses: &[Result<f64, GradError>]) -> Option<usize> {
    losses
        .iter()
        .enumerate()
        .filter_map(|(s, l)| l.as_ref().ok().map(|l| (s, *l)))
        .fold(None, |acc: Option<(usize, f64)>, (s, l)| match acc {
            Some((_, b)) if b <= l => acc,
            _ => Some((s, l)),
        })
        .map(|(s, _)| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phi_solves_its_equation() {
        // phi_1 is the golden ratio, phi_2 the plastic number.
        assert!((phi(1) - (1.0 + 5f64.sqrt()) / 2.0).abs() < 1e-14);
        assert!((phi(2) - 1.324_717_957_244_746).abs() < 1e-14);
    }

    #[test]
    fn starts_include_the_given_one_and_fill_the_factor_range() {
        let theta0 = [2.0, -0.5, 0.0];
        let starts = spread(&theta0, 33, 4.0);
        assert_eq!(starts.len(), 33);
        assert_eq!(starts[0], theta0);
        for s in &starts[1..] {
            assert_eq!(s[2], 0.0, "a zero component stays zero");
            for p in 0..2 {
                let r = s[p] / theta0[p];
                assert!((0.25..=4.0).contains(&r), "{r}");
            }
        }
        // Spread: each component's log-ratios fall in every quarter of [-ln 4, ln 4].
        for p in 0..2 {
            let mut quarters = [0; 4];
            for s in &starts[1..] {
                let x = (s[p] / theta0[p]).ln() / 4f64.ln(); // in [-1, 1]
                quarters[(((x + 1.0) * 2.0) as usize).min(3)] += 1;
            }
            assert!(quarters.iter().all(|&q| q >= 4), "{quarters:?}");
        }
        // Deterministic.
        assert_eq!(spread(&theta0, 33, 4.0), starts);
    }

    #[test]
    fn best_takes_the_lowest_finite_loss_and_the_first_of_equals() {
        let l = vec![
            Ok(3.0),
            Err(GradError::NonFiniteLoss),
            Ok(1.0),
            Ok(1.0),
            Ok(2.0),
        ];
        assert_eq!(best(&l), Some(2));
        assert_eq!(best(&[Err(GradError::NonFiniteLoss)]), None);
    }

    /// No start with a loss: a stop request that stopped one is a stop (exit 130), not a
    /// failure; else each start's error is named by its index, the first kept whole.
    #[test]
    fn no_start_is_a_stop_if_one_was_stopped_else_names_each_start() {
        let l = vec![Err(GradError::NonFiniteLoss), Err(GradError::Interrupted)];
        assert!(matches!(no_start(l), GradError::Interrupted));
        let l = (0..6).map(|_| Err(GradError::NonFiniteLoss)).collect();
        match no_start(l) {
            GradError::NoStart {
                count: 6,
                failures,
                first,
            } => {
                assert!(failures.starts_with("start 0: the loss is not finite; start 1"));
                assert!(failures.ends_with("start 3: the loss is not finite; and 2 more"));
                assert!(matches!(*first, GradError::NonFiniteLoss));
            }
            e => panic!("{e:?}"),
        }
    }
}
