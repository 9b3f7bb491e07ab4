//! The forward-mode tangent (JVP) of the lattice DDEF forces with the evaluation's discrete
//! structure frozen (docs/physics.md §9, "Through DDEF"): the frame (quantized box, lattice, sites), each
//! charge's tetrahedron, the sorted order and so the near/far split (M_j, S(tau)) are the
//! primal evaluation's. Along position tangents dx and charge tangents dq:
//! - far field at site j (eq. 17), linear in the source charges:
//!   dE_far(u_j) = k_c sum_{s not in M_j} [dq_s phi(u_j - x_s) - q_s G(u_j - x_s) dx_s];
//! - the `corrected` vertex terms, the same over their sources;
//! - a target's barycentric weights, affine in its position ([`weights_jvp`]);
//! - the near sum, exact pairs: k_c sum_{s in S(tau), s != i} [dq_s phi + q_s G (dx_i - dx_s)];
//! - the force q_i E_i: dq_i E_i + q_i dE_i.
//!
//! Every piece is linear in (dx, dq) through the per-pair derivative
//! `physics::point_charge::field_jvp`, so its transpose is the same sums read the other
//! way ([`super::lattice_adjoint`]). The structure is piecewise
//! constant in the positions, so this is the DDEF map's derivative wherever no charge
//! crosses a tetrahedron face and the box keeps its quanta: almost everywhere; at a
//! crossing the force jumps.
//!
//! A particle outside the source set (q = 0) with dq != 0 would enter the structure: it
//! has no derivative there, and its force tangent is NaN (the gradient drivers refuse such
//! directions up front).

use super::field::Evaluation;
use super::lattice_field::{weights_jvp, LatticeDdef, NearRange};
use super::DdefVariant;
use crate::model::COULOMB_K;
use crate::physics::point_charge::field_jvp;
use glam::DVec3;
use rayon::prelude::*;

/// Source tangents in sorted order.
struct Sorted {
    dx: Vec<DVec3>,
    dq: Vec<f64>,
}

impl LatticeDdef {
    fn sorted_tangents(&self, dx: &[DVec3], dq: &[f64]) -> Sorted {
        let particle = |k: usize| self.source_particle[self.order[k] as usize] as usize;
        Sorted {
            dx: (0..self.order.len()).map(|k| dx[particle(k)]).collect(),
            dq: (0..self.order.len()).map(|k| dq[particle(k)]).collect(),
        }
    }

    /// dE_far(u_j) per site (k_c included): [`LatticeDdef::far_field`]'s sums
    /// differentiated (the sites do not move).
    fn far_field_jvp(&self, t: &Sorted) -> Vec<DVec3> {
        let sites = self.site_count();
        (0..sites as u32)
            .into_par_iter()
            .with_min_len(4)
            .map(|j| {
                let u = self.frame.site(self.frame.site_point(j));
                let ranges = self.site_ranges(j);
                let mut r = ranges.iter().peekable();
                let mut acc = DVec3::ZERO;
                for k in 0..self.xs.len() as u32 {
                    while r.peek().is_some_and(|&&(_, e)| k >= e) {
                        r.next();
                    }
                    if r.peek().is_some_and(|&&(b, _)| k >= b) {
                        continue;
                    }
                    let k = k as usize;
                    acc += field_jvp(u - self.xs[k], self.qs[k], self.eps2, -t.dx[k], t.dq[k]);
                }
                acc * COULOMB_K
            })
            .collect()
    }

    /// The tangent of [`LatticeDdef::vertex_far`] at tetrahedron `tet`.
    fn vertex_far_jvp(
        &self,
        tet: u32,
        near: &[NearRange],
        variant: DdefVariant,
        dfar: &[DVec3],
        t: &Sorted,
    ) -> [DVec3; 4] {
        let sites = self.tet_sites(tet);
        let mut out = sites.map(|j| dfar[j as usize]);
        if variant == DdefVariant::Corrected {
            for (v, o) in out.iter_mut().enumerate() {
                let u = self.frame.site(self.frame.site_point(sites[v]));
                let mut c = DVec3::ZERO;
                for r in near.iter().filter(|r| r.mask & (1 << v) != 0) {
                    for s in r.begin as usize..r.end as usize {
                        c += field_jvp(u - self.xs[s], self.qs[s], self.eps2, -t.dx[s], t.dq[s]);
                    }
                }
                *o -= c * COULOMB_K;
            }
        }
        out
    }

    /// The field's tangent dE (k_c included) at every source, in source order, along the
    /// particles' tangents `dx`, `dq` (see the module doc).
    pub fn fields_at_sources_jvp(&self, eval: Evaluation, dx: &[DVec3], dq: &[f64]) -> Vec<DVec3> {
        let t = self.sorted_tangents(dx, dq);
        let variant = eval.far_variant();
        let text = eval == Evaluation::TextNearSet;
        let dfar = variant.map(|_| self.far_field_jvp(&t));
        let parts: Vec<(u32, Vec<DVec3>)> = self
            .target_tasks()
            .into_par_iter()
            .map(|(tet, b, e)| {
                let near = self.near_ranges(tet);
                let far = variant.map(|v| {
                    let dfar = dfar.as_deref().expect("computed with the variant");
                    (
                        self.vertex_far(tet, &near, v),
                        self.vertex_far_jvp(tet, &near, v, dfar, &t),
                    )
                });
                let fields = (b..e)
                    .map(|k| {
                        let ku = k as usize;
                        let (p, dp) = (self.xs[ku], t.dx[ku]);
                        let mut acc = DVec3::ZERO;
                        for r in near.iter().filter(|r| !(text && r.mask != 0)) {
                            for s in (r.begin..r.end).filter(|&s| s != k) {
                                let s = s as usize;
                                acc += field_jvp(
                                    p - self.xs[s],
                                    self.qs[s],
                                    self.eps2,
                                    dp - t.dx[s],
                                    t.dq[s],
                                );
                            }
                        }
                        let mut de = acc * COULOMB_K;
                        if let Some((vf, dvf)) = far {
                            let l = &self.located[self.order[ku] as usize];
                            let dw = weights_jvp(&self.frame, dp, l.kuhn as usize);
                            for v in 0..4 {
                                de += vf[v] * dw[v] + dvf[v] * l.weights[v];
                            }
                        }
                        de
                    })
                    .collect();
                (b, fields)
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

    /// The tangent of [`LatticeDdef::forces_into`] along the particles' tangents `dx`, `dq`
    /// into `out` (one per particle): dq_i E_i + q_i dE_i on the sources; 0 on the other
    /// particles, NaN on one with dq != 0 (it would enter the structure).
    pub fn forces_jvp(&self, eval: Evaluation, dx: &[DVec3], dq: &[f64], out: &mut [DVec3]) {
        out.iter_mut()
            .zip(dq)
            .for_each(|(f, &d)| *f = if d == 0.0 { DVec3::ZERO } else { DVec3::NAN });
        let e = self.fields_at_sources(eval);
        let de = self.fields_at_sources_jvp(eval, dx, dq);
        for (s, &i) in self.source_particle.iter().enumerate() {
            let i = i as usize;
            out[i] = e[s] * dq[i] + de[s] * self.qs[self.rank[s] as usize];
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::ddef::lattice_field::weights_in;
    use crate::ddef::{DdefConfig, DdefSamples, DdefSolver};

    /// n random charges in a box with random tangents (x, q, dx, dq).
    pub(in crate::ddef) fn cloud(
        n: usize,
        seed: u64,
    ) -> (Vec<DVec3>, Vec<f64>, Vec<DVec3>, Vec<f64>) {
        let mut s = seed;
        let mut unit = move || {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        let x = (0..n)
            .map(|_| DVec3::new(unit(), unit() * 0.7, unit() * 1.3))
            .collect();
        let q = (0..n).map(|_| (unit() - 0.5) * 2e-6).collect();
        let dx = (0..n)
            .map(|_| DVec3::new(unit(), unit(), unit()) - 0.5)
            .collect();
        let dq = (0..n).map(|_| (unit() - 0.5) * 1e-6).collect();
        (x, q, dx, dq)
    }

    /// The JVP against central differences of the same evaluation with its structure
    /// frozen (frame and tetrahedra given, `LatticeDdef::with_tets`): every variant, with
    /// and without softening. Step 1e-7 on O(1) positions; the frozen map is smooth, so
    /// the truncation is O(1e-14) and the cancellation about 1e-9 relative: 1e-6 holds with
    /// margin, and a missing term (a dropped dw, a wrong sign on a source's dx) is O(1).
    #[test]
    fn forces_jvp_matches_central_differences_of_the_frozen_structure() {
        let (x, q, dx, dq) = cloud(300, 11);
        let config = DdefConfig {
            samples: DdefSamples::Count(64),
            ..DdefConfig::default()
        };
        let plan = DdefSolver::plan_for(config, &x, &q).unwrap();
        for eps in [0.0, 0.02] {
            let l = LatticeDdef::new(&plan, &x, &q, eps).unwrap();
            let tets: Vec<u32> = l.located().iter().map(|l| l.tet).collect();
            for eval in [
                Evaluation::Ddef(DdefVariant::Paper),
                Evaluation::Ddef(DdefVariant::Corrected),
                Evaluation::TextNearSet,
                Evaluation::NearOnly,
            ] {
                let at = |a: f64| {
                    let xa: Vec<DVec3> = x.iter().zip(&dx).map(|(x, d)| *x + *d * a).collect();
                    let qa: Vec<f64> = q.iter().zip(&dq).map(|(q, d)| q + d * a).collect();
                    let f = LatticeDdef::with_tets(*l.frame(), &xa, &qa, eps, &tets).unwrap();
                    let mut out = vec![DVec3::ZERO; x.len()];
                    f.forces_into(eval, &mut out);
                    out
                };
                let h = 1e-7;
                let (p, m) = (at(h), at(-h));
                let mut an = vec![DVec3::ZERO; x.len()];
                l.forces_jvp(eval, &dx, &dq, &mut an);
                let scale = an.iter().map(|v| v.length()).fold(0.0, f64::max);
                for i in 0..x.len() {
                    let fd = (p[i] - m[i]) / (2.0 * h);
                    assert!(
                        (an[i] - fd).length() <= 1e-6 * scale,
                        "{eval:?} eps {eps} particle {i}: {} vs {fd}",
                        an[i]
                    );
                }
            }
        }
    }

    /// The weights' derivative against central differences of `weights_in` in a fixed
    /// cell and Kuhn type (affine: exact up to roundoff).
    #[test]
    fn weights_jvp_matches_central_differences() {
        let (x, q, dx, _) = cloud(40, 9);
        let config = DdefConfig {
            samples: DdefSamples::Count(64),
            ..DdefConfig::default()
        };
        let l = DdefSolver::reference_for(config, &x, &q, 0.0).unwrap();
        let f = l.frame();
        for (s, loc) in l.located().iter().enumerate() {
            let (p, d) = (x[s], dx[s]);
            let (cell, k) = (loc.cell, loc.kuhn as usize);
            let h = 1e-6;
            let wp = weights_in(f, p + d * h, cell, k);
            let wm = weights_in(f, p - d * h, cell, k);
            let an = weights_jvp(f, d, k);
            for v in 0..4 {
                let fd = (wp[v] - wm[v]) / (2.0 * h);
                assert!((an[v] - fd).abs() <= 1e-7 * (1.0 + an[v].abs()), "{s} {v}");
            }
            assert!(
                an.iter().sum::<f64>().abs() < 1e-12,
                "the weights sum to 1: their derivatives to 0"
            );
        }
    }

    /// Linearity of each piece in (dx, dq): J(a u + b w) = a J u + b J w to roundoff.
    #[test]
    fn forces_jvp_is_linear_in_the_tangent() {
        let (x, q, dx, dq) = cloud(200, 5);
        let (_, _, dx2, dq2) = cloud(200, 6);
        let config = DdefConfig {
            samples: DdefSamples::Count(40),
            ..DdefConfig::default()
        };
        let l = DdefSolver::reference_for(config, &x, &q, 0.01).unwrap();
        let eval = Evaluation::Ddef(DdefVariant::Corrected);
        let jvp = |dx: &[DVec3], dq: &[f64]| {
            let mut out = vec![DVec3::ZERO; x.len()];
            l.forces_jvp(eval, dx, dq, &mut out);
            out
        };
        let (a, b) = (0.3, -1.7);
        let mix_x: Vec<DVec3> = dx.iter().zip(&dx2).map(|(u, w)| *u * a + *w * b).collect();
        let mix_q: Vec<f64> = dq.iter().zip(&dq2).map(|(u, w)| u * a + w * b).collect();
        let (j1, j2, j) = (jvp(&dx, &dq), jvp(&dx2, &dq2), jvp(&mix_x, &mix_q));
        let scale = j.iter().map(|v| v.length()).fold(0.0, f64::max);
        for i in 0..x.len() {
            let want = j1[i] * a + j2[i] * b;
            assert!((j[i] - want).length() <= 1e-12 * scale, "particle {i}");
        }
    }

    /// An uncharged particle with a charge tangent would enter the structure: NaN, not 0.
    #[test]
    fn a_charge_tangent_on_an_uncharged_particle_is_not_finite() {
        let (x, mut q, dx, dq) = cloud(50, 3);
        q[7] = 0.0;
        let config = DdefConfig {
            samples: DdefSamples::Count(27),
            ..DdefConfig::default()
        };
        let l = DdefSolver::reference_for(config, &x, &q, 0.0).unwrap();
        let mut out = vec![DVec3::ZERO; x.len()];
        l.forces_jvp(Evaluation::Ddef(DdefVariant::Paper), &dx, &dq, &mut out);
        assert!(!out[7].is_finite());
        assert!(out.iter().enumerate().all(|(i, f)| i == 7 || f.is_finite()));
        let mut dq0 = dq.clone();
        dq0[7] = 0.0;
        l.forces_jvp(Evaluation::Ddef(DdefVariant::Paper), &dx, &dq0, &mut out);
        assert_eq!(out[7], DVec3::ZERO);
    }
}
