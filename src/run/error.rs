//! What driving a run can fail with, its exit code (2 for input errors, 1 for run
//! failures), and the one-message rendering of an error chain that `msc` prints and a
//! batch's table records.

use crate::config::ConfigError;
use crate::gpu::GpuError;
use crate::output::OutputError;
use crate::render::RenderError;
use crate::scene::SceneError;
use crate::simulator::SimError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The scene file, built-in name or a `--set` override is wrong.
    #[error("cannot load scene '{scene}'")]
    Scene {
        scene: String,
        /// Boxed to keep `RunError` small.
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
    /// Drawing images failed (`msc render`, `msc run --render`).
    #[error("cannot render")]
    Render(#[source] RenderError),
}

impl RunError {
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
            // Inputs the GPU cannot take (f32 range, singular charges, a scene larger than
            // the adapter's limits): input errors, as the guide's Limits section says.
            Self::Gpu(
                GpuError::F32Range { .. }
                | GpuError::F32Pair { .. }
                | GpuError::Config(_)
                | GpuError::LimitExceeded { .. },
            ) => 2,
            Self::Output(OutputError::WouldOverwriteInput { .. }) => 2,
            Self::Gpu(_) | Self::Sim { .. } | Self::Output(_) => 1,
        }
    }

    /// True when the GPU device was lost: a batch opens a new one for the next run.
    pub fn is_device_loss(&self) -> bool {
        matches!(
            self,
            Self::Gpu(GpuError::DeviceLost(_))
                | Self::Sim {
                    source: SimError::Gpu(GpuError::DeviceLost(_)),
                    ..
                }
        )
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

/// An error as one line: its message and causes, joined by `: ` (a batch table's
/// `reason` column).
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    render(e)
        .trim_start_matches("error: ")
        .replace("\n  caused by: ", ": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn render_prints_the_chain_once() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let err = RunError::Output(OutputError::Write {
            path: PathBuf::from("out/x/energy.csv"),
            source: io,
        });
        assert_eq!(
            render(&err),
            "error: cannot write out/x/energy.csv\n  caused by: denied"
        );
        assert_eq!(one_line(&err), "cannot write out/x/energy.csv: denied");
        assert_eq!(err.exit_code(), 1);
        let opt = RunError::Option {
            option: "--steps",
            source: ConfigError::new("integrator.steps", "must be at least 1"),
        };
        assert_eq!(
            render(&opt),
            "error: invalid --steps\n  caused by: integrator.steps: must be at least 1"
        );
        assert_eq!(opt.exit_code(), 2);
    }

    #[test]
    fn a_scene_past_the_adapters_limits_is_an_input_error() {
        // All-pairs past a CPU adapter's loop budget is refused when the solver starts,
        // not at load; it is still the scene's size, not a failed run (exit 2).
        let err = RunError::Gpu(GpuError::LimitExceeded {
            what: "charged particles".into(),
            needed: 61_504,
            limit: 61_440,
        });
        assert_eq!(err.exit_code(), 2);
        assert_eq!(
            RunError::Gpu(GpuError::DeviceLost("gone".into())).exit_code(),
            1
        );
    }
}
