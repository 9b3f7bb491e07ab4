//! The lattice grid: an alternative to Halton samples + Delaunay with no tetrahedralization
//! step, suited to a GPU. Sites form a regular r_x x r_y x r_z lattice over the padded
//! box; every cell is split into the 6 Kuhn (Freudenthal) tetrahedra around its main
//! diagonal, all cells the same way, so faces match across cells. All in closed form:
//!
//! - location: per axis the cell from floor((p - lo) / h) (clamped, so the box's upper
//!   faces belong to the last cell) and the fractional coordinate f in [0, 1]; the
//!   tetrahedron from the order of the f (descending: axes a, b, c); the weights
//!   (1 - f_a, f_a - f_b, f_b - f_c, f_c) over the path 0, e_a, e_a + e_b, e_a + e_b + e_c;
//! - neighbours (path vertex k opposite the face): k = 0, cell + e_a with order (b, c, a);
//!   k = 3, cell - e_c with (c, a, b); k = 1, the same cell with (b, a, c); k = 2, the
//!   same cell with (a, c, b); none where that cell is outside the lattice (a box face).
//!
//! The lattice is Delaunay (degenerately): a cell's 8 corners are cospherical and every
//! other site lies strictly outside their sphere, for any increasing axis coordinates, so
//! [`Tetrahedralization::check`] (exact predicates) holds on the rounded coordinates too.
//!
//! Sizes: r_x r_y r_z close to m + 8 (the Delaunay grid's site count for m samples) with
//! cells as close to cubes as whole numbers allow: the cell edge h solves
//! prod_a (e_a / h + 1) = m + 8 for the box extents e_a, then each r_a is e_a / h + 1
//! rounded down or up (at least 2), the combination whose product is nearest m + 8
//! (ties: the most cubic cells). m = 0 gives the 8 corners and the 6 tetrahedra of the
//! Delaunay grid's corner triangulation.
//!
//! Sites are numbered like the Delaunay grid's: the 8 box corners first (corner bits
//! x = 1, y = 2, z = 4), then the other lattice sites in x-fastest order.

use super::delaunay::{orient, Tetrahedralization, NONE};
use super::DdefError;
use glam::DVec3;

/// The axis orders (a, b, c) of a cell's 6 Kuhn tetrahedra, by index (`order_index`).
const ORDERS: [[usize; 3]; 6] = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
];

/// Index of an axis order in [`ORDERS`].
#[inline]
fn order_index(o: [usize; 3]) -> usize {
    2 * o[0] + usize::from(o[1] > o[2])
}

/// Corner offsets (bits x = 1, y = 2, z = 4) of the path 0, e_a, e_a + e_b, 1.
#[inline]
fn path_offsets(o: [usize; 3]) -> [u32; 4] {
    let (a, b) = (1u32 << o[0], 1u32 << o[1]);
    [0, a, a | b, 7]
}

/// A regular lattice of sites over a box and its Kuhn tetrahedra (see the module doc).
#[derive(Clone, Debug)]
pub struct Lattice {
    lo: DVec3,
    hi: DVec3,
    /// Sites per axis, each >= 2.
    dims: [usize; 3],
    /// Site coordinates per axis, strictly increasing, first lo, last hi.
    coords: [Vec<f64>; 3],
    /// Per axis order: the path vertex stored in each slot (v0 and v1 swapped where the
    /// path tetrahedron is negatively oriented, so stored tetrahedra are positive).
    slot_path: [[usize; 4]; 6],
}

impl Lattice {
    /// Sites per axis for a box of extents `ext` and `samples` = m (see the module doc).
    pub fn dims_for(ext: DVec3, samples: usize) -> [usize; 3] {
        Self::dims_with(ext, samples, [None; 3])
    }

    /// [`Self::dims_for`] with the sites of some axes given (`fixed`): the others share
    /// m + 8 sites over their extents by the same rule.
    pub fn dims_with(ext: DVec3, samples: usize, fixed: [Option<usize>; 3]) -> [usize; 3] {
        let given: f64 = fixed.iter().flatten().map(|&r| r as f64).product();
        let target = ((samples as f64 + 8.0) / given).max(1.0);
        let free: Vec<usize> = (0..3).filter(|&a| fixed[a].is_none()).collect();
        let e = [ext.x, ext.y, ext.z];
        let base = fixed.map(|r| r.unwrap_or(2).max(2));
        let emax = free.iter().map(|&a| e[a]).fold(0.0, f64::max);
        if free.is_empty() || !(emax.is_finite() && free.iter().all(|&a| e[a] > 0.0)) {
            return base;
        }
        let count = |h: f64| free.iter().map(|&a| e[a] / h + 1.0).product::<f64>();
        // count(emax / target) > target >= count(emax) when target >= 2^free; count
        // decreases in h.
        let (mut small, mut big) = (emax / target, emax);
        for _ in 0..200 {
            let mid = 0.5 * (small + big);
            if count(mid) > target {
                small = mid;
            } else {
                big = mid;
            }
        }
        let h = 0.5 * (small + big);
        let options = e.map(|x| {
            let r = x / h + 1.0;
            [(r.floor() as usize).max(2), (r.ceil() as usize).max(2)]
        });
        let mut best = base;
        let mut best_key = (f64::INFINITY, f64::INFINITY);
        for pick in 0..8usize {
            if free
                .iter()
                .any(|&a| (pick >> a) & 1 == 1 && options[a][0] == options[a][1])
            {
                continue;
            }
            let r = [0, 1, 2].map(|a| fixed[a].unwrap_or(options[a][(pick >> a) & 1]));
            let prod = free.iter().map(|&a| r[a] as f64).product::<f64>();
            let cells = free.iter().map(|&a| e[a] / (r[a] - 1) as f64);
            let (hi, lo) = cells.fold((0.0, f64::INFINITY), |(x, y), c| {
                (f64::max(x, c), f64::min(y, c))
            });
            let key = ((prod / target).ln().abs(), hi / lo);
            if key < best_key {
                best_key = key;
                best = r;
            }
        }
        best
    }

    /// The lattice for `samples` = m on the box [lo, hi] and its tetrahedralization.
    pub fn build(
        lo: DVec3,
        hi: DVec3,
        samples: usize,
    ) -> Result<(Self, Tetrahedralization), DdefError> {
        let degenerate = DdefError::DegenerateBox { lo, hi };
        if !(lo.is_finite() && hi.is_finite()) || (0..3).any(|a| hi[a] <= lo[a]) {
            return Err(degenerate);
        }
        let dims = Self::dims_for(hi - lo, samples);
        let [rx, ry, rz] = dims;
        let sites = rx * ry * rz;
        let tets = 6 * (rx - 1) * (ry - 1) * (rz - 1);
        if tets >= NONE as usize {
            return Err(DdefError::TooManySamples {
                samples,
                limit: NONE as usize / 6,
            });
        }
        let coords = [0, 1, 2].map(|a| {
            let r = dims[a];
            (0..r)
                .map(|i| {
                    if i + 1 == r {
                        hi[a]
                    } else {
                        lo[a] + (hi[a] - lo[a]) * (i as f64 / (r - 1) as f64)
                    }
                })
                .collect::<Vec<f64>>()
        });
        if coords.iter().any(|c| c.windows(2).any(|w| w[1] <= w[0])) {
            // Cells below the coordinates' resolution.
            return Err(degenerate);
        }
        let slot_path = ORDERS.map(|o| {
            let v = path_offsets(o)
                .map(|c| DVec3::new((c & 1) as f64, ((c >> 1) & 1) as f64, ((c >> 2) & 1) as f64));
            if orient(v[0], v[1], v[2], v[3]) < 0.0 {
                [1, 0, 2, 3]
            } else {
                [0, 1, 2, 3]
            }
        });
        let lattice = Self {
            lo,
            hi,
            dims,
            coords,
            slot_path,
        };

        // Site numbers: the 8 corners, then the rest in x-fastest order.
        let natural = |i: usize, j: usize, k: usize| i + rx * (j + ry * k);
        let mut site_of = vec![NONE; sites];
        for c in 0..8usize {
            let pick = |bit: usize, r: usize| if c & bit != 0 { r - 1 } else { 0 };
            site_of[natural(pick(1, rx), pick(2, ry), pick(4, rz))] = c as u32;
        }
        let mut next = 8u32;
        for s in site_of.iter_mut() {
            if *s == NONE {
                *s = next;
                next += 1;
            }
        }
        let mut points = vec![DVec3::ZERO; sites];
        for k in 0..rz {
            for j in 0..ry {
                for i in 0..rx {
                    points[site_of[natural(i, j, k)] as usize] = DVec3::new(
                        lattice.coords[0][i],
                        lattice.coords[1][j],
                        lattice.coords[2][k],
                    );
                }
            }
        }

        let mut tet_list = Vec::with_capacity(tets);
        let mut neighbors = Vec::with_capacity(tets);
        for k in 0..rz - 1 {
            for j in 0..ry - 1 {
                for i in 0..rx - 1 {
                    let cell = [i, j, k];
                    for (oi, &o) in ORDERS.iter().enumerate() {
                        let path = path_offsets(o).map(|c| {
                            let c = c as usize;
                            site_of[natural(i + (c & 1), j + ((c >> 1) & 1), k + ((c >> 2) & 1))]
                        });
                        let [a, b, c] = o;
                        let mut up = cell;
                        up[a] += 1;
                        let across0 = if up[a] + 1 < dims[a] {
                            lattice.tet_id(up, order_index([b, c, a]))
                        } else {
                            NONE
                        };
                        let across3 = if cell[c] > 0 {
                            let mut down = cell;
                            down[c] -= 1;
                            lattice.tet_id(down, order_index([c, a, b]))
                        } else {
                            NONE
                        };
                        let path_nbr = [
                            across0,
                            lattice.tet_id(cell, order_index([b, a, c])),
                            lattice.tet_id(cell, order_index([a, c, b])),
                            across3,
                        ];
                        let sp = lattice.slot_path[oi];
                        tet_list.push(sp.map(|p| path[p]));
                        neighbors.push(sp.map(|p| path_nbr[p]));
                    }
                }
            }
        }
        let point_tet = points
            .iter()
            .map(|&p| lattice.locate(p).map_or(NONE, |(t, _)| t))
            .collect();
        let tri = Tetrahedralization::from_parts(points, tet_list, neighbors, point_tet, lo, hi);
        Ok((lattice, tri))
    }

    /// Sites per axis.
    pub fn dims(&self) -> [usize; 3] {
        self.dims
    }
    /// Site coordinates along axis `a` (0..3), increasing.
    pub fn axis_coords(&self, a: usize) -> &[f64] {
        &self.coords[a]
    }
    pub fn bounds(&self) -> (DVec3, DVec3) {
        (self.lo, self.hi)
    }

    /// Tetrahedron index of axis order `oi` in cell (i, j, k): 6 per cell, x-fastest.
    #[inline]
    fn tet_id(&self, cell: [usize; 3], oi: usize) -> u32 {
        let [rx, ry, _] = self.dims;
        (((cell[2] * (ry - 1) + cell[1]) * (rx - 1) + cell[0]) * 6 + oi) as u32
    }

    /// Cell index and fractional coordinate in [0, 1] of `v` along axis `a` (v in the
    /// box). The rounded floor is corrected against the stored coordinates and clamped, so
    /// a v on a lattice plane or on the upper box face gets a cell that contains it.
    #[inline]
    fn axis_cell(&self, a: usize, v: f64) -> (usize, f64) {
        let c = &self.coords[a];
        let cells = c.len() - 1;
        let u = (v - self.lo[a]) / (self.hi[a] - self.lo[a]) * cells as f64;
        let mut i = if u > 0.0 {
            (u as usize).min(cells - 1)
        } else {
            0
        };
        while i > 0 && v < c[i] {
            i -= 1;
        }
        while i + 1 < cells && v > c[i + 1] {
            i += 1;
        }
        let f = ((v - c[i]) / (c[i + 1] - c[i])).clamp(0.0, 1.0);
        (i, f)
    }

    /// The tetrahedron containing `p` (closed) and p's barycentric weights over its
    /// vertices (stored order), in O(1); `None` outside the box or not finite. Weights
    /// are non-negative and sum to 1 up to rounding.
    pub fn locate(&self, p: DVec3) -> Option<(u32, [f64; 4])> {
        if !p.is_finite() || p.cmplt(self.lo).any() || p.cmpgt(self.hi).any() {
            return None;
        }
        let mut cell = [0usize; 3];
        let mut f = [0.0f64; 3];
        for a in 0..3 {
            (cell[a], f[a]) = self.axis_cell(a, p[a]);
        }
        // Axes by decreasing f (ties in axis order: either tetrahedron holds p then).
        let mut o = [0usize, 1, 2];
        o.sort_by(|&x, &y| f[y].total_cmp(&f[x]));
        let [a, b, c] = o;
        let path_w = [1.0 - f[a], f[a] - f[b], f[b] - f[c], f[c]];
        let oi = order_index(o);
        let w = self.slot_path[oi].map(|k| path_w[k]);
        Some((self.tet_id(cell, oi), w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_are_indexed_consistently() {
        for (i, &o) in ORDERS.iter().enumerate() {
            assert_eq!(order_index(o), i);
        }
    }

    #[test]
    fn dims_make_cubic_cells_with_about_m_plus_8_sites() {
        for m in [0usize, 1, 100, 1000, 2000, 10_000] {
            let d = Lattice::dims_for(DVec3::ONE, m);
            let prod = (d[0] * d[1] * d[2]) as f64;
            let t = m as f64 + 8.0;
            // The cube root rounded per axis: within one lattice plane of m + 8.
            let r = t.cbrt();
            assert!(
                prod >= (r - 1.0).powi(3).max(8.0) && prod <= (r + 1.0).powi(3),
                "m {m}: {d:?}"
            );
            assert!(d.iter().max().unwrap() - d.iter().min().unwrap() <= 1);
        }
        assert_eq!(Lattice::dims_for(DVec3::ONE, 0), [2, 2, 2]);
        // An anisotropic box: sites in proportion to the extents, cells near cubes.
        let ext = DVec3::new(4.0, 1.0, 0.5);
        let d = Lattice::dims_for(ext, 2000);
        let h = [0, 1, 2].map(|a| ext[a] / (d[a] - 1) as f64);
        let (hmax, hmin) = (
            h.iter().cloned().fold(0.0, f64::max),
            h.iter().cloned().fold(1e9, f64::min),
        );
        assert!(hmax / hmin < 1.3, "{d:?} {h:?}");
        let prod = (d[0] * d[1] * d[2]) as f64;
        assert!((prod / 2008.0 - 1.0).abs() < 0.15, "{d:?}");
    }

    #[test]
    fn corner_only_lattice_is_the_six_tet_kuhn_split() {
        let (lat, tri) = Lattice::build(DVec3::ZERO, DVec3::ONE, 0).unwrap();
        assert_eq!(lat.dims(), [2, 2, 2]);
        assert_eq!(tri.points().len(), 8);
        assert_eq!(tri.tets().len(), 6);
        for c in 0..8u32 {
            let p = tri.points()[c as usize];
            assert_eq!(
                p,
                DVec3::new((c & 1) as f64, ((c >> 1) & 1) as f64, ((c >> 2) & 1) as f64)
            );
        }
        tri.check().unwrap();
    }
}
