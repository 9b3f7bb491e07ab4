//! Embedding msc's GPU solver in a host application's own wgpu renderer.
//!
//! The host owns all of wgpu here: the instance, adapter, device, queue, its render
//! pipeline and its target. The solver is built on the host's device
//! (`GpuSolver::new(&device, &queue, ...)`), and every frame the host records the
//! solver's steps (`record_steps`) and then its own render pass into ONE command encoder
//! of its own, submitted once. The render pass binds `solver.positions_buffer()` directly
//! as a vertex buffer (`Float32x4`, stride 16; w = 1): the positions never leave the GPU
//! and are never copied. At the end the host reads its own target back and writes a PNG.
//!
//! Headless, so it runs anywhere wgpu finds an adapter, software ones (Mesa's lavapipe)
//! included:
//!
//! ```sh
//! cargo run --release --example embed -- embed.png
//! ```

use msc::gpu::GpuSolver;
use msc::model::{mesh, Spring, System, SystemDesc};
use msc::Config;
use std::path::Path;

/// The image size.
pub const WIDTH: u32 = 480;
pub const HEIGHT: u32 = 360;

/// What went wrong; `NoAdapter` lets a caller (the test) skip on machines without one.
#[derive(Debug)]
pub enum EmbedError {
    NoAdapter(String),
    Failed(String),
}

impl std::fmt::Display for EmbedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EmbedError::NoAdapter(m) => write!(f, "no GPU adapter: {m}"),
            EmbedError::Failed(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for EmbedError {}

fn failed(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Failed(e.to_string())
}

/// The host's own shader: particles as screen-space discs (instanced quads) and springs
/// as lines, both reading positions as `vec4<f32>` vertex attributes.
const SHADER: &str = r#"
struct Camera { view_proj: mat4x4<f32>, viewport: vec2<f32>, radius_px: f32, _pad: f32 }
@group(0) @binding(0) var<uniform> camera: Camera;

struct Disc { @builtin(position) clip: vec4<f32>, @location(0) uv: vec2<f32>, @location(1) height: f32 }

@vertex
fn vs_disc(@builtin(vertex_index) corner: u32, @location(0) position: vec4<f32>) -> Disc {
    let uv = vec2<f32>(select(-1.0, 1.0, (corner & 1u) != 0u), select(-1.0, 1.0, (corner & 2u) != 0u));
    var clip = camera.view_proj * vec4<f32>(position.xyz, 1.0);
    clip = vec4<f32>(clip.xy + uv * camera.radius_px * 2.0 / camera.viewport * clip.w, clip.zw);
    return Disc(clip, uv, position.z);
}

@fragment
fn fs_disc(in: Disc) -> @location(0) vec4<f32> {
    let r2 = dot(in.uv, in.uv);
    if r2 > 1.0 { discard; }
    // Warm above the torus's plane, cool below; darker towards the rim.
    let t = clamp(0.5 + 0.5 * in.height, 0.0, 1.0);
    let base = mix(vec3<f32>(0.1, 0.35, 0.9), vec3<f32>(1.0, 0.45, 0.1), t);
    return vec4<f32>(base * (1.0 - 0.5 * r2), 1.0);
}

@vertex
fn vs_line(@location(0) position: vec4<f32>) -> @builtin(position) vec4<f32> {
    return camera.view_proj * vec4<f32>(position.xyz, 1.0);
}

@fragment
fn fs_line() -> @location(0) vec4<f32> {
    return vec4<f32>(0.25, 0.27, 0.32, 1.0);
}
"#;

/// A charged torus (the built-in `torus` scene's physics): the charges repel and it swells.
fn charged_torus() -> Result<System, EmbedError> {
    let m = mesh::torus(4.0, 1.5, 29, 5).map_err(failed)?;
    let springs = m
        .edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness: 10.0,
            rest_length: m.positions[i as usize].distance(m.positions[j as usize]),
            damping: 0.0,
        })
        .collect();
    let n = m.positions.len();
    System::new(SystemDesc {
        positions: m.positions,
        masses: vec![0.1; n],
        charges: vec![6e-6; n],
        springs,
        faces: m.faces,
        ..Default::default()
    })
    .map_err(failed)
}

/// What [`run`] did.
pub struct Outcome {
    pub steps: u64,
    pub adapter: String,
    /// The final image, RGBA, rows top to bottom.
    pub rgba: Vec<u8>,
}

/// Runs `frames` frames of `steps_per_frame` solver steps each and writes the last image
/// to `out` (PNG).
pub fn run(out: &Path, frames: u32, steps_per_frame: u32) -> Result<Outcome, EmbedError> {
    // 1. The host's own wgpu setup: any adapter will do, software ones included.
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }))
    .map_err(|e| EmbedError::NoAdapter(e.to_string()))?;
    let adapter_name = adapter.get_info().name;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("host device"),
        ..Default::default()
    }))
    .map_err(failed)?;

    // 2. The solver, on the host's device and queue.
    let system = charged_torus()?;
    let config = Config {
        dt: 0.015,
        ..Config::default()
    };
    let mut solver = GpuSolver::new(&device, &queue, &system, &config).map_err(failed)?;
    let n = system.len() as u32;
    let spring_indices: Vec<[u32; 2]> = system.springs().iter().map(|s| [s.i, s.j]).collect();

    // 3. The host's renderer: a pipeline whose vertex buffer 0 is a Float32x4 position.
    let format = wgpu::TextureFormat::Rgba8UnormSrgb;
    let target = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("host target"),
        size: wgpu::Extent3d {
            width: WIDTH,
            height: HEIGHT,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let target_view = target.create_view(&Default::default());
    let depth = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("host depth"),
        size: target.size(),
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Depth32Float,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
        view_formats: &[],
    });
    let depth_view = depth.create_view(&Default::default());

    // A fixed camera looking down at the torus (outer radius 5.5 m, swelling to about 7.5 m).
    let view = glam::Mat4::look_at_rh(
        glam::Vec3::new(0.0, -19.0, 16.0),
        glam::Vec3::ZERO,
        glam::Vec3::Z,
    );
    let proj =
        glam::Mat4::perspective_rh(45f32.to_radians(), WIDTH as f32 / HEIGHT as f32, 1.0, 100.0);
    let mut camera = [0f32; 20];
    camera[..16].copy_from_slice(&(proj * view).to_cols_array());
    camera[16..19].copy_from_slice(&[WIDTH as f32, HEIGHT as f32, 4.0]);
    use wgpu::util::DeviceExt;
    let camera_buffer = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("host camera"),
        contents: bytemuck::cast_slice(&camera),
        usage: wgpu::BufferUsages::UNIFORM,
    });
    let index_buffer = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("host spring indices"),
        contents: bytemuck::cast_slice(&spring_indices),
        usage: wgpu::BufferUsages::INDEX,
    });
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("host camera"),
        entries: &[wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::VERTEX,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        }],
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("host camera"),
        layout: &layout,
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: camera_buffer.as_entire_binding(),
        }],
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("host"),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("host shader"),
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    // The solver's positions: one vec4<f32> per particle, stride 16.
    let positions_layout = |step_mode| wgpu::VertexBufferLayout {
        array_stride: 16,
        step_mode,
        attributes: &[wgpu::VertexAttribute {
            format: wgpu::VertexFormat::Float32x4,
            offset: 0,
            shader_location: 0,
        }],
    };
    let pipeline = |label, vs, fs, topology, step_mode| {
        device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some(label),
            layout: Some(&pipeline_layout),
            vertex: wgpu::VertexState {
                module: &module,
                entry_point: Some(vs),
                compilation_options: Default::default(),
                buffers: &[Some(positions_layout(step_mode))],
            },
            primitive: wgpu::PrimitiveState {
                topology,
                ..Default::default()
            },
            depth_stencil: Some(wgpu::DepthStencilState {
                format: wgpu::TextureFormat::Depth32Float,
                depth_write_enabled: Some(true),
                depth_compare: Some(wgpu::CompareFunction::Less),
                stencil: Default::default(),
                bias: Default::default(),
            }),
            multisample: Default::default(),
            fragment: Some(wgpu::FragmentState {
                module: &module,
                entry_point: Some(fs),
                compilation_options: Default::default(),
                targets: &[Some(format.into())],
            }),
            multiview_mask: None,
            cache: None,
        })
    };
    let discs = pipeline(
        "host discs",
        "vs_disc",
        "fs_disc",
        wgpu::PrimitiveTopology::TriangleStrip,
        wgpu::VertexStepMode::Instance,
    );
    let lines = pipeline(
        "host lines",
        "vs_line",
        "fs_line",
        wgpu::PrimitiveTopology::LineList,
        wgpu::VertexStepMode::Vertex,
    );

    // Texture-to-buffer copies need rows padded to 256 bytes.
    let padded_row = (4 * WIDTH).div_ceil(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT)
        * wgpu::COPY_BYTES_PER_ROW_ALIGNMENT;
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("host readback"),
        size: u64::from(padded_row * HEIGHT),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });

    // 4. The frame loop: simulation and drawing in one encoder, one submission per frame.
    for frame in 0..frames {
        let mut encoder = device.create_command_encoder(&Default::default());
        solver
            .record_steps(&mut encoder, steps_per_frame)
            .map_err(failed)?;
        {
            let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("host pass"),
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view: &target_view,
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations {
                        load: wgpu::LoadOp::Clear(wgpu::Color {
                            r: 0.92,
                            g: 0.93,
                            b: 0.95,
                            a: 1.0,
                        }),
                        store: wgpu::StoreOp::Store,
                    },
                })],
                depth_stencil_attachment: Some(wgpu::RenderPassDepthStencilAttachment {
                    view: &depth_view,
                    depth_ops: Some(wgpu::Operations {
                        load: wgpu::LoadOp::Clear(1.0),
                        store: wgpu::StoreOp::Discard,
                    }),
                    stencil_ops: None,
                }),
                ..Default::default()
            });
            pass.set_bind_group(0, &bind_group, &[]);
            // The solver's own buffer, bound as a vertex buffer: no copy.
            pass.set_vertex_buffer(0, solver.positions_buffer().slice(..));
            pass.set_pipeline(&lines);
            pass.set_index_buffer(index_buffer.slice(..), wgpu::IndexFormat::Uint32);
            pass.draw_indexed(0..2 * spring_indices.len() as u32, 0, 0..1);
            pass.set_pipeline(&discs);
            pass.draw(0..4, 0..n);
        }
        if frame + 1 == frames {
            encoder.copy_texture_to_buffer(
                wgpu::TexelCopyTextureInfo {
                    texture: &target,
                    mip_level: 0,
                    origin: wgpu::Origin3d::ZERO,
                    aspect: wgpu::TextureAspect::All,
                },
                wgpu::TexelCopyBufferInfo {
                    buffer: &readback,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: 0,
                        bytes_per_row: Some(padded_row),
                        rows_per_image: Some(HEIGHT),
                    },
                },
                target.size(),
            );
        }
        queue.submit([encoder.finish()]);
    }

    // 5. Read the last image back and drop the row padding.
    let (tx, rx) = std::sync::mpsc::channel();
    readback
        .slice(..)
        .map_async(wgpu::MapMode::Read, move |r| drop(tx.send(r)));
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(failed)?;
    rx.recv().map_err(failed)?.map_err(failed)?;
    let rgba: Vec<u8> = {
        let data = readback.slice(..).get_mapped_range().map_err(failed)?;
        data.chunks_exact(padded_row as usize)
            .flat_map(|row| &row[..4 * WIDTH as usize])
            .copied()
            .collect()
    };
    readback.unmap();
    let image = msc::render::Image {
        width: WIDTH,
        height: HEIGHT,
        rgba,
    };
    image.write_png(out).map_err(failed)?;
    Ok(Outcome {
        steps: solver.steps_done(),
        adapter: adapter_name,
        rgba: image.rgba,
    })
}

fn main() {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "embed.png".into());
    match run(Path::new(&out), 100, 4) {
        Ok(o) => println!("{} steps on {}; wrote {out}", o.steps, o.adapter),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
