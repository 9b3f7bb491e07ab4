//! The adjoint (VJP) of the lattice DDEF forces with the evaluation's discrete structure
//! frozen: the transpose of [`super::lattice_tangent`]'s map (docs/physics.md §9, (9.9)-(9.12)).
//! From a cotangent w of the forces, with c_i = q_i w_i the cotangent of the field at
//! source i (sorted order below):
//! - q_bar_i gets w_i . E_i (the force is q_i E_i);
//! - near pairs (i, s), s in S(tau_i), s != i: x_bar_i += k_c q_s G c_i,
//!   x_bar_s -= k_c q_s G c_i, q_bar_s += k_c phi . c_i;
//! - interpolation: x_bar_i gets the weights' transpose of (c_i . vf_v)_v, and the vertex
//!   far values the cotangents cv_v(tau) = sum_{i in tau} psi_iv c_i;
//! - `corrected` vertex terms: the same pair rule from site u_v over their sources, sign
//!   flipped (they are subtracted);
//! - sites: e_bar_j = sum of cv_v(tau) over the (tau, v) with site j; the far field's
//!   transpose gathers per source s over the sites whose far set holds it:
//!   q_bar_s += k_c sum_j phi(u_j - x_s) . e_bar_j, x_bar_s -= k_c sum_j q_s G e_bar_j.
//!
//! The per-pair rule is `physics::point_charge::field_vjp` (the transpose of the tangent's
//! `field_jvp`). Every cotangent is gathered, never scattered: the near pairs once per
//! target (its row) and once per source over the near relation's transpose (T in S(tau)
//! listed per T), the far part per source. Each row is summed whole, in a fixed order, by
//! one parallel task, so the result does not depend on the thread count, and a crowded
//! tetrahedron's rows are split over tasks (`TARGETS_PER_TASK`). Evaluating each near
//! pair twice costs a single thread about 1.4x the serial scatter it replaced, and pays
//! from two threads on (BENCHMARKS.md). Uncharged particles are not sources: their
//! cotangents stay 0 (a charge on one would change the structure; the gradient drivers
//! refuse that parameter).

use super::field::Evaluation;
use super::lattice_field::{split_tasks, weights_vjp, LatticeDdef, NearRange};
use super::stencil::{offset_cell, Stencils};
use super::DdefVariant;
use crate::model::COULOMB_K;
use crate::physics::point_charge::field_vjp;
use glam::DVec3;
use rayon::prelude::*;

/// An occupied tetrahedron: its sorted range [begin, end), its near ranges and,
/// transposed, `users`: the occupied tetrahedra whose near set holds it (their indices in
/// the list, increasing, each with that range's `corrected` mask).
struct Tet {
    tet: u32,
    begin: usize,
    end: usize,
    near: Vec<NearRange>,
    users: Vec<(u32, u32)>,
}

/// The parallel tasks over `tets` (a crowded one split, see
/// [`TARGETS_PER_TASK`](super::lattice_field::TARGETS_PER_TASK)): (index in the list,
/// first row, end row). Each row is summed whole by one task.
fn units(tets: &[Tet]) -> Vec<(usize, usize, usize)> {
    let ranges = tets.iter().enumerate();
    split_tasks(ranges.map(|(o, t)| (o, t.begin as u32, t.end as u32)))
        .into_iter()
        .map(|(o, b, e)| (o, b as usize, e as usize))
        .collect()
}

impl LatticeDdef {
    /// Adds the transpose of [`LatticeDdef::forces_jvp`] applied to the force cotangent
    /// `w` (one per particle): position cotangents to `xbar` and, when given, charge
    /// cotangents to `qbar` (both one per particle). See the module doc.
    pub fn forces_vjp(
        &self,
        eval: Evaluation,
        w: &[DVec3],
        xbar: &mut [DVec3],
        qbar: Option<&mut [f64]>,
    ) {
        let n = self.order.len();
        let particle = |k: usize| self.source_particle[self.order[k] as usize] as usize;
        let c: Vec<DVec3> = (0..n).map(|k| w[particle(k)] * self.qs[k]).collect();
        let variant = eval.far_variant();
        let tets = self.tets();
        // Per occupied tetrahedron, the cotangents of its vertex far values.
        let cv: Vec<[DVec3; 4]> = tets
            .par_iter()
            .map(|t| {
                let mut cv = [DVec3::ZERO; 4];
                if variant.is_some() {
                    for (ck, &o) in c[t.begin..t.end].iter().zip(&self.order[t.begin..t.end]) {
                        let l = &self.located[o as usize];
                        for (v, a) in cv.iter_mut().enumerate() {
                            *a += *ck * l.weights[v];
                        }
                    }
                }
                cv
            })
            .collect();
        let (mut xb, mut qb) = (self.target_rows(eval, &tets, &c), vec![0.0; n]);
        self.source_rows(eval, &tets, &c, &cv, &mut xb, &mut qb);
        if variant.is_some() {
            let mut site_bar = vec![DVec3::ZERO; self.site_count()];
            for (t, cv) in tets.iter().zip(&cv) {
                for (&j, a) in self.tet_sites(t.tet).iter().zip(cv) {
                    site_bar[j as usize] += *a;
                }
            }
            self.far_field_vjp(&site_bar, &mut xb, &mut qb);
        }
        for k in 0..n {
            xbar[particle(k)] += xb[k];
        }
        if let Some(qbar) = qbar {
            let e = self.fields_at_sources(eval);
            for (s, &i) in self.source_particle.iter().enumerate() {
                let k = self.rank[s] as usize;
                qbar[i as usize] += w[i as usize].dot(e[s]) + qb[k];
            }
        }
    }

    /// The target side of the near pairs and the interpolation, per sorted position k:
    /// k_c sum over its near sources s of q_s G c_k, plus the weights' transpose of
    /// (c_k . vf_v)_v.
    fn target_rows(&self, eval: Evaluation, tets: &[Tet], c: &[DVec3]) -> Vec<DVec3> {
        let text = eval == Evaluation::TextNearSet;
        let variant = eval.far_variant();
        let parts: Vec<(usize, Vec<DVec3>)> = units(tets)
            .into_par_iter()
            .map(|(o, kb, ke)| {
                let (tet, near) = (tets[o].tet, &tets[o].near);
                let vf = variant.map(|v| self.vertex_far(tet, near, v));
                let rows = (kb..ke)
                    .map(|k| {
                        let (p, ck) = (self.xs[k], c[k]);
                        let mut g = DVec3::ZERO;
                        for r in near.iter().filter(|r| !(text && r.mask != 0)) {
                            for s in (r.begin as usize..r.end as usize).filter(|&s| s != k) {
                                g += field_vjp(p - self.xs[s], self.qs[s], self.eps2, ck).0;
                            }
                        }
                        let mut own = g * COULOMB_K;
                        if let Some(vf) = vf {
                            let kuhn = self.located[self.order[k] as usize].kuhn as usize;
                            let g = [0, 1, 2, 3].map(|v| ck.dot(vf[v]));
                            own += weights_vjp(&self.frame, g, kuhn);
                        }
                        own
                    })
                    .collect();
                (kb, rows)
            })
            .collect();
        let mut xb = vec![DVec3::ZERO; self.order.len()];
        for (kb, rows) in parts {
            xb[kb..kb + rows.len()].copy_from_slice(&rows);
        }
        xb
    }

    /// The source side, gathered per sorted position s over the tetrahedra whose near
    /// set holds s's (the near relation's transpose, `Tet::users`): the near pairs,
    /// x_bar_s -= k_c q_s G c_k and q_bar_s += k_c phi . c_k over their targets k != s,
    /// and the `corrected` vertex terms from their sites, sign flipped. Added to xb, qb.
    fn source_rows(
        &self,
        eval: Evaluation,
        tets: &[Tet],
        c: &[DVec3],
        cv: &[[DVec3; 4]],
        xb: &mut [DVec3],
        qb: &mut [f64],
    ) {
        let text = eval == Evaluation::TextNearSet;
        let corrected = eval.far_variant() == Some(DdefVariant::Corrected);
        let sites: Vec<[DVec3; 4]> = tets
            .iter()
            .map(|t| {
                self.tet_sites(t.tet)
                    .map(|j| self.frame.site(self.frame.site_point(j)))
            })
            .collect();
        let parts: Vec<(usize, Vec<(DVec3, f64)>)> = units(tets)
            .into_par_iter()
            .map(|(o, sb, se)| {
                let rows = (sb..se)
                    .map(|s| {
                        let (p, qs) = (self.xs[s], self.qs[s]);
                        let (mut gx, mut gq) = (DVec3::ZERO, 0.0);
                        for &(u, mask) in &tets[o].users {
                            let t = &tets[u as usize];
                            if !(text && mask != 0) {
                                for k in (t.begin..t.end).filter(|&k| k != s) {
                                    let (g, ph) = field_vjp(self.xs[k] - p, qs, self.eps2, c[k]);
                                    gx -= g;
                                    gq += ph;
                                }
                            }
                            if corrected {
                                for v in (0..4).filter(|v| mask & (1 << v) != 0) {
                                    let (g, ph) = field_vjp(
                                        sites[u as usize][v] - p,
                                        qs,
                                        self.eps2,
                                        cv[u as usize][v],
                                    );
                                    gx += g;
                                    gq -= ph;
                                }
                            }
                        }
                        (gx * COULOMB_K, gq * COULOMB_K)
                    })
                    .collect();
                (sb, rows)
            })
            .collect();
        for (sb, rows) in parts {
            for (s, (gx, gq)) in (sb..).zip(rows) {
                xb[s] += gx;
                qb[s] += gq;
            }
        }
    }

    /// The occupied tetrahedra with their near ranges and the near relation's transpose.
    fn tets(&self) -> Vec<Tet> {
        let mut tets: Vec<Tet> = self
            .occupied()
            .into_par_iter()
            .map(|(tet, b, e)| Tet {
                tet,
                begin: b as usize,
                end: e as usize,
                near: self.near_ranges(tet),
                users: Vec::new(),
            })
            .collect();
        for o in 0..tets.len() {
            for i in 0..tets[o].near.len() {
                let (begin, mask) = (tets[o].near[i].begin as usize, tets[o].near[i].mask);
                // A near range is a non-empty tetrahedron's whole range.
                let t = tets
                    .binary_search_by_key(&begin, |t| t.begin)
                    .expect("a near range starts an occupied tetrahedron");
                tets[t].users.push((o as u32, mask));
            }
        }
        tets
    }

    /// The far field's transpose for site cotangents `site_bar`, added per sorted source:
    /// each source gathers over the sites with a nonzero cotangent whose far set holds it
    /// (a crowded tetrahedron's sources split over tasks, each source whole in one).
    fn far_field_vjp(&self, site_bar: &[DVec3], xb: &mut [DVec3], qb: &mut [f64]) {
        let active: Vec<u32> = (0..site_bar.len() as u32)
            .filter(|&j| site_bar[j as usize] != DVec3::ZERO)
            .collect();
        // Per tetrahedron, the active sites whose stencil holds it (increasing): its
        // sources are in M_j there, so not in that site's far set.
        let mut excluded: Vec<Vec<u32>> = vec![Vec::new(); self.start.len() - 1];
        let f = &self.frame;
        for &j in &active {
            let p = f.site_point(j);
            for e in &Stencils::get().site {
                if let Some(cell) = offset_cell(f.dims, p, e.dcell) {
                    let t = f.tet_id(cell, e.kuhn as usize) as usize;
                    if excluded[t].last() != Some(&j) {
                        excluded[t].push(j);
                    }
                }
            }
        }
        let sites: Vec<DVec3> = active.iter().map(|&j| f.site(f.site_point(j))).collect();
        let parts: Vec<(u32, Vec<(DVec3, f64)>)> = self
            .target_tasks()
            .into_par_iter()
            .map(|(tet, b, e)| {
                let skip = &excluded[tet as usize];
                let out = (b as usize..e as usize)
                    .map(|k| {
                        let (mut gx, mut gq) = (DVec3::ZERO, 0.0);
                        let mut next = skip.iter().peekable();
                        for (a, &j) in active.iter().enumerate() {
                            if next.peek() == Some(&&j) {
                                next.next();
                                continue;
                            }
                            let (g, p) = field_vjp(
                                sites[a] - self.xs[k],
                                self.qs[k],
                                self.eps2,
                                site_bar[j as usize],
                            );
                            gx -= g;
                            gq += p;
                        }
                        (gx * COULOMB_K, gq * COULOMB_K)
                    })
                    .collect();
                (b, out)
            })
            .collect();
        for (b, out) in parts {
            for (k, (gx, gq)) in out.into_iter().enumerate() {
                xb[b as usize + k] += gx;
                qb[b as usize + k] += gq;
            }
        }
    }
}

#[cfg(test)]
#[path = "lattice_adjoint_tests.rs"]
mod tests;
