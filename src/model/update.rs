//! Changing a system under a running simulator instead of rebuilding it: new charges or
//! stiffnesses on the same particles and springs (checked as [`System::new`] checks
//! them), a replacement state's checks, and the [`Topology`] a running simulator keeps
//! fixed (particle count, springs, charged particles).

use glam::DVec3;

use super::{ModelError, System, SystemDesc};

impl System {
    /// A copy with `charges` (C, one per particle), checked as [`System::new`] checks them.
    pub fn with_charges(&self, charges: &[f64]) -> Result<Self, ModelError> {
        if charges.len() != self.len() {
            return Err(ModelError::LengthMismatch {
                what: "charges",
                got: charges.len(),
                expected: self.len(),
            });
        }
        let mut desc = self.desc();
        desc.charges = charges.to_vec();
        System::new(desc)
    }

    /// A copy with spring `k`'s stiffness set to `stiffnesses[k]` (N/m), checked as
    /// [`System::new`] checks them.
    pub fn with_stiffnesses(&self, stiffnesses: &[f64]) -> Result<Self, ModelError> {
        if stiffnesses.len() != self.springs.len() {
            return Err(ModelError::SpringArrayLength {
                what: "stiffnesses",
                got: stiffnesses.len(),
                expected: self.springs.len(),
            });
        }
        let mut desc = self.desc();
        for (s, &k) in desc.springs.iter_mut().zip(stiffnesses) {
            s.stiffness = k;
        }
        System::new(desc)
    }

    fn desc(&self) -> SystemDesc {
        SystemDesc {
            positions: self.positions.clone(),
            velocities: self.velocities.clone(),
            masses: self.masses.clone(),
            charges: self.charges.clone(),
            pinned: self.pinned.clone(),
            springs: self.springs.clone(),
            faces: self.faces.clone(),
        }
    }
}

/// Checks a replacement state for `n` particles: one position and one velocity per
/// particle, every component finite.
pub fn check_state(n: usize, x: &[DVec3], v: &[DVec3]) -> Result<(), ModelError> {
    for (what, len) in [("state positions", x.len()), ("state velocities", v.len())] {
        if len != n {
            return Err(ModelError::LengthMismatch {
                what,
                got: len,
                expected: n,
            });
        }
    }
    for (i, (xi, vi)) in x.iter().zip(v).enumerate() {
        if !xi.is_finite() {
            return Err(ModelError::NonFinite {
                index: i,
                what: "position",
            });
        }
        if !vi.is_finite() {
            return Err(ModelError::NonFinite {
                index: i,
                what: "velocity",
            });
        }
    }
    Ok(())
}

/// What a running simulator keeps from the system it was built with: the particle
/// count, the springs' endpoints in order, and which particles may carry charge (the
/// GPU's Coulomb sources are laid out once). A parameter update must keep them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    particles: usize,
    springs: usize,
    /// FNV-1a over the springs' endpoints, in order.
    endpoints: u64,
    charged: Vec<u32>,
}

fn endpoints_digest(system: &System) -> u64 {
    system.springs.iter().fold(0xcbf2_9ce4_8422_2325, |h, s| {
        let word = (u64::from(s.i) << 32) | u64::from(s.j);
        (h ^ word).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl Topology {
    pub fn of(system: &System) -> Self {
        Self {
            particles: system.len(),
            springs: system.springs.len(),
            endpoints: endpoints_digest(system),
            charged: system.charged_indices(),
        }
    }

    /// Whether `system` keeps this topology: the same particle count and springs, and
    /// charge only on particles charged at the start (a charge may become 0).
    pub fn check(&self, system: &System) -> Result<(), ModelError> {
        let changed =
            |what: &'static str, detail: String| ModelError::TopologyChanged { what, detail };
        if system.len() != self.particles {
            return Err(changed(
                "particle count",
                format!("{} particles, it has {}", system.len(), self.particles),
            ));
        }
        if system.springs.len() != self.springs || endpoints_digest(system) != self.endpoints {
            return Err(changed(
                "springs",
                format!(
                    "the new system's {} springs join other particles than its {}",
                    system.springs.len(),
                    self.springs
                ),
            ));
        }
        let mut start = self.charged.iter().peekable();
        for (i, &q) in system.charges.iter().enumerate() {
            while start.next_if(|&&c| (c as usize) < i).is_some() {}
            let was_charged = start.peek().is_some_and(|&&c| c as usize == i);
            if q != 0.0 && !was_charged {
                return Err(changed(
                    "charged particles",
                    format!(
                        "particle {i} was uncharged when it was built and cannot take a charge"
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Spring;

    fn chain() -> System {
        System::new(SystemDesc {
            positions: (0..4).map(|i| DVec3::X * f64::from(i)).collect(),
            masses: vec![1.0; 4],
            charges: vec![1e-6, 0.0, -1e-6, 0.0],
            springs: (1..4)
                .map(|j| Spring {
                    i: j - 1,
                    j,
                    stiffness: 10.0,
                    rest_length: 1.0,
                    damping: 0.0,
                })
                .collect(),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn updates_are_checked_and_name_the_index() {
        let s = chain();
        let q = s.with_charges(&[2e-6, 0.0, 0.0, 0.0]).unwrap();
        assert_eq!(q.charges(), &[2e-6, 0.0, 0.0, 0.0]);
        assert_eq!(q.springs(), s.springs());
        assert!(matches!(
            s.with_charges(&[0.0; 3]),
            Err(ModelError::LengthMismatch { got: 3, .. })
        ));
        assert!(matches!(
            s.with_charges(&[0.0, f64::NAN, 0.0, 0.0]),
            Err(ModelError::NonFinite { index: 1, .. })
        ));
        let k = s.with_stiffnesses(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(k.springs()[2].stiffness, 3.0);
        assert!(matches!(
            s.with_stiffnesses(&[1.0, -2.0, 3.0]),
            Err(ModelError::BadSpringParameter { spring: 1, .. })
        ));
        let e = s.with_stiffnesses(&[1.0]).unwrap_err();
        assert!(e.to_string().contains("3 springs"), "{e}");
    }

    #[test]
    fn topology_keeps_the_charged_set_and_the_springs() {
        let s = chain();
        let t = Topology::of(&s);
        t.check(&s).unwrap();
        // A charged particle may change its charge or lose it.
        t.check(&s.with_charges(&[0.0, 0.0, 5e-6, 0.0]).unwrap())
            .unwrap();
        let e = t
            .check(&s.with_charges(&[1e-6, 0.0, -1e-6, 3e-6]).unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("particle 3"), "{e}");
        let mut desc = s.desc();
        desc.springs.swap(0, 1);
        let swapped = System::new(desc).unwrap();
        assert!(matches!(
            t.check(&swapped),
            Err(ModelError::TopologyChanged {
                what: "springs",
                ..
            })
        ));
    }

    #[test]
    fn a_replacement_state_must_be_whole_and_finite() {
        let x = vec![DVec3::ZERO; 2];
        check_state(2, &x, &x).unwrap();
        assert!(matches!(
            check_state(3, &x, &x),
            Err(ModelError::LengthMismatch {
                got: 2,
                expected: 3,
                ..
            })
        ));
        let mut v = x.clone();
        v[1].y = f64::INFINITY;
        assert_eq!(
            check_state(2, &x, &v),
            Err(ModelError::NonFinite {
                index: 1,
                what: "velocity"
            })
        );
    }
}
