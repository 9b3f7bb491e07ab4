//! Numbers in messages and reports: plain decimals for ordinary magnitudes, scientific
//! notation beyond them (1e300 is not printed as a 301-digit integer), the shortest text
//! that parses back to the same f64, and zero always as `0` (never `-0`); and long lists
//! in messages, a few items named and the rest counted.

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

/// The first `shown` items joined by `sep`, then how many more there are: `a, b, and 3
/// more` (`sep` ", "), `x; y; and 3 more` (`sep` "; "). A message names a few of a long
/// list rather than all of it.
pub fn first_of<I>(items: I, shown: usize, sep: &str) -> String
where
    I: IntoIterator,
    I::IntoIter: ExactSizeIterator,
    I::Item: fmt::Display,
{
    let items = items.into_iter();
    let rest = items.len().saturating_sub(shown);
    let named: Vec<String> = items.take(shown).map(|x| x.to_string()).collect();
    match (named.is_empty(), rest) {
        (_, 0) => named.join(sep),
        (true, n) => format!("{n} more"),
        (false, n) => format!("{}{sep}and {n} more", named.join(sep)),
    }
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

    #[test]
    fn a_list_names_its_first_items_and_counts_the_rest() {
        let five = ["a", "b", "c", "d", "e"];
        assert_eq!(first_of(five, 2, ", "), "a, b, and 3 more");
        assert_eq!(first_of(five, 4, "; "), "a; b; c; d; and 1 more");
        assert_eq!(first_of(five, 5, ", "), "a, b, c, d, e");
        assert_eq!(first_of(five, 9, ", "), "a, b, c, d, e");
        assert_eq!(first_of(five, 0, ", "), "5 more");
        assert_eq!(first_of(Vec::<String>::new(), 3, ", "), "");
    }
}
