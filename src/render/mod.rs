//! Offscreen rendering of particles and springs, for `msc render`, `msc run --render` and
//! host applications.
//!
//! [`Renderer`] draws straight from vertex buffers of `vec4<f32>` positions (xyz, w = 1,
//! stride 16): the GPU solver's [`positions_buffer`](crate::gpu::GpuSolver::positions_buffer)
//! binds as one with no copy. Particles are camera-facing quads shaded as spheres (one
//! instance per particle), springs are lines through an index buffer of their endpoints;
//! both are depth tested. Colour is by charge (a diverging map: blue negative, grey zero,
//! red positive) or by speed (a sequential map, from a velocity buffer of the same layout).
//! The renderer records into the caller's encoder ([`Renderer::record`]) into its own
//! offscreen texture or a view the caller owns ([`Renderer::record_to_view`]); it never
//! owns a window or an event loop. [`Renderer::render`] is the one-call form that submits
//! and reads the image back.
//!
//! - [`camera`]: the automatic camera (fit a bounding box from a fixed view);
//! - [`frames`]: reading `frames/frame_NNNNNN.ply` of a run folder back;
//! - [`image`]: PNG and animated GIF output, written atomically;
//! - [`options`]: the `--size`, `--background` and `--particle-size` values.

pub mod camera;
pub mod device;
pub mod frames;
pub mod image;
pub mod options;
mod pipelines;
pub mod renderer;
mod targets;

pub use camera::{Bounds, Camera, View};
pub use device::{headless_device, HeadlessDevice};
pub use frames::{Frame, RunFrames};
pub use image::{GifWriter, Image};
pub use options::{ColorBy, ParticleSize, Rgb, Size};
pub use renderer::{RenderOptions, Renderer, SceneGeometry};

use crate::output::OutputError;
use std::path::PathBuf;

/// The WGSL source of the render pipelines.
pub const SHADER: &str = include_str!("render_scene.wgsl");

/// What rendering can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    #[error("no GPU adapter to render with{0}")]
    NoAdapter(String),
    #[error("cannot open a GPU device for rendering: {0}")]
    Device(String),
    #[error("wgpu error while rendering: {0}")]
    Gpu(String),
    #[error("reading the rendered image back failed: {0}")]
    Readback(String),
    #[error("image size {width}x{height}: {reason}")]
    Size {
        width: u32,
        height: u32,
        reason: String,
    },
    #[error(
        "{what} holds {size} bytes but {needed} are needed ({particles} particles, 16 bytes each)"
    )]
    BufferTooSmall {
        what: &'static str,
        size: u64,
        needed: u64,
        particles: u32,
    },
    #[error("msaa: {0} samples per pixel; 1 or 4 are supported")]
    Msaa(u32),
    #[error("colouring by speed needs a velocity buffer")]
    MissingVelocities,
    #[error("spring {index} joins particle {particle}, but there are only {particles} particles")]
    BadSpring {
        index: usize,
        particle: u32,
        particles: u32,
    },
    #[error("nothing to draw: the system has no particles")]
    Empty,
    #[error("{}: {message}", path.display())]
    Malformed { path: PathBuf, message: String },
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} does not exist", path.display())]
    NotFound { path: PathBuf },
    #[error(
        "no frames in {}: expected frame_NNNNNN.ply files (a run writes them unless its scene \
         sets output.frames = \"none\")",
        dir.display()
    )]
    NoFrames { dir: PathBuf },
    /// Every chosen frame was skipped (each named in a note before this error).
    #[error("none of the {count} chosen frames in {} can be drawn (see the notes above)", dir.display())]
    NoneDrawable { dir: PathBuf, count: usize },
    #[error("{}: {found} particles, but the run's first frame has {expected}", path.display())]
    ParticleCount {
        path: PathBuf,
        expected: usize,
        found: usize,
    },
    #[error("cannot write the GIF {}: {message}", path.display())]
    Gif { path: PathBuf, message: String },
    #[error(transparent)]
    Output(#[from] OutputError),
}
