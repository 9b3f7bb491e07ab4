//! The renderer: checks the scene once, fits the camera and sizes the particles, then
//! records frames (particles as instanced quads, springs as indexed lines) from
//! caller-owned position buffers into an offscreen target and reads them back.
//! The GPU objects it draws with are built in `pipelines` and `targets`.

use super::camera::{Bounds, Camera, View};
use super::image::{padded_row_bytes, unpad_rows, Image};
use super::options::{ColorBy, ParticleSize, Rgb, Size};
use super::pipelines::{FrameUniform, Pipelines};
use super::targets::{create_targets, Targets};
use super::RenderError;
use glam::Vec3;
use wgpu::util::DeviceExt;

pub use super::pipelines::FRAME_UNIFORM_SIZE;

/// How to draw.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderOptions {
    pub size: Size,
    pub color: ColorBy,
    pub view: View,
    pub background: Rgb,
    pub particle_size: ParticleSize,
    /// Draw the springs as lines.
    pub springs: bool,
    pub spring_color: Rgb,
    /// Samples per pixel: 1, or 4 for multisample antialiasing.
    pub msaa: u32,
    /// Format of the target: an 8-bit RGBA or BGRA format (sRGB or not) for read-back;
    /// a surface's format when drawing into a window with [`Renderer::record_to_view`].
    pub format: wgpu::TextureFormat,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            size: Size::default(),
            color: ColorBy::Charge,
            view: View::Iso,
            background: Rgb::DEFAULT_BACKGROUND,
            particle_size: ParticleSize::Auto,
            springs: true,
            spring_color: Rgb([120, 124, 134]),
            msaa: 4,
            format: wgpu::TextureFormat::Rgba8UnormSrgb,
        }
    }
}

/// What the renderer needs to know of the system once, at creation.
#[derive(Clone, Copy, Debug, Default)]
pub struct SceneGeometry<'a> {
    /// Positions (x, y, z, 1) of a representative frame: they fit the automatic camera and
    /// size the particles when [`ParticleSize::Auto`]. Their count is the particle count.
    pub positions: &'a [[f32; 4]],
    /// Spring endpoints, drawn as lines.
    pub springs: &'a [[u32; 2]],
    /// Charge per particle (empty: all zero).
    pub charges: &'a [f32],
}

/// Fraction of the image's half-size left free around the automatic camera's box.
const CAMERA_MARGIN: f32 = 0.08;

/// Draws particles and springs from position buffers (`vec4<f32>`, stride 16).
pub struct Renderer {
    device: wgpu::Device,
    queue: wgpu::Queue,
    options: RenderOptions,
    particles: u32,
    springs: Option<(wgpu::Buffer, u32)>,
    charges: wgpu::Buffer,
    pipelines: Pipelines,
    targets: Targets,
    camera: Camera,
    radius: ParticleSize,
    charge_scale: f32,
    speed_scale: f32,
}

/// Runs `f` inside validation and out-of-memory error scopes, so wgpu errors come back
/// as [`RenderError::Gpu`] rather than the default handler's panic.
fn scoped<T>(
    device: &wgpu::Device,
    f: impl FnOnce() -> Result<T, RenderError>,
) -> Result<T, RenderError> {
    crate::gpu::device::error_scope(device, f, |e| RenderError::Gpu(e.to_string()))
}

/// The automatic particle radius in metres: a quarter of the median spring length, or
/// without springs a quarter of the mean spacing of `n` points in their bounding box.
pub fn auto_radius(positions: &[[f32; 4]], springs: &[[u32; 2]]) -> f32 {
    let p = |i: u32| {
        let a = positions[i as usize];
        Vec3::new(a[0], a[1], a[2])
    };
    let n = positions.len() as u32;
    let mut lengths: Vec<f32> = springs
        .iter()
        .filter(|s| s[0] < n && s[1] < n)
        .map(|s| (p(s[0]) - p(s[1])).length())
        .filter(|l| l.is_finite() && *l > 0.0)
        .collect();
    if !lengths.is_empty() {
        let mid = lengths.len() / 2;
        let (_, median, _) = lengths.select_nth_unstable_by(mid, f32::total_cmp);
        return 0.25 * *median;
    }
    let diag = Bounds::of_points(positions.iter().map(|a| Vec3::new(a[0], a[1], a[2])))
        .map_or(0.0, |b| b.diagonal());
    if diag > 0.0 {
        0.25 * diag / (positions.len() as f32).cbrt()
    } else {
        0.05
    }
}

impl Renderer {
    /// Builds the pipelines and an offscreen target of `options.size` on the caller's
    /// device; the camera is fitted to `geometry.positions`.
    pub fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        options: &RenderOptions,
        geometry: &SceneGeometry<'_>,
    ) -> Result<Self, RenderError> {
        let n = geometry.positions.len();
        if n == 0 {
            return Err(RenderError::Empty);
        }
        let particles = u32::try_from(n).map_err(|_| RenderError::Empty)?;
        for (index, s) in geometry.springs.iter().enumerate() {
            if let Some(&particle) = s.iter().find(|&&k| k >= particles) {
                return Err(RenderError::BadSpring {
                    index,
                    particle,
                    particles,
                });
            }
        }
        if ![1, 4].contains(&options.msaa) {
            return Err(RenderError::Msaa(options.msaa));
        }
        let mut options = options.clone();
        let device = device.clone();
        let queue = queue.clone();
        let radius = match options.particle_size {
            ParticleSize::Auto => {
                ParticleSize::World(auto_radius(geometry.positions, geometry.springs))
            }
            other => other,
        };
        options.particle_size = radius;
        let max_q = geometry
            .charges
            .iter()
            .map(|q| q.abs())
            .filter(|q| q.is_finite())
            .fold(0.0f32, f32::max);
        let charge_scale = if max_q > 0.0 { 1.0 / max_q } else { 0.0 };
        let d = device.clone();
        let built = scoped(&d, || {
            let mut charges: Vec<[f32; 4]> = vec![[0.0; 4]; n];
            for (c, &q) in charges.iter_mut().zip(geometry.charges) {
                c[0] = q;
            }
            let charges = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("msc render charges"),
                contents: bytemuck::cast_slice(&charges),
                usage: wgpu::BufferUsages::VERTEX,
            });
            let springs = if geometry.springs.is_empty() {
                None
            } else {
                let buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some("msc render spring indices"),
                    contents: bytemuck::cast_slice(geometry.springs),
                    usage: wgpu::BufferUsages::INDEX,
                });
                Some((buf, 2 * geometry.springs.len() as u32))
            };
            let pipelines = Pipelines::new(&device, options.msaa, options.format);
            let targets = create_targets(&device, options.size, options.msaa, options.format)?;
            Ok((charges, springs, pipelines, targets))
        })?;
        let (charges, springs, pipelines, targets) = built;
        let bounds = Bounds::of_points(
            geometry
                .positions
                .iter()
                .map(|a| Vec3::new(a[0], a[1], a[2])),
        )
        .unwrap_or(Bounds {
            min: Vec3::ZERO,
            max: Vec3::ZERO,
        });
        let mut renderer = Renderer {
            camera: Camera::fit(bounds, options.view, 1.0, CAMERA_MARGIN),
            device,
            queue,
            particles,
            springs,
            charges,
            pipelines,
            targets,
            radius,
            charge_scale,
            speed_scale: 0.0,
            options,
        };
        renderer.fit(bounds);
        Ok(renderer)
    }

    pub fn options(&self) -> &RenderOptions {
        &self.options
    }
    pub fn size(&self) -> Size {
        self.targets.size
    }
    pub fn camera(&self) -> Camera {
        self.camera
    }
    pub fn particles(&self) -> u32 {
        self.particles
    }
    /// The particle radius in use (`Auto` resolved to metres).
    pub fn particle_size(&self) -> ParticleSize {
        self.radius
    }
    /// The offscreen colour texture (single-sampled; MSAA resolves into it).
    pub fn texture(&self) -> &wgpu::Texture {
        &self.targets.color
    }

    /// Points the automatic camera at `bounds`, grown by the particle radius.
    pub fn fit(&mut self, bounds: Bounds) {
        let pad = match self.radius {
            ParticleSize::World(r) => r,
            _ => 0.0,
        };
        let aspect = self.targets.size.width as f32 / self.targets.size.height as f32;
        self.set_camera(Camera::fit(
            bounds.padded(pad),
            self.options.view,
            aspect,
            CAMERA_MARGIN,
        ));
    }

    pub fn set_camera(&mut self, camera: Camera) {
        self.camera = camera;
        self.write_uniform();
    }

    /// The speed shown at the top of the colour map (m/s); speeds above it saturate.
    pub fn set_speed_scale(&mut self, max_speed: f32) {
        self.speed_scale = if max_speed.is_finite() && max_speed > 0.0 {
            1.0 / max_speed
        } else {
            0.0
        };
        self.write_uniform();
    }

    /// Resizes the offscreen target (and the depth and MSAA textures used with
    /// [`Self::record_to_view`]); the camera's aspect ratio follows.
    pub fn resize(&mut self, size: Size) -> Result<(), RenderError> {
        if size == self.targets.size {
            return Ok(());
        }
        let (msaa, format) = (self.options.msaa, self.options.format);
        let device = self.device.clone();
        self.targets = scoped(&device, || create_targets(&device, size, msaa, format))?;
        self.options.size = size;
        self.camera.aspect = size.width as f32 / size.height as f32;
        self.write_uniform();
        Ok(())
    }

    fn write_uniform(&self) {
        let (size, in_px) = match self.radius {
            ParticleSize::Pixels(p) => (p, 1),
            ParticleSize::World(r) => (r, 0),
            ParticleSize::Auto => (0.05, 0),
        };
        let c = self.options.spring_color.0;
        let u = FrameUniform {
            view: self.camera.view().to_cols_array(),
            proj: self.camera.proj().to_cols_array(),
            viewport: [
                self.targets.size.width as f32,
                self.targets.size.height as f32,
            ],
            particle_size: size,
            size_in_pixels: in_px,
            color_mode: match self.options.color {
                ColorBy::Charge => 0,
                ColorBy::Speed => 1,
            },
            charge_scale: self.charge_scale,
            speed_scale: self.speed_scale,
            _pad: 0.0,
            spring_color: [
                f32::from(c[0]) / 255.0,
                f32::from(c[1]) / 255.0,
                f32::from(c[2]) / 255.0,
                1.0,
            ],
        };
        self.queue
            .write_buffer(&self.pipelines.uniform, 0, bytemuck::bytes_of(&u));
    }

    fn check_buffer(&self, what: &'static str, b: &wgpu::Buffer) -> Result<(), RenderError> {
        let needed = 16 * u64::from(self.particles);
        if b.size() < needed {
            return Err(RenderError::BufferTooSmall {
                what,
                size: b.size(),
                needed,
                particles: self.particles,
            });
        }
        Ok(())
    }

    /// Records one frame into the caller's encoder, drawn into the offscreen texture.
    /// `positions` holds `vec4<f32>` (xyz, w ignored) per particle, stride 16, with
    /// VERTEX usage; `velocities` the same layout, needed when colouring by speed. Camera
    /// and scale changes take effect at the next queue submission (they are uniform
    /// writes), so record one frame per submission when they change.
    pub fn record(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        positions: &wgpu::Buffer,
        velocities: Option<&wgpu::Buffer>,
    ) -> Result<(), RenderError> {
        self.record_to_view(encoder, &self.targets.color_view, positions, velocities)
    }

    /// As [`Self::record`], into a view the caller owns (a window's surface texture): it
    /// must have the renderer's format and size.
    pub fn record_to_view(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        view: &wgpu::TextureView,
        positions: &wgpu::Buffer,
        velocities: Option<&wgpu::Buffer>,
    ) -> Result<(), RenderError> {
        self.check_buffer("the position buffer", positions)?;
        let values = match self.options.color {
            ColorBy::Charge => &self.charges,
            ColorBy::Speed => {
                let v = velocities.ok_or(RenderError::MissingVelocities)?;
                self.check_buffer("the velocity buffer", v)?;
                v
            }
        };
        let [r, g, b] = self.options.background.to_linear();
        let clear = wgpu::Color { r, g, b, a: 1.0 };
        let (view, resolve) = match &self.targets.msaa_view {
            Some(msaa) => (msaa, Some(view)),
            None => (view, None),
        };
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("msc render"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view,
                depth_slice: None,
                resolve_target: resolve,
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Clear(clear),
                    store: wgpu::StoreOp::Store,
                },
            })],
            depth_stencil_attachment: Some(wgpu::RenderPassDepthStencilAttachment {
                view: &self.targets.depth_view,
                depth_ops: Some(wgpu::Operations {
                    load: wgpu::LoadOp::Clear(1.0),
                    store: wgpu::StoreOp::Discard,
                }),
                stencil_ops: None,
            }),
            ..Default::default()
        });
        pass.set_bind_group(0, &self.pipelines.bind_group, &[]);
        let bytes = 16 * u64::from(self.particles);
        if let (true, Some((indices, count))) = (self.options.springs, &self.springs) {
            pass.set_pipeline(&self.pipelines.spring);
            pass.set_vertex_buffer(0, positions.slice(..bytes));
            pass.set_index_buffer(indices.slice(..), wgpu::IndexFormat::Uint32);
            pass.draw_indexed(0..*count, 0, 0..1);
        }
        pass.set_pipeline(&self.pipelines.particle);
        pass.set_vertex_buffer(0, positions.slice(..bytes));
        pass.set_vertex_buffer(1, values.slice(..bytes));
        pass.draw(0..4, 0..self.particles);
        Ok(())
    }

    /// Records the copy of the offscreen texture into the read-back buffer (rows padded
    /// to 256 bytes); call [`Self::read_image`] once the encoder has been submitted.
    pub fn record_readback(&self, encoder: &mut wgpu::CommandEncoder) {
        let Size { width, height } = self.targets.size;
        encoder.copy_texture_to_buffer(
            wgpu::TexelCopyTextureInfo {
                texture: &self.targets.color,
                mip_level: 0,
                origin: wgpu::Origin3d::ZERO,
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::TexelCopyBufferInfo {
                buffer: &self.targets.readback,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(padded_row_bytes(width)),
                    rows_per_image: Some(height),
                },
            },
            wgpu::Extent3d {
                width,
                height,
                depth_or_array_layers: 1,
            },
        );
    }

    /// Maps the read-back buffer (after the submission holding [`Self::record_readback`])
    /// and returns the image, RGBA top row first.
    pub fn read_image(&self) -> Result<Image, RenderError> {
        let Size { width, height } = self.targets.size;
        let readback = &self.targets.readback;
        let data = crate::gpu::device::read_mapped(&self.device, readback, readback.size())
            .map_err(|e| match e {
                crate::gpu::device::MapError::Poll(e) => {
                    RenderError::Readback(format!("waiting for the GPU failed: {e}"))
                }
                crate::gpu::device::MapError::Map(m) => RenderError::Readback(m),
            })?;
        let mut image = unpad_rows(&data, width, height, padded_row_bytes(width));
        if matches!(
            self.options.format,
            wgpu::TextureFormat::Bgra8Unorm | wgpu::TextureFormat::Bgra8UnormSrgb
        ) {
            for p in image.rgba.chunks_exact_mut(4) {
                p.swap(0, 2);
            }
        }
        Ok(image)
    }

    /// Draws one frame, submits it and reads the image back.
    pub fn render(
        &self,
        positions: &wgpu::Buffer,
        velocities: Option<&wgpu::Buffer>,
    ) -> Result<Image, RenderError> {
        scoped(&self.device, || {
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("msc render"),
                });
            self.record(&mut encoder, positions, velocities)?;
            self.record_readback(&mut encoder);
            self.queue.submit([encoder.finish()]);
            Ok(())
        })?;
        self.read_image()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_radius_follows_the_springs_or_the_spacing() {
        let p = [
            [0.0, 0.0, 0.0, 1.0],
            [1.0, 0.0, 0.0, 1.0],
            [3.0, 0.0, 0.0, 1.0],
            [3.0, 4.0, 0.0, 1.0],
        ];
        // Lengths 1, 2, 4: median 2.
        assert_eq!(auto_radius(&p, &[[0, 1], [1, 2], [2, 3]]), 0.5);
        // Diagonal 5 over 4^(1/3) points per side.
        let r = auto_radius(&p, &[]);
        assert!((r - 0.25 * 5.0 / 4f32.cbrt()).abs() < 1e-6, "{r}");
        assert_eq!(auto_radius(&p[..1], &[]), 0.05);
    }
}
