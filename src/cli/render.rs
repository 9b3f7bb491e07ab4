//! `msc render`: draw a run folder's frames to PNG images (and an animated GIF); and
//! [`LiveRender`], which draws while `msc run --render` runs.

use super::CliError;
use crate::model::{State, System};
use crate::output::OutputError;
use crate::render::frames::{run_springs, SpringSource};
use crate::render::{
    headless_device, Bounds, ColorBy, GifWriter, Image, ParticleSize, RenderError, RenderOptions,
    Renderer, Rgb, RunFrames, SceneGeometry, Size, Uploads, View,
};
use crate::run::{GpuHandles, RunError};
use crate::simulator::Simulator;
use std::path::{Path, PathBuf};

pub use crate::output::run_dir::RENDER_DIR;

/// `render/frame_000042.png` for frame 42 (the number of the PLY frame it shows).
pub fn image_name(index: u64) -> String {
    format!("frame_{index:06}.png")
}

/// How images look; shared by `msc render` and `msc run --render`.
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct RenderStyle {
    /// Image size in pixels, WIDTHxHEIGHT
    #[arg(long, value_name = "WxH", default_value_t = Size::default())]
    pub size: Size,
    /// What the particles' colour shows
    #[arg(long, value_enum, default_value_t = ColorBy::Charge)]
    pub color: ColorBy,
    /// Where the camera looks from; it frames the whole motion (msc render) or the initial
    /// state (msc run --render)
    #[arg(long, value_enum, default_value_t = View::Iso)]
    pub view: View,
    /// Background colour: #rrggbb, #rgb, black, white, grey or dark
    #[arg(long, value_name = "COLOR", default_value_t = Rgb::DEFAULT_BACKGROUND)]
    pub background: Rgb,
    /// Particle radius: auto (a quarter of the median spring length), metres (0.05) or
    /// pixels (4px)
    #[arg(long, value_name = "SIZE", default_value_t = ParticleSize::Auto)]
    pub particle_size: ParticleSize,
    /// Samples per pixel: 4 smooths edges (multisampling), 1 does not
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = parse_msaa)]
    pub msaa: u32,
    /// Do not draw the springs
    #[arg(long)]
    pub no_springs: bool,
}

fn parse_msaa(s: &str) -> Result<u32, String> {
    match s.trim() {
        "1" => Ok(1),
        "4" => Ok(4),
        _ => Err(format!("expected 1 or 4 samples per pixel, got '{s}'")),
    }
}

impl Default for RenderStyle {
    fn default() -> Self {
        RenderStyle {
            size: Size::default(),
            color: ColorBy::Charge,
            view: View::Iso,
            background: Rgb::DEFAULT_BACKGROUND,
            particle_size: ParticleSize::Auto,
            msaa: 4,
            no_springs: false,
        }
    }
}

impl RenderStyle {
    pub fn options(&self) -> RenderOptions {
        RenderOptions {
            size: self.size,
            color: self.color,
            view: self.view,
            background: self.background,
            particle_size: self.particle_size,
            springs: !self.no_springs,
            msaa: self.msaa,
            ..RenderOptions::default()
        }
    }
}

#[derive(Clone, Debug, clap::Args)]
pub struct RenderArgs {
    /// A run folder written by `msc run` (its frames/frame_NNNNNN.ply are drawn)
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    #[command(flatten)]
    pub style: RenderStyle,
    /// Draw every K-th frame: the first, every K-th after it, and the last
    #[arg(long, value_name = "K", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub every: u64,
    /// Also write the images drawn as an animated GIF
    #[arg(long, value_name = "FILE")]
    pub gif: Option<PathBuf>,
    /// Frames per second of the GIF (rounded to GIF's 1/100 s delays)
    #[arg(long, value_name = "F", default_value_t = 20.0, value_parser = parse_fps)]
    pub fps: f64,
    /// Folder for the PNG images [default: RUN_DIR/render]. Earlier frame_*.png there are
    /// replaced
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// No progress bar and no closing report
    #[arg(long, short)]
    pub quiet: bool,
}

fn parse_fps(s: &str) -> Result<f64, String> {
    let min = crate::render::GifWriter::MIN_FPS;
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= min && f <= 100.0 => Ok(f),
        _ => Err(format!(
            "expected a frame rate from {min:.5} (GIF's longest delay, 655.35 s) to 100, \
             got '{s}'"
        )),
    }
}

/// What `msc render` produced.
#[derive(Clone, Debug)]
pub struct RenderOutcome {
    pub out: PathBuf,
    pub images: Vec<PathBuf>,
    /// Frames that could not be drawn (a non-finite position, a malformed file), with why.
    pub skipped: Vec<(PathBuf, String)>,
    pub gif: Option<PathBuf>,
    pub adapter: String,
}

fn render_err(e: RenderError) -> RunError {
    RunError::Render(e)
}

/// Creates `dir` and removes the `frame_NNNNNN.png` files an earlier render left there.
fn prepare_image_dir(dir: &Path) -> Result<(), RunError> {
    std::fs::create_dir_all(dir).map_err(|source| {
        RunError::Output(OutputError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })
    })?;
    crate::output::ply::clear_numbered(dir, "png")?;
    Ok(())
}

/// The positions of the frames chosen by `--every`: 0, K, 2K, ... and the last.
pub fn selected(count: usize, every: u64) -> Vec<usize> {
    let step = usize::try_from(every.max(1)).unwrap_or(usize::MAX);
    let mut v: Vec<usize> = (0..count).step_by(step).collect();
    if count > 0 && v.last() != Some(&(count - 1)) {
        v.push(count - 1);
    }
    v
}

/// The GIF must not replace a frame or a file of the run folder (its scene, which gives
/// the springs, its energy log and summary).
fn check_gif(gif: &Path, frames: &RunFrames) -> Result<(), CliError> {
    use crate::output::run_dir::{ENERGY_FILE, SCENE_FILE, SUMMARY_FILE};
    let run_files = [
        (frames.root.join(SCENE_FILE), "run's scene"),
        (frames.root.join(ENERGY_FILE), "run's energy log"),
        (frames.root.join(SUMMARY_FILE), "run's summary"),
    ];
    let inputs: Vec<(&Path, &'static str)> = run_files
        .iter()
        .map(|(p, w)| (p.as_path(), *w))
        .chain(frames.frames.iter().map(|(_, p)| (p.as_path(), "frame")))
        .collect();
    crate::output::inputs::refuse_overwrite(gif, "--gif", &inputs)?;
    // Checked before any frame is drawn: a folder there would fail only at the end.
    if gif.is_dir() {
        return Err(RunError::Option {
            option: "--gif",
            source: crate::config::ConfigError::new(
                "--gif",
                format!("{} is a folder; give a file name", gif.display()),
            ),
        }
        .into());
    }
    Ok(())
}

/// Draws the frames of a run folder.
pub fn execute(args: &RenderArgs) -> Result<RenderOutcome, CliError> {
    let frames = RunFrames::open(&args.run_dir).map_err(render_err)?;
    if let Some(gif) = &args.gif {
        check_gif(gif, &frames)?;
    }
    let chosen = selected(frames.len(), args.every);
    let speed = args.style.color == ColorBy::Speed;

    // First pass: the camera frames every drawable chosen frame, and speeds share one
    // scale. A frame that cannot be read (a diverged run's non-finite positions, a
    // truncated file) is skipped and named; the others are drawn.
    let mut skipped: Vec<(PathBuf, String)> = Vec::new();
    let mut drawable: Vec<usize> = Vec::with_capacity(chosen.len());
    let mut first: Option<crate::render::Frame> = None;
    let mut bounds: Option<Bounds> = None;
    let mut max_speed = 0.0f32;
    for &k in &chosen {
        let path = frames.frames[k].1.clone();
        let f = match frames.read(k) {
            Ok(f) => f,
            Err(RenderError::Malformed { message, .. }) => {
                skipped.push((path, message));
                continue;
            }
            Err(e) => return Err(render_err(e).into()),
        };
        let n = first.as_ref().map_or(f.len(), |f0| f0.len());
        if f.len() != n {
            skipped.push((
                path,
                format!("{} particles where the first drawn frame has {n}", f.len()),
            ));
            continue;
        }
        if speed && f.velocities.is_none() {
            return Err(render_err(RenderError::Malformed {
                path,
                message: "--color speed needs velocities (vx vy vz) in the frames".into(),
            })
            .into());
        }
        if let Some(b) = f.bounds() {
            bounds = Some(bounds.map_or(b, |a| a.union(b)));
        }
        max_speed = max_speed.max(f.max_speed());
        drawable.push(k);
        if first.is_none() {
            first = Some(f);
        }
    }
    if !args.quiet || drawable.is_empty() {
        for (path, why) in &skipped {
            eprintln!("note: skipping {}: {why}", path.display());
        }
    }
    let Some(first) = first else {
        return Err(render_err(RenderError::NoneDrawable {
            dir: frames.root.join(crate::output::run_dir::FRAMES_DIR),
            count: chosen.len(),
        })
        .into());
    };
    let n = first.len();
    if n == 0 {
        return Err(render_err(RenderError::Empty).into());
    }

    let (springs, source) = run_springs(&frames.root, n, &first.faces);
    if !args.quiet {
        match &source {
            SpringSource::Scene => {}
            SpringSource::FaceEdges(why) => {
                eprintln!("note: {why}; drawing the triangles' edges as springs")
            }
            SpringSource::None(why) => eprintln!("note: {why}; drawing no springs"),
        }
    }
    let gpu = headless_device().map_err(render_err)?;
    let charges = first.charges.clone().unwrap_or_default();
    let mut renderer = Renderer::new(
        &gpu.device,
        &gpu.queue,
        &args.style.options(),
        &SceneGeometry {
            positions: &first.positions,
            springs: &springs,
            charges: &charges,
        },
    )
    .map_err(render_err)?;
    if let Some(b) = bounds {
        renderer.fit(b);
    }
    renderer.set_speed_scale(max_speed);

    let out = args
        .out
        .clone()
        .unwrap_or_else(|| args.run_dir.join(RENDER_DIR));
    prepare_image_dir(&out)?;
    let mut gif = match &args.gif {
        Some(path) => Some(
            GifWriter::create(
                path,
                args.style.size.width,
                args.style.size.height,
                args.fps,
            )
            .map_err(render_err)?,
        ),
        None => None,
    };
    let uploads = Uploads::new(&gpu.device, &gpu.queue, n, "msc render");
    let bar = crate::progress::bar(drawable.len() as u64, "images", args.quiet);
    let mut images = Vec::with_capacity(drawable.len());
    for &k in &drawable {
        let f = if k == drawable[0] {
            first.clone()
        } else {
            frames.read(k).map_err(render_err)?
        };
        uploads.write(&f.positions, f.velocities.as_deref());
        let image = uploads.render(&renderer).map_err(render_err)?;
        let path = out.join(image_name(f.index));
        image.write_png(&path).map_err(render_err)?;
        if let Some(g) = gif.as_mut() {
            g.add(&image).map_err(render_err)?;
        }
        images.push(path);
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Some(g) = gif {
        g.finish().map_err(render_err)?;
    }
    if !args.quiet {
        let skipped_note = match skipped.len() {
            0 => String::new(),
            k => format!(" ({k} skipped, named above)"),
        };
        println!(
            "rendered {} of {} frames{skipped_note} ({}, {} particles, {} springs) on {} into {}{}",
            images.len(),
            frames.len(),
            args.style.size,
            n,
            springs.len(),
            gpu.adapter.name,
            out.display(),
            args.gif
                .as_ref()
                .map(|g| format!(", and {}", g.display()))
                .unwrap_or_default()
        );
    }
    Ok(RenderOutcome {
        out,
        images,
        skipped,
        gif: args.gif.clone(),
        adapter: gpu.adapter.name,
    })
}

/// Where [`LiveRender`] takes positions from.
enum Source {
    /// The GPU solver's own buffers, on its device: no copy, no read-back.
    Solver(GpuHandles),
    /// Host-side states (the CPU backend) uploaded into vertex buffers each frame.
    Upload(Uploads),
}

/// Draws each output step of `msc run --render` into `OUT/render/frame_NNNNNN.png`
/// (numbered as the PLY frames are). With the GPU backend the renderer shares the
/// solver's device and draws straight from its position buffer; with the CPU backend it
/// opens a device of its own (software adapters accepted) and uploads the positions.
/// The camera frames the initial state; when a state read back for other reasons (frames,
/// the CPU backend, speed colours) leaves that box, it zooms out to the union, never in.
pub struct LiveRender {
    renderer: Renderer,
    source: Source,
    dir: PathBuf,
    color: ColorBy,
    framed: Option<Bounds>,
    max_speed: f32,
    images: u64,
}

impl LiveRender {
    /// Prepares `out/render/` and the renderer.
    pub fn start(
        style: &RenderStyle,
        system: &System,
        gpu: Option<GpuHandles>,
        out: &Path,
    ) -> Result<Self, RunError> {
        let positions: Vec<[f32; 4]> = system
            .positions()
            .iter()
            .map(|p| [p.x as f32, p.y as f32, p.z as f32, 1.0])
            .collect();
        let springs: Vec<[u32; 2]> = system.springs().iter().map(|s| [s.i, s.j]).collect();
        let charges: Vec<f32> = system.charges().iter().map(|&q| q as f32).collect();
        let geometry = SceneGeometry {
            positions: &positions,
            springs: &springs,
            charges: &charges,
        };
        let options = style.options();
        let (renderer, source) = match gpu {
            Some(h) => (
                Renderer::new(&h.device, &h.queue, &options, &geometry).map_err(render_err)?,
                Source::Solver(h),
            ),
            None => {
                let d = headless_device().map_err(render_err)?;
                let renderer =
                    Renderer::new(&d.device, &d.queue, &options, &geometry).map_err(render_err)?;
                let uploads = Uploads::new(&d.device, &d.queue, positions.len(), "msc live");
                (renderer, Source::Upload(uploads))
            }
        };
        let dir = out.join(RENDER_DIR);
        prepare_image_dir(&dir)?;
        Ok(LiveRender {
            renderer,
            source,
            dir,
            color: style.color,
            framed: Bounds::of_points(positions.iter().map(|p| glam::Vec3::new(p[0], p[1], p[2]))),
            max_speed: 0.0,
            images: 0,
        })
    }

    /// Images written so far.
    pub fn images(&self) -> u64 {
        self.images
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Draws the current state. `state` is the one the run already read back, if any; it
    /// is read here only when needed (the CPU backend, or speed colours' scale).
    pub fn frame(
        &mut self,
        sim: &mut dyn Simulator,
        step: u64,
        state: Option<&State>,
    ) -> Result<(), RunError> {
        let needs_state = matches!(self.source, Source::Upload(_)) || self.color == ColorBy::Speed;
        let read;
        let state = match (state, needs_state) {
            (Some(s), _) => Some(s),
            (None, true) => {
                read = sim
                    .state()
                    .map_err(|source| RunError::Sim { step, source })?;
                Some(&read)
            }
            (None, false) => None,
        };
        if let Some(s) = state {
            let b = Bounds::of_points(
                s.x.iter()
                    .map(|p| glam::Vec3::new(p.x as f32, p.y as f32, p.z as f32)),
            );
            if let Some(b) = b {
                let framed = self.framed.unwrap_or(b);
                if !framed.contains(&b) {
                    // Grown with some room, so a steady drift does not refit every frame.
                    let grown = framed.union(b);
                    let grown = grown.padded(0.05 * grown.diagonal());
                    self.framed = Some(grown);
                    self.renderer.fit(grown);
                }
            }
        }
        if let (Some(s), ColorBy::Speed) = (state, self.color) {
            // The scale is the largest speed seen so far: it only grows.
            let top =
                s.v.iter()
                    .map(|v| v.length() as f32)
                    .filter(|v| v.is_finite())
                    .fold(0.0, f32::max);
            if top > self.max_speed {
                self.max_speed = top;
                self.renderer.set_speed_scale(top);
            }
        }
        let image: Image = match &self.source {
            Source::Solver(h) => self
                .renderer
                .render(&h.positions, Some(&h.velocities))
                .map_err(render_err)?,
            Source::Upload(uploads) => {
                let s = state.expect("read above for uploads");
                uploads.write_state(&s.x, &s.v);
                uploads.render(&self.renderer).map_err(render_err)?
            }
        };
        image
            .write_png(&self.dir.join(image_name(self.images)))
            .map_err(render_err)?;
        self.images += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Style {
        #[command(flatten)]
        style: RenderStyle,
    }

    #[test]
    fn clap_defaults_match_default() {
        let parsed = Style::try_parse_from(["x"]).unwrap();
        assert_eq!(parsed.style, RenderStyle::default());
        let parsed =
            Style::try_parse_from(["x", "--size", "32x16", "--msaa", "1", "--color", "speed"])
                .unwrap();
        assert_eq!(parsed.style.size.width, 32);
        assert_eq!(parsed.style.msaa, 1);
        assert!(Style::try_parse_from(["x", "--msaa", "2"]).is_err());
        assert!(Style::try_parse_from(["x", "--size", "0x10"]).is_err());
    }

    #[test]
    fn every_keeps_the_first_and_the_last() {
        assert_eq!(selected(5, 1), vec![0, 1, 2, 3, 4]);
        assert_eq!(selected(5, 2), vec![0, 2, 4]);
        assert_eq!(selected(6, 4), vec![0, 4, 5]);
        assert_eq!(selected(1, 10), vec![0]);
        assert!(selected(0, 3).is_empty());
        assert!(crate::output::ply::is_numbered(&image_name(7), "png"));
        assert!(!crate::output::ply::is_numbered("frame_7.png", "png"));
    }
}
