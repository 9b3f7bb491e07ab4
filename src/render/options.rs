//! Option values of the render commands, parsed with errors that name the input.

use std::fmt;
use std::str::FromStr;

/// A value that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{value:?}: {reason}")]
pub struct ParseError {
    pub value: String,
    pub reason: String,
}

fn bad(value: &str, reason: impl Into<String>) -> ParseError {
    ParseError {
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// What the particles' colour shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorBy {
    /// Charge: blue negative, grey zero, red positive (scaled by the largest |q|)
    #[default]
    Charge,
    /// Speed: dark violet at rest to yellow at the largest speed
    Speed,
}

/// An image size, `WxH` in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    pub width: u32,
    pub height: u32,
}

impl Size {
    /// The largest side accepted on the command line (wgpu's default texture limit).
    pub const MAX_SIDE: u32 = 8192;
}

impl Default for Size {
    fn default() -> Self {
        Size {
            width: 640,
            height: 480,
        }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

impl FromStr for Size {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let (w, h) = s
            .trim()
            .split_once(['x', 'X'])
            .ok_or_else(|| bad(s, "expected WIDTHxHEIGHT in pixels, e.g. 640x480"))?;
        let side = |t: &str, name: &str| -> Result<u32, ParseError> {
            let v: u32 = t
                .trim()
                .parse()
                .map_err(|_| bad(s, format!("the {name} {t:?} is not a whole number")))?;
            if v == 0 || v > Self::MAX_SIDE {
                return Err(bad(
                    s,
                    format!("the {name} must be 1 to {} pixels, got {v}", Self::MAX_SIDE),
                ));
            }
            Ok(v)
        };
        Ok(Size {
            width: side(w, "width")?,
            height: side(h, "height")?,
        })
    }
}

/// An sRGB colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rgb(pub [u8; 3]);

impl Rgb {
    /// The default background: a dark blue-grey, against which grey (uncharged) particles show.
    pub const DEFAULT_BACKGROUND: Rgb = Rgb([24, 26, 33]);

    /// Linear-light components in 0..1 (what a clear colour on an sRGB target takes).
    pub fn to_linear(self) -> [f64; 3] {
        self.0.map(|c| {
            let c = f64::from(c) / 255.0;
            if c <= 0.04045 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        })
    }
}

impl Default for Rgb {
    fn default() -> Self {
        Self::DEFAULT_BACKGROUND
    }
}

impl fmt::Display for Rgb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [r, g, b] = self.0;
        write!(f, "#{r:02x}{g:02x}{b:02x}")
    }
}

impl FromStr for Rgb {
    type Err = ParseError;
    /// `#rrggbb`, `rrggbb`, `#rgb`, or a few names (black, white, grey/gray, dark).
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "black" => return Ok(Rgb([0, 0, 0])),
            "white" => return Ok(Rgb([255, 255, 255])),
            "grey" | "gray" => return Ok(Rgb([128, 128, 128])),
            "dark" => return Ok(Self::DEFAULT_BACKGROUND),
            _ => {}
        }
        let hex = t.strip_prefix('#').unwrap_or(&t);
        let digits: Option<Vec<u8>> = hex
            .chars()
            .map(|c| c.to_digit(16).map(|d| d as u8))
            .collect();
        let expected = "expected a colour as #rrggbb, #rgb, black, white, grey or dark";
        match digits.as_deref() {
            Some([r1, r2, g1, g2, b1, b2]) => Ok(Rgb([r1 * 16 + r2, g1 * 16 + g2, b1 * 16 + b2])),
            Some([r, g, b]) => Ok(Rgb([r * 17, g * 17, b * 17])),
            _ => Err(bad(s, expected)),
        }
    }
}

/// Particle radius: in pixels (`4px`) or in metres (a plain number), or `auto`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum ParticleSize {
    /// A quarter of the median spring length in the first frame (or of the mean spacing
    /// without springs).
    #[default]
    Auto,
    /// A radius in pixels, the same at any depth.
    Pixels(f32),
    /// A radius in metres.
    World(f32),
}

impl fmt::Display for ParticleSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParticleSize::Auto => write!(f, "auto"),
            ParticleSize::Pixels(p) => write!(f, "{p}px"),
            ParticleSize::World(r) => write!(f, "{r}"),
        }
    }
}

impl FromStr for ParticleSize {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("auto") {
            return Ok(ParticleSize::Auto);
        }
        let (num, px) = match t.strip_suffix("px") {
            Some(n) => (n.trim(), true),
            None => (t.strip_suffix('m').unwrap_or(t).trim(), false),
        };
        let v: f32 = num.parse().map_err(|_| {
            bad(
                s,
                "expected auto, a radius in metres (0.05) or in pixels (4px)",
            )
        })?;
        if !(v.is_finite() && v > 0.0) {
            return Err(bad(s, "the radius must be positive and finite"));
        }
        if px && v > 1024.0 {
            return Err(bad(s, "a radius of at most 1024 pixels"));
        }
        Ok(if px {
            ParticleSize::Pixels(v)
        } else {
            ParticleSize::World(v)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_bad_ones_name_the_problem() {
        assert_eq!(
            "640x480".parse::<Size>().unwrap(),
            Size {
                width: 640,
                height: 480
            }
        );
        assert_eq!("32X16".parse::<Size>().unwrap().height, 16);
        let e = "0x10".parse::<Size>().unwrap_err();
        assert!(e.to_string().contains("width must be 1 to"), "{e}");
        let e = "abc".parse::<Size>().unwrap_err();
        assert!(e.to_string().contains("WIDTHxHEIGHT"), "{e}");
        let e = "10x-3".parse::<Size>().unwrap_err();
        assert!(e.to_string().contains("height"), "{e}");
        assert!("99999x10".parse::<Size>().is_err());
    }

    #[test]
    fn colours_parse() {
        assert_eq!("#ff8000".parse::<Rgb>().unwrap(), Rgb([255, 128, 0]));
        assert_eq!("0A0B0C".parse::<Rgb>().unwrap(), Rgb([10, 11, 12]));
        assert_eq!("#fff".parse::<Rgb>().unwrap(), Rgb([255, 255, 255]));
        assert_eq!("White".parse::<Rgb>().unwrap(), Rgb([255, 255, 255]));
        assert!("#12345".parse::<Rgb>().is_err());
        assert!("#gg0000".parse::<Rgb>().is_err());
        assert_eq!(Rgb([1, 2, 255]).to_string(), "#0102ff");
        let l = Rgb([255, 0, 128]).to_linear();
        assert!((l[0] - 1.0).abs() < 1e-12 && l[1] == 0.0 && (l[2] - 0.2158).abs() < 1e-3);
    }

    #[test]
    fn particle_sizes_parse() {
        assert_eq!(
            "4px".parse::<ParticleSize>().unwrap(),
            ParticleSize::Pixels(4.0)
        );
        assert_eq!(
            "0.05".parse::<ParticleSize>().unwrap(),
            ParticleSize::World(0.05)
        );
        assert_eq!(
            "0.05m".parse::<ParticleSize>().unwrap(),
            ParticleSize::World(0.05)
        );
        assert_eq!("AUTO".parse::<ParticleSize>().unwrap(), ParticleSize::Auto);
        assert!("-1px".parse::<ParticleSize>().is_err());
        assert!("big".parse::<ParticleSize>().is_err());
        assert!("0".parse::<ParticleSize>().is_err());
    }
}
