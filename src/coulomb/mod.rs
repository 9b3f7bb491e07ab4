//! The all-pairs Coulomb sum at native speed (the paper's eq. 8), still the f64 oracle.
//!
//! Charged particles become structure-of-arrays sources ([`Sources`]), walked in chunks
//! of [`LANES`] by a branch-free body that the compiler vectorizes. The forces between
//! all charges ([`forces_into`], in `pairs`) evaluate each pair once and apply it to both
//! sides, in an order fixed by the charge count. The field at any point from all sources
//! but some ([`Sources::field_excluding`], the DDEF far field) walks every source: lane
//! `l` of the accumulator sums the sources `l, l + LANES, ...` in increasing order and the
//! lanes are combined in a fixed tree. Neither depends on the thread count or the rayon
//! split.
//!
//! 1 / r^3 = (r^2)^(-3/2): an IEEE f64 `sqrt` and `/` per pair cost the divider ~5 cycles
//! whatever the vector width, so [`inv_r3`] takes an f32 estimate of r^-1 (exact IEEE f32
//! `sqrt` and `/`, several per cycle) and corrects it in f64 with the series of
//! (1 - e)^(-3/2) to second order in its residual e (2^-22 -> below rounding): within a
//! few f64 ulp of the exact value (tested). Chunks with an r^2 outside the f32 range use
//! the exact f64 expression. r^2, the correction and the accumulation are fused multiply-adds (`f64::mul_add`, one IEEE rounding each):
//! the AVX2+FMA and AVX-512+FMA builds (chosen at run time) issue `vfmadd`, and the
//! portable build computes the very same fused operations (in software where the processor
//! has no FMA, slowly), so every build on every machine gives the same bits. The result
//! differs from the straightforward sequential sum ([`reference`](mod@reference)) only by the
//! reassociation, the fusing and those few ulp per term.
//!
//! Excluded sources (and the ragged last chunk) run on a local copy whose excluded lanes
//! carry charge 0 at the target with r^2 padded by 1, so their terms are exact zeros. A distinct source at distance 0
//! with eps = 0 gives 0 / 0 in its term: a non-finite force, never a silent zero.

use crate::physics::point_charge;
use glam::DVec3;

mod pairs;
pub mod reference;

pub use pairs::forces_into;

/// Sources per vector chunk (8 f64 = one AVX-512 register, two AVX2, four SSE2).
pub const LANES: usize = 8;

/// The charged particles as structure-of-arrays f64, in increasing particle index.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    x: Vec<f64>,
    y: Vec<f64>,
    z: Vec<f64>,
    q: Vec<f64>,
    /// Particle index -> position in the arrays (u32::MAX for an uncharged particle).
    slot: Vec<u32>,
    /// The per-block fields of [`forces_into`], kept between calls.
    field: Vec<f64>,
}

impl Sources {
    /// Refills the arrays from positions and charges, reusing their storage.
    pub fn fill(&mut self, x: &[DVec3], q: &[f64]) {
        assert_eq!(q.len(), x.len(), "coulomb sources: charges");
        for v in [&mut self.x, &mut self.y, &mut self.z, &mut self.q] {
            v.clear();
        }
        self.slot.clear();
        for (p, &c) in x.iter().zip(q) {
            if c != 0.0 {
                self.slot.push(self.q.len() as u32);
                self.x.push(p.x);
                self.y.push(p.y);
                self.z.push(p.z);
                self.q.push(c);
            } else {
                self.slot.push(u32::MAX);
            }
        }
    }

    /// The slot of particle `i`, when it is charged.
    pub fn slot_of(&self, i: usize) -> Option<usize> {
        self.slot
            .get(i)
            .filter(|&&s| s != u32::MAX)
            .map(|&s| s as usize)
    }

    /// Number of charged sources.
    pub fn len(&self) -> usize {
        self.q.len()
    }
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// The field at `p` from every source whose slot is not in `excluded` (increasing),
    /// without k_c: lane l sums slots l, l + LANES, ... in order, whatever is excluded.
    /// Runs the widest vector build the processor has; all give the same bits.
    pub fn field_excluding(&self, p: DVec3, excluded: &[u32], eps2: f64) -> DVec3 {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("fma")
            {
                // SAFETY: the features were just detected on this processor.
                return unsafe { self.field_avx512(p, excluded, eps2) };
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                // SAFETY: as above.
                return unsafe { self.field_avx2(p, excluded, eps2) };
            }
        }
        self.field_portable(p, excluded, eps2)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,fma")]
    fn field_avx512(&self, p: DVec3, excluded: &[u32], eps2: f64) -> DVec3 {
        self.field_portable(p, excluded, eps2)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn field_avx2(&self, p: DVec3, excluded: &[u32], eps2: f64) -> DVec3 {
        self.field_portable(p, excluded, eps2)
    }

    /// The refined sum; should any r^2 fall outside [`inv_r3`]'s range (then rarely),
    /// the whole target again with the exact expression, in the same order.
    #[inline(always)]
    fn field_portable(&self, p: DVec3, excluded: &[u32], eps2: f64) -> DVec3 {
        let (field, in_range) = self.walk::<false>(p, excluded, eps2);
        if in_range {
            field
        } else {
            self.walk::<true>(p, excluded, eps2).0
        }
    }

    /// The chunk walk; `EXACT` picks the per-pair expression. Returns the field and
    /// whether every r^2 was in [`inv_r3`]'s range.
    #[inline(always)]
    fn walk<const EXACT: bool>(&self, p: DVec3, excluded: &[u32], eps2: f64) -> (DVec3, bool) {
        let m = self.len();
        let full = m / LANES;
        let mut acc = Acc::default();
        let mut ex = excluded.iter().map(|&e| e as usize).peekable();
        for c in 0..full {
            let b = c * LANES;
            if ex.peek().is_some_and(|&e| e < b + LANES) {
                let mut mask = [false; LANES];
                while let Some(e) = ex.next_if(|&e| e < b + LANES) {
                    mask[e - b] = true;
                }
                self.masked_chunk::<EXACT>(p, b, &mask, eps2, &mut acc);
            } else {
                acc.add::<EXACT>(
                    p,
                    lanes(&self.x[b..b + LANES]),
                    lanes(&self.y[b..b + LANES]),
                    lanes(&self.z[b..b + LANES]),
                    lanes(&self.q[b..b + LANES]),
                    eps2,
                );
            }
        }
        if full * LANES < m {
            let b = full * LANES;
            let mut mask = [false; LANES];
            for (l, slot) in mask.iter_mut().enumerate() {
                *slot = b + l >= m;
            }
            for e in ex {
                mask[e - b] = true;
            }
            self.masked_chunk::<EXACT>(p, b, &mask, eps2, &mut acc);
        }
        (acc.total(), acc.in_range())
    }

    /// The chunk starting at `b` with the masked lanes (excluded, or past the end) given
    /// charge 0 at the target with r^2 padded by 1: an exact zero term.
    #[inline(always)]
    fn masked_chunk<const EXACT: bool>(
        &self,
        p: DVec3,
        b: usize,
        mask: &[bool; LANES],
        eps2: f64,
        acc: &mut Acc,
    ) {
        let (mut xs, mut ys, mut zs) = ([p.x; LANES], [p.y; LANES], [p.z; LANES]);
        let (mut qs, mut pad) = ([0.0; LANES], [1.0; LANES]);
        for l in 0..LANES {
            if !mask[l] {
                let j = b + l;
                xs[l] = self.x[j];
                ys[l] = self.y[j];
                zs[l] = self.z[j];
                qs[l] = self.q[j];
                pad[l] = 0.0;
            }
        }
        acc.add_padded::<EXACT, true>(p, &xs, &ys, &zs, &qs, &pad, eps2);
    }
}

#[inline(always)]
fn lanes(s: &[f64]) -> &[f64; LANES] {
    s.try_into().expect("a full chunk")
}

/// The r^2 range where [`inv_r3`] is valid: r^2 and r^-1 are normal f32 with room to spare.
const R2_MIN: f64 = 1e-30;
const R2_MAX: f64 = 1e30;

/// `point_charge::factor(1.0, r2)`'s vectorized form: the fast path's one departure from
/// the scalar definition, for the divider's sake (see the module comment).
/// (r^2)^(-3/2) for r^2 in [R2_MIN, R2_MAX]: y0 = 1 / sqrt(r^2) in f32 (relative error
/// |d| <= 2.5 2^-24 from the three f32 roundings), then in f64 e = 1 - r^2 y0^2 (y0^2
/// is exact: 48 significant bits; one rounding in the fused form) and
/// (r^2)^(-3/2) = y0^3 (1 - e)^(-3/2) = y0^3 (1 + 3/2 e + 15/8 e^2 + O(e^3)), |e| <= 2^-21.6,
/// so the dropped 35/16 e^3 is below 2^-64. Six operations where two Newton steps and
/// y^3 take nine; within a few f64 ulp of 1 / (r^2 sqrt(r^2)) (tested).
#[inline(always)]
pub fn inv_r3(r2: f64) -> f64 {
    let y0 = f64::from(1.0 / (r2 as f32).sqrt());
    let y0sq = y0 * y0;
    let e = (-r2).mul_add(y0sq, 1.0);
    (y0sq * y0) * e.mul_add(e.mul_add(15.0 / 8.0, 1.5), 1.0)
}

/// Per-lane partial sums of the field, and whether every r^2 was in [`inv_r3`]'s range.
struct Acc {
    x: [f64; LANES],
    y: [f64; LANES],
    z: [f64; LANES],
    /// Per-lane smallest and largest r^2 seen (a NaN r^2 is never taken: its term is NaN
    /// on either path).
    lo: [f64; LANES],
    hi: [f64; LANES],
}

impl Default for Acc {
    fn default() -> Self {
        Self {
            x: [0.0; LANES],
            y: [0.0; LANES],
            z: [0.0; LANES],
            lo: [R2_MIN; LANES],
            hi: [R2_MAX; LANES],
        }
    }
}

impl Acc {
    /// One chunk: the field terms q / r^3 (x - x_s) of [`reference`], with 1 / r^3 from
    /// [`inv_r3`] or, when `EXACT`, the point-charge factor itself.
    #[inline(always)]
    fn add<const EXACT: bool>(
        &mut self,
        p: DVec3,
        xs: &[f64; LANES],
        ys: &[f64; LANES],
        zs: &[f64; LANES],
        qs: &[f64; LANES],
        eps2: f64,
    ) {
        self.add_padded::<EXACT, false>(p, xs, ys, zs, qs, &[0.0; LANES], eps2);
    }

    /// [`Self::add`] with `pad` added to r^2 when `PAD` (1 on masked lanes, whose d and q
    /// are 0; + 0 leaves the other lanes' r^2 unchanged).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn add_padded<const EXACT: bool, const PAD: bool>(
        &mut self,
        p: DVec3,
        xs: &[f64; LANES],
        ys: &[f64; LANES],
        zs: &[f64; LANES],
        qs: &[f64; LANES],
        pad: &[f64; LANES],
        eps2: f64,
    ) {
        for l in 0..LANES {
            let dx = p.x - xs[l];
            let dy = p.y - ys[l];
            let dz = p.z - zs[l];
            let mut r2 = dz.mul_add(dz, dy.mul_add(dy, dx.mul_add(dx, eps2)));
            if PAD {
                r2 += pad[l];
            }
            let s = if EXACT {
                point_charge::factor(qs[l], r2)
            } else {
                // Selects, not `f64::min`: one vminpd / vmaxpd each, no NaN fix-up.
                self.lo[l] = if r2 < self.lo[l] { r2 } else { self.lo[l] };
                self.hi[l] = if r2 > self.hi[l] { r2 } else { self.hi[l] };
                qs[l] * inv_r3(r2)
            };
            self.x[l] = dx.mul_add(s, self.x[l]);
            self.y[l] = dy.mul_add(s, self.y[l]);
            self.z[l] = dz.mul_add(s, self.z[l]);
        }
    }

    /// Whether every r^2 was in [`inv_r3`]'s range.
    fn in_range(&self) -> bool {
        self.lo.iter().all(|&r| r >= R2_MIN) && self.hi.iter().all(|&r| r <= R2_MAX)
    }

    /// Lanes combined in a fixed pairwise tree.
    #[inline(always)]
    fn total(&self) -> DVec3 {
        let t =
            |a: &[f64; LANES]| ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
        DVec3::new(t(&self.x), t(&self.y), t(&self.z))
    }
}

#[cfg(test)]
mod tests;
