//! `msc fit`: estimate scene parameters from target frames (the paper's Section 3.2).
//!
//! The loss is the mean squared position error against the target frames (a run folder's
//! `frames/*.ply` or one PLY file), matched by time; its gradient comes from forward
//! sensitivities or from the adjoint (`--gradient`) through the scene's own integrator
//! and time step ([`crate::grad`]). `--backend gpu` propagates the tangents on the GPU.
//! Levenberg-Marquardt for few parameters, L-BFGS (or Adam) for many. `--starts N` first runs N start
//! points around the initial values forward, as worlds of one batch, and fits from the one
//! with the lowest loss ([`grad::starts`]). Progress goes to stderr; the history and the
//! result go to `fit.json` ([`grad::fit_job::FitRecord`]), written atomically. This file
//! checks the arguments (declared in `fit_args.rs`) and reports; the fit's own steps are in
//! [`grad::fit_job`].

use super::CliError;
use crate::config::ConfigError;
use crate::grad::fit_job::{self, FitInputs, FitParam, FitRecord};
use crate::grad::{
    self, CheckpointOptions, FitHistoryEntry, FitOptions, FitOutcome, GradBackend, GradError,
    GradMode, GradOptions, Optimizer, Param, ParamSet, StopReason, TangentSolve,
};
use crate::run::{BackendArg, RunError};
use crate::scene::LoadedScene;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::fit_args::DEFAULT_LEARNING_RATE;
pub use super::fit_args::{AdjointSolveArg, FitArgs, FramesArg, GradientArg, OptimizerArg};

/// How often a running fit rewrites `fit.json` at most (after its first iteration).
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// One progress line on stderr: the iteration's loss, parameters (`shown`) and gradient.
fn report_iteration(h: &FitHistoryEntry, shown: impl Fn(&[f64]) -> String) {
    let lambda = h
        .lambda
        .map(|l| format!(", lambda {l:.1e}"))
        .unwrap_or_default();
    eprintln!(
        "iter {:>3}: loss {:.6e} m^2 (rms {:.3e} m), {}, |grad| {:.3e}{lambda}",
        h.iteration,
        h.loss,
        h.loss.sqrt(),
        shown(&h.theta),
        h.gradient_norm
    );
}

/// Forward residuals above this get a note: the loss and its gradient then describe
/// noticeably different maps.
const FORWARD_RESIDUAL_NOTE: f64 = 1e-4;

fn option_error(option: &'static str, message: impl Into<String>) -> CliError {
    CliError::from(RunError::Option {
        option,
        source: ConfigError::new(option, message),
    })
}

fn parse_param(name: &str, scene: &LoadedScene) -> Result<FitParam, CliError> {
    let (base, index) = match name.split_once(':') {
        Some((b, i)) => (
            b.trim(),
            Some(i.trim().parse::<usize>().map_err(|_| {
                option_error(
                    "--param",
                    format!("'{name}': the index after ':' must be a number"),
                )
            })?),
        ),
        None => (name.trim(), None),
    };
    let system = &scene.system;
    let spec = FitParam::new;
    let index = index.unwrap_or(0);
    let s = match base {
        "charge" => {
            if system.charged_count() == 0 {
                return Err(option_error(
                    "--param",
                    "charge: the scene has no charged particle to scale (use `charges`)",
                ));
            }
            spec(
                Param::ChargeScale,
                fit_job::common(system.charges().iter().copied()),
                "C",
                "charge",
            )
        }
        "stiffness" => {
            let k = fit_job::common(system.springs().iter().map(|s| s.stiffness));
            spec(Param::StiffnessScale, k, "N/m", "stiffness")
        }
        "charges" => spec(Param::Charges, Some(1.0), "C", "charges"),
        "stiffnesses" => spec(Param::Stiffnesses, Some(1.0), "N/m", "stiffnesses"),
        "masses" => spec(Param::Masses, Some(1.0), "kg", "masses"),
        "external_charge" => spec(
            Param::ExternalCharge { index },
            Some(1.0),
            "C",
            &format!("external_charges[{index}].charge"),
        ),
        "external_position" => spec(
            Param::ExternalPosition { index },
            Some(1.0),
            "m",
            &format!("external_charges[{index}].position"),
        ),
        other => {
            return Err(option_error(
                "--param",
                format!(
                    "unknown parameter '{other}' (charge, stiffness, charges, stiffnesses, \
                     external_charge[:I], external_position[:I])"
                ),
            ))
        }
    };
    Ok(s)
}

fn parse_values(text: &str) -> Result<Vec<f64>, CliError> {
    text.split(',')
        .map(|v| {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| {
                    option_error("--init", format!("'{text}' is not a finite number (list)"))
                })
        })
        .collect()
}

/// What `msc fit` produced.
#[derive(Debug)]
pub struct FitRun {
    pub out: PathBuf,
    pub outcome: FitOutcome,
    /// Display values of the result, one per component.
    pub values: Vec<f64>,
}

fn grad_error(e: GradError) -> CliError {
    CliError::Fit(Box::new(e))
}

/// `fit.json` must not replace the scene's files or the target (checked before the fit,
/// not after it).
fn check_output(fit_json: &Path, scene: &LoadedScene, target: &Path) -> Result<(), CliError> {
    let mut inputs = crate::output::inputs::of_scene(scene);
    inputs.push((target, "target"));
    crate::output::inputs::refuse_overwrite(fit_json, "--out", &inputs)?;
    Ok(())
}

pub fn execute(args: &FitArgs) -> Result<FitRun, CliError> {
    let scene = args.scene.load(None)?;
    let specs: Vec<FitParam> = args
        .params
        .iter()
        .map(|p| parse_param(p, &scene))
        .collect::<Result<_, _>>()?;
    let params: Vec<Param> = specs.iter().map(|s| s.param).collect();
    let mut log = vec![false; specs.len()];
    for name in &args.log {
        let a = args
            .params
            .iter()
            .position(|p| p.trim() == name.trim())
            .ok_or_else(|| {
                option_error("--log", format!("'{name}' is not one of the --param names"))
            })?;
        log[a] = true;
    }
    let set = ParamSet::new(&scene.system, &scene.config, &params)
        .and_then(|s| s.with_log(&log))
        .map_err(grad_error)?;
    let reference = fit_job::display_factors(&specs, &set);
    // The initial values, relative to each parameter's reference (theta0 is their image:
    // logarithms for --log).
    let mut values0 = set.values(&set.initial()).map_err(grad_error)?;
    if !args.init.is_empty() {
        if args.init.len() != specs.len() {
            return Err(option_error(
                "--init",
                format!(
                    "{} values for {} parameters: give one --init per --param, in order",
                    args.init.len(),
                    specs.len()
                ),
            ));
        }
        for (a, text) in args.init.iter().enumerate() {
            let values = parse_values(text)?;
            fit_job::apply_init(&specs[a], &mut values0[set.range(a)], &values)
                .map_err(|m| option_error("--init", m))?;
        }
    }
    let theta0 = set.from_values(&values0).map_err(grad_error)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("out").join(format!("{}-fit", scene.name)));
    check_output(&out.join("fit.json"), &scene, &args.target)?;
    let targets = fit_job::load_targets(
        &args.target,
        &scene.config,
        args.frames == FramesArg::Last,
        scene.system.positions(),
        args.initial_tolerance,
    )
    .map_err(grad_error)?;
    let mode = match args.gradient {
        GradientArg::Auto => GradMode::auto(&set),
        GradientArg::Forward => GradMode::Forward,
        GradientArg::Adjoint => GradMode::Adjoint,
    };
    let optimizer = match args.optimizer {
        OptimizerArg::Lm => Optimizer::LevenbergMarquardt,
        OptimizerArg::Adam => Optimizer::Adam {
            learning_rate: args.learning_rate,
        },
        OptimizerArg::Lbfgs => Optimizer::Lbfgs {
            initial_step: args.learning_rate,
        },
        OptimizerArg::Auto => Optimizer::auto(mode, set.len(), args.learning_rate),
    };
    if !(args.smoothness.is_finite() && args.smoothness >= 0.0) {
        return Err(option_error("--smoothness", "must be 0 or positive"));
    }
    if args.smoothness_continuation > 0 && args.smoothness == 0.0 {
        return Err(option_error(
            "--smoothness-continuation",
            "lowers the --smoothness weight: give --smoothness LAMBDA > 0",
        ));
    }
    if args.smoothness_release && args.smoothness_continuation == 0 {
        return Err(option_error(
            "--smoothness-release",
            "ends a continuation: give --smoothness-continuation S",
        ));
    }
    if !(args.learning_rate.is_finite() && args.learning_rate > 0.0) {
        return Err(option_error("--learning-rate", "must be positive"));
    }
    // `auto` keeps the CPU reference: its tangents are f64 with exact (CG to 1e-12)
    // solves, it runs every integrator and option, and on the software adapters CI has
    // the GPU tangents are slower (docs/guide.md, "Fitting parameters").
    let grad_backend = match args.backend {
        BackendArg::Gpu => GradBackend::Gpu {
            allow_software: true,
        },
        BackendArg::Auto | BackendArg::Cpu => GradBackend::Cpu,
    };
    // An adjoint option the fit's gradient does not read is refused, not ignored.
    let (gpu, adjoint) = (args.backend == BackendArg::Gpu, mode == GradMode::Adjoint);
    if args.adjoint_cg.is_some() && !(gpu && adjoint) {
        let m = "is read by the GPU adjoint only (--backend gpu with adjoint gradients)";
        return Err(option_error("--adjoint-cg", m));
    }
    if args.adjoint_solve != AdjointSolveArg::Exact && (gpu || !adjoint) {
        let m = "is read by the CPU adjoint only (adjoint gradients, --backend cpu or auto)";
        return Err(option_error("--adjoint-solve", m));
    }
    // Likewise the options a given value of which this fit would not read (their
    // defaults cannot be told from an explicit default, and change nothing).
    if !adjoint {
        let m = "is read by the adjoint only (--gradient adjoint, or auto with per-element \
                 parameters or more than 8 components); this fit uses forward gradients";
        if args.checkpoint != grad::Checkpointing::Auto {
            return Err(option_error("--checkpoint", m));
        }
        if args.checkpoint_memory != grad::checkpoint::DEFAULT_MEMORY_BUDGET >> 20 {
            return Err(option_error("--checkpoint-memory", m));
        }
    }
    if optimizer == Optimizer::LevenbergMarquardt && args.learning_rate != DEFAULT_LEARNING_RATE {
        let m = "is read by L-BFGS and Adam only; this fit runs Levenberg-Marquardt \
                 (--optimizer lbfgs or adam to use it)";
        return Err(option_error("--learning-rate", m));
    }
    if !(args.start_factor.is_finite() && args.start_factor > 1.0) {
        return Err(option_error("--start-factor", "must be a number above 1"));
    }
    if args.starts == 1 && args.start_factor != grad::starts::DEFAULT_START_FACTOR {
        let m = "spreads the start points of --starts N, N > 1; there is one start here";
        return Err(option_error("--start-factor", m));
    }
    if args.smoothness > 0.0 && grad::smooth::Smoothness::new(&set, args.smoothness).is_off() {
        let m = "penalizes differences between neighbouring springs or particles of a \
                 per-element parameter (charges, stiffnesses), and no --param here has \
                 neighbours to compare";
        return Err(option_error("--smoothness", m));
    }
    let options = FitOptions {
        optimizer,
        max_iterations: args.max_iters,
        grad: GradOptions {
            tangent_solve: TangentSolve::default(),
            exact_forward: args.exact_solves,
            window: args.window,
            backend: grad_backend,
            mode,
            adjoint_cg_iterations: args.adjoint_cg,
            adjoint_solve: args.adjoint_solve.mode(),
            checkpoint: CheckpointOptions {
                policy: args.checkpoint,
                memory_budget: args.checkpoint_memory.saturating_mul(1 << 20),
            },
        },
        smoothness: args.smoothness,
        smoothness_continuation: args.smoothness_continuation,
        smoothness_release: args.smoothness_release,
        ..FitOptions::default()
    };
    // theta -> the values shown (physical, in each parameter's display unit).
    let display = |theta: &[f64]| fit_job::display(&set, &reference, theta);
    // Display values as a progress line shows them.
    let show = |shown: Vec<f64>| -> String {
        if shown.len() > 4 {
            let mean = shown.iter().sum::<f64>() / shown.len() as f64;
            return format!("{} components, mean {mean:.6e}", shown.len());
        }
        specs
            .iter()
            .enumerate()
            .map(|(a, s)| {
                let v: Vec<String> = set.range(a).map(|k| format!("{:.6e}", shown[k])).collect();
                format!("{} = {} {}", s.label, v.join(","), s.unit)
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let shown = |theta: &[f64]| display(theta).map_or_else(|e| e.to_string(), show);
    if !args.quiet {
        eprintln!(
            "fitting {} ({} components) to {} frames of {} with {} at dt = {} s over {} steps",
            specs
                .iter()
                .map(|s| s.label.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            set.len(),
            targets.len(),
            args.target.display(),
            scene.config.integrator.name(),
            scene.config.dt,
            targets.last().map_or(0, |t| t.step),
        );
    }
    // An output folder that cannot be written fails now, not after the fit.
    FitRecord::prepare(&out)?;
    let start = Instant::now();
    let starts = if args.starts > 1 {
        let count = (args.starts as usize, args.start_factor);
        let starts = fit_job::evaluate_starts(&set, &values0, count, &targets, &options.grad)
            .map_err(grad_error)?;
        if !args.quiet {
            for (s, (values, loss)) in starts.values.iter().zip(&starts.losses).enumerate() {
                let loss = match loss {
                    Ok(l) => format!("loss {l:.6e} m^2"),
                    Err(e) => format!("failed: {e}"),
                };
                let values = values.iter().zip(&reference).map(|(v, r)| v * r);
                eprintln!("start {s:>3}: {}, {loss}", show(values.collect()));
            }
            eprintln!(
                "start {} of {} has the lowest loss ({} worlds in one batch, {:.2} s); \
                 fitting from it",
                starts.best,
                starts.values.len(),
                starts.values.len(),
                starts.seconds
            );
        }
        Some(starts)
    } else {
        None
    };
    let from = starts.as_ref().map_or(theta0.as_slice(), |s| &s.theta);
    let inputs = |wall_seconds: f64| FitInputs {
        scene: &scene,
        target: &args.target,
        targets: &targets,
        params: &specs,
        set: &set,
        theta0: &theta0,
        options: &options,
        starts: starts.as_ref(),
        wall_seconds,
    };
    // fit.json after the first iteration and then at most once every CHECKPOINT_EVERY,
    // marked `running` with the last accepted point: a fit killed before it stops (a
    // second Ctrl-C, a scheduler's SIGKILL) keeps its progress. Only a small set's thetas
    // are kept per iteration (the record lists no others).
    let small = set.len() <= 16;
    let penalty = (options.smoothness == 0.0).then_some(0.0);
    let mut so_far: Vec<FitHistoryEntry> = Vec::new();
    let mut last_theta: Vec<f64> = Vec::new();
    let mut written: Option<Instant> = None;
    let mut checkpoint_failed = false;
    // A record of the fit so far (`running` or `failed`) as fit.json.
    let save = |partial: &FitOutcome| -> Result<(), String> {
        let record = FitRecord::new(&inputs(start.elapsed().as_secs_f64()), partial);
        let record = record.map_err(|w| w.to_string())?;
        record.write(&out).map(drop).map_err(|w| w.to_string())
    };
    let progress = |h: &FitHistoryEntry| {
        let mut kept = h.clone();
        if !small {
            kept.theta = Vec::new();
        }
        so_far.push(kept);
        last_theta.clone_from(&h.theta);
        let due = written.is_none_or(|t| t.elapsed() >= CHECKPOINT_EVERY);
        if due && !checkpoint_failed {
            written = Some(Instant::now());
            // The fit goes on (its result is still written at the end); said once.
            if let Err(w) = save(&FitOutcome::so_far(&so_far, &last_theta, penalty)) {
                eprintln!("warning: fit.json is not kept up to date while the fit runs: {w}");
                checkpoint_failed = true;
            }
        }
        if !args.quiet {
            report_iteration(h, shown);
        }
    };
    let outcome = match grad::fit(&set, from, &targets, &options, progress) {
        Ok(outcome) => outcome,
        Err(e) => {
            // The iterations before the failure stay in fit.json, marked `failed`; the
            // error itself is what the command reports. A stop request in the first
            // evaluation (which stops within a step) keeps the start as the result, with
            // its loss when the starts measured it.
            let reason = match e {
                GradError::Interrupted => StopReason::Interrupted,
                _ => StopReason::Failed,
            };
            if !so_far.is_empty() || reason == StopReason::Interrupted {
                let mut partial = if so_far.is_empty() {
                    FitOutcome::so_far(&[], from, penalty)
                } else {
                    FitOutcome::so_far(&so_far, &last_theta, penalty)
                };
                let measured = starts.as_ref().map(|s| &s.losses[s.best]);
                if let (true, Some(Ok(loss))) = (so_far.is_empty(), measured) {
                    (partial.loss, partial.initial_loss) = (*loss, *loss);
                }
                partial.reason = reason.clone();
                match save(&partial) {
                    // A stop is reported as a stop (exit 130, Python's interrupt), not as
                    // a fit that failed.
                    Ok(()) if reason == StopReason::Interrupted => {
                        return Err(CliError::Interrupted {
                            unit: "iteration",
                            at: so_far.last().map_or(0, |h| u64::from(h.iteration)),
                            out: out.join("fit.json"),
                        })
                    }
                    Ok(()) => {}
                    Err(w) => eprintln!("warning: fit.json keeps its last checkpoint: {w}"),
                }
            }
            return Err(grad_error(e));
        }
    };
    let wall = start.elapsed().as_secs_f64();
    let values: Vec<f64> = display(&outcome.theta).map_err(grad_error)?;

    let path = FitRecord::new(&inputs(wall), &outcome)
        .map_err(grad_error)?
        .write(&out)?;

    // Parameters the fit could not move from their start: named, with what to do.
    let flat = (outcome.flat_at_start.iter())
        .filter_map(|&a| Some(specs.get(a)?.label.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    if !flat.is_empty() && outcome.reason != StopReason::NoGradient {
        eprintln!(
            "warning: the gradient for {flat} is exactly 0 at the start: the loss does not \
             depend on it there, so the fit may leave it at its initial value (start from a \
             nonzero --init)"
        );
    }
    // The gradient is that of exact linear solves (crate::grad); say so when the scene's
    // solver stops far from one.
    let forward = outcome.stats.worst_forward_residual.unwrap_or(0.0);
    if forward > FORWARD_RESIDUAL_NOTE {
        eprintln!(
            "note: the scene's linear solves stopped at relative residuals up to {forward:.1e}; \
             the gradients are those of exact solves, so the fit may stall short of the minimum. \
             --exact-solves (or a tighter integrator.solver) removes the mismatch"
        );
    }
    if !args.quiet {
        eprintln!("{}", stop_message(&outcome, &optimizer, &options));
        println!(
            "{}: loss {:.6e} -> {:.6e} m^2 in {} iterations ({} evaluations, {:.2} s); {}",
            scene.name,
            outcome.initial_loss,
            outcome.loss,
            outcome.history.last().map_or(0, |h| h.iteration),
            outcome.evaluations,
            wall,
            shown(&outcome.theta)
        );
        println!("wrote {}", path.display());
    }
    if outcome.reason == StopReason::Interrupted {
        return Err(CliError::Interrupted {
            unit: "iteration",
            at: outcome.history.last().map_or(0, |h| u64::from(h.iteration)),
            out: path,
        });
    }
    if outcome.reason == StopReason::NoGradient {
        return Err(CliError::FitNoGradient {
            source: Box::new(GradError::NoGradient { params: flat }),
            out: path,
        });
    }
    if outcome.reason == StopReason::CannotReduce {
        return Err(CliError::FitStalled {
            loss: outcome.loss,
            out: path,
        });
    }
    Ok(FitRun {
        out: path,
        outcome,
        values,
    })
}

/// The stop reason in words; an Adam fit that hit --max-iters without accepting an
/// iteration says that every trial was backed off (the bare "iteration limit" read as a
/// slow fit, not as a learning rate that blows the run up).
fn stop_message(outcome: &FitOutcome, optimizer: &Optimizer, options: &FitOptions) -> String {
    let none_accepted = outcome.history.iter().all(|h| h.iteration == 0);
    match optimizer {
        Optimizer::Adam { learning_rate }
            if none_accepted && outcome.reason == StopReason::MaxIterations =>
        {
            let stages = match options.smoothness > 0.0 {
                true => u64::from(options.smoothness_continuation) + 1,
                false => 1,
            };
            let trials = u64::from(options.max_iterations) * stages;
            format!(
                "stopped: no iteration accepted: all {trials} trials (--max-iters) were backed \
                 off, each run blowing up or leaving f64's range, from --learning-rate \
                 {learning_rate:e} halving each time; try a smaller --learning-rate"
            )
        }
        _ => outcome.reason.describe().to_string(),
    }
}
