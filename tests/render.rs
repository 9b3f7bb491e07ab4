//! Rendering: `msc render`, `msc run --render`, the renderer library and the embedding
//! example. Drawing needs a wgpu adapter (software ones, lavapipe, are fine): tests that
//! draw print a note and skip when wgpu finds none, and fail instead with
//! `MSC_REQUIRE_GPU=1`, as the GPU solver's tests do.

mod common;

use common::{msc, stderr};

use msc::render::{
    headless_device, ColorBy, Image, ParticleSize, RenderOptions, Renderer, Rgb, SceneGeometry,
    Size, View,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[allow(dead_code)]
#[path = "../examples/embed.rs"]
mod embed;

fn require_gpu() -> bool {
    std::env::var("MSC_REQUIRE_GPU").as_deref() == Ok("1")
}

/// True when an adapter can render; otherwise prints why the test is skipped.
fn can_render() -> bool {
    match headless_device() {
        Ok(_) => true,
        Err(e) => {
            assert!(!require_gpu(), "MSC_REQUIRE_GPU=1 but: {e}");
            eprintln!("skipping: {e}");
            false
        }
    }
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{:?}\n{}", o.status, stderr(o));
}

fn assert_no_panic(o: &Output) {
    let err = stderr(o);
    assert!(!err.contains("panicked"), "{err}");
}

/// A short CPU run of the built-in torus (145 positively charged particles): 4 frames.
fn torus_run(dir: &Path) -> PathBuf {
    ok(&msc(
        &[
            "run",
            "torus",
            "--backend",
            "cpu",
            "--steps",
            "30",
            "--out",
            "run",
            "--quiet",
        ],
        dir,
    ));
    dir.join("run")
}

fn png_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".png"))
        .collect();
    v.sort();
    v
}

/// Pixels that differ from `bg` by more than `tol` in some channel: their count and the
/// bounding box (x0, y0, x1, y1) they span.
fn foreground(img: &Image, bg: [u8; 3], tol: u8) -> (usize, Option<[u32; 4]>) {
    let mut count = 0;
    let mut bbox: Option<[u32; 4]> = None;
    for y in 0..img.height {
        for x in 0..img.width {
            let p = img.pixel(x, y);
            if (0..3).any(|c| p[c].abs_diff(bg[c]) > tol) {
                count += 1;
                bbox = Some(match bbox {
                    None => [x, y, x, y],
                    Some([a, b, c, d]) => [a.min(x), b.min(y), c.max(x), d.max(y)],
                });
            }
        }
    }
    (count, bbox)
}

const DEFAULT_BG: [u8; 3] = Rgb::DEFAULT_BACKGROUND.0;

#[test]
fn the_render_shader_validates_and_its_uniform_matches_the_host() {
    let module = naga::front::wgsl::parse_str(msc::render::SHADER)
        .unwrap_or_else(|e| panic!("{}", e.emit_to_string(msc::render::SHADER)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::empty(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{}", e.emit_to_string(msc::render::SHADER)));
    let mut entries: Vec<&str> = module
        .entry_points
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    entries.sort();
    assert_eq!(
        entries,
        ["fs_particle", "fs_spring", "vs_particle", "vs_spring"]
    );
    let (_, frame) = module
        .types
        .iter()
        .find(|(_, t)| t.name.as_deref() == Some("Frame"))
        .expect("struct Frame");
    let naga::TypeInner::Struct { span, .. } = frame.inner else {
        panic!("Frame is not a struct");
    };
    assert_eq!(
        span as usize,
        msc::render::renderer::FRAME_UNIFORM_SIZE,
        "Frame's size in WGSL and in Rust"
    );
}

#[test]
fn the_embedding_example_shader_validates() {
    // Its source is private to the example; parse the example file's raw string.
    let text = include_str!("../examples/embed.rs");
    let start = text.find("r#\"").expect("a raw string") + 3;
    let end = start + text[start..].find("\"#").expect("its end");
    let src = &text[start..end];
    let module =
        naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{}", e.emit_to_string(src)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::empty(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{}", e.emit_to_string(src)));
}

#[test]
fn msc_render_draws_every_frame_at_the_stated_size_inside_the_image() {
    if !can_render() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let run = torus_run(tmp.path());
    let o = msc(
        &["render", "run", "--size", "160x120", "--quiet"],
        tmp.path(),
    );
    ok(&o);
    let dir = run.join("render");
    // One image per PLY frame, named after it.
    assert_eq!(
        png_names(&dir),
        [
            "frame_000000.png",
            "frame_000001.png",
            "frame_000002.png",
            "frame_000003.png"
        ]
    );
    for name in png_names(&dir) {
        let img = Image::read_png(&dir.join(&name)).unwrap();
        assert_eq!((img.width, img.height), (160, 120), "{name}");
        // The corner shows the background colour (within sRGB rounding).
        let c = img.pixel(0, 0);
        assert!(
            (0..3).all(|k| c[k].abs_diff(DEFAULT_BG[k]) <= 2),
            "{name}: {c:?}"
        );
        let (count, bbox) = foreground(&img, DEFAULT_BG, 12);
        let fraction = count as f64 / (160.0 * 120.0);
        // A torus seen at three quarters covers a good part of the image, never all of it.
        assert!(
            (0.05..0.8).contains(&fraction),
            "{name}: {fraction} of the pixels drawn"
        );
        // The automatic camera keeps the drawing off the edges and fills the image:
        // the drawing spans most of its width or height.
        let [x0, y0, x1, y1] = bbox.unwrap();
        assert!(
            x0 > 0 && y0 > 0 && x1 < 159 && y1 < 119,
            "{name}: {bbox:?} touches the edge"
        );
        assert!(
            (x1 - x0) as f64 > 0.5 * 160.0 || (y1 - y0) as f64 > 0.5 * 120.0,
            "{name}: {bbox:?} is small"
        );
        // Every particle is positively charged: reds, and no blues.
        let (mut red, mut blue) = (0, 0);
        for p in img.rgba.chunks_exact(4) {
            if p[0] as i32 > p[2] as i32 + 60 {
                red += 1;
            }
            if p[2] as i32 > p[0] as i32 + 60 {
                blue += 1;
            }
        }
        assert!(
            red > count / 4 && blue == 0,
            "{name}: {red} red, {blue} blue"
        );
    }
    // Frames differ: the torus swells.
    let a = Image::read_png(&dir.join("frame_000000.png")).unwrap();
    let b = Image::read_png(&dir.join("frame_000003.png")).unwrap();
    assert_ne!(a, b);
}

#[test]
fn every_k_out_dir_and_gif() {
    if !can_render() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    torus_run(tmp.path());
    let o = msc(
        &[
            "render",
            "run",
            "--size",
            "64x48",
            "--every",
            "2",
            "--out",
            "pics",
            "--gif",
            "anim.gif",
            "--color",
            "speed",
            "--background",
            "#ffffff",
            "--quiet",
        ],
        tmp.path(),
    );
    ok(&o);
    // Frames 0 and 2, and the last (3).
    let names = png_names(&tmp.path().join("pics"));
    assert_eq!(
        names,
        ["frame_000000.png", "frame_000002.png", "frame_000003.png"]
    );
    let img = Image::read_png(&tmp.path().join("pics/frame_000002.png")).unwrap();
    assert_eq!(img.pixel(0, 0), [255, 255, 255, 255]);
    assert!(foreground(&img, [255, 255, 255], 12).0 > 100);

    // A valid GIF: its decoder reads three frames of the size asked for.
    let file = std::fs::File::open(tmp.path().join("anim.gif")).unwrap();
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    let mut decoder = options.read_info(file).expect("a GIF header");
    assert_eq!((decoder.width(), decoder.height()), (64, 48));
    let mut frames = 0;
    while let Some(frame) = decoder.read_next_frame().expect("GIF frame data") {
        assert_eq!((frame.width, frame.height), (64, 48));
        assert_eq!(frame.delay, 5, "20 fps is 5/100 s per frame");
        frames += 1;
    }
    assert_eq!(frames, 3);
    // No temporary file left behind.
    let stray: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

#[test]
fn charge_colours_tell_signs_apart() {
    let Ok(gpu) = headless_device() else {
        assert!(can_render());
        return;
    };
    // Positive on the left, negative on the right, an uncharged one in the middle.
    let positions = [
        [-1.0, 0.0, 0.0, 1.0],
        [0.0, 0.0, 0.0, 1.0],
        [1.0, 0.0, 0.0, 1.0f32],
    ];
    let options = RenderOptions {
        size: Size {
            width: 96,
            height: 48,
        },
        view: View::Front,
        color: ColorBy::Charge,
        particle_size: ParticleSize::World(0.3),
        background: Rgb([0, 0, 0]),
        msaa: 1,
        ..RenderOptions::default()
    };
    let renderer = Renderer::new(
        &gpu.device,
        &gpu.queue,
        &options,
        &SceneGeometry {
            positions: &positions,
            springs: &[[0, 1], [1, 2]],
            charges: &[2e-6, 0.0, -2e-6],
        },
    )
    .unwrap();
    use wgpu::util::DeviceExt;
    let buffer = gpu
        .device
        .create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck::cast_slice(&positions),
            usage: wgpu::BufferUsages::VERTEX,
        });
    let img = renderer.render(&buffer, None).unwrap();
    let at = |x: f32| {
        // The particle's centre column: project it with the renderer's camera.
        let p = renderer.camera().project(glam::Vec3::new(x, 0.0, 0.0));
        let px = ((p.x + 1.0) * 0.5 * 96.0) as u32;
        let py = ((1.0 - p.y) * 0.5 * 48.0) as u32;
        img.pixel(px, py)
    };
    let (pos, zero, neg) = (at(-1.0), at(0.0), at(1.0));
    assert!(pos[0] as i32 > pos[2] as i32 + 80, "positive: {pos:?}");
    assert!(neg[2] as i32 > neg[0] as i32 + 80, "negative: {neg:?}");
    // Zero charge is grey: no channel dominates.
    assert!(
        zero[0].abs_diff(zero[2]) < 20 && zero[0] > 60,
        "zero: {zero:?}"
    );
    // The image is left-right the right way round: x grows to the right in front view.
    assert_ne!(pos, neg);

    // Colouring by speed without a velocity buffer is an error, not a panic.
    let speed = Renderer::new(
        &gpu.device,
        &gpu.queue,
        &RenderOptions {
            color: ColorBy::Speed,
            ..options.clone()
        },
        &SceneGeometry {
            positions: &positions,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(matches!(
        speed.render(&buffer, None),
        Err(msc::render::RenderError::MissingVelocities)
    ));
    // A buffer too small for the particles is refused before wgpu sees it.
    let small = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::VERTEX,
        mapped_at_creation: false,
    });
    let e = renderer.render(&small, None).unwrap_err().to_string();
    assert!(e.contains("16 bytes") && e.contains("48"), "{e}");
    // A spring to a particle that does not exist.
    let e = Renderer::new(
        &gpu.device,
        &gpu.queue,
        &options,
        &SceneGeometry {
            positions: &positions,
            springs: &[[0, 3]],
            ..Default::default()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("spring 0") && e.contains("particle 3"), "{e}");
}

#[test]
fn run_render_draws_from_the_gpu_solver_as_from_the_cpu() {
    if !can_render() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let args = |backend: &'static str, out: &'static str| {
        vec![
            "run",
            "torus",
            "--backend",
            backend,
            "--steps",
            "20",
            "--render",
            "--size",
            "120x90",
            "--out",
            out,
            "--quiet",
        ]
    };
    ok(&msc(&args("cpu", "cpu"), tmp.path()));
    let cpu = tmp.path().join("cpu/render");
    assert_eq!(
        png_names(&cpu),
        ["frame_000000.png", "frame_000001.png", "frame_000002.png"]
    );
    for name in png_names(&cpu) {
        let img = Image::read_png(&cpu.join(&name)).unwrap();
        assert_eq!((img.width, img.height), (120, 90));
        assert!(foreground(&img, DEFAULT_BG, 12).0 > 500, "{name} is blank");
    }
    let o = msc(&args("gpu", "gpu"), tmp.path());
    if !o.status.success() && stderr(&o).contains("no GPU adapter") {
        assert!(!require_gpu(), "{}", stderr(&o));
        eprintln!("skipping the GPU half: {}", stderr(&o));
        return;
    }
    ok(&o);
    let gpu = tmp.path().join("gpu/render");
    assert_eq!(png_names(&gpu), png_names(&cpu));
    // Step 0: the same positions (the solver's f32 copy of them), camera and colours, so
    // the same picture, drawn straight from the solver's buffer. Allow a few pixels of
    // rasterization differences between two devices.
    let a = Image::read_png(&cpu.join("frame_000000.png")).unwrap();
    let b = Image::read_png(&gpu.join("frame_000000.png")).unwrap();
    let differing = a
        .rgba
        .chunks_exact(4)
        .zip(b.rgba.chunks_exact(4))
        .filter(|(p, q)| (0..3).any(|c| p[c].abs_diff(q[c]) > 8))
        .count();
    assert!(
        differing < 120 * 90 / 100,
        "{differing} pixels differ at step 0"
    );
    let last = Image::read_png(&gpu.join("frame_000002.png")).unwrap();
    assert!(foreground(&last, DEFAULT_BG, 12).0 > 500);
}

#[test]
fn the_embedding_example_runs_and_draws() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("embed.png");
    let outcome = match embed::run(&out, 10, 3) {
        Ok(o) => o,
        Err(embed::EmbedError::NoAdapter(why)) => {
            assert!(!require_gpu(), "MSC_REQUIRE_GPU=1 but no adapter: {why}");
            eprintln!("skipping: no adapter: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert_eq!(outcome.steps, 30);
    let img = Image::read_png(&out).unwrap();
    assert_eq!((img.width, img.height), (embed::WIDTH, embed::HEIGHT));
    assert_eq!(img.rgba, outcome.rgba);
    let corner = img.pixel(0, 0);
    let (count, bbox) = foreground(&img, [corner[0], corner[1], corner[2]], 30);
    let fraction = count as f64 / f64::from(img.width * img.height);
    assert!(fraction > 0.03, "only {fraction} of the image drawn");
    let [x0, y0, x1, y1] = bbox.unwrap();
    assert!(x0 > 0 && y0 > 0 && x1 < img.width - 1 && y1 < img.height - 1);
}

#[test]
fn bad_inputs_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    // No such folder.
    let o = msc(&["render", "nowhere"], t);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("nowhere does not exist"),
        "{}",
        stderr(&o)
    );
    // A folder with no frames names where they were expected.
    std::fs::create_dir(t.join("empty")).unwrap();
    let o = msc(&["render", "empty"], t);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("no frames in empty/frames") && err.contains("frame_NNNNNN.ply"),
        "{err}"
    );
    // Sizes.
    for bad in ["0x10", "abc", "10x0", "20000x10"] {
        let o = msc(&["render", "empty", "--size", bad], t);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(stderr(&o).contains("--size"), "{bad}: {}", stderr(&o));
        assert_no_panic(&o);
        let o = msc(&["run", "torus", "--render", "--size", bad], t);
        assert_eq!(o.status.code(), Some(2), "{bad}");
    }
    let o = msc(&["render", "empty", "--background", "blue-ish"], t);
    assert_eq!(o.status.code(), Some(2));
    let o = msc(&["render", "empty", "--every", "0"], t);
    assert_eq!(o.status.code(), Some(2));
    // A truncated frame names the file.
    std::fs::create_dir_all(t.join("broken/frames")).unwrap();
    std::fs::write(
        t.join("broken/frames/frame_000000.ply"),
        b"ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\n\
property float y\nproperty float z\nend_header\n\x00\x00",
    )
    .unwrap();
    let o = msc(&["render", "broken"], t);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("frame_000000.ply") && stderr(&o).contains("truncated"),
        "{}",
        stderr(&o)
    );
    assert_no_panic(&o);
    // No adapter: a message, exit 1.
    if can_render() {
        let run = torus_run(t);
        let o = Command::new(env!("CARGO_BIN_EXE_msc"))
            .args(["render", "--quiet"])
            .arg(&run)
            .env("WGPU_ADAPTER_NAME", "no-such-adapter-anywhere")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("no GPU adapter to render with")
                && stderr(&o).contains("no-such-adapter-anywhere"),
            "{}",
            stderr(&o)
        );
    }
}
