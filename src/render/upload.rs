//! Frames the host holds (a PLY frame, the CPU backend's state) uploaded into vertex
//! buffers for a [`Renderer`] on the same device: one `vec4<f32>` per particle, the layout
//! of the GPU solver's own position and velocity buffers.

use super::image::Image;
use super::renderer::Renderer;
use super::RenderError;
use glam::DVec3;

/// Position and velocity vertex buffers of `n` particles, written from the host.
pub struct Uploads {
    positions: wgpu::Buffer,
    velocities: wgpu::Buffer,
    queue: wgpu::Queue,
}

/// A vertex buffer the host fills with `vec4<f32>` per particle.
fn upload_buffer(device: &wgpu::Device, label: &str, n: usize) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: (16 * n.max(1)) as u64,
        usage: wgpu::BufferUsages::VERTEX | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

impl Uploads {
    /// Buffers for `n` particles on `device`, labelled `label` positions and velocities.
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue, n: usize, label: &str) -> Self {
        Self {
            positions: upload_buffer(device, &format!("{label} positions"), n),
            velocities: upload_buffer(device, &format!("{label} velocities"), n),
            queue: queue.clone(),
        }
    }

    /// Writes the positions (xyz, 1) and, when given, the velocities.
    pub fn write(&self, positions: &[[f32; 4]], velocities: Option<&[[f32; 4]]>) {
        self.queue
            .write_buffer(&self.positions, 0, bytemuck::cast_slice(positions));
        if let Some(v) = velocities {
            self.queue
                .write_buffer(&self.velocities, 0, bytemuck::cast_slice(v));
        }
    }

    /// Writes a state's positions and velocities, rounded to f32.
    pub fn write_state(&self, x: &[DVec3], v: &[DVec3]) {
        let vec4 = |v: &[DVec3], w: f32| -> Vec<[f32; 4]> {
            v.iter()
                .map(|p| [p.x as f32, p.y as f32, p.z as f32, w])
                .collect()
        };
        self.write(&vec4(x, 1.0), Some(&vec4(v, 0.0)));
    }

    /// Draws what was written last with `renderer`.
    pub fn render(&self, renderer: &Renderer) -> Result<Image, RenderError> {
        renderer.render(&self.positions, Some(&self.velocities))
    }
}
