//! A fit as `msc fit` runs it, between the parsed command line and the printed report:
//! the parameters as named, with the unit their values are shown in ([`FitParam`]); the
//! initial values given for them ([`apply_init`]); the target frames in the loss
//! ([`load_targets`]); start points evaluated as one batch of worlds
//! ([`evaluate_starts`]); and `fit.json` as a typed record ([`FitRecord`]), written
//! atomically.

use super::loss::{FrameReport, Target};
use super::optim::{FitOptions, FitOutcome, StopReason};
use super::params::{Param, ParamSet};
use super::sensitivity::{GradBackend, GradMode, GradOptions};
use super::{starts, target, GradError};
use crate::config::Config;
use crate::output::{write_atomic, OutputError};
use crate::scene::LoadedScene;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A parameter as the user named it: what it estimates, and how its values are shown
/// (display value = theta * `reference`, in `unit`).
#[derive(Clone, Debug)]
pub struct FitParam {
    pub param: Param,
    pub reference: f64,
    pub unit: &'static str,
    pub label: String,
}

impl FitParam {
    /// `param` shown in `unit` relative to `reference` (the scene's common value), or,
    /// without one, as a scale of the scene's values.
    pub fn new(param: Param, reference: Option<f64>, unit: &'static str, label: &str) -> Self {
        let (reference, unit, label) = match reference {
            Some(r) => (r, unit, label.to_string()),
            None => (1.0, "x scene", format!("{label} scale")),
        };
        Self {
            param,
            reference,
            unit,
            label,
        }
    }
}

/// The common value of the non-zero entries, if they all agree.
pub fn common(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut it = values.filter(|v| *v != 0.0);
    let first = it.next()?;
    it.all(|v| v == first).then_some(first)
}

/// theta -> display value, per component of `set` (`params` in its order).
pub fn display_factors(params: &[FitParam], set: &ParamSet) -> Vec<f64> {
    let mut reference = Vec::with_capacity(set.len());
    for (a, p) in params.iter().enumerate() {
        reference.extend(std::iter::repeat_n(p.reference, set.range(a).len()));
    }
    reference
}

/// `theta`'s values in each parameter's display unit (`reference` from
/// [`display_factors`]; a log parameter's theta is its logarithm). An error as
/// [`ParamSet::values`] gives one.
pub fn display(set: &ParamSet, reference: &[f64], theta: &[f64]) -> Result<Vec<f64>, GradError> {
    let v = set.values(theta)?;
    Ok(v.iter().zip(reference).map(|(t, r)| t * r).collect())
}

/// Sets `theta` (one parameter's components, as values relative to its reference, not
/// logarithms) from the initial `values` given in its display unit: x,y,z for a position, else one value; per-element parameters set their
/// non-zero components (every one if all are 0), so uncharged particles stay uncharged.
/// `Err` says what the parameter takes.
pub fn apply_init(p: &FitParam, theta: &mut [f64], values: &[f64]) -> Result<(), String> {
    match (p.param, values) {
        (Param::ExternalPosition { .. }, [x, y, z]) => theta.copy_from_slice(&[*x, *y, *z]),
        (Param::ExternalPosition { .. }, _) => return Err("external_position takes x,y,z".into()),
        (_, [v]) => {
            let any_nonzero = theta.iter().any(|t| *t != 0.0);
            let per_element = matches!(p.param, Param::Charges | Param::Stiffnesses);
            for t in theta.iter_mut() {
                if !per_element || *t != 0.0 || !any_nonzero {
                    *t = *v / p.reference;
                }
            }
        }
        _ => return Err(format!("{} takes one value", p.label)),
    }
    Ok(())
}

/// The target frames of the loss from `path` (a run folder or one PLY file), matched to
/// the steps of `config`; with `last_only`, its last frame alone. None after t = 0 is an
/// error.
pub fn load_targets(
    path: &Path,
    config: &Config,
    last_only: bool,
    initial: &[glam::DVec3],
    initial_tolerance: f64,
) -> Result<Vec<Target>, GradError> {
    let frames = target::read_target(path)?;
    target::check_counts(&frames, initial.len())?;
    target::check_initial(&frames, initial, initial_tolerance)?;
    let end_time = crate::measures::time_at(config.steps, config.dt);
    let mut targets = target::to_targets(&frames, config.dt, end_time)?;
    if last_only {
        targets = targets.split_off(targets.len().saturating_sub(1));
    }
    if targets.is_empty() {
        return Err(GradError::Frames(format!(
            "{} has no frame after t = 0",
            path.display()
        )));
    }
    Ok(targets)
}

/// Start points and their losses (`--starts`).
#[derive(Debug)]
pub struct Starts {
    /// Each start's values relative to the parameters' references, as spread (display
    /// value = value * reference; a start the spread took past f64's range keeps its
    /// infinite value, and its error).
    pub values: Vec<Vec<f64>>,
    pub losses: Vec<Result<f64, GradError>>,
    /// The start with the lowest loss, and its theta (where the fit begins).
    pub best: usize,
    pub theta: Vec<f64>,
    pub seconds: f64,
    /// The spread factor they were drawn with.
    pub factor: f64,
}

/// `count` start points spread by `factor` around the relative values `values0` (among
/// them; spread in value space, since a log parameter's theta is not a value to scale),
/// evaluated by forward runs of all of them as worlds of one batch. A start without a
/// theta (spread past f64's range, a log value rounded to 0) gets its own error, as a
/// start whose run fails; [`starts::no_start`]'s error when none has a loss.
pub fn evaluate_starts(
    set: &ParamSet,
    values0: &[f64],
    (count, factor): (usize, f64),
    targets: &[Target],
    grad: &GradOptions,
) -> Result<Starts, GradError> {
    let values = starts::spread(values0, count, factor);
    let names = set.component_names();
    let theta = |v: &[f64]| match v.iter().position(|x| !x.is_finite()) {
        Some(c) => Err(GradError::Param(format!(
            "{} = {:e} spread by --start-factor {factor:e} is past f64's range (a smaller \
             factor keeps every start finite)",
            names[c], values0[c]
        ))),
        None => set.from_values(v),
    };
    let thetas = values.iter().map(|v| theta(v)).collect();
    let t = Instant::now();
    let losses = starts::batch_losses_of(set, thetas, targets, grad)?;
    let seconds = t.elapsed().as_secs_f64();
    let Some(best) = starts::best(&losses) else {
        return Err(starts::no_start(losses));
    };
    Ok(Starts {
        theta: theta(&values[best])?,
        values,
        losses,
        best,
        seconds,
        factor,
    })
}

/// `fit.json`: what was fitted to what, the result, the history and how the gradient
/// was computed. Values are in each parameter's display unit; per-component lists are
/// `null` past 16 components.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FitRecord {
    pub msc_version: &'static str,
    pub scene: String,
    pub target: String,
    pub target_steps: Vec<u64>,
    pub integrator: &'static str,
    pub dt: f64,
    pub parameters: Vec<ParamRecord>,
    pub components: Option<Vec<String>>,
    pub optimizer: &'static str,
    pub initial_loss: f64,
    pub loss: f64,
    pub rms_error: f64,
    pub converged: bool,
    pub reason: StopReason,
    pub message: &'static str,
    pub interrupted: bool,
    /// The parameters whose gradient was exactly 0 at the start (the fit cannot move
    /// them from there; all of them: reason `no_gradient`).
    pub zero_gradient_at_start: Vec<String>,
    pub iterations: u32,
    pub evaluations: u32,
    pub history: Vec<HistoryRecord>,
    pub frames: Vec<FrameReport>,
    /// The smoothness weight (`--smoothness`) and the penalty's share of `loss`.
    pub smoothness: f64,
    /// Its continuation: stages after the first, and whether the last ran without it.
    pub smoothness_continuation: u32,
    pub smoothness_release: bool,
    pub penalty: f64,
    pub gradient: GradientRecord,
    pub wall_seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starts: Option<StartsRecord>,
}

/// One parameter of [`FitRecord`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct ParamRecord {
    pub name: String,
    pub unit: &'static str,
    pub components: usize,
    pub initial: Vec<f64>,
    /// Fitted as its logarithm (`--log`).
    pub log: bool,
    pub result: Vec<f64>,
}

/// One iteration of [`FitRecord::history`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct HistoryRecord {
    pub iteration: u32,
    pub loss: f64,
    pub values: Option<Vec<f64>>,
    pub gradient_norm: f64,
    pub lambda: Option<f64>,
    pub step_norm: f64,
    pub evaluations: u32,
}

/// How [`FitRecord`]'s gradients were computed.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GradientRecord {
    /// `forward` or `adjoint`.
    pub mode: &'static str,
    pub method: &'static str,
    /// The adjoint's checkpointing (absent in forward mode).
    pub checkpoint: Option<super::checkpoint::CheckpointStats>,
    pub backend: &'static str,
    pub tangent_tolerance: f64,
    pub exact_forward_solves: bool,
    pub window: Option<u64>,
    pub worst_tangent_residual: f64,
    pub worst_forward_residual: Option<f64>,
}

/// The start points of [`FitRecord`] (`--starts`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct StartsRecord {
    pub count: usize,
    pub factor: f64,
    pub chosen: usize,
    pub evaluation: &'static str,
    pub wall_seconds: f64,
    pub points: Vec<StartRecord>,
}

/// One start point of [`StartsRecord`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct StartRecord {
    pub values: Option<Vec<f64>>,
    pub loss: Option<f64>,
    pub error: Option<String>,
}

/// What a fit was run on, for its record.
pub struct FitInputs<'a> {
    pub scene: &'a LoadedScene,
    pub target: &'a Path,
    pub targets: &'a [Target],
    pub params: &'a [FitParam],
    pub set: &'a ParamSet,
    pub theta0: &'a [f64],
    pub options: &'a FitOptions,
    pub starts: Option<&'a Starts>,
    pub wall_seconds: f64,
}

impl FitRecord {
    /// The record of `outcome`, fitted from `inputs`; an error when one of its thetas
    /// does not fit `inputs.set` ([`ParamSet::values`]).
    pub fn new(inputs: &FitInputs, outcome: &FitOutcome) -> Result<Self, GradError> {
        let set = inputs.set;
        let reference = display_factors(inputs.params, set);
        let display = |theta: &[f64]| display(set, &reference, theta);
        let small = set.len() <= 16;
        let listed = |theta: &[f64]| small.then(|| display(theta)).transpose();
        let values = display(&outcome.theta)?;
        let initial = display(inputs.theta0)?;
        let history = (outcome.history.iter())
            .map(|h| listed(&h.theta))
            .collect::<Result<Vec<_>, _>>()?;
        let start_values: Vec<Option<Vec<f64>>> = (inputs.starts.iter())
            .flat_map(|s| &s.values)
            .map(|v| small.then(|| v.iter().zip(&reference).map(|(v, r)| v * r).collect()))
            .collect();
        let scene = inputs.scene;
        let grad = &inputs.options.grad;
        Ok(Self {
            msc_version: env!("CARGO_PKG_VERSION"),
            scene: scene.name.clone(),
            target: inputs.target.display().to_string(),
            target_steps: inputs.targets.iter().map(|t| t.step).collect(),
            integrator: scene.config.integrator.name(),
            dt: scene.config.dt,
            parameters: (inputs.params.iter().enumerate())
                .map(|(a, p)| ParamRecord {
                    name: p.label.clone(),
                    unit: p.unit,
                    components: set.range(a).len(),
                    initial: initial[set.range(a)].to_vec(),
                    log: set.is_log(a),
                    result: values[set.range(a)].to_vec(),
                })
                .collect(),
            components: small.then(|| set.component_names()),
            optimizer: inputs.options.optimizer.name(),
            initial_loss: outcome.initial_loss,
            loss: outcome.loss,
            rms_error: outcome.loss.sqrt(),
            converged: outcome.reason.converged(),
            reason: outcome.reason.clone(),
            message: outcome.reason.describe(),
            interrupted: outcome.reason == StopReason::Interrupted,
            zero_gradient_at_start: (outcome.flat_at_start.iter())
                .filter_map(|&a| Some(inputs.params.get(a)?.label.clone()))
                .collect(),
            iterations: outcome.history.last().map_or(0, |h| h.iteration),
            evaluations: outcome.evaluations,
            history: (outcome.history.iter().zip(history))
                .map(|(h, values)| HistoryRecord {
                    iteration: h.iteration,
                    loss: h.loss,
                    values,
                    gradient_norm: h.gradient_norm,
                    lambda: h.lambda,
                    step_norm: h.step_norm,
                    evaluations: h.evaluations,
                })
                .collect(),
            frames: outcome.frames.clone(),
            smoothness: inputs.options.smoothness,
            smoothness_continuation: inputs.options.smoothness_continuation,
            smoothness_release: inputs.options.smoothness_release,
            penalty: outcome.penalty,
            gradient: GradientRecord {
                mode: grad.mode.name(),
                method: match grad.mode {
                    GradMode::Forward => {
                        "forward sensitivities, exact-solve derivative of the discrete steps"
                    }
                    GradMode::Adjoint => {
                        "adjoint (one reverse sweep), exact-solve derivative of the discrete steps"
                    }
                },
                checkpoint: outcome.stats.checkpoint,
                backend: match grad.backend {
                    GradBackend::Cpu => "cpu",
                    GradBackend::Gpu { .. } => "gpu",
                },
                tangent_tolerance: grad.tangent_solve.tolerance,
                exact_forward_solves: grad.exact_forward,
                window: grad.window,
                worst_tangent_residual: outcome.stats.worst_tangent_residual,
                worst_forward_residual: outcome.stats.worst_forward_residual,
            },
            wall_seconds: inputs.wall_seconds,
            starts: inputs.starts.map(|s| StartsRecord {
                count: s.values.len(),
                factor: s.factor,
                chosen: s.best,
                evaluation: "forward runs of every start as worlds of one batch",
                wall_seconds: s.seconds,
                points: (start_values.into_iter().zip(&s.losses))
                    .map(|(values, l)| StartRecord {
                        values,
                        loss: l.as_ref().ok().copied(),
                        error: l.as_ref().err().map(|e| e.to_string()),
                    })
                    .collect(),
            }),
        })
    }

    /// Makes sure `dir/fit.json` can be written before the fit runs, not after it: creates
    /// the folder and a temporary file beside `fit.json` (removed again), and refuses a
    /// `fit.json` that is a folder. Returns the path of `fit.json`.
    pub fn prepare(dir: &Path) -> Result<PathBuf, OutputError> {
        std::fs::create_dir_all(dir).map_err(|source| OutputError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join("fit.json");
        if path.is_dir() {
            return Err(OutputError::NotAFile { path });
        }
        drop(crate::output::AtomicFile::create(&path)?);
        Ok(path)
    }

    /// Writes the record as `dir/fit.json` (the folder created if needed), atomically;
    /// returns its path.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, OutputError> {
        std::fs::create_dir_all(dir).map_err(|source| OutputError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join("fit.json");
        let mut text = serde_json::to_string_pretty(self).map_err(|source| OutputError::Json {
            path: path.clone(),
            source,
        })?;
        text.push('\n');
        write_atomic(&path, text.as_bytes())?;
        Ok(path)
    }
}
