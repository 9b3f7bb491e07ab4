//! The all-pairs Coulomb tangent, vectorized as the force is (`crate::coulomb`):
//! d f_i = k_c sum_{j != i} [(dq_i q_j + q_i dq_j) phi_ij + q_i q_j G_ij (dx_i - dx_j)],
//! phi = d / r^3, G delta = (delta - 3 d (d . delta) / r^2) / r^3, over the active particles
//! (q or dq nonzero) as structure-of-arrays sources in chunks of [`LANES`]. Lane l sums the
//! sources l, l + LANES, ... in order and the lanes are combined in a fixed tree, so the
//! result depends on neither the thread count nor the ISA build. The per-pair arithmetic is
//! the exact IEEE expression of `physics::point_charge::unit_field_and_jvp` (the tangent is not the hot loop of a
//! run; it keeps the reference's terms bit for bit, only their order differs).
//!
//! Self pair: excluded by index (its lane gets zero charges and tangent at the target,
//! r^2 padded by 1: an exact zero). Two distinct coincident sources with eps = 0: 0 / 0,
//! a non-finite tangent as the force is.

use crate::coulomb::LANES;
use crate::physics::point_charge;
use glam::DVec3;

/// The active particles as structure-of-arrays f64 (position, charge, their tangents).
#[derive(Clone, Debug, Default)]
pub(crate) struct TangentSources {
    x: [Vec<f64>; 3],
    dx: [Vec<f64>; 3],
    q: Vec<f64>,
    dq: Vec<f64>,
    /// Particle index -> slot (u32::MAX when inactive).
    slot: Vec<u32>,
}

/// One target's data.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    pub x: DVec3,
    pub dx: DVec3,
    pub q: f64,
    pub dq: f64,
}

impl TangentSources {
    /// The particles `i` with `active(i)`, in increasing index.
    pub(crate) fn new(
        x: &[DVec3],
        dx: &[DVec3],
        q: &[f64],
        dq: impl Fn(usize) -> f64,
        active: impl Fn(usize) -> bool,
    ) -> Self {
        let mut s = Self::default();
        for i in 0..x.len() {
            if !active(i) {
                s.slot.push(u32::MAX);
                continue;
            }
            s.slot.push(s.q.len() as u32);
            for k in 0..3 {
                s.x[k].push(x[i][k]);
                s.dx[k].push(dx[i][k]);
            }
            s.q.push(q[i]);
            s.dq.push(dq(i));
        }
        s
    }

    fn len(&self) -> usize {
        self.q.len()
    }

    /// sum_{j != i} [(dq_i q_j + q_i dq_j) phi_ij + q_i q_j G_ij (dx_i - dx_j)] without
    /// k_c, for particle `i` (its own term excluded by index).
    pub(crate) fn tangent_at(&self, i: usize, t: Target, eps2: f64) -> DVec3 {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the feature was just detected on this processor.
                return unsafe { self.tangent_avx512(i, t, eps2) };
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: as above.
                return unsafe { self.tangent_avx2(i, t, eps2) };
            }
        }
        self.tangent_portable(i, t, eps2)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    fn tangent_avx512(&self, i: usize, t: Target, eps2: f64) -> DVec3 {
        self.tangent_portable(i, t, eps2)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn tangent_avx2(&self, i: usize, t: Target, eps2: f64) -> DVec3 {
        self.tangent_portable(i, t, eps2)
    }

    #[inline(always)]
    fn tangent_portable(&self, i: usize, t: Target, eps2: f64) -> DVec3 {
        let m = self.len();
        let skip = self.slot.get(i).copied().unwrap_or(u32::MAX) as usize;
        let mut acc = [[0.0; LANES]; 3];
        let full = m / LANES;
        for c in 0..=full {
            let b = c * LANES;
            if b >= m {
                break;
            }
            if c < full && !(b..b + LANES).contains(&skip) {
                let lane = |v: &Vec<f64>| -> [f64; LANES] {
                    v[b..b + LANES].try_into().expect("a full chunk")
                };
                let xs = [lane(&self.x[0]), lane(&self.x[1]), lane(&self.x[2])];
                let ds = [lane(&self.dx[0]), lane(&self.dx[1]), lane(&self.dx[2])];
                chunk::<false>(
                    &mut acc,
                    t,
                    &xs,
                    &ds,
                    &lane(&self.q),
                    &lane(&self.dq),
                    &[0.0; LANES],
                    eps2,
                );
            } else {
                // The target's own chunk or the ragged last one: masked lanes are zeros.
                let mut xs = [[t.x.x; LANES], [t.x.y; LANES], [t.x.z; LANES]];
                let mut ds = [[t.dx.x; LANES], [t.dx.y; LANES], [t.dx.z; LANES]];
                let (mut qs, mut dqs, mut pad) = ([0.0; LANES], [0.0; LANES], [1.0; LANES]);
                for l in 0..LANES {
                    let j = b + l;
                    if j < m && j != skip {
                        for k in 0..3 {
                            xs[k][l] = self.x[k][j];
                            ds[k][l] = self.dx[k][j];
                        }
                        qs[l] = self.q[j];
                        dqs[l] = self.dq[j];
                        pad[l] = 0.0;
                    }
                }
                chunk::<true>(&mut acc, t, &xs, &ds, &qs, &dqs, &pad, eps2);
            }
        }
        let tree =
            |a: &[f64; LANES]| ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
        DVec3::new(tree(&acc[0]), tree(&acc[1]), tree(&acc[2]))
    }
}

/// One chunk of pair terms, the arithmetic of `physics::point_charge::unit_field_and_jvp` lane by lane; `pad`
/// is added to r^2 when `PAD` (+ 0 leaves the other lanes unchanged).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn chunk<const PAD: bool>(
    acc: &mut [[f64; LANES]; 3],
    t: Target,
    xs: &[[f64; LANES]; 3],
    ds: &[[f64; LANES]; 3],
    qs: &[f64; LANES],
    dqs: &[f64; LANES],
    pad: &[f64; LANES],
    eps2: f64,
) {
    for l in 0..LANES {
        let d = DVec3::new(t.x.x - xs[0][l], t.x.y - xs[1][l], t.x.z - xs[2][l]);
        let delta = DVec3::new(t.dx.x - ds[0][l], t.dx.y - ds[1][l], t.dx.z - ds[2][l]);
        let mut r2 = d.length_squared() + eps2;
        if PAD {
            r2 += pad[l];
        }
        let (phi, gd) = point_charge::unit_field_and_jvp_at(d, r2, delta);
        let term = phi * (t.dq * qs[l] + t.q * dqs[l]) + gd * (t.q * qs[l]);
        acc[0][l] += term.x;
        acc[1][l] += term.y;
        acc[2][l] += term.z;
    }
}
