//! Driving one run, for `msc run` and the batches (`crate::batch`) alike: the backend
//! choice ([`backend`]), loading the scene with `--steps` ([`load`]), one run's recording
//! ([`driver`]), the stepping loop of one run ([`stepping`]) or of a batch of worlds
//! ([`worlds`]), the run folder with its summary ([`folder`]), a scene validated on both
//! backends ([`validate`]) and what a run can fail with ([`error`]). Below the command
//! line: nothing here parses arguments or prints reports.

pub mod backend;
pub mod driver;
pub mod error;
pub mod folder;
pub mod load;
pub mod stepping;
pub mod validate;
pub mod worlds;

pub use backend::{Backend, BackendArg, GpuHandles};
pub use driver::{Driven, Probe, RunDriver, WorldProbe};
pub use error::{render, RunError};
pub use folder::{
    check_folder, finish_folder, open_folder, run_scene, run_scene_with, RanOn, RunOutcome,
    Unwatched, Watch,
};
pub use stepping::{drive, drive_with, OnOutput};
pub use worlds::drive_worlds;
