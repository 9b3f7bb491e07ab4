//! Numbers in messages and reports: plain decimals for ordinary magnitudes, scientific
//! notation beyond them (1e300 is not printed as a 301-digit integer), the shortest text
//! that parses back to the same f64, and zero always as `0` (never `-0`).

use std::fmt;

/// `{}` of this prints `v` for a person: `0.015`, `250`, `1e300`, `-2.5e-9`, `NaN`, `inf`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Num(pub f64);

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0 + 0.0; // -0 -> 0
        let a = v.abs();
        if v == 0.0 || !v.is_finite() || (1e-4..1e9).contains(&a) {
            write!(f, "{v}")
        } else {
            write!(f, "{v:e}")
        }
    }
}

/// `{}` of this prints a 3-vector as `[x, y, z]` with each component as [`Num`] does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Vec3(pub glam::DVec3);

impl fmt::Display for Vec3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        write!(f, "[{}, {}, {}]", Num(v.x), Num(v.y), Num(v.z))
    }
}

/// Shorthand for `Num(v)`.
pub fn num(v: f64) -> Num {
    Num(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magnitudes_print_briefly_and_round_trip() {
        assert_eq!(num(1e300).to_string(), "1e300");
        assert_eq!(num(1e39).to_string(), "1e39");
        assert_eq!(num(-2.5e-9).to_string(), "-2.5e-9");
        assert_eq!(num(0.015).to_string(), "0.015");
        assert_eq!(num(250.0).to_string(), "250");
        assert_eq!(num(-0.0).to_string(), "0");
        assert_eq!(num(f64::NAN).to_string(), "NaN");
        assert_eq!(num(f64::NEG_INFINITY).to_string(), "-inf");
        assert_eq!(
            Vec3(glam::DVec3::new(1e300, -0.0, 0.5)).to_string(),
            "[1e300, 0, 0.5]"
        );
        for v in [1e300, 0.1 + 0.2, -3.3e-7, 123456.789, 5e-324, f64::MAX] {
            assert_eq!(num(v).to_string().parse::<f64>().unwrap(), v);
            assert!(num(v).to_string().len() < 30, "{}", num(v));
        }
    }
}
