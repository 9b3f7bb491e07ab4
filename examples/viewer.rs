//! An interactive window showing a simulation live: the GPU solver and msc's renderer on
//! one device, the renderer drawing straight from the solver's position buffer into the
//! window's surface, steps and drawing recorded into one encoder per frame.
//!
//! ```sh
//! cargo run --release --example viewer --features viewer -- [SCENE] [KEY=VALUE]...
//! ```
//!
//! `SCENE` is a built-in scene name or a scene file (default `torus`); `KEY=VALUE` are
//! `--set` overrides (`integrator.dt=0.01`). Controls: drag with the left mouse button to
//! orbit, scroll to zoom, space to pause, `+`/`-` for more or fewer steps per frame, `r` to
//! reset the camera, `c` to switch between charge and speed colours, Esc to quit.
//!
//! Needs a display; the default build of msc stays headless (`--features viewer` pulls in
//! winit for this example only).

use msc::gpu::GpuSolver;
use msc::render::{Camera, ColorBy, RenderOptions, Renderer, SceneGeometry, Size};
use msc::scene::LoadedScene;
use std::sync::Arc;
use winit::application::ApplicationHandler;
use winit::dpi::PhysicalPosition;
use winit::event::{ElementState, MouseButton, MouseScrollDelta, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop};
use winit::keyboard::{Key, NamedKey};
use winit::window::{Window, WindowId};

/// Everything that exists once the window does.
struct Gfx {
    window: Arc<Window>,
    surface: wgpu::Surface<'static>,
    config: wgpu::SurfaceConfiguration,
    device: wgpu::Device,
    queue: wgpu::Queue,
    solver: GpuSolver,
    /// The scene's time step, for the title's clock.
    dt: f64,
    renderer: Renderer,
    /// One per colour mode, so `c` switches without rebuilding.
    speed_renderer: Renderer,
    color: ColorBy,
    home: Camera,
    camera: Camera,
    paused: bool,
    steps_per_frame: u32,
    dragging: bool,
    cursor: Option<PhysicalPosition<f64>>,
}

struct Viewer {
    scene: LoadedScene,
    instance: wgpu::Instance,
    gfx: Option<Gfx>,
    error: Option<String>,
}

impl Viewer {
    fn start(&mut self, event_loop: &ActiveEventLoop) -> Result<(), String> {
        let title = format!("msc viewer: {}", self.scene.name);
        let window = Arc::new(
            event_loop
                .create_window(Window::default_attributes().with_title(title))
                .map_err(|e| format!("cannot open a window: {e}"))?,
        );
        let surface = self
            .instance
            .create_surface(window.clone())
            .map_err(|e| format!("cannot create a surface: {e}"))?;
        let adapter =
            pollster::block_on(self.instance.request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                compatible_surface: Some(&surface),
                ..Default::default()
            }))
            .map_err(|e| format!("no adapter for this window: {e}"))?;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("msc viewer"),
            required_limits: adapter.limits(),
            ..Default::default()
        }))
        .map_err(|e| format!("cannot open the device: {e}"))?;

        let size = window.inner_size();
        let caps = surface.get_capabilities(&adapter);
        // An sRGB format, as the renderer writes linear colours.
        let format = caps
            .formats
            .iter()
            .copied()
            .find(|f| f.is_srgb())
            .unwrap_or(caps.formats[0]);
        let config = wgpu::SurfaceConfiguration {
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
            format,
            width: size.width.max(1),
            height: size.height.max(1),
            present_mode: wgpu::PresentMode::AutoVsync,
            ..surface
                .get_default_config(&adapter, size.width.max(1), size.height.max(1))
                .ok_or("the surface does not work with this adapter")?
        };
        surface.configure(&device, &config);

        let system = &self.scene.system;
        let solver = GpuSolver::new(&device, &queue, system, &self.scene.config)
            .map_err(|e| format!("cannot build the solver: {e}"))?;
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
        let options = RenderOptions {
            size: Size {
                width: config.width,
                height: config.height,
            },
            format,
            ..RenderOptions::default()
        };
        let renderer = Renderer::new(&device, &queue, &options, &geometry)
            .map_err(|e| format!("cannot build the renderer: {e}"))?;
        let mut speed_renderer = Renderer::new(
            &device,
            &queue,
            &RenderOptions {
                color: ColorBy::Speed,
                ..options
            },
            &geometry,
        )
        .map_err(|e| format!("cannot build the renderer: {e}"))?;
        // Speeds are not known ahead; a scale from the system's size per second of motion.
        let scale = msc::render::Bounds::of_points(
            positions.iter().map(|p| glam::Vec3::new(p[0], p[1], p[2])),
        )
        .map_or(1.0, |b| b.diagonal());
        speed_renderer.set_speed_scale(scale);
        let home = renderer.camera();
        self.gfx = Some(Gfx {
            window,
            surface,
            config,
            device,
            queue,
            solver,
            dt: self.scene.config.dt,
            renderer,
            speed_renderer,
            color: ColorBy::Charge,
            home,
            camera: home,
            paused: false,
            steps_per_frame: 1,
            dragging: false,
            cursor: None,
        });
        Ok(())
    }
}

impl Gfx {
    fn renderers(&mut self) -> [&mut Renderer; 2] {
        [&mut self.renderer, &mut self.speed_renderer]
    }

    fn set_camera(&mut self, camera: Camera) {
        self.camera = camera;
        for r in self.renderers() {
            r.set_camera(camera);
        }
    }

    fn resize(&mut self, width: u32, height: u32) -> Result<(), String> {
        if width == 0 || height == 0 {
            return Ok(());
        }
        self.config.width = width;
        self.config.height = height;
        self.surface.configure(&self.device, &self.config);
        let size = Size { width, height };
        for r in self.renderers() {
            r.resize(size).map_err(|e| e.to_string())?;
        }
        self.camera.aspect = width as f32 / height as f32;
        self.home.aspect = self.camera.aspect;
        Ok(())
    }

    fn frame(&mut self) -> Result<(), String> {
        let texture = match self.surface.get_current_texture() {
            wgpu::CurrentSurfaceTexture::Success(t)
            | wgpu::CurrentSurfaceTexture::Suboptimal(t) => t,
            wgpu::CurrentSurfaceTexture::Outdated | wgpu::CurrentSurfaceTexture::Lost => {
                self.surface.configure(&self.device, &self.config);
                return Ok(());
            }
            _ => return Ok(()),
        };
        let view = texture.texture.create_view(&Default::default());
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("msc viewer frame"),
            });
        // The solver's steps and the drawing, in one encoder and one submission.
        if !self.paused {
            self.solver
                .record_steps(&mut encoder, self.steps_per_frame)
                .map_err(|e| e.to_string())?;
        }
        let renderer = match self.color {
            ColorBy::Charge => &self.renderer,
            ColorBy::Speed => &self.speed_renderer,
        };
        renderer
            .record_to_view(
                &mut encoder,
                &view,
                self.solver.positions_buffer(),
                Some(self.solver.velocities_buffer()),
            )
            .map_err(|e| e.to_string())?;
        self.queue.submit([encoder.finish()]);
        self.window.pre_present_notify();
        self.queue.present(texture);
        let t = self.solver.steps_done() as f64 * self.dt;
        self.window.set_title(&format!(
            "msc viewer: step {} (t = {t:.2} s){}",
            self.solver.steps_done(),
            if self.paused { ", paused" } else { "" }
        ));
        Ok(())
    }
}

impl ApplicationHandler for Viewer {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.gfx.is_none() {
            if let Err(e) = self.start(event_loop) {
                self.error = Some(e);
                event_loop.exit();
            }
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _: WindowId, event: WindowEvent) {
        let Some(gfx) = self.gfx.as_mut() else {
            return;
        };
        let result = match event {
            WindowEvent::CloseRequested => {
                event_loop.exit();
                Ok(())
            }
            WindowEvent::Resized(size) => gfx.resize(size.width, size.height),
            WindowEvent::RedrawRequested => gfx.frame(),
            WindowEvent::MouseInput {
                state,
                button: MouseButton::Left,
                ..
            } => {
                gfx.dragging = state == ElementState::Pressed;
                Ok(())
            }
            WindowEvent::CursorMoved { position, .. } => {
                if let (true, Some(last)) = (gfx.dragging, gfx.cursor) {
                    // A full window width turns the camera half a turn.
                    let w = f64::from(gfx.config.width.max(1));
                    let yaw = -(position.x - last.x) / w * std::f64::consts::PI;
                    let pitch = (position.y - last.y) / w * std::f64::consts::PI;
                    let cam = gfx.camera.orbit(yaw as f32, pitch as f32);
                    gfx.set_camera(cam);
                }
                gfx.cursor = Some(position);
                Ok(())
            }
            WindowEvent::MouseWheel { delta, .. } => {
                let lines = match delta {
                    MouseScrollDelta::LineDelta(_, y) => y,
                    MouseScrollDelta::PixelDelta(p) => (p.y / 40.0) as f32,
                };
                let cam = gfx.camera.zoom(0.9f32.powf(lines));
                gfx.set_camera(cam);
                Ok(())
            }
            WindowEvent::KeyboardInput { event, .. } if event.state == ElementState::Pressed => {
                match event.logical_key.as_ref() {
                    Key::Named(NamedKey::Space) => gfx.paused = !gfx.paused,
                    Key::Named(NamedKey::Escape) => event_loop.exit(),
                    Key::Character("+") | Key::Character("=") => {
                        gfx.steps_per_frame = (gfx.steps_per_frame * 2).min(256)
                    }
                    Key::Character("-") => gfx.steps_per_frame = (gfx.steps_per_frame / 2).max(1),
                    Key::Character("r") => {
                        let home = gfx.home;
                        gfx.set_camera(home);
                    }
                    Key::Character("c") => {
                        gfx.color = match gfx.color {
                            ColorBy::Charge => ColorBy::Speed,
                            ColorBy::Speed => ColorBy::Charge,
                        }
                    }
                    _ => {}
                }
                Ok(())
            }
            _ => Ok(()),
        };
        if let Err(e) = result {
            self.error = Some(e);
            event_loop.exit();
        }
    }

    fn about_to_wait(&mut self, _: &ActiveEventLoop) {
        if let Some(gfx) = &self.gfx {
            gfx.window.request_redraw();
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "torus".into());
    let overrides: Vec<String> = args.collect();
    let scene = match msc::scene::load(&name, &overrides) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot load scene '{name}': {e}");
            std::process::exit(2);
        }
    };
    let event_loop = match EventLoop::new() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: no display to open a window on: {e}");
            std::process::exit(1);
        }
    };
    event_loop.set_control_flow(ControlFlow::Poll);
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_with_display_handle_from_env(
        Box::new(event_loop.owned_display_handle()),
    ));
    let mut viewer = Viewer {
        scene,
        instance,
        gfx: None,
        error: None,
    };
    if let Err(e) = event_loop.run_app(&mut viewer) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    if let Some(e) = viewer.error {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
