//! Halton low-discrepancy samples (the paper's Section 3.3.1) and the padded domain box.

use super::DdefError;
use glam::DVec3;

/// Radical inverse of `i` in `base`: the digits of i mirrored about the radix point.
/// In (0, 1) for i >= 1.
pub fn radical_inverse(mut i: u64, base: u64) -> f64 {
    let inv = 1.0 / base as f64;
    let mut f = 1.0;
    let mut r = 0.0;
    while i > 0 {
        f *= inv;
        r += f * (i % base) as f64;
        i /= base;
    }
    r
}

/// The i-th point (i >= 1) of the 3-D Halton sequence with bases 2, 3, 5, in (0, 1)^3.
pub fn halton3(i: u64) -> DVec3 {
    DVec3::new(
        radical_inverse(i, 2),
        radical_inverse(i, 3),
        radical_inverse(i, 5),
    )
}

/// m Halton samples in the box [lo, hi]: points 1..=m of the sequence (point 0 is the
/// corner lo, which the box corners already give). All lie strictly inside the box.
pub fn halton_sites(lo: DVec3, hi: DVec3, m: usize) -> Vec<DVec3> {
    let ext = hi - lo;
    (1..=m as u64).map(|i| lo + ext * halton3(i)).collect()
}

/// Every charge lies at least this fraction of the box size inside the padded box, so no
/// charge sits on the hull (where the far field would be extrapolated, not interpolated).
pub const PAD_FRACTION: f64 = 1e-3;

/// An axis thinner than this fraction of the largest extent (coplanar or collinear
/// charges) is widened to it, so the box has volume and its tetrahedra are not slivers.
pub const THIN_FRACTION: f64 = 0.1;

/// The DDEF domain: the bounding box of `points`, thin axes widened to
/// [`THIN_FRACTION`] of the largest extent, then every side padded by
/// ([`PAD_FRACTION`] + `margin`) times that extent. All points at one place get a box of
/// size 1e-3 max(1, |x|_inf). Errors on a non-finite point or on an empty set.
pub fn domain_box(points: &[DVec3], margin: f64) -> Result<(DVec3, DVec3), DdefError> {
    let mut lo = DVec3::splat(f64::INFINITY);
    let mut hi = DVec3::splat(f64::NEG_INFINITY);
    for (k, p) in points.iter().enumerate() {
        if !p.is_finite() {
            return Err(DdefError::NonFinitePosition { index: k });
        }
        lo = lo.min(*p);
        hi = hi.max(*p);
    }
    if points.is_empty() {
        return Err(DdefError::NoCharges);
    }
    let center = (lo + hi) * 0.5;
    let mut size = (hi - lo).max_element();
    if size <= 0.0 {
        size = 1e-3 * center.abs().max_element().max(1.0);
    }
    // Keep the box representable: at least a few thousand ulps of the coordinates wide.
    size = size.max(1e-12 * center.abs().max_element());
    let half_min = 0.5 * THIN_FRACTION * size;
    let pad = (PAD_FRACTION + margin.max(0.0)) * size;
    for a in 0..3 {
        let half = 0.5 * (hi[a] - lo[a]);
        if half < half_min {
            lo[a] = center[a] - half_min;
            hi[a] = center[a] + half_min;
        }
        lo[a] -= pad;
        hi[a] += pad;
    }
    if !(lo.is_finite() && hi.is_finite()) || (0..3).any(|a| hi[a] <= lo[a]) {
        return Err(DdefError::DegenerateBox { lo, hi });
    }
    Ok((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radical_inverse_mirrors_digits() {
        assert_eq!(radical_inverse(1, 2), 0.5);
        assert_eq!(radical_inverse(6, 2), 0.375); // 110 -> 0.011
        assert!((radical_inverse(5, 3) - (2.0 / 3.0 + 1.0 / 9.0)).abs() < 1e-15);
        // 12 -> 0.21
    }

    #[test]
    fn the_box_contains_every_point_strictly_and_has_volume() {
        let pts = [DVec3::new(0.0, 0.0, 1.0), DVec3::new(2.0, 1.0, 1.0)];
        let (lo, hi) = domain_box(&pts, 0.0).unwrap();
        for p in pts {
            assert!(p.cmpgt(lo).all() && p.cmplt(hi).all());
        }
        assert!((hi.z - lo.z) >= 0.2 - 1e-12, "thin z axis widened");
    }
}
