//! `msc fit`: estimate scene parameters from target frames (the paper's Section 3.2).
//!
//! The loss is the mean squared position error against the target frames (a run folder's
//! `frames/*.ply` or one PLY file), matched by time; its gradient comes from forward
//! sensitivities or from the adjoint (`--gradient`) through the scene's own integrator
//! and time step ([`crate::grad`]). `--backend gpu` propagates the tangents on the GPU.
//! Levenberg-Marquardt for few parameters, L-BFGS (or Adam) for many. `--starts N` first runs N start
//! points around the initial values forward, as worlds of one batch, and fits from the one
//! with the lowest loss ([`grad::starts`]). Progress goes to stderr; the
//! history and the result go to `fit.json`, written atomically.

use super::scene_args::SceneArgs;
use super::CliError;
use crate::config::ConfigError;
use crate::grad::{
    self, CheckpointOptions, FitHistoryEntry, FitOptions, FitOutcome, GradBackend, GradError,
    GradMode, GradOptions, Optimizer, Param, ParamSet, StopReason, TangentSolve,
};
use crate::output::write_atomic;
use crate::run::{BackendArg, RunError};
use crate::scene::LoadedScene;
use std::path::PathBuf;
use std::time::Instant;

/// Which target frames enter the loss.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum FramesArg {
    /// Every target frame after t = 0
    #[default]
    All,
    /// Only the last target frame
    Last,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OptimizerArg {
    /// Levenberg-Marquardt for up to 16 components with forward gradients, else L-BFGS
    #[default]
    Auto,
    /// Levenberg-Marquardt (Gauss-Newton with damping; forward gradients)
    Lm,
    /// L-BFGS
    Lbfgs,
    /// Adam
    Adam,
}

/// How the gradient is computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum GradientArg {
    /// The adjoint for per-element parameters or more than 8 components, else forward
    #[default]
    Auto,
    /// Forward sensitivities: one tangent per component (gives J^T J for --optimizer lm)
    Forward,
    /// Reverse mode: one backward pass for all components, with checkpointing
    Adjoint,
}

#[derive(Clone, Debug, Default, clap::Args)]
pub struct FitArgs {
    #[command(flatten)]
    pub scene: SceneArgs,
    /// Target: a run folder written by `msc run` (its frames/*.ply) or one PLY file (taken
    /// at its header's time, else at the scene's end time)
    #[arg(long, value_name = "RUN_DIR|FRAME.ply")]
    pub target: PathBuf,
    /// Parameters to estimate: charge (C per charged particle, or a scale when the
    /// scene's charges differ), stiffness (N/m, or a scale), charges (per particle),
    /// stiffnesses (per spring), external_charge[:I] (C), external_position[:I] (m, x,y,z).
    /// Repeat or separate with commas
    #[arg(
        long = "param",
        value_name = "NAME",
        value_delimiter = ',',
        required = true
    )]
    pub params: Vec<String>,
    /// Fit the logarithm of these --param names (the same names), keeping them positive
    /// (a charge keeps its sign); not positions, nor a parameter with a zero value
    #[arg(long = "log", value_name = "NAME", value_delimiter = ',')]
    pub log: Vec<String>,
    /// Initial value of each --param in its order, in the parameter's unit (x,y,z for a
    /// position; for charges and stiffnesses every component is set). Default: the scene's
    #[arg(long = "init", value_name = "VALUE")]
    pub init: Vec<String>,
    /// Target frames in the loss
    #[arg(long, value_enum, default_value_t = FramesArg::All)]
    pub frames: FramesArg,
    /// Start points: evaluate N points spread around the initial values (the initial
    /// values among them) by forward runs of all of them as worlds of one batch, then fit
    /// from the one with the lowest loss. 1: fit from the initial values
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub starts: u32,
    /// Spread of --starts: start s > 0 multiplies each component by a factor in [1/F, F],
    /// log-uniform and evenly spread over the starts (a low-discrepancy sequence)
    #[arg(long = "start-factor", value_name = "F", default_value_t = grad::starts::DEFAULT_START_FACTOR)]
    pub start_factor: f64,
    /// Iteration limit
    #[arg(long = "max-iters", value_name = "N", default_value_t = 50)]
    pub max_iters: u32,
    #[arg(long, value_enum, default_value_t = OptimizerArg::Auto)]
    pub optimizer: OptimizerArg,
    /// Adam's relative step per iteration, and L-BFGS's first step
    #[arg(long = "learning-rate", value_name = "R", default_value_t = 0.02)]
    pub learning_rate: f64,
    /// Forward sensitivities or the adjoint
    #[arg(long, value_enum, default_value_t = GradientArg::Auto)]
    pub gradient: GradientArg,
    /// The adjoint's checkpointing: auto (store every state when they fit
    /// --checkpoint-memory, else two-level), all, two-level[:C], binomial:S
    #[arg(long, value_name = "POLICY", default_value = "auto")]
    pub checkpoint: grad::Checkpointing,
    /// GPU adjoint: run its linear solves as CG with N iterations instead of the scene's
    /// solver and iteration count
    #[arg(long = "adjoint-cg", value_name = "N")]
    pub adjoint_cg: Option<u32>,
    /// Memory the adjoint's kept states may take, in MiB
    #[arg(long = "checkpoint-memory", value_name = "MIB", default_value_t = grad::checkpoint::DEFAULT_MEMORY_BUDGET >> 20)]
    pub checkpoint_memory: u64,
    /// Weight (m^2) of a smoothness penalty over neighbouring springs or particles of
    /// per-element parameters (graph Laplacian); 0 = none
    #[arg(long, value_name = "LAMBDA", default_value_t = 0.0)]
    pub smoothness: f64,
    /// Truncate each frame's gradient to its last N steps (long, chaotic horizons)
    #[arg(long, value_name = "N")]
    pub window: Option<u64>,
    /// Solve the forward linear systems with CG to 1e-12 instead of the scene's solver, so
    /// the gradient is exactly that of the simulated trajectory
    #[arg(long = "exact-solves")]
    pub exact_solves: bool,
    /// Where the simulation and its tangents run: `gpu` propagates the tangents on the GPU
    /// (f32, the scene's solver and iteration count for the tangent solves, no --window or
    /// --exact-solves); `auto` and `cpu` use the f64 CPU reference
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// Output folder for fit.json [default: out/<scene name>-fit]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// No progress lines
    #[arg(long, short)]
    pub quiet: bool,
}

/// Forward residuals above this get a note: the loss and its gradient then describe
/// noticeably different maps.
const FORWARD_RESIDUAL_NOTE: f64 = 1e-4;

/// A --param as given, with the unit its values are shown in.
#[derive(Clone, Debug)]
struct ParamSpec {
    param: Param,
    /// Display value = theta * reference (charge and stiffness: the scene's common value).
    reference: f64,
    unit: &'static str,
    label: String,
}

fn option_error(option: &'static str, message: impl Into<String>) -> CliError {
    CliError::from(RunError::Option {
        option,
        source: ConfigError::new(option, message),
    })
}

/// The common value of the non-zero entries, if they all agree.
fn common(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut it = values.filter(|v| *v != 0.0);
    let first = it.next()?;
    it.all(|v| v == first).then_some(first)
}

fn parse_param(name: &str, scene: &LoadedScene) -> Result<ParamSpec, CliError> {
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
    let spec = |param, reference: Option<f64>, unit: &'static str, label: &str| {
        let (reference, unit, label) = match reference {
            Some(r) => (r, unit, label.to_string()),
            None => (1.0, "x scene", format!("{label} scale")),
        };
        ParamSpec {
            param,
            reference,
            unit,
            label,
        }
    };
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
                common(system.charges().iter().copied()),
                "C",
                "charge",
            )
        }
        "stiffness" => {
            let k = common(system.springs().iter().map(|s| s.stiffness));
            spec(Param::StiffnessScale, k, "N/m", "stiffness")
        }
        "charges" => spec(Param::Charges, Some(1.0), "C", "charges"),
        "stiffnesses" => spec(Param::Stiffnesses, Some(1.0), "N/m", "stiffnesses"),
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

pub fn execute(args: &FitArgs) -> Result<FitRun, CliError> {
    let scene = args.scene.load(None)?;
    let specs: Vec<ParamSpec> = args
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
    // theta -> display value, per component.
    let mut reference = Vec::with_capacity(set.len());
    for (a, s) in specs.iter().enumerate() {
        reference.extend(std::iter::repeat_n(s.reference, set.range(a).len()));
    }
    // The initial physical values (theta0 is their image, logarithms for --log).
    let mut values0 = set.values(&set.initial());
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
            let range = set.range(a);
            let theta = &mut values0[range.clone()];
            match (specs[a].param, values.as_slice()) {
                (Param::ExternalPosition { .. }, [x, y, z]) => theta.copy_from_slice(&[*x, *y, *z]),
                (Param::ExternalPosition { .. }, _) => {
                    return Err(option_error("--init", "external_position takes x,y,z"))
                }
                (_, [v]) => {
                    let any_nonzero = theta.iter().any(|t| *t != 0.0);
                    let per_element = matches!(specs[a].param, Param::Charges | Param::Stiffnesses);
                    for t in theta.iter_mut() {
                        // Per-element values: set the non-zero ones (every one if all are 0),
                        // so uncharged particles stay uncharged.
                        if !per_element || *t != 0.0 || !any_nonzero {
                            *t = *v / specs[a].reference;
                        }
                    }
                }
                _ => {
                    return Err(option_error(
                        "--init",
                        format!("{} takes one value", specs[a].label),
                    ))
                }
            }
        }
    }
    let theta0 = set.from_values(&values0).map_err(grad_error)?;
    let frames =
        grad::target::read_target(&args.target).map_err(|e| grad_error(GradError::Target(e)))?;
    let end_time = crate::sim::time_at(scene.config.steps, scene.config.dt);
    let mut targets = grad::target::to_targets(&frames, scene.config.dt, end_time)
        .map_err(|e| grad_error(GradError::Target(e)))?;
    if args.frames == FramesArg::Last {
        targets = targets.split_off(targets.len().saturating_sub(1));
    }
    if targets.is_empty() {
        return Err(grad_error(GradError::Frames(format!(
            "{} has no frame after t = 0",
            args.target.display()
        ))));
    }
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
    if !(args.learning_rate.is_finite() && args.learning_rate > 0.0) {
        return Err(option_error("--learning-rate", "must be positive"));
    }
    // `auto` keeps the CPU reference: its tangents are f64 with exact (CG to 1e-12)
    // solves, it runs every integrator and option, and on the software adapters CI has
    // the GPU tangents are slower (README, `msc fit`).
    let grad_backend = match args.backend {
        BackendArg::Gpu => GradBackend::Gpu {
            allow_software: true,
        },
        BackendArg::Auto | BackendArg::Cpu => GradBackend::Cpu,
    };
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
            checkpoint: CheckpointOptions {
                policy: args.checkpoint,
                memory_budget: args.checkpoint_memory.saturating_mul(1 << 20),
            },
        },
        smoothness: args.smoothness,
        ..FitOptions::default()
    };
    let names = set.component_names();
    // theta -> the values shown (physical, in each parameter's display unit).
    let display = |theta: &[f64]| -> Vec<f64> {
        let v = set.values(theta);
        v.iter().zip(&reference).map(|(t, r)| t * r).collect()
    };
    let shown = |theta: &[f64]| -> String {
        let shown = display(theta);
        if theta.len() > 4 {
            let mean = shown.iter().sum::<f64>() / theta.len() as f64;
            return format!("{} components, mean {mean:.6e}", theta.len());
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
    let quiet = args.quiet;
    let progress = |h: &FitHistoryEntry| {
        if quiet {
            return;
        }
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
    };
    let start = Instant::now();
    let starts = if args.starts > 1 {
        if !(args.start_factor.is_finite() && args.start_factor > 1.0) {
            return Err(option_error("--start-factor", "must be a number above 1"));
        }
        // Spread in value space (a log parameter's theta is not a value to scale).
        let thetas = grad::starts::spread(&values0, args.starts as usize, args.start_factor)
            .iter()
            .map(|v| set.from_values(v))
            .collect::<Result<Vec<_>, _>>()
            .map_err(grad_error)?;
        let t = Instant::now();
        let losses = grad::starts::batch_losses(&set, &thetas, &targets, &options.grad)
            .map_err(grad_error)?;
        let seconds = t.elapsed().as_secs_f64();
        let Some(best) = grad::starts::best(&losses) else {
            let first = losses.into_iter().find_map(Result::err);
            return Err(grad_error(first.unwrap_or(GradError::NonFiniteLoss)));
        };
        if !args.quiet {
            for (s, (theta, loss)) in thetas.iter().zip(&losses).enumerate() {
                let loss = match loss {
                    Ok(l) => format!("loss {l:.6e} m^2"),
                    Err(e) => format!("failed: {e}"),
                };
                eprintln!("start {s:>3}: {}, {loss}", shown(theta));
            }
            eprintln!(
                "start {best} of {} has the lowest loss ({} worlds in one batch, {seconds:.2} s); \
                 fitting from it",
                thetas.len(),
                thetas.len()
            );
        }
        Some((thetas, losses, best, seconds))
    } else {
        None
    };
    let from = starts
        .as_ref()
        .map_or(theta0.as_slice(), |(thetas, _, best, _)| &thetas[*best]);
    let outcome = grad::fit(&set, from, &targets, &options, progress).map_err(grad_error)?;
    let wall = start.elapsed().as_secs_f64();
    let values: Vec<f64> = display(&outcome.theta);

    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("out").join(format!("{}-fit", scene.name)));
    std::fs::create_dir_all(&out).map_err(|source| {
        CliError::from(crate::output::OutputError::CreateDir {
            path: out.clone(),
            source,
        })
    })?;
    let small = set.len() <= 16;
    let mut json = serde_json::json!({
        "msc_version": env!("CARGO_PKG_VERSION"),
        "scene": scene.name,
        "target": args.target.display().to_string(),
        "target_steps": targets.iter().map(|t| t.step).collect::<Vec<_>>(),
        "integrator": scene.config.integrator.name(),
        "dt": scene.config.dt,
        "parameters": specs.iter().enumerate().map(|(a, s)| serde_json::json!({
            "name": s.label,
            "unit": s.unit,
            "components": set.range(a).len(),
            "initial": display(&theta0)[set.range(a)].to_vec(),
            "log": set.is_log(a),
            "result": values[set.range(a)].to_vec(),
        })).collect::<Vec<_>>(),
        "components": if small { serde_json::json!(names) } else { serde_json::Value::Null },
        "optimizer": optimizer.name(),
        "initial_loss": outcome.initial_loss,
        "loss": outcome.loss,
        "rms_error": outcome.loss.sqrt(),
        "converged": outcome.reason.converged(),
        "reason": outcome.reason,
        "message": outcome.reason.describe(),
        "interrupted": outcome.reason == StopReason::Interrupted,
        "iterations": outcome.history.last().map_or(0, |h| h.iteration),
        "evaluations": outcome.evaluations,
        "history": outcome.history.iter().map(|h| serde_json::json!({
            "iteration": h.iteration,
            "loss": h.loss,
            "values": if small { serde_json::json!(display(&h.theta)) } else { serde_json::Value::Null },
            "gradient_norm": h.gradient_norm,
            "lambda": h.lambda,
            "step_norm": h.step_norm,
            "evaluations": h.evaluations,
        })).collect::<Vec<_>>(),
        "frames": outcome.frames,
        "smoothness": args.smoothness,
        "penalty": outcome.penalty,
        "gradient": {
            "mode": mode.name(),
            "method": match mode {
                GradMode::Forward => "forward sensitivities, exact-solve derivative of the discrete steps",
                GradMode::Adjoint => "adjoint (one reverse sweep), exact-solve derivative of the discrete steps",
            },
            "checkpoint": outcome.stats.checkpoint,
            "backend": match grad_backend {
                GradBackend::Cpu => "cpu",
                GradBackend::Gpu { .. } => "gpu",
            },
            "tangent_tolerance": options.grad.tangent_solve.tolerance,
            "exact_forward_solves": args.exact_solves,
            "window": args.window,
            "worst_tangent_residual": outcome.stats.worst_tangent_residual,
            "worst_forward_residual": outcome.stats.worst_forward_residual,
        },
        "wall_seconds": wall,
    });
    if let Some((thetas, losses, best, seconds)) = &starts {
        json["starts"] = serde_json::json!({
            "count": thetas.len(),
            "factor": args.start_factor,
            "chosen": best,
            "evaluation": "forward runs of every start as worlds of one batch",
            "wall_seconds": seconds,
            "points": thetas.iter().zip(losses).map(|(t, l)| serde_json::json!({
                "values": if small { serde_json::json!(display(t)) } else { serde_json::Value::Null },
                "loss": l.as_ref().ok(),
                "error": l.as_ref().err().map(|e| e.to_string()),
            })).collect::<Vec<_>>(),
        });
    }
    let path = out.join("fit.json");
    let mut text = serde_json::to_string_pretty(&json).map_err(|source| {
        CliError::from(crate::output::OutputError::Json {
            path: path.clone(),
            source,
        })
    })?;
    text.push('\n');
    write_atomic(&path, text.as_bytes())?;

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
        eprintln!("{}", outcome.reason.describe());
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
            step: outcome.history.last().map_or(0, |h| u64::from(h.iteration)),
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
