//! The physical model: particles and springs, validated on construction.
//!
//! A [`System`] holds the constant parameters and the initial state of a charged
//! mass-spring system (docs/physics.md §1). Simulation state that changes over a run lives
//! in [`State`], so one `System` can seed many runs (sweeps, gradients, GPU vs CPU checks).

pub mod adjacency;
pub mod close_pairs;
pub mod mesh;
pub mod update;

pub use adjacency::{AdjEntry, Adjacency};
pub use mesh::{Mesh, MeshCounts, MeshError};
pub use update::{check_state, Topology};

use glam::DVec3;

/// Coulomb constant k_c in N m^2 / C^2.
pub const COULOMB_K: f64 = 8.987_551_792_3e9;

/// The largest finite f32 (the GPU's and the PLY frames' precision), as f64: a state
/// beyond it is a divergence on every backend.
pub const F32_MAX: f64 = f32::MAX as f64;

/// One spring between particles `i` and `j` (SI units).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spring {
    pub i: u32,
    pub j: u32,
    /// Stiffness k in N/m (not per unit rest length; see docs/physics.md §1).
    pub stiffness: f64,
    /// Rest length L in m.
    pub rest_length: f64,
    /// Damping c in N s/m along the spring axis.
    pub damping: f64,
}

/// A unit spring (k = 1 N/m, L = 1 m, no damping) for tests that need only topology.
#[cfg(test)]
pub(crate) fn unit_spring(i: u32, j: u32) -> Spring {
    Spring {
        i,
        j,
        stiffness: 1.0,
        rest_length: 1.0,
        damping: 0.0,
    }
}

/// Errors found while building a [`System`]. Each names the offending index.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    #[error("the system has no particles")]
    Empty,
    #[error(
        "particle arrays disagree in length: {what} has {got} entries, positions has {expected}"
    )]
    LengthMismatch {
        what: &'static str,
        got: usize,
        expected: usize,
    },
    #[error(
        "spring {spring}: endpoint {index} is out of range (the system has {particles} particles)"
    )]
    SpringIndexOutOfRange {
        spring: usize,
        index: u32,
        particles: usize,
    },
    #[error("spring {spring} joins particle {index} to itself")]
    SelfSpring { spring: usize, index: u32 },
    /// A mass that is not positive and finite, or whose inverse 1/m (every integrator's
    /// acceleration) overflows f64: below about 5.6e-309 kg, subnormals included.
    #[error(
        "particle {index}: mass must be positive and finite with a finite inverse 1/m (at \
         least about 5.6e-309 kg), got {}",
        crate::display::num(*value)
    )]
    BadMass { index: usize, value: f64 },
    #[error("particle {index}: {what} is not finite")]
    NonFinite { index: usize, what: &'static str },
    #[error(
        "spring {spring}: {what} must be finite and non-negative, got {}",
        crate::display::num(*value)
    )]
    BadSpringParameter {
        spring: usize,
        what: &'static str,
        value: f64,
    },
    #[error("{what} has {got} entries but the system has {expected} springs")]
    SpringArrayLength {
        what: &'static str,
        got: usize,
        expected: usize,
    },
    /// An update of a running simulator that would change what it keeps fixed
    /// ([`Topology`]).
    #[error("a running simulator keeps its {what}: {detail}; build a new simulator to change it")]
    TopologyChanged { what: &'static str, detail: String },
    #[error("too many particles: {count} exceeds the limit of {limit}")]
    TooManyParticles { count: usize, limit: usize },
    /// Charges so large that k_c q_i q_j overflows f64 whatever their distance: no
    /// softening helps, the charges are out of range.
    #[error(
        "the Coulomb product k_c q_i q_j of {what} is not finite in f64 (charge {}): the \
         charges are too large for any distance or softening",
        crate::display::num(*charge)
    )]
    ChargeProductOverflow { what: String, charge: f64 },
    /// Two charged particles so close (coincident, or r^2 + eps^2 below the smallest
    /// normal f64) that their exact Coulomb force is infinite or overflows f64.
    #[error(
        "charged particles {i} and {j} are {} m apart: with softening {softening} m their \
         Coulomb force is not finite in f64 (coincident charges, or r^2 + eps^2 underflows \
         or k_c q_i q_j / r^3 overflows); set coulomb.softening to a positive length \
         (e.g. 1e-3) or move them apart",
        metres(*distance)
    )]
    SingularCoulombPair {
        i: usize,
        j: usize,
        distance: f64,
        softening: f64,
    },
    /// An external point charge on (or, as above, too close to) a charged particle at t = 0.
    #[error(
        "external charge {external} is {} m from charged particle {particle} at t = 0: \
         with softening {softening} m their Coulomb force is not finite in f64; set \
         coulomb.softening to a positive length or move the charge",
        metres(*distance)
    )]
    SingularExternalCharge {
        external: usize,
        particle: usize,
        distance: f64,
        softening: f64,
    },
}

/// A length for a message: `0`, or in exponent form (f64's `Display` would print
/// 1e-160 with 160 zeros).
fn metres(d: f64) -> String {
    crate::display::num(d).to_string()
}

/// |d| without underflow or overflow of its square (1e-170 m stays 1e-170 m).
pub fn robust_length(d: DVec3) -> f64 {
    let m = d.abs().max_element();
    if m > 0.0 && m.is_finite() {
        m * (d / m).length()
    } else {
        m
    }
}

/// True when the exact Coulomb pair term with squared distance `r2`, softening `eps2` and
/// charge product `kqq` = k_c q_i q_j cannot be evaluated in f64: r^2 + eps^2 is zero or
/// subnormal, or the force scale k_c |q_i q_j| / (r^2 + eps^2)^(3/2) overflows.
fn singular_pair(r2: f64, eps2: f64, kqq: f64) -> bool {
    let s2 = r2 + eps2;
    !(s2 >= f64::MIN_POSITIVE && (kqq.abs() / (s2 * s2.sqrt())).is_finite())
}

/// Pairs closer than this may be singular (see [`singular_pair`]) for charges of at most
/// `qmax` in magnitude; pairs farther apart are not. Infinite when k_c qmax^2 overflows.
fn singular_distance(qmax: f64) -> f64 {
    let overflow = (COULOMB_K * qmax * qmax / f64::MAX).cbrt();
    2.0 * f64::MIN_POSITIVE.sqrt().max(overflow)
}

/// The pairs of [`System::check_coulomb`] for particles at `x` with charges `q` (a
/// replacement state is checked as the initial one): the first two distinct charged
/// particles whose exact Coulomb force with softening `softening` m is not finite in f64.
pub(crate) fn check_coulomb_pairs(
    x: &[DVec3],
    q: &[f64],
    softening: f64,
) -> Result<(), ModelError> {
    let charged: Vec<usize> = (0..q.len()).filter(|&i| q[i] != 0.0).collect();
    if charged.len() < 2 {
        return Ok(());
    }
    let xc: Vec<DVec3> = charged.iter().map(|&i| x[i]).collect();
    let qc: Vec<f64> = charged.iter().map(|&i| q[i]).collect();
    let qmax = qc.iter().fold(0.0, |m: f64, q| m.max(q.abs()));
    let eps2 = softening * softening;
    let found = close_pairs::first_close_pair(&xc, singular_distance(qmax), |a, b| {
        singular_pair(
            xc[a].distance_squared(xc[b]),
            eps2,
            COULOMB_K * qc[a] * qc[b],
        )
    });
    match found {
        Some((a, b)) => Err(ModelError::SingularCoulombPair {
            i: charged[a],
            j: charged[b],
            distance: robust_length(xc[a] - xc[b]),
            softening,
        }),
        None => Ok(()),
    }
}

/// A validated charged mass-spring system: constant parameters plus its initial state.
///
/// Fields are read-only after construction; build one with [`System::new`], which checks
/// every input and returns a [`ModelError`] naming the first problem it finds.
#[derive(Clone, Debug)]
pub struct System {
    positions: Vec<DVec3>,
    velocities: Vec<DVec3>,
    masses: Vec<f64>,
    charges: Vec<f64>,
    pinned: Vec<bool>,
    springs: Vec<Spring>,
    /// Triangles for output (PLY faces); may be empty.
    faces: Vec<[u32; 3]>,
}

/// Raw inputs to [`System::new`]. Empty `velocities`, `charges` and `pinned` mean zero,
/// uncharged and free for every particle.
#[derive(Clone, Debug, Default)]
pub struct SystemDesc {
    pub positions: Vec<DVec3>,
    pub velocities: Vec<DVec3>,
    pub masses: Vec<f64>,
    pub charges: Vec<f64>,
    pub pinned: Vec<bool>,
    pub springs: Vec<Spring>,
    pub faces: Vec<[u32; 3]>,
}

impl System {
    /// Particle indices are u32 on the GPU; leave headroom for sentinels.
    pub const MAX_PARTICLES: usize = (u32::MAX / 2) as usize;

    /// Validates `desc` and builds the system.
    pub fn new(desc: SystemDesc) -> Result<Self, ModelError> {
        let n = desc.positions.len();
        if n == 0 {
            return Err(ModelError::Empty);
        }
        if n > Self::MAX_PARTICLES {
            return Err(ModelError::TooManyParticles {
                count: n,
                limit: Self::MAX_PARTICLES,
            });
        }
        let fill = |v: Vec<DVec3>, what| -> Result<Vec<DVec3>, ModelError> {
            match v.len() {
                0 => Ok(vec![DVec3::ZERO; n]),
                len if len == n => Ok(v),
                got => Err(ModelError::LengthMismatch {
                    what,
                    got,
                    expected: n,
                }),
            }
        };
        let velocities = fill(desc.velocities, "velocities")?;
        let check_len = |len: usize, what| {
            if len == n {
                Ok(())
            } else {
                Err(ModelError::LengthMismatch {
                    what,
                    got: len,
                    expected: n,
                })
            }
        };
        check_len(desc.masses.len(), "masses")?;
        let charges = if desc.charges.is_empty() {
            vec![0.0; n]
        } else {
            check_len(desc.charges.len(), "charges")?;
            desc.charges
        };
        let pinned = if desc.pinned.is_empty() {
            vec![false; n]
        } else {
            check_len(desc.pinned.len(), "pinned")?;
            desc.pinned
        };

        for i in 0..n {
            if !desc.positions[i].is_finite() {
                return Err(ModelError::NonFinite {
                    index: i,
                    what: "position",
                });
            }
            if !velocities[i].is_finite() {
                return Err(ModelError::NonFinite {
                    index: i,
                    what: "velocity",
                });
            }
            if !charges[i].is_finite() {
                return Err(ModelError::NonFinite {
                    index: i,
                    what: "charge",
                });
            }
            let m = desc.masses[i];
            if !(m.is_finite() && m > 0.0 && (1.0 / m).is_finite()) {
                return Err(ModelError::BadMass { index: i, value: m });
            }
        }
        for (k, s) in desc.springs.iter().enumerate() {
            for index in [s.i, s.j] {
                if index as usize >= n {
                    return Err(ModelError::SpringIndexOutOfRange {
                        spring: k,
                        index,
                        particles: n,
                    });
                }
            }
            if s.i == s.j {
                return Err(ModelError::SelfSpring {
                    spring: k,
                    index: s.i,
                });
            }
            for (what, value) in [
                ("stiffness", s.stiffness),
                ("rest length", s.rest_length),
                ("damping", s.damping),
            ] {
                if !(value.is_finite() && value >= 0.0) {
                    return Err(ModelError::BadSpringParameter {
                        spring: k,
                        what,
                        value,
                    });
                }
            }
        }
        for (f, face) in desc.faces.iter().enumerate() {
            if let Some(&index) = face.iter().find(|&&v| v as usize >= n) {
                // Faces are output-only; still never let a bad index reach a writer.
                return Err(ModelError::SpringIndexOutOfRange {
                    spring: f,
                    index,
                    particles: n,
                });
            }
        }
        Ok(Self {
            positions: desc.positions,
            velocities,
            masses: desc.masses,
            charges,
            pinned,
            springs: desc.springs,
            faces: desc.faces,
        })
    }

    pub fn len(&self) -> usize {
        self.positions.len()
    }
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }
    pub fn positions(&self) -> &[DVec3] {
        &self.positions
    }
    pub fn velocities(&self) -> &[DVec3] {
        &self.velocities
    }
    pub fn masses(&self) -> &[f64] {
        &self.masses
    }
    pub fn charges(&self) -> &[f64] {
        &self.charges
    }
    pub fn pinned(&self) -> &[bool] {
        &self.pinned
    }
    pub fn springs(&self) -> &[Spring] {
        &self.springs
    }
    pub fn faces(&self) -> &[[u32; 3]] {
        &self.faces
    }
    /// Number of particles with non-zero charge (the Coulomb sources).
    pub fn charged_count(&self) -> usize {
        self.charges.iter().filter(|&&q| q != 0.0).count()
    }
    /// Indices of the charged particles, in increasing order.
    pub fn charged_indices(&self) -> Vec<u32> {
        (0..self.len() as u32)
            .filter(|&i| self.charges[i as usize] != 0.0)
            .collect()
    }

    /// The load-time Coulomb check (exact Coulomb, softening `softening` m): the first
    /// pair of distinct charged particles (when `pairs`, i.e. the Coulomb method sums them)
    /// or external charge `(position at t = 0, charge)` and charged particle whose exact
    /// force is infinite or overflows f64 (see [`ModelError::SingularCoulombPair`]).
    /// Pairs are found through [`close_pairs`], not an all-pairs loop.
    pub fn check_coulomb(
        &self,
        softening: f64,
        pairs: bool,
        externals: &[(DVec3, f64)],
    ) -> Result<(), ModelError> {
        let eps2 = softening * softening;
        let charged = self.charged_indices();
        let qmax = charged
            .iter()
            .map(|&i| self.charges[i as usize].abs())
            .fold(0.0, f64::max);
        let largest = |q: f64| {
            charged
                .iter()
                .find(|&&i| self.charges[i as usize].abs() == q)
        };
        if pairs && charged.len() > 1 && !(COULOMB_K * qmax * qmax).is_finite() {
            let i = largest(qmax).copied().unwrap_or_default();
            return Err(ModelError::ChargeProductOverflow {
                what: format!("the largest charge (particle {i}) with itself"),
                charge: self.charges[i as usize],
            });
        }
        for (k, &(_, qe)) in externals.iter().enumerate() {
            if !(COULOMB_K * qmax * qe).is_finite() {
                let i = largest(qmax).copied().unwrap_or_default();
                return Err(ModelError::ChargeProductOverflow {
                    what: format!("external charge {k} and particle {i}"),
                    charge: qe,
                });
            }
        }
        if pairs {
            check_coulomb_pairs(&self.positions, &self.charges, softening)?;
        }
        for (k, &(xe, qe)) in externals.iter().enumerate() {
            if qe == 0.0 {
                continue;
            }
            for &i in &charged {
                let (xi, qi) = (self.positions[i as usize], self.charges[i as usize]);
                if singular_pair(xi.distance_squared(xe), eps2, COULOMB_K * qi * qe) {
                    return Err(ModelError::SingularExternalCharge {
                        external: k,
                        particle: i as usize,
                        distance: robust_length(xi - xe),
                        softening,
                    });
                }
            }
        }
        Ok(())
    }

    /// A copy with every charge multiplied by `scale` (parameter sweeps, gradients),
    /// checked as [`System::new`] checks charges: a non-finite product (a NaN or infinite
    /// `scale`) names the particle.
    pub fn with_charge_scale(&self, scale: f64) -> Result<Self, ModelError> {
        let charges: Vec<f64> = self.charges.iter().map(|q| q * scale).collect();
        self.with_charges(&charges)
    }
    /// A copy with every spring stiffness multiplied by `scale`, checked as
    /// [`System::new`] checks stiffnesses: a negative, NaN or infinite product names the
    /// spring.
    pub fn with_stiffness_scale(&self, scale: f64) -> Result<Self, ModelError> {
        let stiffnesses: Vec<f64> = self.springs.iter().map(|s| s.stiffness * scale).collect();
        self.with_stiffnesses(&stiffnesses)
    }

    /// The initial state of a run.
    pub fn initial_state(&self) -> State {
        State {
            x: self.positions.clone(),
            v: self.velocities.clone(),
            t: 0.0,
            step: 0,
        }
    }
}

/// Positions and velocities at time `t` (after `step` steps).
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    pub x: Vec<DVec3>,
    pub v: Vec<DVec3>,
    pub t: f64,
    pub step: u64,
}

impl State {
    /// True when every position and velocity is finite.
    pub fn is_finite(&self) -> bool {
        self.x.iter().chain(self.v.iter()).all(|p| p.is_finite())
    }
    /// The first particle whose position or velocity has a component that f32 (the PLY
    /// frames' and the GPU's precision) cannot hold: non-finite or beyond `f32::MAX`.
    pub fn first_outside_f32(&self) -> Option<usize> {
        let fits = |p: &DVec3| p.to_array().iter().all(|c| c.abs() <= F32_MAX);
        (0..self.x.len()).find(|&i| !fits(&self.x[i]) || !self.v.get(i).is_none_or(fits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn charged(x: Vec<DVec3>, q: Vec<f64>) -> System {
        let n = x.len();
        System::new(SystemDesc {
            positions: x,
            masses: vec![1.0; n],
            charges: q,
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn singular_coulomb_pairs_are_named_and_softening_accepts_them() {
        let p = DVec3::new(0.3, -0.2, 0.1);
        let s = charged(
            vec![DVec3::ZERO, p, DVec3::X, p],
            vec![1e-6, 1e-6, 0.0, -2e-6],
        );
        assert_eq!(
            s.check_coulomb(0.0, true, &[]),
            Err(ModelError::SingularCoulombPair {
                i: 1,
                j: 3,
                distance: 0.0,
                softening: 0.0
            })
        );
        s.check_coulomb(1e-3, true, &[]).unwrap();
        // The Coulomb method `none` sums no pairs.
        s.check_coulomb(0.0, false, &[]).unwrap();
        // r^2 = 1e-340 underflows to 0: singular; at 1e-150 m, r^2 is normal but
        // k_c q q / r^3 = 9e447 overflows; at 1e-100 m both are finite.
        let tiny = |d: f64| charged(vec![DVec3::ZERO, DVec3::X * d], vec![1e-6; 2]);
        let e = tiny(1e-170).check_coulomb(0.0, true, &[]).unwrap_err();
        assert!(e.to_string().contains("1e-170 m apart"), "{e}");
        assert!(tiny(1e-150).check_coulomb(0.0, true, &[]).is_err());
        tiny(1e-100).check_coulomb(0.0, true, &[]).unwrap();
        // An uncharged particle may sit on a charged one.
        charged(vec![p, p], vec![1e-6, 0.0])
            .check_coulomb(0.0, true, &[])
            .unwrap();
        // External charges at t = 0; a 0 C one anywhere.
        let ext = [(DVec3::X * 5.0, 1e-6), (p, -1e-6)];
        assert!(matches!(s.check_coulomb(1e-3, true, &ext), Ok(())));
        assert_eq!(
            charged(vec![DVec3::ZERO, p], vec![1e-6, 1e-6]).check_coulomb(0.0, true, &ext),
            Err(ModelError::SingularExternalCharge {
                external: 1,
                particle: 1,
                distance: 0.0,
                softening: 0.0
            })
        );
        charged(vec![p], vec![1e-6])
            .check_coulomb(0.0, true, &[(p, 0.0)])
            .unwrap();
    }
}
