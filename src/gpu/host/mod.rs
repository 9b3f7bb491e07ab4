//! The host's data and recordings, below the kernels that use them: the spring
//! adjacency's layout, f32 conversions and the time step's one host copy (`params`), size
//! limits and f32 range checks, the rows the buffers start with (`rows`), every buffer in
//! one table keyed by `Buf` (`buffers`), what
//! a recording is (`recording`), the engine of pipelines, bind groups and dispatch records
//! (`engine`), the `Recorder` each kernel family's launchers record into (`recorder`),
//! the replay of a solver's recordings (`replay`) and per-kernel timestamps (`profile`).

pub mod adjacency;
pub(crate) mod buffers;
pub(crate) mod ddef_layout;
pub(crate) mod engine;
pub mod limits;
pub(crate) mod params;
pub(crate) mod profile;
pub(crate) mod range;
pub(crate) mod recorder;
pub(crate) mod recording;
pub(crate) mod replay;
pub(crate) mod rows;
