//! The optimizers' norm (|grad| in the progress lines and fit.json, the step sizes):
//! finite whenever every component is, at the ends of f64's range too.

use super::norm;

#[test]
fn the_norm_of_finite_components_is_finite_at_the_ends_of_f64s_range() {
    for (v, want) in [
        (vec![1e200, 1e200], 2f64.sqrt() * 1e200),
        (vec![3e300, -4e300], 5e300),
        (vec![f64::MAX, 0.0], f64::MAX),
        (vec![3e-170, 4e-170], 5e-170),
    ] {
        let n = norm(&v);
        assert!(n.is_finite(), "{v:?}: {n}");
        assert!((n - want).abs() <= 1e-15 * want, "{v:?}: {n}, want {want}");
    }
    // Ordinary values are the plain sum of squares, bit for bit.
    assert_eq!(norm(&[3.0, 4.0]), 5.0);
    assert_eq!(norm(&[0.0, 0.0]), 0.0);
    assert_eq!(norm(&[]), 0.0);
    assert!(norm(&[1.0, f64::INFINITY]).is_infinite());
    assert!(norm(&[1.0, f64::NAN]).is_nan());
}
