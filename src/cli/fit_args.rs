//! `msc fit`'s arguments: the parameters, target, optimizer, gradient and output options,
//! parsed once by clap and handed to [`super::fit::execute`].

use super::scene_args::SceneArgs;
use crate::grad;
use crate::run::BackendArg;
use std::path::PathBuf;

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
    /// stiffnesses (per spring), masses (kg, per particle), `external_charge[:I]` (C),
    /// `external_position[:I]` (m, x,y,z).
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
    /// --checkpoint-memory, else two-level), all, two-level, two-level:C, binomial:S (each
    /// refused when the states its plan keeps exceed --checkpoint-memory)
    #[arg(long, value_name = "POLICY", default_value = "auto")]
    pub checkpoint: grad::Checkpointing,
    /// GPU adjoint: run its linear solves as CG with N iterations instead of the scene's
    /// solver and iteration count
    #[arg(long = "adjoint-cg", value_name = "N")]
    pub adjoint_cg: Option<u32>,
    /// CPU adjoint: its linear solves (exact: CG to 1e-12; scene: the scene's solver)
    #[arg(long = "adjoint-solve", value_enum, default_value_t = AdjointSolveArg::Exact)]
    pub adjoint_solve: AdjointSolveArg,
    /// Memory the adjoint's kept states may take, in MiB (auto chooses its policy by it;
    /// a policy whose plan keeps more is refused)
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
pub(super) const DEFAULT_LEARNING_RATE: f64 = 0.02;

fn parse_initial_tolerance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if t >= 0.0 => Ok(t),
        _ => Err(format!(
            "expected a tolerance of 0 or more (inf turns the check off), got '{s}'"
        )),
    }
}
