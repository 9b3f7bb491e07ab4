//! The render pipelines: the `Frame` uniform of `render_scene.wgsl` (beside it) (its Rust
//! mirror, buffer and bind group) and the two pipelines drawing particles as instanced
//! quads and springs as indexed lines, depth tested, into one colour format.

use super::targets::DEPTH_FORMAT;
use super::SHADER;

/// The uniform block of `render_scene.wgsl` (beside it) (struct `Frame`, 176 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub(super) struct FrameUniform {
    pub view: [f32; 16],
    pub proj: [f32; 16],
    pub viewport: [f32; 2],
    pub particle_size: f32,
    pub size_in_pixels: u32,
    pub color_mode: u32,
    pub charge_scale: f32,
    pub speed_scale: f32,
    pub _pad: f32,
    pub spring_color: [f32; 4],
}

/// Size of the shader's `Frame` uniform, for layout tests.
pub const FRAME_UNIFORM_SIZE: usize = std::mem::size_of::<FrameUniform>();

/// The uniform buffer, its bind group and the two pipelines.
pub(super) struct Pipelines {
    pub uniform: wgpu::Buffer,
    pub bind_group: wgpu::BindGroup,
    pub particle: wgpu::RenderPipeline,
    pub spring: wgpu::RenderPipeline,
}

impl Pipelines {
    /// Builds them for `msaa` samples per pixel into targets of `format`. Positions are
    /// vertex buffer 0 (`vec4<f32>`, stride 16), per instance for the particles and per
    /// vertex for the springs; the colouring values are buffer 1, per instance.
    pub fn new(device: &wgpu::Device, msaa: u32, format: wgpu::TextureFormat) -> Self {
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
            count: msaa,
            mask: !0,
            alpha_to_coverage_enabled: false,
        };
        let target = [Some(wgpu::ColorTargetState {
            format,
            blend: None,
            write_mask: wgpu::ColorWrites::ALL,
        })];
        let particle_buffers = [
            Some(vec4_layout(wgpu::VertexStepMode::Instance, 0)),
            Some(vec4_layout(wgpu::VertexStepMode::Instance, 1)),
        ];
        let particle_pipeline = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
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
        Pipelines {
            uniform,
            bind_group,
            particle: particle_pipeline,
            spring: spring_pipeline,
        }
    }
}
