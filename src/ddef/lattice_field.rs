//! The lattice DDEF evaluation in f64 under the plan's policy ([`super::plan`]): the
//! reference the GPU kernels are validated against, step for step.
//!
//! 1. Frame: the charges' box quantized by the plan; each charge's tetrahedron in closed
//!    form.
//! 2. Counting sort by (tetrahedron, particle index): every tetrahedron's sources are one
//!    contiguous range `start[t]..start[t + 1]` of the sorted sources, in particle order.
//! 3. Far field at every site j (paper eq. 17): the sorted sources minus the ranges of the
//!    site stencil's tetrahedra (M_j), excluded source by source, never added and then
//!    subtracted.
//! 4. Per occupied tetrahedron tau: its near set S(tau) from the near stencil (ranges, each
//!    with its `corrected` mask), the four vertex far values (minus, for `corrected`, the
//!    sources of S(tau) each vertex's far field holds), then per target the exact near sum
//!    (its own source skipped) plus the far values interpolated with its weights.

use super::field::Evaluation;
use super::once::once_parallel;
use super::plan::{bounds, Frame, LatticePlan, Located, ORDERS};
use super::stencil::{offset_cell, valid_slots, Stencils};
use super::{DdefError, DdefVariant};
use crate::coulomb::Sources;
use crate::model::COULOMB_K;
use crate::physics::point_charge;
use glam::DVec3;
use rayon::prelude::*;
use std::sync::OnceLock;

/// Targets per parallel task of the per-tetrahedron loops (here, in the tangent and in
/// the adjoint): a crowded tetrahedron (charges on a surface, a cluster) is split over
/// tasks rather than left to one thread. Each target's sum is computed whole, in a fixed
/// order, by one task, so the split changes no bit of the result.
pub(super) const TARGETS_PER_TASK: u32 = 256;

/// Each (key, first sorted position, end) as runs of at most [`TARGETS_PER_TASK`]
/// positions, the key kept with each run: the parallel tasks over those ranges.
pub(super) fn split_tasks<K: Copy>(
    ranges: impl IntoIterator<Item = (K, u32, u32)>,
) -> Vec<(K, u32, u32)> {
    ranges
        .into_iter()
        .flat_map(|(key, b, e)| {
            (b..e)
                .step_by(TARGETS_PER_TASK as usize)
                .map(move |k| (key, k, (k + TARGETS_PER_TASK).min(e)))
        })
        .collect()
}

/// One tetrahedron's sources in S(tau): sorted positions `begin..end`, and the
/// `corrected` mask (bit v: the sources are in the far field of tau's path vertex v).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NearRange {
    pub begin: u32,
    pub end: u32,
    pub mask: u32,
}

/// One lattice DDEF evaluation's data (see the module doc).
#[derive(Clone, Debug)]
pub struct LatticeDdef {
    pub(super) frame: Frame,
    pub(super) eps2: f64,
    /// Particle index of each source (the charged particles, increasing).
    pub(super) source_particle: Vec<u32>,
    /// Per source (in source order): its tetrahedron and weights.
    pub(super) located: Vec<Located>,
    /// Per tetrahedron its first sorted position; one entry more than tetrahedra.
    pub(super) start: Vec<u32>,
    /// Sorted position -> source.
    pub(super) order: Vec<u32>,
    /// Source -> sorted position.
    pub(super) rank: Vec<u32>,
    /// Positions and charges in sorted order.
    pub(super) xs: Vec<DVec3>,
    pub(super) qs: Vec<f64>,
    far: OnceLock<Vec<DVec3>>,
}

impl LatticeDdef {
    /// The evaluation of the charged particles of (x, q) under `plan`: frame from their
    /// bounding box, every charge located in closed form.
    pub fn new(
        plan: &LatticePlan,
        x: &[DVec3],
        q: &[f64],
        softening: f64,
    ) -> Result<Self, DdefError> {
        check_len("charges", x.len(), q.len())?;
        if let Some(i) = (0..x.len()).find(|&i| !x[i].is_finite()) {
            return Err(DdefError::NonFinitePosition { index: i });
        }
        let (lo, hi) = bounds((0..x.len()).filter(|&i| q[i] != 0.0).map(|i| (i, x[i])))?;
        let frame = plan.frame(lo, hi);
        let located = (0..x.len())
            .filter(|&i| q[i] != 0.0)
            .map(|i| frame.locate(x[i]))
            .collect();
        Ok(Self::from_located(frame, x, q, softening, located))
    }

    /// The same with each charge's tetrahedron given (in source order, e.g. as a GPU
    /// located them): weights are the point's barycentric coordinates in that tetrahedron.
    pub fn with_tets(
        frame: Frame,
        x: &[DVec3],
        q: &[f64],
        softening: f64,
        tets: &[u32],
    ) -> Result<Self, DdefError> {
        check_len("charges", x.len(), q.len())?;
        let charged: Vec<usize> = (0..x.len()).filter(|&i| q[i] != 0.0).collect();
        check_len("tetrahedra", charged.len(), tets.len())?;
        let limit = frame.dims.iter().map(|&r| r - 1).product::<u32>() * 6;
        let located = charged
            .iter()
            .zip(tets)
            .map(|(&i, &t)| {
                if t >= limit {
                    return Err(DdefError::LengthMismatch {
                        what: "tetrahedron index",
                        expected: limit as usize,
                        got: t as usize,
                    });
                }
                let (cell, kuhn) = frame.tet_cell(t);
                Ok(Located {
                    cell,
                    kuhn: kuhn as u8,
                    tet: t,
                    weights: weights_in(&frame, x[i], cell, kuhn),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::from_located(frame, x, q, softening, located))
    }

    fn from_located(
        frame: Frame,
        x: &[DVec3],
        q: &[f64],
        softening: f64,
        located: Vec<Located>,
    ) -> Self {
        let source_particle: Vec<u32> = (0..x.len() as u32)
            .filter(|&i| q[i as usize] != 0.0)
            .collect();
        let tets = frame
            .dims
            .iter()
            .map(|&r| r as usize - 1)
            .product::<usize>()
            * 6;
        // Counting sort by tetrahedron; sources enter in increasing index, so each
        // tetrahedron's range is in particle order.
        let mut start = vec![0u32; tets + 1];
        for l in &located {
            start[l.tet as usize + 1] += 1;
        }
        for t in 0..tets {
            start[t + 1] += start[t];
        }
        let mut fill = start.clone();
        let mut order = vec![0u32; located.len()];
        let mut rank = vec![0u32; located.len()];
        for (s, l) in located.iter().enumerate() {
            let p = &mut fill[l.tet as usize];
            order[*p as usize] = s as u32;
            rank[s] = *p;
            *p += 1;
        }
        let xs = order
            .iter()
            .map(|&s| x[source_particle[s as usize] as usize])
            .collect();
        let qs = order
            .iter()
            .map(|&s| q[source_particle[s as usize] as usize])
            .collect();
        Self {
            frame,
            eps2: softening * softening,
            source_particle,
            located,
            start,
            order,
            rank,
            xs,
            qs,
            far: OnceLock::new(),
        }
    }

    pub fn frame(&self) -> &Frame {
        &self.frame
    }
    pub fn source_particles(&self) -> &[u32] {
        &self.source_particle
    }
    /// Each source's tetrahedron and weights, in source order.
    pub fn located(&self) -> &[Located] {
        &self.located
    }
    /// Per tetrahedron the first sorted position (one entry more than tetrahedra).
    pub fn tet_starts(&self) -> &[u32] {
        &self.start
    }
    /// The sources in sorted order (by tetrahedron, then particle).
    pub fn sorted_sources(&self) -> &[u32] {
        &self.order
    }

    /// Grid sites r_x r_y r_z.
    pub(super) fn site_count(&self) -> usize {
        self.frame.dims.iter().map(|&r| r as usize).product()
    }

    /// M_j as sorted-position ranges, increasing: the sources of the site stencil's
    /// tetrahedra around site j.
    pub fn site_ranges(&self, j: u32) -> Vec<(u32, u32)> {
        let f = &self.frame;
        let p = f.site_point(j);
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(48);
        for e in &Stencils::get().site {
            // The tetrahedron's cell is site + offset (site j is its slot `e.slots`).
            let Some(cell) = offset_cell(f.dims, p, e.dcell) else {
                continue;
            };
            let t = f.tet_id(cell, e.kuhn as usize) as usize;
            let (b, en) = (self.start[t], self.start[t + 1]);
            if b < en {
                match out.last_mut() {
                    Some(last) if last.1 == b => last.1 = en,
                    _ => out.push((b, en)),
                }
            }
        }
        out
    }

    /// E_far(u_j) per site (k_c included), paper eq. 17, computed on first use.
    pub fn far_field(&self) -> &[DVec3] {
        once_parallel::<Vec<DVec3>>(&self.far, || {
            let mut src = Sources::default();
            src.fill(&self.xs, &self.qs);
            let sites = self.site_count();
            (0..sites as u32)
                .into_par_iter()
                .with_min_len(4)
                .map(|j| {
                    let excluded: Vec<u32> = self
                        .site_ranges(j)
                        .into_iter()
                        .flat_map(|(b, e)| b..e)
                        .collect();
                    let u = self.frame.site(self.frame.site_point(j));
                    src.field_excluding(u, &excluded, self.eps2) * COULOMB_K
                })
                .collect()
        })
    }

    /// S(tau) of tetrahedron `tet` as sorted-position ranges with their masks.
    pub fn near_ranges(&self, tet: u32) -> Vec<NearRange> {
        let f = &self.frame;
        let (cell, t) = f.tet_cell(tet);
        let valid = valid_slots(f.dims, cell, t);
        let mut out = Vec::with_capacity(200);
        for e in &Stencils::get().near[t] {
            if e.slots & valid == 0 {
                continue;
            }
            let Some(c) = offset_cell(f.dims, cell, e.dcell) else {
                continue;
            };
            let t2 = f.tet_id(c, e.kuhn as usize) as usize;
            let (b, en) = (self.start[t2], self.start[t2 + 1]);
            if b < en {
                out.push(NearRange {
                    begin: b,
                    end: en,
                    mask: e.corrected_mask(),
                });
            }
        }
        out
    }

    /// Site indices of the path vertices of tetrahedron `tet` (slot order).
    pub fn tet_sites(&self, tet: u32) -> [u32; 4] {
        let f = &self.frame;
        let (cell, t) = f.tet_cell(tet);
        let [a, b, _] = ORDERS[t];
        let mut v = [cell; 4];
        v[1][a] += 1;
        v[2][a] += 1;
        v[2][b] += 1;
        v[3] = cell.map(|c| c + 1);
        v.map(|p| f.site_id(p))
    }

    /// The far values at the path vertices of `tet` as its targets interpolate them (see
    /// [`super::field`]'s `vertex_far`).
    pub fn vertex_far(&self, tet: u32, near: &[NearRange], variant: DdefVariant) -> [DVec3; 4] {
        let far = self.far_field();
        let sites = self.tet_sites(tet);
        let mut out = sites.map(|j| far[j as usize]);
        if variant == DdefVariant::Corrected {
            for (v, o) in out.iter_mut().enumerate() {
                let u = self.frame.site(self.frame.site_point(sites[v]));
                let mut c = DVec3::ZERO;
                for r in near.iter().filter(|r| r.mask & (1 << v) != 0) {
                    for s in r.begin..r.end {
                        c += point_charge::field(
                            u - self.xs[s as usize],
                            self.qs[s as usize],
                            self.eps2,
                        );
                    }
                }
                *o -= c * COULOMB_K;
            }
        }
        out
    }

    /// The field (k_c included) at targets of tetrahedron `tet`: `targets` gives each
    /// one's position, weights and own sorted position (skipped in the near sum).
    fn evaluate_tet(
        &self,
        tet: u32,
        targets: &[(DVec3, [f64; 4], Option<u32>)],
        eval: Evaluation,
    ) -> Vec<DVec3> {
        let near = self.near_ranges(tet);
        let variant = eval.far_variant();
        let vf = variant.map(|v| self.vertex_far(tet, &near, v));
        let text = eval == Evaluation::TextNearSet;
        targets
            .iter()
            .map(|&(p, w, own)| {
                let mut e = DVec3::ZERO;
                for r in near.iter().filter(|r| !(text && r.mask != 0)) {
                    for s in r.begin..r.end {
                        if Some(s) != own {
                            e += point_charge::field(
                                p - self.xs[s as usize],
                                self.qs[s as usize],
                                self.eps2,
                            );
                        }
                    }
                }
                let mut field = e * COULOMB_K;
                if let Some(vf) = vf {
                    for v in 0..4 {
                        field += vf[v] * w[v];
                    }
                }
                field
            })
            .collect()
    }

    /// The occupied tetrahedra: (tet, first sorted position, end).
    pub(super) fn occupied(&self) -> Vec<(u32, u32, u32)> {
        (0..self.start.len() - 1)
            .filter(|&t| self.start[t] < self.start[t + 1])
            .map(|t| (t as u32, self.start[t], self.start[t + 1]))
            .collect()
    }

    /// The occupied tetrahedra's targets as parallel tasks: (tet, first sorted position,
    /// end), [`TARGETS_PER_TASK`] at most each.
    pub(super) fn target_tasks(&self) -> Vec<(u32, u32, u32)> {
        split_tasks(self.occupied())
    }

    /// The approximate field (k_c included) at every source, in source order.
    pub fn fields_at_sources(&self, eval: Evaluation) -> Vec<DVec3> {
        self.far_field();
        let parts: Vec<(u32, Vec<DVec3>)> = self
            .target_tasks()
            .into_par_iter()
            .map(|(t, b, e)| {
                let targets: Vec<_> = (b..e)
                    .map(|k| {
                        let s = self.order[k as usize] as usize;
                        (self.xs[k as usize], self.located[s].weights, Some(k))
                    })
                    .collect();
                (b, self.evaluate_tet(t, &targets, eval))
            })
            .collect();
        let mut out = vec![DVec3::ZERO; self.order.len()];
        for (b, fields) in parts {
            for (k, f) in fields.into_iter().enumerate() {
                out[self.order[b as usize + k] as usize] = f;
            }
        }
        out
    }

    /// Coulomb forces q_i E(x_i) into `out` (one per particle; uncharged ones get zero).
    pub fn forces_into(&self, eval: Evaluation, out: &mut [DVec3]) {
        out.iter_mut().for_each(|f| *f = DVec3::ZERO);
        let e = self.fields_at_sources(eval);
        for (s, &i) in self.source_particle.iter().enumerate() {
            out[i as usize] = e[s] * self.qs[self.rank[s] as usize];
        }
    }

    /// The approximate field at arbitrary points (no own source). Errors on a point
    /// outside the frame's box.
    pub fn fields_at(&self, points: &[DVec3], eval: Evaluation) -> Result<Vec<DVec3>, DdefError> {
        let f = &self.frame;
        if let Some(k) = points.iter().position(|&p| !f.contains(p)) {
            return Err(DdefError::OutsideGrid {
                what: "point",
                index: k,
                position: points[k],
                lo: f.lo,
                hi: f.hi,
            });
        }
        self.far_field();
        let located: Vec<Located> = points.iter().map(|&p| f.locate(p)).collect();
        let mut idx: Vec<u32> = (0..points.len() as u32).collect();
        idx.sort_unstable_by_key(|&k| (located[k as usize].tet, k));
        let groups: Vec<&[u32]> = idx
            .chunk_by(|&a, &b| located[a as usize].tet == located[b as usize].tet)
            .flat_map(|g| g.chunks(TARGETS_PER_TASK as usize))
            .collect();
        let parts: Vec<Vec<(u32, DVec3)>> = groups
            .into_par_iter()
            .map(|g| {
                let targets: Vec<_> = g
                    .iter()
                    .map(|&k| (points[k as usize], located[k as usize].weights, None))
                    .collect();
                let tet = located[g[0] as usize].tet;
                g.iter()
                    .copied()
                    .zip(self.evaluate_tet(tet, &targets, eval))
                    .collect()
            })
            .collect();
        let mut out = vec![DVec3::ZERO; points.len()];
        for (k, e) in parts.into_iter().flatten() {
            out[k as usize] = e;
        }
        Ok(out)
    }

    /// Mean |S(tau)| over the sources (their own included): the near-field work per target.
    pub fn mean_near_count(&self) -> f64 {
        let total: u64 = self
            .occupied()
            .par_iter()
            .map(|&(t, b, e)| {
                let n: u64 = self
                    .near_ranges(t)
                    .iter()
                    .map(|r| u64::from(r.end - r.begin))
                    .sum();
                n * u64::from(e - b)
            })
            .sum();
        total as f64 / self.order.len().max(1) as f64
    }

    /// The most charges in one lattice cell: a cell's 6 Kuhn tetrahedra are consecutive,
    /// so their sorted ranges are one range.
    pub fn busiest_cell(&self) -> u32 {
        let s = &self.start;
        (0..s.len() / 6)
            .map(|c| s[6 * c + 6] - s[6 * c])
            .max()
            .unwrap_or(0)
    }
}

/// Barycentric weights of `p` over the path vertices of (cell, kuhn): exact for any point,
/// negative outside that tetrahedron.
pub fn weights_in(frame: &Frame, p: DVec3, cell: [u32; 3], kuhn: usize) -> [f64; 4] {
    let f = [0, 1, 2].map(|a| (p[a] - frame.lo[a]) * frame.inv_h[a] - f64::from(cell[a]));
    let [a, b, c] = ORDERS[kuhn];
    [1.0 - f[a], f[a] - f[b], f[b] - f[c], f[c]]
}

/// The derivative of [`weights_in`] along a displacement `dp` of the point (the cell and
/// Kuhn type frozen): the weights are affine in the point, df_a = dp_a / h_a.
pub fn weights_jvp(frame: &Frame, dp: DVec3, kuhn: usize) -> [f64; 4] {
    let df = [0, 1, 2].map(|a| dp[a] * frame.inv_h[a]);
    let [a, b, c] = ORDERS[kuhn];
    [-df[a], df[a] - df[b], df[b] - df[c], df[c]]
}

/// The transpose of [`weights_jvp`]: the displacement cotangent of cotangents `g` of the
/// four weights.
pub fn weights_vjp(frame: &Frame, g: [f64; 4], kuhn: usize) -> DVec3 {
    let [a, b, c] = ORDERS[kuhn];
    let mut df = [0.0; 3];
    df[a] = g[1] - g[0];
    df[b] = g[2] - g[1];
    df[c] = g[3] - g[2];
    DVec3::from_array([0, 1, 2].map(|k| df[k] * frame.inv_h[k]))
}

fn check_len(what: &'static str, expected: usize, got: usize) -> Result<(), DdefError> {
    if expected == got {
        Ok(())
    } else {
        Err(DdefError::LengthMismatch {
            what,
            expected,
            got,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddef::lattice_tangent::tests::cloud;
    use crate::ddef::{DdefConfig, DdefSamples, DdefSolver};

    /// The reference's structure for `n` charges of the test cloud (seed `seed`), the
    /// first `k` of them moved by `cluster`, on about m sites.
    fn clustered(
        (n, seed): (usize, u64),
        k: usize,
        cluster: impl Fn(DVec3) -> DVec3,
        m: u32,
    ) -> LatticeDdef {
        let (mut x, q, _, _) = cloud(n, seed);
        for p in &mut x[..k] {
            *p = cluster(*p);
        }
        let config = DdefConfig {
            samples: DdefSamples::Count(m),
            ..DdefConfig::default()
        };
        DdefSolver::reference_for(config, &x, &q, 0.01).unwrap()
    }

    /// The busiest cell counts the charges the locator put in each cell.
    #[test]
    fn the_busiest_cell_is_the_largest_count_of_located_cells() {
        let near = |p: DVec3| DVec3::splat(0.3) + (p - DVec3::splat(0.5)) * 0.05;
        let l = clustered((600, 7), 150, near, 125);
        let mut per_cell = std::collections::HashMap::<[u32; 3], u32>::new();
        for s in l.located() {
            *per_cell.entry(s.cell).or_default() += 1;
        }
        let most = per_cell.values().copied().max().unwrap();
        assert!(most >= 100, "{most}: the cluster's cell");
        assert_eq!(l.busiest_cell(), most);
    }

    /// A tetrahedron crowded past two tasks: the split evaluation gives, bit for bit,
    /// what one pass over each whole tetrahedron gives (each target's sum is the same
    /// terms in the same order), for every evaluation.
    #[test]
    fn a_crowded_tetrahedron_split_over_tasks_gives_the_same_bits() {
        let at = DVec3::new(0.62, 0.18, 0.91);
        let near = |p: DVec3| at + (p - DVec3::new(0.5, 0.35, 0.65)) * 1e-3;
        let l = clustered((800, 51), 700, near, 27);
        let crowded = l.occupied().iter().map(|&(_, b, e)| e - b).max().unwrap();
        assert!(crowded > 2 * TARGETS_PER_TASK, "{crowded}");
        for eval in [
            Evaluation::Ddef(DdefVariant::Paper),
            Evaluation::Ddef(DdefVariant::Corrected),
            Evaluation::TextNearSet,
            Evaluation::NearOnly,
        ] {
            let split = l.fields_at_sources(eval);
            for (t, b, e) in l.occupied() {
                let targets: Vec<_> = (b..e)
                    .map(|k| {
                        let s = l.order[k as usize] as usize;
                        (l.xs[k as usize], l.located[s].weights, Some(k))
                    })
                    .collect();
                for (k, f) in (b..e).zip(l.evaluate_tet(t, &targets, eval)) {
                    assert_eq!(split[l.order[k as usize] as usize], f, "{eval:?} {k}");
                }
            }
        }
    }
}
