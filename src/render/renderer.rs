//! The renderer: two pipelines (particles as instanced quads, springs as indexed lines)
//! drawing from caller-owned position buffers into an offscreen target.

use super::camera::{Bounds, Camera, View};
use super::image::{padded_row_bytes, unpad_rows, Image};
use super::options::{ColorBy, ParticleSize, Rgb, Size};
use super::{RenderError, SHADER};
use glam::Vec3;
use wgpu::util::DeviceExt;

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

/// The uniform block of `shaders/render_scene.wgsl` (struct `Frame`, 176 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
struct FrameUniform {
    view: [f32; 16],
    proj: [f32; 16],
    viewport: [f32; 2],
    particle_size: f32,
    size_in_pixels: u32,
    color_mode: u32,
    charge_scale: f32,
    speed_scale: f32,
    _pad: f32,
    spring_color: [f32; 4],
}

/// Size of the shader's `Frame` uniform, for layout tests.
pub const FRAME_UNIFORM_SIZE: usize = std::mem::size_of::<FrameUniform>();

const DEPTH_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Depth32Float;

/// Fraction of the image's half-size left free around the automatic camera's box.
const CAMERA_MARGIN: f32 = 0.08;

struct Targets {
    size: Size,
    color: wgpu::Texture,
    color_view: wgpu::TextureView,
    msaa_view: Option<wgpu::TextureView>,
    depth_view: wgpu::TextureView,
    readback: wgpu::Buffer,
}

/// Draws particles and springs from position buffers (`vec4<f32>`, stride 16).
pub struct Renderer {
    device: wgpu::Device,
    queue: wgpu::Queue,
    options: RenderOptions,
    particles: u32,
    springs: Option<(wgpu::Buffer, u32)>,
    charges: wgpu::Buffer,
    uniform: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    particle_pipeline: wgpu::RenderPipeline,
    spring_pipeline: wgpu::RenderPipeline,
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
            let uniform = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("msc render frame"),
                size: FRAME_UNIFORM_SIZE as u64,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("msc render frame"),
                entries: &[wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::VERTEX_FRAGMENT,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: wgpu::BufferSize::new(FRAME_UNIFORM_SIZE as u64),
                    },
                    count: None,
                }],
            });
            let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("msc render frame"),
                layout: &layout,
                entries: &[wgpu::BindGroupEntry {
                    binding: 0,
                    resource: uniform.as_entire_binding(),
                }],
            });
            let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("msc render"),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("msc render_scene.wgsl"),
                source: wgpu::ShaderSource::Wgsl(SHADER.into()),
            });
            let vec4_layout = |step_mode, location| wgpu::VertexBufferLayout {
                array_stride: 16,
                step_mode,
                attributes: match location {
                    0 => &[wgpu::VertexAttribute {
                        format: wgpu::VertexFormat::Float32x4,
                        offset: 0,
                        shader_location: 0,
                    }],
                    _ => &[wgpu::VertexAttribute {
                        format: wgpu::VertexFormat::Float32x4,
                        offset: 0,
                        shader_location: 1,
                    }],
                },
            };
            let depth = Some(wgpu::DepthStencilState {
                format: DEPTH_FORMAT,
                depth_write_enabled: Some(true),
                depth_compare: Some(wgpu::CompareFunction::Less),
                stencil: Default::default(),
                bias: Default::default(),
            });
            let multisample = wgpu::MultisampleState {
                count: options.msaa,
                mask: !0,
                alpha_to_coverage_enabled: false,
            };
            let target = [Some(wgpu::ColorTargetState {
                format: options.format,
                blend: None,
                write_mask: wgpu::ColorWrites::ALL,
            })];
            let particle_buffers = [
                Some(vec4_layout(wgpu::VertexStepMode::Instance, 0)),
                Some(vec4_layout(wgpu::VertexStepMode::Instance, 1)),
            ];
            let particle_pipeline =
                device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
                    label: Some("msc render particles"),
                    layout: Some(&pipeline_layout),
                    vertex: wgpu::VertexState {
                        module: &module,
                        entry_point: Some("vs_particle"),
                        compilation_options: Default::default(),
                        buffers: &particle_buffers,
                    },
                    primitive: wgpu::PrimitiveState {
                        topology: wgpu::PrimitiveTopology::TriangleStrip,
                        ..Default::default()
                    },
                    depth_stencil: depth.clone(),
                    multisample,
                    fragment: Some(wgpu::FragmentState {
                        module: &module,
                        entry_point: Some("fs_particle"),
                        compilation_options: Default::default(),
                        targets: &target,
                    }),
                    multiview_mask: None,
                    cache: None,
                });
            let spring_buffers = [Some(vec4_layout(wgpu::VertexStepMode::Vertex, 0))];
            let spring_pipeline = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
                label: Some("msc render springs"),
                layout: Some(&pipeline_layout),
                vertex: wgpu::VertexState {
                    module: &module,
                    entry_point: Some("vs_spring"),
                    compilation_options: Default::default(),
                    buffers: &spring_buffers,
                },
                primitive: wgpu::PrimitiveState {
                    topology: wgpu::PrimitiveTopology::LineList,
                    ..Default::default()
                },
                depth_stencil: depth,
                multisample,
                fragment: Some(wgpu::FragmentState {
                    module: &module,
                    entry_point: Some("fs_spring"),
                    compilation_options: Default::default(),
                    targets: &target,
                }),
                multiview_mask: None,
                cache: None,
            });
            let targets = create_targets(&device, &options)?;
            Ok((
                charges,
                springs,
                uniform,
                bind_group,
                particle_pipeline,
                spring_pipeline,
                targets,
            ))
        })?;
        let (charges, springs, uniform, bind_group, particle_pipeline, spring_pipeline, targets) =
            built;
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
            uniform,
            bind_group,
            particle_pipeline,
            spring_pipeline,
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
        let mut options = self.options.clone();
        options.size = size;
        let device = self.device.clone();
        self.targets = scoped(&device, || create_targets(&device, &options))?;
        self.options = options;
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
            .write_buffer(&self.uniform, 0, bytemuck::bytes_of(&u));
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
        pass.set_bind_group(0, &self.bind_group, &[]);
        let bytes = 16 * u64::from(self.particles);
        if let (true, Some((indices, count))) = (self.options.springs, &self.springs) {
            pass.set_pipeline(&self.spring_pipeline);
            pass.set_vertex_buffer(0, positions.slice(..bytes));
            pass.set_index_buffer(indices.slice(..), wgpu::IndexFormat::Uint32);
            pass.draw_indexed(0..*count, 0, 0..1);
        }
        pass.set_pipeline(&self.particle_pipeline);
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

fn create_targets(device: &wgpu::Device, options: &RenderOptions) -> Result<Targets, RenderError> {
    let Size { width, height } = options.size;
    let max = device.limits().max_texture_dimension_2d;
    if width == 0 || height == 0 || width > max || height > max {
        return Err(RenderError::Size {
            width,
            height,
            reason: format!("each side must be 1 to {max} pixels on this device"),
        });
    }
    let readable = matches!(
        options.format,
        wgpu::TextureFormat::Rgba8Unorm
            | wgpu::TextureFormat::Rgba8UnormSrgb
            | wgpu::TextureFormat::Bgra8Unorm
            | wgpu::TextureFormat::Bgra8UnormSrgb
    );
    if !readable {
        return Err(RenderError::Gpu(format!(
            "target format {:?}: the renderer draws into 8-bit RGBA or BGRA",
            options.format
        )));
    }
    let extent = wgpu::Extent3d {
        width,
        height,
        depth_or_array_layers: 1,
    };
    let texture = |label, samples, format, usage| {
        device.create_texture(&wgpu::TextureDescriptor {
            label: Some(label),
            size: extent,
            mip_level_count: 1,
            sample_count: samples,
            dimension: wgpu::TextureDimension::D2,
            format,
            usage,
            view_formats: &[],
        })
    };
    let color = texture(
        "msc render target",
        1,
        options.format,
        wgpu::TextureUsages::RENDER_ATTACHMENT
            | wgpu::TextureUsages::COPY_SRC
            | wgpu::TextureUsages::TEXTURE_BINDING,
    );
    let msaa_view = (options.msaa > 1).then(|| {
        texture(
            "msc render msaa",
            options.msaa,
            options.format,
            wgpu::TextureUsages::RENDER_ATTACHMENT,
        )
        .create_view(&Default::default())
    });
    let depth = texture(
        "msc render depth",
        options.msaa,
        DEPTH_FORMAT,
        wgpu::TextureUsages::RENDER_ATTACHMENT,
    );
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("msc render readback"),
        size: u64::from(padded_row_bytes(width)) * u64::from(height),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    Ok(Targets {
        size: options.size,
        color_view: color.create_view(&Default::default()),
        color,
        msaa_view,
        depth_view: depth.create_view(&Default::default()),
        readback,
    })
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
