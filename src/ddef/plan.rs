//! The lattice DDEF's plan and frame: the policy both backends follow, so the GPU kernels
//! and this f64 reference build the same lattice from the same charges.
//!
//! - **Plan** (set-up, and a re-plan between steps when the box drifted): the box quantum
//!   Q (a power of two near 1/64 of the charges' extent), the minimum extent of a thin
//!   axis (in quanta), the sites per axis (fixed until the next plan: the rule of
//!   [`Lattice::dims_for`] on the planned box) and the planned extents.
//! - **Frame** (every evaluation): the charges' bounding box, rounded outward to whole
//!   quanta (so the box is piecewise constant in the positions) and widened to the minimum
//!   extent on a thin axis; the cell size per axis is its extent over the fixed cells.
//!   All box arithmetic is on integers (quanta), exact in f32 and f64 alike.
//! - **Location**, in closed form: cell from a floor (clamped), Kuhn type from the order of
//!   the fractional coordinates (descending, ties in axis order), barycentric weights
//!   (1 - f_a, f_a - f_b, f_b - f_c, f_c) over the path 0, e_a, e_a + e_b, 1 of the cell.
//!   Tetrahedron t = 6 cell + type, cells x-fastest; site j = (k r_y + j) r_x + i.
//! - **Drift**: a frame whose extents changed aspect by more than [`DRIFT_ASPECT`] against
//!   the plan, or whose largest extent left [`MIN_QUANTA`]..=[`MAX_QUANTA`] quanta, or
//!   whose corners passed [`MAX_COORD_QUANTA`], asks for a re-plan (the GPU raises a flag
//!   the host reads with the energies; the run re-plans between steps).
//!
//! **Degenerate charge sets** (coplanar, collinear, one point): an axis thinner than
//! [`THIN_FRACTION`] of the largest extent gets 3 sites and a box two cells wide (cells as
//! wide as the other axes'), centred on the charges' middle (rounded to a quantum
//! 2^[`THIN_REFINE`] times finer), so its middle lattice plane runs through the charges
//! and the other axes get the rest of the sites. Cells keep their volume, and an
//! exactly coplanar (collinear) set is interpolated from sites in its plane (line) only:
//! the field has no spurious normal component, which would otherwise push the charges off
//! their plane and grow (measured: docs/guide.md, "DDEF").

use super::halton::THIN_FRACTION;
use super::lattice::Lattice;
use super::DdefError;
use glam::DVec3;

/// The box quantum is the power of two Q with extent / Q in [64, 128).
pub const QUANTA_PER_EXTENT: f64 = 64.0;
/// A re-plan when the extents' ratios changed by more than this factor.
pub const DRIFT_ASPECT: i64 = 2;
/// A re-plan when the largest extent falls below this many quanta (the outward rounding
/// then pads the box by more than a few percent) ...
pub const MIN_QUANTA: i64 = 16;
/// ... or grows past this many.
pub const MAX_QUANTA: i64 = 4096;
/// A re-plan when a box corner passes this many quanta from the origin, and the plan keeps
/// corners within half of it: box coordinates stay exact f32 integers times Q.
pub const MAX_COORD_QUANTA: i64 = 1 << 23;
/// A thin axis's middle is rounded to Q / 2^THIN_REFINE, so an exactly coplanar or
/// collinear set lies on a lattice plane (to that resolution).
pub const THIN_REFINE: i32 = 10;
/// Kuhn tetrahedra per cell.
pub const KUHN: usize = 6;

/// The axis orders (a, b, c) of a cell's 6 Kuhn tetrahedra, by type (`kuhn_type`).
pub const ORDERS: [[usize; 3]; KUHN] = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
];

/// Type of an axis order in [`ORDERS`].
#[inline]
pub fn kuhn_type(o: [usize; 3]) -> usize {
    2 * o[0] + usize::from(o[1] > o[2])
}

/// A lattice plan: fixed between re-plans (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatticePlan {
    /// log2 of the box quantum Q.
    pub log2_quantum: i32,
    /// log2 of the finer quantum a thin axis's middle is rounded to.
    pub log2_fine: i32,
    /// The box width of a thin axis, in quanta (even): two cells as wide as the others.
    pub thin_quanta: i64,
    /// The axes that were thin when planned (3 sites each).
    pub thin: [bool; 3],
    /// The planned box extent per axis, in quanta (the drift test's reference).
    pub planned_quanta: [i64; 3],
    /// Sites per axis, each >= 2; 3 on an axis that was thin when planned.
    pub dims: [u32; 3],
    /// m, as resolved for this plan.
    pub samples: u32,
}

/// One evaluation's box and cells under a plan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frame {
    /// The charges' bounds rounded outward to quanta (the drift test's corners).
    pub lo_q: [i64; 3],
    pub hi_q: [i64; 3],
    /// The box extent per axis in quanta (a thin axis: the plan's `thin_quanta`).
    pub ext_q: [i64; 3],
    /// Box corners (m).
    pub lo: DVec3,
    pub hi: DVec3,
    /// Sites per axis (the plan's).
    pub dims: [u32; 3],
    /// Cell edge per axis, extent / (dims - 1), and its inverse.
    pub h: DVec3,
    pub inv_h: DVec3,
}

/// A point's place in a frame: cell, Kuhn type, tetrahedron and weights over the path
/// vertices 0, e_a, e_a + e_b, 1 of the cell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Located {
    pub cell: [u32; 3],
    pub kuhn: u8,
    pub tet: u32,
    pub weights: [f64; 4],
}

/// Bounding box of `points` (errors on none, or on a non-finite one, naming it).
pub fn bounds(
    points: impl IntoIterator<Item = (usize, DVec3)>,
) -> Result<(DVec3, DVec3), DdefError> {
    let mut lo = DVec3::splat(f64::INFINITY);
    let mut hi = DVec3::splat(f64::NEG_INFINITY);
    let mut any = false;
    for (i, p) in points {
        if !p.is_finite() {
            return Err(DdefError::NonFinitePosition { index: i });
        }
        lo = lo.min(p);
        hi = hi.max(p);
        any = true;
    }
    if any {
        Ok((lo, hi))
    } else {
        Err(DdefError::NoCharges)
    }
}

/// floor(v / Q) and ceil(v / Q) as integers, Q = 2^e (exact: a scaling by a power of
/// two), clamped to +-2^29 as the GPU's i32 are (far past any plan's corners, so the
/// drift test fires first).
fn quanta(v: f64, log2_q: i32) -> (i64, i64) {
    let s = v * (-f64::from(log2_q)).exp2();
    let c = |x: f64| x.clamp(-(2f64.powi(29)), 2f64.powi(29)) as i64;
    (c(s.floor()), c(s.ceil()))
}

impl LatticePlan {
    /// The plan for charges with bounding box [lo, hi] and `samples` = m.
    pub fn new(lo: DVec3, hi: DVec3, samples: u32) -> Result<Self, DdefError> {
        if !(lo.is_finite() && hi.is_finite()) || (0..3).any(|a| hi[a] < lo[a]) {
            return Err(DdefError::DegenerateBox { lo, hi });
        }
        let limit = super::DdefConfig::MAX_SAMPLES;
        if samples > limit {
            return Err(DdefError::TooManySamples {
                samples: samples as usize,
                limit: limit as usize,
            });
        }
        let far = lo.abs().max(hi.abs()).max_element();
        let mut size = (hi - lo).max_element();
        if size <= 0.0 {
            // One point (or all charges at one place): a small box around it.
            size = 1e-3 * far.max(1.0);
        }
        // A box narrower than this would be below f32's resolution of its coordinates.
        size = size.max(far * 2f64.powi(-14));
        let fine = (size / QUANTA_PER_EXTENT).log2().floor() as i32;
        // Corners within MAX_COORD_QUANTA / 2 quanta of the origin.
        let coarse = (far / (MAX_COORD_QUANTA / 2) as f64).log2().ceil() as i32;
        let log2_quantum = fine.max(coarse).clamp(-120, 120);
        let log2_fine = (log2_quantum - THIN_REFINE).max(coarse).clamp(-130, 120);
        let q = f64::from(log2_quantum).exp2();
        // Thin axes (narrower than THIN_FRACTION of the largest) get 3 sites, the others
        // share the rest; a thin axis's box is two cells as wide as the others' (cubes),
        // and an axis too wide for that box is not thin after all.
        let raw = [0, 1, 2]
            .map(|a| (quanta(hi[a], log2_quantum).1 - quanta(lo[a], log2_quantum).0).max(1));
        let ext = DVec3::from_array(raw.map(|k| k as f64 * q));
        let mut thin = raw.map(|k| (k as f64) * q < THIN_FRACTION * size);
        let (dims, thin_quanta) = loop {
            let dims = Lattice::dims_with(ext, samples as usize, thin.map(|t| t.then_some(3)));
            let cell = (0..3)
                .filter(|&a| !thin[a])
                .map(|a| ext[a] / (dims[a] - 1) as f64)
                .fold(f64::INFINITY, f64::min);
            let cell = if cell.is_finite() { cell } else { 0.5 * size };
            let w = 2 * (cell / q).ceil().max(1.0) as i64;
            match (0..3).find(|&a| thin[a] && raw[a] >= w) {
                Some(a) => thin[a] = false,
                None => break (dims, w),
            }
        };
        let mut plan = Self {
            log2_quantum,
            log2_fine,
            thin_quanta,
            thin,
            planned_quanta: [0; 3],
            dims: dims.map(|r| r as u32),
            samples,
        };
        plan.planned_quanta = plan.frame(lo, hi).ext_q;
        let tets = KUHN as u64 * dims.iter().map(|&r| r as u64 - 1).product::<u64>();
        if tets >= u64::from(u32::MAX) {
            return Err(DdefError::TooManySamples {
                samples: samples as usize,
                limit: limit as usize,
            });
        }
        Ok(plan)
    }

    /// A new plan on the box of `frame` (a drifted frame of this plan), same m.
    pub fn replanned(&self, frame: &Frame) -> Result<Self, DdefError> {
        self.replanned_box(frame.lo, frame.hi)
    }

    /// A new plan on the box [lo, hi] (a frame's: the GPU's f32 corners are whole numbers
    /// of quanta, the same as the CPU's), same m.
    pub fn replanned_box(&self, lo: DVec3, hi: DVec3) -> Result<Self, DdefError> {
        Self::new(lo, hi, self.samples)
    }

    /// The box quantum Q (m).
    pub fn quantum(&self) -> f64 {
        f64::from(self.log2_quantum).exp2()
    }

    /// Grid sites r_x r_y r_z.
    pub fn sites(&self) -> usize {
        self.dims.iter().map(|&r| r as usize).product()
    }

    /// Cells (r_x - 1)(r_y - 1)(r_z - 1).
    pub fn cells(&self) -> usize {
        self.dims.iter().map(|&r| r as usize - 1).product()
    }

    /// Kuhn tetrahedra, 6 per cell.
    pub fn tets(&self) -> usize {
        KUHN * self.cells()
    }

    /// The frame of charges with bounding box [lo, hi]: rounded outward to quanta (at least
    /// one); a thin axis narrower than `thin_quanta` quanta gets a box that wide, centred on
    /// its middle rounded to the fine quantum (see the module doc).
    pub fn frame(&self, lo: DVec3, hi: DVec3) -> Frame {
        let (e, ef) = (self.log2_quantum, self.log2_fine);
        let mut f = Frame {
            lo_q: [0; 3],
            hi_q: [0; 3],
            ext_q: [0; 3],
            lo: DVec3::ZERO,
            hi: DVec3::ZERO,
            dims: self.dims,
            h: DVec3::ZERO,
            inv_h: DVec3::ZERO,
        };
        let q = self.quantum();
        for a in 0..3 {
            f.lo_q[a] = quanta(lo[a], e).0;
            f.hi_q[a] = quanta(hi[a], e).1;
            if !self.thin[a] || f.hi_q[a] - f.lo_q[a] >= self.thin_quanta {
                // At least one quantum (all charges on one plane of a thick axis).
                f.hi_q[a] = f.hi_q[a].max(f.lo_q[a] + 1);
                f.ext_q[a] = f.hi_q[a] - f.lo_q[a];
                f.lo[a] = f.lo_q[a] as f64 * q;
                f.hi[a] = f.hi_q[a] as f64 * q;
            } else {
                // Twice the middle and the half width, in fine quanta.
                let c2 = quanta(lo[a], ef).0 + quanta(hi[a], ef).1;
                let w = self.thin_quanta << (e - ef);
                let half_fine = 0.5 * f64::from(ef).exp2();
                f.ext_q[a] = self.thin_quanta;
                f.lo[a] = (c2 - w) as f64 * half_fine;
                f.hi[a] = (c2 + w) as f64 * half_fine;
            }
        }
        let cells = DVec3::from_array(self.dims.map(|r| f64::from(r - 1)));
        f.h = (f.hi - f.lo) / cells;
        f.inv_h = cells / (f.hi - f.lo);
        f
    }

    /// Whether `frame` asks for a re-plan (integer tests, the GPU's exactly).
    pub fn drifted(&self, frame: &Frame) -> bool {
        let ext = frame.ext_q;
        let largest = *ext.iter().max().expect("three axes");
        if !(MIN_QUANTA..=MAX_QUANTA).contains(&largest) {
            return true;
        }
        let corner = (0..3)
            .map(|a| frame.lo_q[a].abs().max(frame.hi_q[a].abs()))
            .max()
            .unwrap_or(0);
        if corner > MAX_COORD_QUANTA {
            return true;
        }
        let p = self.planned_quanta;
        (0..3).any(|a| (0..3).any(|b| ext[a] * p[b] > DRIFT_ASPECT * ext[b] * p[a]))
    }
}

impl Frame {
    /// Tetrahedron index of Kuhn type `kuhn` in `cell`.
    #[inline]
    pub fn tet_id(&self, cell: [u32; 3], kuhn: usize) -> u32 {
        let [rx, ry, _] = self.dims;
        ((cell[2] * (ry - 1) + cell[1]) * (rx - 1) + cell[0]) * KUHN as u32 + kuhn as u32
    }

    /// The cell and Kuhn type of tetrahedron `tet`.
    #[inline]
    pub fn tet_cell(&self, tet: u32) -> ([u32; 3], usize) {
        let [rx, ry, _] = self.dims;
        let c = tet / KUHN as u32;
        let (x, yz) = (c % (rx - 1), c / (rx - 1));
        (
            [x, yz % (ry - 1), yz / (ry - 1)],
            (tet % KUHN as u32) as usize,
        )
    }

    /// Site index of lattice point (i, j, k).
    #[inline]
    pub fn site_id(&self, p: [u32; 3]) -> u32 {
        let [rx, ry, _] = self.dims;
        (p[2] * ry + p[1]) * rx + p[0]
    }

    /// Lattice point of site `j`.
    #[inline]
    pub fn site_point(&self, j: u32) -> [u32; 3] {
        let [rx, ry, _] = self.dims;
        [j % rx, (j / rx) % ry, j / (rx * ry)]
    }

    /// Position of lattice point `p` (the last plane exactly at the upper corner).
    pub fn site(&self, p: [u32; 3]) -> DVec3 {
        DVec3::from_array([0, 1, 2].map(|a| {
            if p[a] + 1 == self.dims[a] {
                self.hi[a]
            } else {
                self.lo[a] + f64::from(p[a]) * self.h[a]
            }
        }))
    }

    /// Whether `p` lies in the (closed) box.
    pub fn contains(&self, p: DVec3) -> bool {
        p.cmpge(self.lo).all() && p.cmple(self.hi).all()
    }

    /// The tetrahedron of `p` and its weights (see the module doc). Points outside the box
    /// (or not finite) are clamped into it: callers check [`Self::contains`] first.
    pub fn locate(&self, p: DVec3) -> Located {
        let mut cell = [0u32; 3];
        let mut f = [0.0f64; 3];
        for a in 0..3 {
            let cells = self.dims[a] - 1;
            let u = (p[a] - self.lo[a]) * self.inv_h[a];
            // `!(u > 0)` also takes a NaN to cell 0.
            let c = if u > 0.0 {
                (u.floor() as u32).min(cells - 1)
            } else {
                0
            };
            cell[a] = c;
            f[a] = (u - f64::from(c)).clamp(0.0, 1.0);
            if f[a].is_nan() {
                f[a] = 0.0;
            }
        }
        // Axes by decreasing f, ties in axis order.
        let mut o = [0usize, 1, 2];
        o.sort_by(|&x, &y| f[y].total_cmp(&f[x]));
        let [a, b, c] = o;
        let kuhn = kuhn_type(o);
        Located {
            cell,
            kuhn: kuhn as u8,
            tet: self.tet_id(cell, kuhn),
            weights: [1.0 - f[a], f[a] - f[b], f[b] - f[c], f[c]],
        }
    }

    /// The weights' derivative with respect to the point (rows: the four path vertices),
    /// constant inside a tetrahedron: d f_a / dx = e_a / h_a.
    pub fn weight_gradients(&self, kuhn: usize) -> [DVec3; 4] {
        let [a, b, c] = ORDERS[kuhn];
        let g = |axis: usize| {
            let mut v = DVec3::ZERO;
            v[axis] = self.inv_h[axis];
            v
        };
        [-g(a), g(a) - g(b), g(b) - g(c), g(c)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_indexed_consistently() {
        for (i, &o) in ORDERS.iter().enumerate() {
            assert_eq!(kuhn_type(o), i);
        }
    }

    #[test]
    fn the_box_is_piecewise_constant_and_holds_the_charges() {
        let plan = LatticePlan::new(DVec3::ZERO, DVec3::new(1.0, 0.5, 0.25), 1000).unwrap();
        // extent / Q in [64, 128): Q = 2^-6.
        assert_eq!(plan.log2_quantum, -6);
        let f0 = plan.frame(DVec3::splat(0.001), DVec3::new(0.99, 0.49, 0.24));
        let f1 = plan.frame(DVec3::splat(0.002), DVec3::new(0.991, 0.491, 0.241));
        assert_eq!(
            f0, f1,
            "a small move inside the same quanta keeps the frame"
        );
        assert!(f0.lo.cmple(DVec3::splat(0.001)).all());
        assert!(f0.hi.cmpge(DVec3::new(0.99, 0.49, 0.24)).all());
        assert!(!plan.drifted(&f0));
        // Stretched along x by 3: the aspect drifted.
        let f2 = plan.frame(DVec3::ZERO, DVec3::new(3.0, 0.5, 0.25));
        assert!(plan.drifted(&f2));
        // Uniformly grown by 1.5: no drift.
        assert!(!plan.drifted(&plan.frame(DVec3::ZERO, DVec3::new(1.5, 0.75, 0.375))));
    }

    #[test]
    fn thin_axes_are_widened_and_location_is_closed_form() {
        // Coplanar charges: z has no extent.
        let plan = LatticePlan::new(DVec3::ZERO, DVec3::new(1.0, 1.0, 0.0), 1000).unwrap();
        let f = plan.frame(DVec3::ZERO, DVec3::new(1.0, 1.0, 0.0));
        assert!(f.hi.z - f.lo.z >= 0.1 - 1e-12, "{f:?}");
        assert!(f.lo.z < 0.0 && f.hi.z > 0.0);
        assert!(
            plan.dims[2] % 2 == 1 && plan.dims[0] > plan.dims[2],
            "{:?}",
            plan.dims
        );
        // The middle lattice plane holds the charges.
        let mid = f.site([0, 0, plan.dims[2] / 2]);
        assert_eq!(mid.z, 0.0);
        // Off the origin, at a height that is not a whole number of quanta.
        let z = 0.123_456_789;
        let g = plan.frame(DVec3::new(0.0, 0.0, z), DVec3::new(1.0, 1.0, z));
        let c = g.site([0, 0, plan.dims[2] / 2]).z;
        assert!(
            (c - z).abs() <= plan.quantum() / 2048.0 + 1e-15,
            "{c} vs {z}"
        );
        for p in [
            DVec3::new(0.3, 0.7, 0.0),
            DVec3::new(1.0, 1.0, 0.0),
            DVec3::ZERO,
        ] {
            let l = f.locate(p);
            let w = l.weights;
            assert!(w.iter().all(|&x| x >= 0.0) && (w.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            // The weights reproduce the point.
            let [a, b, _] = ORDERS[l.kuhn as usize];
            let base = l.cell;
            let mut v = [base; 4];
            v[1][a] += 1;
            v[2][a] += 1;
            v[2][b] += 1;
            v[3] = base.map(|c| c + 1);
            let q: DVec3 = (0..4).map(|k| f.site(v[k]) * w[k]).sum();
            assert!((q - p).length() < 1e-12, "{p} -> {q}");
        }
    }
}
