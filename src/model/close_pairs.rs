//! Finding the pairs of points closer than a small distance without an all-pairs loop:
//! the load-time check for charges whose exact Coulomb term is not finite (coincident, or
//! so close that r^2 underflows or k_c q_i q_j / r^3 overflows), in f64 and, for the GPU,
//! in f32.

use glam::DVec3;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiplicative hash of the cell keys (the Fx hash of rustc): several times faster
/// than the default SipHash here, and the keys are not attacker-chosen.
#[derive(Default)]
struct CellHasher(u64);

impl Hasher for CellHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A cell: three indices (or bit patterns, see [`cell`]) and which of them are bits.
type Key = ([i64; 3], u8);

/// Cell -> the highest point index in it; the others follow through `next` links, so a
/// cell costs one map entry and no allocation of its own.
type Heads = HashMap<Key, u32, BuildHasherDefault<CellHasher>>;

const NONE: u32 = u32::MAX;

/// Cell key of one coordinate for cells of size `t`. Values of magnitude below 2^60 t get
/// the index floor(x / t) (pairs within t are in the same or adjacent cells); larger ones
/// are at least 256 t apart when distinct (their spacing in f64, and so in f32, is
/// 2^-52 |x| >= 256 t), so only equal values can be within t: they key on their bits.
fn cell(x: f64, t: f64) -> (bool, i64) {
    let s = x / t;
    if s.abs() < (1u64 << 60) as f64 {
        (false, s.floor() as i64)
    } else {
        (true, (x + 0.0).to_bits() as i64)
    }
}

/// The first pair `(a, b)`, `a < b` in lexicographic order, of the points `p` (given by
/// index into `points`) within distance `t` of each other for which `bad(a, b)` holds.
/// `bad` must only hold for pairs closer than `t`; a non-finite or zero `t` checks every
/// pair. Expected cost O(n) for points spread out on the scale of `t`.
pub fn first_close_pair(
    points: &[DVec3],
    t: f64,
    mut bad: impl FnMut(usize, usize) -> bool,
) -> Option<(usize, usize)> {
    let n = points.len();
    if !(t.is_finite() && t > 0.0) {
        return (0..n).find_map(|a| (a + 1..n).find(|&b| bad(a, b)).map(|b| (a, b)));
    }
    if n >= NONE as usize {
        // Indices are u32 below (System::MAX_PARTICLES is far smaller).
        return (0..n).find_map(|a| (a + 1..n).find(|&b| bad(a, b)).map(|b| (a, b)));
    }
    let key = |p: DVec3| -> Key {
        let c = [cell(p.x, t), cell(p.y, t), cell(p.z, t)];
        (
            c.map(|(_, v)| v),
            c.iter()
                .enumerate()
                .map(|(k, &(big, _))| u8::from(big) << k)
                .sum(),
        )
    };
    let mut heads = Heads::default();
    heads.reserve(n);
    let next: Vec<u32> = points
        .iter()
        .enumerate()
        .map(|(i, &p)| heads.insert(key(p), i as u32).unwrap_or(NONE))
        .collect();
    let mut best: Option<(usize, usize)> = None;
    for (a, &p) in points.iter().enumerate() {
        if best.is_some_and(|(ba, _)| ba < a) {
            break;
        }
        let (k, big) = key(p);
        let span = |axis: u32| {
            if (big >> axis) & 1 == 1 {
                0..=0
            } else {
                -1..=1
            }
        };
        for dx in span(0) {
            for dy in span(1) {
                for dz in span(2) {
                    let nk = (
                        [
                            k[0].wrapping_add(dx),
                            k[1].wrapping_add(dy),
                            k[2].wrapping_add(dz),
                        ],
                        big,
                    );
                    let mut b = heads.get(&nk).copied().unwrap_or(NONE);
                    while b != NONE {
                        let bi = b as usize;
                        if bi > a && best.is_none_or(|(_, bb)| bi < bb) && bad(a, bi) {
                            best = Some((a, bi));
                        }
                        b = next[bi];
                    }
                }
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(p: &[DVec3], t: f64) -> Option<(usize, usize)> {
        let n = p.len();
        (0..n).find_map(|a| {
            (a + 1..n)
                .find(|&b| p[a].distance(p[b]) < t)
                .map(|b| (a, b))
        })
    }

    #[test]
    fn finds_the_same_first_pair_as_the_all_pairs_loop() {
        let t = 1e-3;
        let mut pts: Vec<DVec3> = (0..400)
            .map(|i| DVec3::new((i % 20) as f64, (i / 20) as f64, 0.5) * 0.01)
            .collect();
        assert_eq!(
            first_close_pair(&pts, t, |a, b| pts[a].distance(pts[b]) < t),
            None
        );
        // Near pairs across cell boundaries, exact duplicates, and huge coordinates.
        pts[250] = pts[17] + DVec3::new(0.9e-3, 0.0, 0.0);
        pts[90] = pts[33] + DVec3::new(-2e-4, 3e-4, -1e-4);
        pts.push(DVec3::splat(1e200));
        pts.push(DVec3::splat(1e200));
        let f = |p: &[DVec3]| first_close_pair(p, t, |a, b| p[a].distance(p[b]) < t);
        assert_eq!(f(&pts), brute(&pts, t));
        assert_eq!(f(&pts), Some((17, 250)));
        let far = pts.len() - 1;
        assert_eq!(f(&pts[90..]), Some((far - 91, far - 90)));
        // Tiny cells around the origin: distinct subnormal-scale neighbours.
        let tiny = [DVec3::ZERO, DVec3::new(1e-300, 0.0, 0.0), DVec3::X];
        assert_eq!(
            first_close_pair(&tiny, 1e-154, |a, b| tiny[a].distance(tiny[b]) < 1e-154),
            Some((0, 1))
        );
    }
}
