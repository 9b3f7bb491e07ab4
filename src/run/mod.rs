//! Driving one run, for `msc run` and the batches (`crate::batch`) alike: the backend
//! choice ([`backend`]), loading the scene with `--steps` ([`load`]), the stepping loop
//! ([`drive`]), the run folder with its summary ([`folder`]) and what a run can fail with
//! ([`error`]). Below the command line: nothing here parses arguments or prints reports.

pub mod backend;
pub mod drive;
pub mod error;
pub mod folder;
pub mod load;

pub use backend::{Backend, BackendArg, GpuHandles};
pub use drive::{drive, drive_with, Driven, OnOutput};
pub use error::{render, RunError};
pub use folder::{run_scene, run_scene_with, RunOutcome, Unwatched, Watch};
