//! Algorithm 1 steps 2-4 on a [`Grid`]: the per-source data (tetrahedron, weights, N_s,
//! M_j), the far field at the sites and the field at targets (near sum plus interpolated
//! far field), and the gather plan a GPU kernel reads.

use super::delaunay::NONE;
use super::grid::locate_all;
pub use super::grid::{Csr, Grid};
use super::once::once_parallel;
use super::{DdefError, DdefGrid, DdefVariant};
use crate::coulomb::Sources;
use crate::model::COULOMB_K;
use crate::physics::point_charge;
use glam::DVec3;
use rayon::prelude::*;
use std::sync::{Arc, OnceLock};

/// One source of a target's near set S(x) = union of M_k, k in N(x).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct NearEntry {
    /// Source index (into [`Ddef::source_particles`]).
    pub source: u32,
    /// Bit v (0..4) set when the source is not in M of vertex v of tau(x): the source is
    /// in that vertex's far field, so `corrected` subtracts it there.
    pub mask: u32,
}

/// How a target's field is assembled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evaluation {
    /// Near field plus the far field interpolated as in Algorithm 1 (`paper`) or with
    /// the double-counted sources removed (`corrected`).
    Ddef(DdefVariant),
    /// Section 3.3.3's wording instead of Algorithm 1's: a source is near when its N_s
    /// holds every vertex of tau(x) (the intersection of M_v over the vertices of tau),
    /// and the grid far field is interpolated as is. A source in some but not all M_v is
    /// then partly missed. Measured for comparison only.
    TextNearSet,
    /// Near field only: the far field ignored (Table 1, bottom row).
    NearOnly,
}

impl Evaluation {
    /// The variant whose far values are interpolated (`TextNearSet` interpolates the grid
    /// far field as is); `None` for the near sum alone.
    pub fn far_variant(self) -> Option<DdefVariant> {
        match self {
            Self::Ddef(v) => Some(v),
            Self::TextNearSet => Some(DdefVariant::Paper),
            Self::NearOnly => None,
        }
    }
}

impl From<DdefVariant> for Evaluation {
    fn from(v: DdefVariant) -> Self {
        Self::Ddef(v)
    }
}

/// Exact Coulomb field (with k_c) at `points` from the charged particles of (x, q),
/// skipping particle `skip[i]` for point i when given (a charge's own field). The
/// all-pairs reference the DDEF error is measured against; vectorized over
/// structure-of-arrays sources in a fixed order ([`crate::coulomb`]).
pub fn exact_fields_at(
    points: &[DVec3],
    skip: Option<&[usize]>,
    x: &[DVec3],
    q: &[f64],
    softening: f64,
) -> Vec<DVec3> {
    let eps2 = softening * softening;
    let mut src = Sources::default();
    src.fill(x, q);
    points
        .par_iter()
        .enumerate()
        .with_min_len(16)
        .map(|(i, &p)| {
            let slot = skip.and_then(|s| src.slot_of(s[i]));
            let own = slot.map(|s| [s as u32]);
            src.field_excluding(p, own.as_ref().map_or(&[][..], |o| &o[..]), eps2) * COULOMB_K
        })
        .collect()
}

/// Algorithm 1's data for one set of charge positions on a [`Grid`]: the sources located
/// in the grid, N_s, M_j and the far field at every site.
#[derive(Clone, Debug)]
pub struct Ddef {
    grid: Arc<Grid>,
    eps2: f64,
    /// Particle index of each source (the charged particles, increasing).
    source_particle: Vec<u32>,
    source_x: Vec<DVec3>,
    source_q: Vec<f64>,
    source_tet: Vec<u32>,
    source_weights: Vec<[f64; 4]>,
    /// N_s per source.
    near_sites: Csr<u32>,
    /// M_j per site, sources increasing.
    site_sources: Csr<u32>,
    /// E_far(u_j) with k_c (paper eq. 17), computed on first use: the GPU backend
    /// computes it on the device and never needs the host's O(m n) sum.
    far: OnceLock<Vec<DVec3>>,
}

/// The gather data for a GPU kernel: targets share the near list and vertex far values
/// of their tetrahedron (S(x) depends on tau(x) only), so both are stored per occupied
/// tetrahedron ("group").
#[derive(Clone, Debug)]
pub struct GatherPlan {
    /// Per group: the tetrahedron's site indices (vertex v of the masks).
    pub tet_vertices: Vec<[u32; 4]>,
    /// Per group: S(tet) as (source, mask) entries.
    pub near: Csr<NearEntry>,
    /// Per target: its group.
    pub target_group: Vec<u32>,
    /// Per target: barycentric weights over its group's vertices.
    pub weights: Vec<[f64; 4]>,
}

impl Ddef {
    /// Algorithm 1 steps 1-2 on a grid around the charged particles of (x, q):
    /// `samples` sites, box padded by `margin` (0 for a grid used once).
    pub fn build(
        x: &[DVec3],
        q: &[f64],
        softening: f64,
        samples: usize,
        margin: f64,
    ) -> Result<Self, DdefError> {
        Self::build_with(x, q, softening, samples, margin, DdefGrid::Delaunay)
    }

    /// [`Ddef::build`] on a grid of the given kind.
    pub fn build_with(
        x: &[DVec3],
        q: &[f64],
        softening: f64,
        samples: usize,
        margin: f64,
        kind: DdefGrid,
    ) -> Result<Self, DdefError> {
        check_len("charges", x.len(), q.len())?;
        let charged: Vec<DVec3> = (0..x.len())
            .filter(|&i| q[i] != 0.0)
            .map(|i| x[i])
            .collect();
        if let Some(i) = (0..x.len()).find(|&i| !x[i].is_finite()) {
            return Err(DdefError::NonFinitePosition { index: i });
        }
        let grid = Grid::around_with(&charged, samples, margin, kind)?;
        Self::on_grid(Arc::new(grid), x, q, softening, None)
    }

    /// Locates the charged particles of (x, q) on `grid` (walks start from `hints`, one
    /// tetrahedron per particle, when given), builds N_s and M_j, and the far field.
    pub fn on_grid(
        grid: Arc<Grid>,
        x: &[DVec3],
        q: &[f64],
        softening: f64,
        hints: Option<&[u32]>,
    ) -> Result<Self, DdefError> {
        check_len("charges", x.len(), q.len())?;
        if let Some(h) = hints {
            check_len("hints", x.len(), h.len())?;
        }
        let source_particle: Vec<u32> = (0..x.len() as u32)
            .filter(|&i| q[i as usize] != 0.0)
            .collect();
        let source_x: Vec<DVec3> = source_particle.iter().map(|&i| x[i as usize]).collect();
        let source_q: Vec<f64> = source_particle.iter().map(|&i| q[i as usize]).collect();
        let hint_of = |s: usize| hints.map_or(NONE, |h| h[source_particle[s] as usize]);
        let located = locate_all(&grid, &source_x, hint_of).map_err(|s| {
            let (lo, hi) = grid.bounds();
            let i = source_particle[s] as usize;
            if x[i].is_finite() {
                DdefError::OutsideGrid {
                    what: "charged particle",
                    index: i,
                    position: x[i],
                    lo,
                    hi,
                }
            } else {
                DdefError::NonFinitePosition { index: i }
            }
        })?;
        let (source_tet, source_weights): (Vec<u32>, Vec<[f64; 4]>) = located.into_iter().unzip();

        // N_s and the inverse lists M_j (counting sort by site; sources stay increasing).
        let near_rows: Vec<Vec<u32>> = source_tet
            .iter()
            .map(|&t| {
                let (s, n) = grid.nearby_sites(t);
                s[..n].to_vec()
            })
            .collect();
        let near_sites = Csr::from_rows(near_rows);
        let m = grid.sites().len();
        let mut counts = vec![0u32; m + 1];
        for &j in &near_sites.entries {
            counts[j as usize + 1] += 1;
        }
        for j in 0..m {
            counts[j + 1] += counts[j];
        }
        let mut fill = counts.clone();
        let mut inv = vec![0u32; near_sites.entries.len()];
        for s in 0..near_sites.rows() {
            for &j in near_sites.row(s) {
                inv[fill[j as usize] as usize] = s as u32;
                fill[j as usize] += 1;
            }
        }
        let site_sources = Csr {
            offsets: counts,
            entries: inv,
        };

        let eps2 = softening * softening;
        Ok(Self {
            grid,
            eps2,
            source_particle,
            source_x,
            source_q,
            source_tet,
            source_weights,
            near_sites,
            site_sources,
            far: OnceLock::new(),
        })
    }

    pub fn grid(&self) -> &Arc<Grid> {
        &self.grid
    }
    pub fn source_particles(&self) -> &[u32] {
        &self.source_particle
    }
    /// tau_s of each source.
    pub fn source_tets(&self) -> &[u32] {
        &self.source_tet
    }
    /// Barycentric weights psi_s of each source in tau_s.
    pub fn source_weights(&self) -> &[[f64; 4]] {
        &self.source_weights
    }
    /// N_s per source.
    pub fn near_sites(&self) -> &Csr<u32> {
        &self.near_sites
    }
    /// M_j per site.
    pub fn site_sources(&self) -> &Csr<u32> {
        &self.site_sources
    }
    /// E_far(u_j) per site (k_c included).
    pub fn far_field(&self) -> &[DVec3] {
        once_parallel::<Vec<DVec3>>(&self.far, || {
            far_field(
                self.grid.sites(),
                &self.site_sources,
                &self.source_x,
                &self.source_q,
                self.eps2,
            )
        })
    }

    /// S(x) for a target in `tet`: the sources of M_k for k in N(tet), each once, with its
    /// per-vertex mask, in the order N(tet) and the M_k lists give (deterministic).
    pub fn near_entries(&self, tet: u32, out: &mut Vec<NearEntry>) {
        let mut scratch = vec![NONE; self.source_x.len()];
        self.near_entries_with(tet, &mut scratch, out);
    }

    /// [`Ddef::near_entries`] with a caller's slot table (all `NONE`, one per source; left
    /// all `NONE`), so a worker dedups without sorting or allocating.
    fn near_entries_with(&self, tet: u32, slot: &mut [u32], out: &mut Vec<NearEntry>) {
        out.clear();
        let (nb, n) = self.grid.nearby_sites(tet);
        for (k_slot, &k) in nb[..n].iter().enumerate() {
            // Bits mark membership in M_v for the four vertices of tau (slots 0..4).
            let bit = if k_slot < 4 { 1u32 << k_slot } else { 0 };
            for &s in self.site_sources.row(k as usize) {
                let e = &mut slot[s as usize];
                if *e == NONE {
                    *e = out.len() as u32;
                    out.push(NearEntry {
                        source: s,
                        mask: bit,
                    });
                } else {
                    out[*e as usize].mask |= bit;
                }
            }
        }
        for e in out.iter_mut() {
            slot[e.source as usize] = NONE;
            e.mask = !e.mask & 0xF;
        }
    }

    /// The far field at the four vertices of `tet` as a target there interpolates it:
    /// the grid values (`paper`), or with the sources of S(tet) that each vertex's far
    /// field holds removed (`corrected`). Depends on the tetrahedron only, not on the
    /// target (a charge's own source is in M_v of every vertex of its tetrahedron).
    fn vertex_far(&self, tet: u32, near: &[NearEntry], variant: DdefVariant) -> [DVec3; 4] {
        let verts = self.grid.tetrahedralization().tets()[tet as usize];
        let sites = self.grid.sites();
        let far = self.far_field();
        let mut out = verts.map(|j| far[j as usize]);
        if variant == DdefVariant::Corrected {
            for (v, f) in out.iter_mut().enumerate() {
                let u = sites[verts[v] as usize];
                let mut c = DVec3::ZERO;
                for ne in near {
                    if ne.mask & (1 << v) != 0 {
                        let s = ne.source as usize;
                        c += point_charge::field(u - self.source_x[s], self.source_q[s], self.eps2);
                    }
                }
                *f -= c * COULOMB_K;
            }
        }
        out
    }

    /// The field (k_c included) at targets grouped by tetrahedron: `groups` lists, per
    /// occupied tetrahedron, its target indices; `me(t)` is target t's own source.
    fn evaluate_groups(
        &self,
        groups: &Csr<u32>,
        group_tet: &[u32],
        x: &[DVec3],
        weights: &[[f64; 4]],
        me: impl Fn(u32) -> Option<u32> + Sync,
        eval: Evaluation,
    ) -> Vec<DVec3> {
        let eps2 = self.eps2;
        let ns = self.source_x.len();
        // Computed here, once, not inside the parallel section below.
        self.far_field();
        let parts: Vec<Vec<(u32, DVec3)>> = (0..groups.rows())
            .into_par_iter()
            .with_min_len(16)
            .map_init(
                || (vec![NONE; ns], Vec::new()),
                |(slot, near), g| {
                    let tet = group_tet[g];
                    self.near_entries_with(tet, slot, near);
                    let variant = eval.far_variant();
                    let vf = variant.map(|v| self.vertex_far(tet, near, v));
                    let text = eval == Evaluation::TextNearSet;
                    groups
                        .row(g)
                        .iter()
                        .map(|&t| {
                            let p = x[t as usize];
                            let own = me(t);
                            let mut e = DVec3::ZERO;
                            for ne in near.iter() {
                                if Some(ne.source) != own && !(text && ne.mask != 0) {
                                    let s = ne.source as usize;
                                    e += point_charge::field(
                                        p - self.source_x[s],
                                        self.source_q[s],
                                        eps2,
                                    );
                                }
                            }
                            let mut field = e * COULOMB_K;
                            if let Some(vf) = vf {
                                let w = weights[t as usize];
                                for v in 0..4 {
                                    field += vf[v] * w[v];
                                }
                            }
                            (t, field)
                        })
                        .collect()
                },
            )
            .collect();
        let mut out = vec![DVec3::ZERO; x.len()];
        for (t, f) in parts.into_iter().flatten() {
            out[t as usize] = f;
        }
        out
    }

    /// The approximate field (k_c included) at every source, in source order.
    pub fn fields_at_sources(&self, eval: Evaluation) -> Vec<DVec3> {
        let (groups, group_tet) = group_by_tet(&self.source_tet);
        self.evaluate_groups(
            &groups,
            &group_tet,
            &self.source_x,
            &self.source_weights,
            Some,
            eval,
        )
    }

    /// Coulomb forces q_i E(x_i) on all `n` particles (uncharged ones get zero).
    pub fn forces(&self, n: usize, eval: Evaluation) -> Vec<DVec3> {
        let mut out = vec![DVec3::ZERO; n];
        self.forces_into(eval, &mut out);
        out
    }

    /// [`Ddef::forces`] into a caller's buffer (one entry per particle).
    pub fn forces_into(&self, eval: Evaluation, out: &mut [DVec3]) {
        out.iter_mut().for_each(|f| *f = DVec3::ZERO);
        let e = self.fields_at_sources(eval);
        for (s, &i) in self.source_particle.iter().enumerate() {
            out[i as usize] = e[s] * self.source_q[s];
        }
    }

    /// The approximate field at arbitrary points (test sites). Errors on a point outside
    /// the grid box.
    pub fn fields_at(&self, points: &[DVec3], eval: Evaluation) -> Result<Vec<DVec3>, DdefError> {
        let located = locate_all(&self.grid, points, |_| NONE).map_err(|k| {
            let (lo, hi) = self.grid.bounds();
            DdefError::OutsideGrid {
                what: "point",
                index: k,
                position: points[k],
                lo,
                hi,
            }
        })?;
        let (tets, weights): (Vec<u32>, Vec<[f64; 4]>) = located.into_iter().unzip();
        let (groups, group_tet) = group_by_tet(&tets);
        Ok(self.evaluate_groups(&groups, &group_tet, points, &weights, |_| None, eval))
    }

    /// The gather data for the sources as targets: per occupied tetrahedron its vertices
    /// and near list, per source its tetrahedron slot and weights.
    pub fn gather_plan(&self) -> GatherPlan {
        let (groups, group_tet) = group_by_tet(&self.source_tet);
        let mut target_group = vec![0u32; self.source_tet.len()];
        for g in 0..groups.rows() {
            for &t in groups.row(g) {
                target_group[t as usize] = g as u32;
            }
        }
        let ns = self.source_x.len();
        let rows: Vec<Vec<NearEntry>> = group_tet
            .par_iter()
            .map_init(
                || vec![NONE; ns],
                |slot, &t| {
                    let mut near = Vec::new();
                    self.near_entries_with(t, slot, &mut near);
                    near
                },
            )
            .collect();
        GatherPlan {
            tet_vertices: group_tet
                .iter()
                .map(|&t| self.grid.tetrahedralization().tets()[t as usize])
                .collect(),
            near: Csr::from_rows(rows),
            target_group,
            weights: self.source_weights.clone(),
        }
    }

    /// Mean |S(x)| over the sources: the near-field work per target.
    pub fn mean_near_count(&self) -> f64 {
        let plan = self.gather_plan();
        let total: usize = plan
            .target_group
            .iter()
            .map(|&g| plan.near.row(g as usize).len())
            .sum();
        total as f64 / plan.target_group.len().max(1) as f64
    }
}

/// Targets grouped by tetrahedron: (CSR of target indices per occupied tetrahedron, the
/// tetrahedron of each group), groups in increasing tetrahedron order.
fn group_by_tet(tets: &[u32]) -> (Csr<u32>, Vec<u32>) {
    let mut order: Vec<u32> = (0..tets.len() as u32).collect();
    order.sort_unstable_by_key(|&t| (tets[t as usize], t));
    let mut offsets = vec![0u32];
    let mut group_tet = Vec::new();
    for (k, &t) in order.iter().enumerate() {
        let tet = tets[t as usize];
        if group_tet.last() != Some(&tet) {
            if k > 0 {
                offsets.push(k as u32);
            }
            group_tet.push(tet);
        }
    }
    if !order.is_empty() {
        offsets.push(order.len() as u32);
    }
    (
        Csr {
            offsets,
            entries: order,
        },
        group_tet,
    )
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

/// E_far(u_j) = k_c sum_{s not in M_j} q_s (u_j - x_s) / (r^2 + eps^2)^(3/2) (paper
/// eq. 17): the exclusion is exact (no subtract-after-adding), so a source close to u_j
/// never enters it.
fn far_field(
    sites: &[DVec3],
    site_sources: &Csr<u32>,
    x: &[DVec3],
    q: &[f64],
    eps2: f64,
) -> Vec<DVec3> {
    let mut src = Sources::default();
    src.fill(x, q);
    debug_assert_eq!(src.len(), x.len(), "DDEF sources are charged");
    sites
        .par_iter()
        .enumerate()
        .with_min_len(4)
        .map(|(j, &u)| src.field_excluding(u, site_sources.row(j), eps2) * COULOMB_K)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectorized far field (paper eq. 17) against the straightforward sequential sum
    /// over the sources outside M_j: equal to reassociation, |E - E_ref| <= 1e-13 sum |terms|.
    #[test]
    fn far_field_matches_the_straightforward_sum() {
        let mut s = 77u64;
        let mut unit = move || {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        let n = 300;
        let x: Vec<DVec3> = (0..n).map(|_| DVec3::new(unit(), unit(), unit())).collect();
        let q: Vec<f64> = (0..n).map(|_| (unit() - 0.5) * 1e-6).collect();
        for eps in [0.0, 1e-2] {
            let d = Ddef::build(&x, &q, eps, 200, 0.0).unwrap();
            let far = d.far_field();
            let eps2 = eps * eps;
            for (j, &u) in d.grid.sites().iter().enumerate() {
                let skip = d.site_sources.row(j);
                let (mut e, mut scale) = (DVec3::ZERO, 0.0);
                for k in 0..d.source_x.len() {
                    if !skip.contains(&(k as u32)) {
                        let t = point_charge::field(u - d.source_x[k], d.source_q[k], eps2);
                        e += t;
                        scale += t.length();
                    }
                }
                let err = (far[j] - e * COULOMB_K).length();
                assert!(err <= 1e-13 * scale * COULOMB_K, "site {j}: {err:e}");
            }
        }
    }
}
