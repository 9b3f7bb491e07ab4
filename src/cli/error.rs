//! What a command can fail with, and the exit code each maps to:
//! 2 for usage and input errors (bad scene, bad `--set`, bad option), 1 for run failures.
//! What a single run can fail with is the run layer's [`RunError`].

use crate::output::OutputError;
pub use crate::run::error::render;
use crate::run::RunError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// Loading the scene, starting a backend, stepping, writing or drawing failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The run stopped because energies or the state became non-finite.
    #[error(
        "the simulation diverged at step {step} (t = {} s): {why}; \
         outputs so far are in {} (summary.json has \"finite\": false). {}",
        crate::display::num(*time),
        out.display(),
        diverged_hint(*step)
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
        "interrupted after {unit} {at}; outputs so far are in {} (marked \"interrupted\": true)",
        out.display()
    )]
    Interrupted {
        /// What `at` counts: "step" (`msc run`) or "iteration" (`msc fit`).
        unit: &'static str,
        at: u64,
        out: PathBuf,
    },
    /// `msc bench`: an option set away from its default that nothing the command runs
    /// reads.
    #[error(
        "{option} changes nothing here: it is read by {readers} only, and this command runs {runs}"
    )]
    UnreadOption {
        option: &'static str,
        readers: &'static str,
        runs: String,
    },
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
    /// `msc fit` stopped at its start, where the gradient is exactly zero (an input
    /// error: another --init); fit.json holds the record, reason `no_gradient`.
    #[error("the fit stopped at its start, not converged (see {})", out.display())]
    FitNoGradient {
        #[source]
        source: Box<crate::grad::GradError>,
        out: PathBuf,
    },
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

/// What to try after a divergence: at step 0 nothing was integrated yet, so the time step
/// is not to blame but a value of the scene (see the guide's Limits).
fn diverged_hint(step: u64) -> &'static str {
    if step == 0 {
        "The initial state is already non-finite, before any step: a value of the scene \
         (a stiffness, rest length, mass, charge or position) is too large or too small for \
         the energies to be computed"
    } else {
        "Try a smaller integrator.dt or an implicit integrator"
    }
}

impl From<OutputError> for CliError {
    fn from(e: OutputError) -> Self {
        Self::Run(e.into())
    }
}

/// The failure a fit's error stands for: with no start point evaluated, the first
/// start's (a failed run exits 1, a bad value 2, as without --starts).
fn fit_failure(e: &crate::grad::GradError) -> &crate::grad::GradError {
    match e {
        crate::grad::GradError::NoStart { first, .. } => first,
        e => e,
    }
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Run(e) => e.exit_code(),
            Self::Fit(e) => match fit_failure(e) {
                crate::grad::GradError::NonFiniteState { .. }
                | crate::grad::GradError::NonFiniteTangent { .. }
                | crate::grad::GradError::NonFiniteLoss => 1,
                crate::grad::GradError::Interrupted => crate::interrupt::EXIT_CODE,
                _ => 2,
            },
            Self::FitStalled { .. } => 1,
            Self::FitNoGradient { .. } => 2,
            Self::UnreadOption { .. } => 2,
            Self::Interrupted { .. } => crate::interrupt::EXIT_CODE,
            Self::Diverged { .. }
            | Self::ValidateDiverged { .. }
            | Self::Mismatch { .. }
            | Self::Ddef(_) => 1,
            Self::Batch(e) => e.exit_code(),
            Self::Plot(e) => e.exit_code(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigError;

    #[test]
    fn a_run_error_reads_and_exits_as_it_does_alone() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let err = CliError::from(OutputError::Write {
            path: PathBuf::from("out/x/energy.csv"),
            source: io,
        });
        assert_eq!(
            render(&err),
            "error: cannot write out/x/energy.csv\n  caused by: denied"
        );
        assert_eq!(err.exit_code(), 1);
        let opt = CliError::from(RunError::Option {
            option: "--steps",
            source: ConfigError::new("integrator.steps", "must be at least 1"),
        });
        assert_eq!(
            render(&opt),
            "error: invalid --steps\n  caused by: integrator.steps: must be at least 1"
        );
        assert_eq!(opt.exit_code(), 2);
    }
}
