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
//! parses the arguments and reports; the fit's own steps are in [`grad::fit_job`].

use super::scene_args::SceneArgs;
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

/// How the CPU adjoint solves its linear systems ([`grad::AdjointSolve`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AdjointSolveArg {
    /// CG to 1e-12 (bench: --adjoint-tolerance): the exact-solve map's gradient, equal to
    /// forward mode
    #[default]
    Exact,
    /// The scene's solver and iteration count, warm-started (as the GPU adjoint): about a
    /// forward step per reversed step, the exact gradient's approximation
    Scene,
}

impl AdjointSolveArg {
    pub(super) fn mode(self) -> grad::AdjointSolve {
        match self {
            Self::Exact => grad::AdjointSolve::Exact,
            Self::Scene => grad::AdjointSolve::Scene,
        }
    }
}

#[derive(Clone, Debug, clap::Args)]
pub struct FitArgs {
    #[command(flatten)]
    pub scene: SceneArgs,
    /// Target: a run folder written by `msc run` (its frames/*.ply) or one PLY file (taken
    /// at its header's time, else at the scene's end time)
    #[arg(long, value_name = "RUN_DIR|FRAME.ply")]
    pub target: PathBuf,
    /// Parameters to estimate: charge (C per charged particle, or a scale when the
    /// scene's charges differ), stiffness (N/m, or a scale), charges (per particle),
    /// stiffnesses (per spring), `external_charge[:I]` (C), `external_position[:I]` (m, x,y,z).
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
    #[arg(long = "init", value_name = "VALUE", allow_hyphen_values = true)]
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
    #[arg(long = "learning-rate", value_name = "R", default_value_t = DEFAULT_LEARNING_RATE)]
    pub learning_rate: f64,
    /// Forward sensitivities or the adjoint
    #[arg(long, value_enum, default_value_t = GradientArg::Auto)]
    pub gradient: GradientArg,
    /// The adjoint's checkpointing: auto (store every state when they fit
    /// --checkpoint-memory, else two-level), all, two-level, two-level:C, binomial:S
    #[arg(long, value_name = "POLICY", default_value = "auto")]
    pub checkpoint: grad::Checkpointing,
    /// GPU adjoint: run its linear solves as CG with N iterations instead of the scene's
    /// solver and iteration count
    #[arg(long = "adjoint-cg", value_name = "N")]
    pub adjoint_cg: Option<u32>,
    /// CPU adjoint: its linear solves (exact: CG to 1e-12; scene: the scene's solver)
    #[arg(long = "adjoint-solve", value_enum, default_value_t = AdjointSolveArg::Exact)]
    pub adjoint_solve: AdjointSolveArg,
    /// Memory the adjoint's kept states may take, in MiB
    #[arg(long = "checkpoint-memory", value_name = "MIB", default_value_t = grad::checkpoint::DEFAULT_MEMORY_BUDGET >> 20)]
    pub checkpoint_memory: u64,
    /// Weight (m^2) of a smoothness penalty over neighbouring springs or particles of
    /// per-element parameters (graph Laplacian); 0 = none
    #[arg(long, value_name = "LAMBDA", default_value_t = 0.0)]
    pub smoothness: f64,
    /// After the first fit, S more from each result with the smoothness weight lowered
    /// tenfold each time (docs/guide.md, "Fitting: forward and adjoint")
    #[arg(
        long = "smoothness-continuation",
        value_name = "S",
        default_value_t = 0
    )]
    pub smoothness_continuation: u32,
    /// With --smoothness-continuation: the last stage without the penalty
    #[arg(long = "smoothness-release")]
    pub smoothness_release: bool,
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
    /// Largest RMS distance, relative to the scene's size, between the target's frame at
    /// t = 0 and the scene's initial positions: a target from another geometry or initial
    /// state is refused, since no parameter can match it
    #[arg(long = "initial-tolerance", value_name = "T", default_value_t = grad::target::DEFAULT_INITIAL_TOLERANCE,
          value_parser = parse_initial_tolerance)]
    pub initial_tolerance: f64,
    /// Output folder for fit.json (default: `out/<scene name>-fit`)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// No progress lines
    #[arg(long, short)]
    pub quiet: bool,
}

/// `--learning-rate`'s default.
const DEFAULT_LEARNING_RATE: f64 = 0.02;

fn parse_initial_tolerance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if t >= 0.0 => Ok(t),
        _ => Err(format!(
            "expected a tolerance of 0 or more (inf turns the check off), got '{s}'"
        )),
    }
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
    let shown = |theta: &[f64]| -> String {
        let shown = match display(theta) {
            Ok(shown) => shown,
            Err(e) => return e.to_string(),
        };
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
    // An output folder that cannot be written fails now, not after the fit.
    FitRecord::prepare(&out)?;
    let start = Instant::now();
    let starts = if args.starts > 1 {
        let count = (args.starts as usize, args.start_factor);
        let starts = fit_job::evaluate_starts(&set, &values0, count, &targets, &options.grad)
            .map_err(grad_error)?;
        if !args.quiet {
            for (s, (theta, loss)) in starts.thetas.iter().zip(&starts.losses).enumerate() {
                let loss = match loss {
                    Ok(l) => format!("loss {l:.6e} m^2"),
                    Err(e) => format!("failed: {e}"),
                };
                eprintln!("start {s:>3}: {}, {loss}", shown(theta));
            }
            eprintln!(
                "start {} of {} has the lowest loss ({} worlds in one batch, {:.2} s); \
                 fitting from it",
                starts.best,
                starts.thetas.len(),
                starts.thetas.len(),
                starts.seconds
            );
        }
        Some(starts)
    } else {
        None
    };
    let from = starts
        .as_ref()
        .map_or(theta0.as_slice(), |s| &s.thetas[s.best]);
    let outcome = grad::fit(&set, from, &targets, &options, progress).map_err(grad_error)?;
    let wall = start.elapsed().as_secs_f64();
    let values: Vec<f64> = display(&outcome.theta).map_err(grad_error)?;

    let inputs = FitInputs {
        scene: &scene,
        target: &args.target,
        targets: &targets,
        params: &specs,
        set: &set,
        theta0: &theta0,
        options: &options,
        starts: starts.as_ref(),
        wall_seconds: wall,
    };
    let path = FitRecord::new(&inputs, &outcome)
        .map_err(grad_error)?
        .write(&out)?;

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
            unit: "iteration",
            at: outcome.history.last().map_or(0, |h| u64::from(h.iteration)),
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
