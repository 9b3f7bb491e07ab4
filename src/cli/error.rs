//! What a command can fail with, and the exit code each maps to:
//! 2 for usage and input errors (bad scene, bad `--set`, bad option), 1 for run failures.

use crate::config::ConfigError;
use crate::gpu::GpuError;
use crate::output::OutputError;
use crate::render::RenderError;
use crate::scene::SceneError;
use crate::sim::SimError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The scene file, built-in name or a `--set` override is wrong.
    #[error("cannot load scene '{scene}'")]
    Scene {
        scene: String,
        /// Boxed to keep `CliError` small.
        #[source]
        source: Box<SceneError>,
    },
    /// A command-line value the scene loader does not see (e.g. `--steps`).
    #[error("invalid {option}")]
    Option {
        option: &'static str,
        #[source]
        source: ConfigError,
    },
    /// The configuration was rejected by a backend.
    #[error("invalid configuration")]
    Config(#[source] ConfigError),
    #[error("cannot start the GPU solver")]
    Gpu(#[source] GpuError),
    #[error("the simulation failed at step {step}")]
    Sim {
        step: u64,
        #[source]
        source: SimError,
    },
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The run stopped because energies or the state became non-finite.
    #[error(
        "the simulation diverged at step {step} (t = {} s): {why}; \
         outputs so far are in {} (summary.json has \"finite\": false). \
         Try a smaller integrator.dt or an implicit integrator",
        crate::display::num(*time),
        out.display()
    )]
    Diverged {
        step: u64,
        time: f64,
        why: String,
        out: PathBuf,
    },
    /// SIGINT or SIGTERM stopped the run after a step (`msc fit`: after an iteration);
    /// every output so far was written, marked `"interrupted": true`.
    #[error(
        "interrupted after step {step}; outputs so far are in {} (marked \"interrupted\": true)",
        out.display()
    )]
    Interrupted { step: u64, out: PathBuf },
    /// Drawing images failed (`msc render`, `msc run --render`).
    #[error("cannot render")]
    Render(#[source] RenderError),
    /// The DDEF approximation could not be built (`msc ddef-error`).
    #[error("DDEF failed")]
    Ddef(#[source] crate::ddef::DdefError),
    /// `msc fit` could not run: bad parameters or target (exit 2) or a failed simulation (1).
    #[error("fit failed")]
    Fit(#[source] Box<crate::grad::GradError>),
    /// `msc fit` stopped where no step lowers the loss; fit.json holds the history.
    #[error(
        "the fit stopped without converging: no step lowers the loss below {loss:e} m^2 \
         (see {}). Try another --init, fewer frames (--frames last) or a --window",
        out.display()
    )]
    FitStalled { loss: f64, out: PathBuf },
    /// `msc sweep` / `msc batch`: a bad `--vary` or manifest (2), or failed runs (1).
    #[error(transparent)]
    Batch(#[from] crate::batch::BatchError),
    /// `msc plot`: bad input (2) or a drawing/writing failure (1).
    #[error(transparent)]
    Plot(#[from] crate::plot::PlotError),
    /// `msc validate`: one backend's run turned non-finite, so there is nothing to compare.
    #[error(
        "the {backend} run diverged at step {step} (non-finite state or energies): nothing \
         to compare. Try fewer --steps, a smaller integrator.dt or an implicit integrator"
    )]
    ValidateDiverged { backend: &'static str, step: u64 },
    /// `msc validate` found the backends further apart than the tolerance.
    #[error("GPU and CPU differ by more than the tolerance {tolerance:e}: {worst}")]
    Mismatch { tolerance: f64, worst: String },
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Scene { .. } | Self::Option { .. } | Self::Config(_) => 2,
            // A missing or unreadable run folder is an input error.
            Self::Render(
                RenderError::NotFound { .. }
                | RenderError::NoFrames { .. }
                | RenderError::NoneDrawable { .. }
                | RenderError::Malformed { .. }
                | RenderError::ParticleCount { .. }
                | RenderError::Size { .. }
                | RenderError::Empty,
            ) => 2,
            Self::Render(_) => 1,
            // Inputs the GPU cannot take (f32 range, singular charges): input errors.
            Self::Gpu(
                GpuError::F32Range { .. } | GpuError::F32Pair { .. } | GpuError::Config(_),
            ) => 2,
            Self::Fit(e) => match **e {
                crate::grad::GradError::NonFiniteState { .. }
                | crate::grad::GradError::NonFiniteTangent { .. }
                | crate::grad::GradError::NonFiniteLoss => 1,
                _ => 2,
            },
            Self::FitStalled { .. } => 1,
            Self::Interrupted { .. } => crate::interrupt::EXIT_CODE,
            Self::Output(crate::output::OutputError::WouldOverwriteInput { .. }) => 2,
            Self::Gpu(_)
            | Self::Sim { .. }
            | Self::Output(_)
            | Self::Diverged { .. }
            | Self::ValidateDiverged { .. }
            | Self::Mismatch { .. }
            | Self::Ddef(_) => 1,
            Self::Batch(e) => e.exit_code(),
            Self::Plot(e) => e.exit_code(),
        }
    }
}

/// `error: <message>` followed by one `  caused by: <cause>` line per source in the
/// chain, skipping a cause whose text the line above already contains.
pub fn render(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = format!("error: {err}");
    let mut last = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let msg = c.to_string();
        if !last.contains(&msg) {
            text.push_str(&format!("\n  caused by: {msg}"));
        }
        last = msg;
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_prints_the_chain_once() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let err = CliError::Output(OutputError::Write {
            path: PathBuf::from("out/x/energy.csv"),
            source: io,
        });
        assert_eq!(
            render(&err),
            "error: cannot write out/x/energy.csv\n  caused by: denied"
        );
        assert_eq!(err.exit_code(), 1);
        let opt = CliError::Option {
            option: "--steps",
            source: ConfigError::new("integrator.steps", "must be at least 1"),
        };
        assert_eq!(
            render(&opt),
            "error: invalid --steps\n  caused by: integrator.steps: must be at least 1"
        );
        assert_eq!(opt.exit_code(), 2);
    }
}
