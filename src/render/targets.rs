//! The offscreen targets of the renderer: the colour texture (single-sampled, copied to
//! the read-back buffer), the MSAA colour and depth textures, sized and checked against
//! the device's limits and the formats the read-back understands.

use super::image::padded_row_bytes;
use super::options::Size;
use super::RenderError;

pub(super) const DEPTH_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Depth32Float;

/// The textures and read-back buffer of one target size.
pub(super) struct Targets {
    pub size: Size,
    pub color: wgpu::Texture,
    pub color_view: wgpu::TextureView,
    pub msaa_view: Option<wgpu::TextureView>,
    pub depth_view: wgpu::TextureView,
    pub readback: wgpu::Buffer,
}

/// Creates the targets of `size` with `msaa` samples per pixel in `format`, or says why
/// that size or format cannot be drawn into on this device.
pub(super) fn create_targets(
    device: &wgpu::Device,
    size: Size,
    msaa: u32,
    format: wgpu::TextureFormat,
) -> Result<Targets, RenderError> {
    let Size { width, height } = size;
    let max = device.limits().max_texture_dimension_2d;
    if width == 0 || height == 0 || width > max || height > max {
        return Err(RenderError::Size {
            width,
            height,
            reason: format!("each side must be 1 to {max} pixels on this device"),
        });
    }
    let readable = matches!(
        format,
        wgpu::TextureFormat::Rgba8Unorm
            | wgpu::TextureFormat::Rgba8UnormSrgb
            | wgpu::TextureFormat::Bgra8Unorm
            | wgpu::TextureFormat::Bgra8UnormSrgb
    );
    if !readable {
        return Err(RenderError::Gpu(format!(
            "target format {:?}: the renderer draws into 8-bit RGBA or BGRA",
            format
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
        format,
        wgpu::TextureUsages::RENDER_ATTACHMENT
            | wgpu::TextureUsages::COPY_SRC
            | wgpu::TextureUsages::TEXTURE_BINDING,
    );
    let msaa_view = (msaa > 1).then(|| {
        texture(
            "msc render msaa",
            msaa,
            format,
            wgpu::TextureUsages::RENDER_ATTACHMENT,
        )
        .create_view(&Default::default())
    });
    let depth = texture(
        "msc render depth",
        msaa,
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
        size,
        color_view: color.create_view(&Default::default()),
        color,
        msaa_view,
        depth_view: depth.create_view(&Default::default()),
        readback,
    })
}
