//! The spring's transverse factor 1 - L/l (docs/physics.md (2.3)), in the stiffness block
//! K = k [n n^T + (1 - L/l)(I - n n^T)] ((2.3)), and its derivative in l.

/// 1 - L/l. A zero-rest-length spring is linear (factor 1 for every l); a degenerate
/// spring with L > 0 (l = 0) gets 0.
#[inline]
pub fn transverse_factor(l: f64, rest: f64) -> f64 {
    transverse_factor_and_derivative(l, rest).0
}

/// (1 - L/l, d/dl (1 - L/l) = L / l^2), with the same special cases as
/// [`transverse_factor`] (derivative 0 there).
#[inline]
pub fn transverse_factor_and_derivative(l: f64, rest: f64) -> (f64, f64) {
    if rest == 0.0 {
        (1.0, 0.0)
    } else if l > 0.0 {
        (1.0 - rest / l, rest / (l * l))
    } else {
        (0.0, 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_derivative_matches_central_differences() {
        for (l, rest) in [(1.3, 1.0), (0.7, 1.0), (2.0, 0.5)] {
            let h = 1e-6;
            let fd = (transverse_factor(l + h, rest) - transverse_factor(l - h, rest)) / (2.0 * h);
            let (_, d) = transverse_factor_and_derivative(l, rest);
            assert!((fd - d).abs() < 1e-8, "{l} {rest}: {fd} vs {d}");
        }
        assert_eq!(transverse_factor_and_derivative(0.0, 1.0), (0.0, 0.0));
        assert_eq!(transverse_factor_and_derivative(3.0, 0.0), (1.0, 0.0));
    }
}
