//! Rendered images: PNG files and animated GIFs, both written atomically (a hidden
//! temporary file renamed into place, as every other output of a run).

use super::RenderError;
use crate::output::{write_atomic, AtomicFile};
use std::path::{Path, PathBuf};

/// An 8-bit sRGB RGBA image, rows top to bottom, tightly packed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub width: u32,
    pub height: u32,
    pub rgba: Vec<u8>,
}

impl Image {
    /// The pixel at column `x`, row `y` (from the top).
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 4] {
        let k = 4 * (y as usize * self.width as usize + x as usize);
        [
            self.rgba[k],
            self.rgba[k + 1],
            self.rgba[k + 2],
            self.rgba[k + 3],
        ]
    }

    /// Encodes as an 8-bit RGB PNG (the alpha channel is opaque and dropped).
    pub fn to_png(&self) -> Vec<u8> {
        let rgb: Vec<u8> = self
            .rgba
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect();
        let mut bytes = Vec::new();
        let mut encoder = png::Encoder::new(&mut bytes, self.width, self.height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Balanced);
        // Writing into a Vec cannot fail, and the size and data length agree by construction.
        let mut writer = encoder.write_header().expect("PNG header into memory");
        writer
            .write_image_data(&rgb)
            .expect("PNG data of the declared size");
        writer.finish().expect("PNG end into memory");
        bytes
    }

    /// Writes a PNG atomically.
    pub fn write_png(&self, path: &Path) -> Result<(), RenderError> {
        Ok(write_atomic(path, &self.to_png())?)
    }

    /// Reads an 8-bit RGB or RGBA PNG (as written by [`Self::write_png`]).
    pub fn read_png(path: &Path) -> Result<Image, RenderError> {
        let bad = |message: String| RenderError::Malformed {
            path: path.to_path_buf(),
            message,
        };
        let file = crate::files::open(path).map_err(|source| RenderError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let decoder = png::Decoder::new(std::io::BufReader::new(file));
        let mut reader = decoder
            .read_info()
            .map_err(|e| bad(format!("not a PNG: {e}")))?;
        let size = reader
            .output_buffer_size()
            .ok_or_else(|| bad("PNG too large".into()))?;
        let mut buf = vec![0; size];
        let info = reader
            .next_frame(&mut buf)
            .map_err(|e| bad(format!("bad PNG data: {e}")))?;
        if info.bit_depth != png::BitDepth::Eight {
            return Err(bad(format!("{:?} bits per channel, not 8", info.bit_depth)));
        }
        let rgba: Vec<u8> = match info.color_type {
            png::ColorType::Rgb => buf[..info.buffer_size()]
                .chunks_exact(3)
                .flat_map(|p| [p[0], p[1], p[2], 255])
                .collect(),
            png::ColorType::Rgba => buf[..info.buffer_size()].to_vec(),
            other => return Err(bad(format!("colour type {other:?}, not RGB or RGBA"))),
        };
        Ok(Image {
            width: info.width,
            height: info.height,
            rgba,
        })
    }
}

/// Copies the rows of a texture readback (each padded to `padded_row` bytes, a multiple
/// of 256 as texture-to-buffer copies require) into a tight image.
pub fn unpad_rows(data: &[u8], width: u32, height: u32, padded_row: u32) -> Image {
    let row = 4 * width as usize;
    let mut rgba = Vec::with_capacity(row * height as usize);
    for y in 0..height as usize {
        let start = y * padded_row as usize;
        rgba.extend_from_slice(&data[start..start + row]);
    }
    Image {
        width,
        height,
        rgba,
    }
}

/// Bytes per row of a texture-to-buffer copy of an RGBA8 image `width` pixels wide.
pub fn padded_row_bytes(width: u32) -> u32 {
    (4 * width).div_ceil(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT) * wgpu::COPY_BYTES_PER_ROW_ALIGNMENT
}

/// An animated GIF being written: frames are quantized to 256 colours each (NeuQuant) and
/// appended; the file appears under its name on [`GifWriter::finish`].
pub struct GifWriter {
    path: PathBuf,
    encoder: gif::Encoder<AtomicFile>,
    width: u16,
    height: u16,
    delay: u16,
    frames: u64,
}

impl GifWriter {
    /// The slowest frame rate a GIF holds: its longest delay is 65535 hundredths of a
    /// second (a slower rate would be clamped to it, silently).
    pub const MIN_FPS: f64 = 100.0 / 65535.0;

    /// Starts a looping GIF of `width` x `height` at `fps` frames per second (GIF delays
    /// are in hundredths of a second, so the rate is rounded to 100 / delay).
    pub fn create(path: &Path, width: u32, height: u32, fps: f64) -> Result<Self, RenderError> {
        let err = |message: String| RenderError::Gif {
            path: path.to_path_buf(),
            message,
        };
        let (w, h) = match (u16::try_from(width), u16::try_from(height)) {
            (Ok(w), Ok(h)) => (w, h),
            _ => {
                return Err(err(format!(
                    "{width}x{height} is larger than GIF's 65535-pixel sides"
                )))
            }
        };
        if !(fps.is_finite() && fps > 0.0) {
            return Err(err(format!("the frame rate must be positive, got {fps}")));
        }
        let delay = (100.0 / fps).round().max(1.0);
        if delay > 65535.0 {
            return Err(err(format!(
                "{fps} frames per second is slower than GIF's longest delay (655.35 s), \
                 {:.5} frames per second",
                Self::MIN_FPS
            )));
        }
        let delay = delay as u16;
        let file = AtomicFile::create(path)?;
        let mut encoder = gif::Encoder::new(file, w, h, &[]).map_err(|e| err(e.to_string()))?;
        encoder
            .set_repeat(gif::Repeat::Infinite)
            .map_err(|e| err(e.to_string()))?;
        Ok(GifWriter {
            path: path.to_path_buf(),
            encoder,
            width: w,
            height: h,
            delay,
            frames: 0,
        })
    }

    /// Appends a frame of the GIF's size.
    pub fn add(&mut self, image: &Image) -> Result<(), RenderError> {
        if image.width != u32::from(self.width) || image.height != u32::from(self.height) {
            return Err(RenderError::Gif {
                path: self.path.clone(),
                message: format!(
                    "frame of {}x{} in a {}x{} GIF",
                    image.width, image.height, self.width, self.height
                ),
            });
        }
        let mut rgba = image.rgba.clone();
        // Speed 10: NeuQuant's usual trade-off of quality for time.
        let mut frame = gif::Frame::from_rgba_speed(self.width, self.height, &mut rgba, 10);
        frame.delay = self.delay;
        self.encoder
            .write_frame(&frame)
            .map_err(|e| RenderError::Gif {
                path: self.path.clone(),
                message: e.to_string(),
            })?;
        self.frames += 1;
        Ok(())
    }

    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Writes the trailer and moves the file into place.
    pub fn finish(self) -> Result<(), RenderError> {
        let path = self.path;
        let file = self.encoder.into_inner().map_err(|e| RenderError::Gif {
            path: path.clone(),
            message: e.to_string(),
        })?;
        Ok(file.commit()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_unpadded() {
        assert_eq!(padded_row_bytes(1), 256);
        assert_eq!(padded_row_bytes(64), 256);
        assert_eq!(padded_row_bytes(65), 512);
        // 3 pixels wide, 2 rows, padded to 256 bytes per row.
        let mut data = vec![0u8; 512];
        for (x, v) in (0..12).zip(1u8..) {
            data[x] = v;
            data[256 + x] = 100 + v;
        }
        let img = unpad_rows(&data, 3, 2, 256);
        assert_eq!(img.rgba.len(), 24);
        assert_eq!(img.pixel(2, 0), [9, 10, 11, 12]);
        assert_eq!(img.pixel(0, 1), [101, 102, 103, 104]);
    }

    #[test]
    fn a_gif_slower_than_its_longest_delay_is_refused() {
        let dir = std::env::temp_dir().join(format!("msc-gif-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.gif");
        let e = GifWriter::create(&path, 2, 2, 0.001)
            .err()
            .expect("0.001 fps");
        assert!(e.to_string().contains("655.35 s"), "{e}");
        assert!(!path.exists());
        assert!(GifWriter::create(&path, 2, 2, GifWriter::MIN_FPS).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn png_round_trips() {
        let dir = std::env::temp_dir().join(format!("msc-png-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.png");
        let img = Image {
            width: 2,
            height: 1,
            rgba: vec![1, 2, 3, 255, 250, 128, 0, 255],
        };
        img.write_png(&path).unwrap();
        assert_eq!(Image::read_png(&path).unwrap(), img);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
