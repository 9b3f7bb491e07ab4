//! The parameters a simulation is differentiated with respect to, and how a parameter
//! vector theta is applied to a base system and configuration.
//!
//! Every parameterization is affine in theta (a scale multiplies the base values; the
//! others replace them), so the derivative of the physical quantities with respect to
//! each component of theta is a constant [`Direction`].

use super::GradError;
use crate::config::{Config, CoulombMethod, DdefGrid};
use crate::model::{System, SystemDesc};
use glam::DVec3;

/// A parameter (group) of the simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Param {
    /// One scale s on every charge: q_i = s q_i(base). Its value at the base system is 1.
    ChargeScale,
    /// One scale s on every spring stiffness: k_k = s k_k(base).
    StiffnessScale,
    /// Every particle's charge q_i (C): one component per particle.
    Charges,
    /// Every spring's stiffness k_k (N/m): one component per spring.
    Stiffnesses,
    /// The charge q_e (C) of external point charge `index`.
    ExternalCharge { index: usize },
    /// The position at t = 0 (m) of external point charge `index`: three components x, y, z.
    /// An orbiting charge's whole path moves with it (its position is affine in it).
    ExternalPosition { index: usize },
}

impl Param {
    /// A short name: `charge_scale`, `stiffnesses`, `external_charges[0].position`...
    pub fn name(&self) -> String {
        match self {
            Self::ChargeScale => "charge_scale".into(),
            Self::StiffnessScale => "stiffness_scale".into(),
            Self::Charges => "charges".into(),
            Self::Stiffnesses => "stiffnesses".into(),
            Self::ExternalCharge { index } => format!("external_charges[{index}].charge"),
            Self::ExternalPosition { index } => format!("external_charges[{index}].position"),
        }
    }
}

/// d(physical quantities)/d(theta_p) for one component p of theta. Dense vectors; `None`
/// (or empty) means zero.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Direction {
    /// dq_i / dtheta per particle.
    pub dq: Option<Vec<f64>>,
    /// dk_k / dtheta per spring.
    pub dk: Option<Vec<f64>>,
    /// dq_e / dtheta per external charge.
    pub dqe: Vec<f64>,
    /// d x_e(0) / dtheta per external charge.
    pub dxe: Vec<DVec3>,
}

impl Direction {
    pub(crate) fn dq(&self, i: usize) -> f64 {
        self.dq.as_ref().map_or(0.0, |v| v[i])
    }
    pub(crate) fn dk(&self, k: usize) -> f64 {
        self.dk.as_ref().map_or(0.0, |v| v[k])
    }
    pub(crate) fn dqe(&self, e: usize) -> f64 {
        self.dqe.get(e).copied().unwrap_or(0.0)
    }
    pub(crate) fn dxe(&self, e: usize) -> DVec3 {
        self.dxe.get(e).copied().unwrap_or(DVec3::ZERO)
    }
}

/// An ordered set of parameters over a base system and configuration: maps a parameter
/// vector theta to the system and configuration it describes.
#[derive(Clone, Debug)]
pub struct ParamSet {
    params: Vec<Param>,
    base_system: System,
    base_config: Config,
    /// Offset of each parameter's first component in theta; last entry = total length.
    offsets: Vec<usize>,
}

impl ParamSet {
    /// Checks the parameters against the system and configuration: external-charge indices
    /// in range, no parameter twice, no scale together with the per-element values it scales.
    pub fn new(system: &System, config: &Config, params: &[Param]) -> Result<Self, GradError> {
        if params.is_empty() {
            return Err(GradError::Param("no parameter to differentiate".into()));
        }
        // DDEF is differentiated with its structure frozen (grid, tetrahedra, near/far
        // split: `crate::ddef::lattice_tangent`), on the lattice grid only.
        if let CoulombMethod::Ddef(d) = config.coulomb.method {
            if d.grid == DdefGrid::Delaunay {
                return Err(GradError::Param(
                    "coulomb.ddef_grid = \"delaunay\" cannot be differentiated: gradients \
                     through DDEF run on the lattice grid (coulomb.ddef_grid = \"lattice\", \
                     the default)"
                        .into(),
                ));
            }
            // The charged set is part of the frozen structure: an uncharged particle's
            // charge has no derivative there (a charge would add a source).
            if params.contains(&Param::Charges) {
                if let Some(i) = system.charges().iter().position(|&q| q == 0.0) {
                    return Err(GradError::Param(format!(
                        "charges: particle {i} is uncharged; with coulomb.method = \"ddef\" \
                         the charged particles are part of the frozen DDEF structure, so an \
                         uncharged particle's charge cannot be differentiated (give every \
                         particle a nonzero starting charge, or fit with \"all_pairs\")"
                    )));
                }
            }
        }
        let externals = config.external_charges.len();
        let mut offsets = vec![0];
        for (a, p) in params.iter().enumerate() {
            if params[..a].contains(p) {
                return Err(GradError::Param(format!("{} is listed twice", p.name())));
            }
            let clash = match p {
                Param::ChargeScale => Some(Param::Charges),
                Param::StiffnessScale => Some(Param::Stiffnesses),
                _ => None,
            };
            if let Some(c) = clash.filter(|c| params.contains(c)) {
                return Err(GradError::Param(format!(
                    "{} and {} describe the same values; use one of them",
                    p.name(),
                    c.name()
                )));
            }
            let count = match *p {
                Param::ChargeScale | Param::StiffnessScale => 1,
                Param::Charges => system.len(),
                Param::Stiffnesses => {
                    if system.springs().is_empty() {
                        return Err(GradError::Param(
                            "stiffnesses: the system has no springs".into(),
                        ));
                    }
                    system.springs().len()
                }
                Param::ExternalCharge { index } | Param::ExternalPosition { index } => {
                    if index >= externals {
                        return Err(GradError::Param(format!(
                            "{}: the configuration has {externals} external charges",
                            p.name()
                        )));
                    }
                    if matches!(p, Param::ExternalCharge { .. }) {
                        1
                    } else {
                        3
                    }
                }
            };
            offsets.push(offsets[a] + count);
        }
        Ok(Self {
            params: params.to_vec(),
            base_system: system.clone(),
            base_config: config.clone(),
            offsets,
        })
    }

    pub fn params(&self) -> &[Param] {
        &self.params
    }
    /// Number of components of theta.
    pub fn len(&self) -> usize {
        *self.offsets.last().unwrap_or(&0)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn base_system(&self) -> &System {
        &self.base_system
    }
    pub fn base_config(&self) -> &Config {
        &self.base_config
    }
    /// The range of theta that parameter `a` occupies.
    pub fn range(&self, a: usize) -> std::ops::Range<usize> {
        self.offsets[a]..self.offsets[a + 1]
    }

    /// One name per component: `charge_scale`, `charges[3]`, `external_charges[0].position.y`.
    pub fn component_names(&self) -> Vec<String> {
        let mut names = Vec::with_capacity(self.len());
        for (a, p) in self.params.iter().enumerate() {
            let n = self.range(a).len();
            match p {
                Param::Charges | Param::Stiffnesses => {
                    names.extend((0..n).map(|k| format!("{}[{k}]", p.name())))
                }
                Param::ExternalPosition { .. } => {
                    names.extend(["x", "y", "z"].map(|c| format!("{}.{c}", p.name())))
                }
                _ => names.push(p.name()),
            }
        }
        names
    }

    /// theta of the base system: scales 1, the other values as the base has them.
    pub fn initial(&self) -> Vec<f64> {
        let mut theta = Vec::with_capacity(self.len());
        for p in &self.params {
            match *p {
                Param::ChargeScale | Param::StiffnessScale => theta.push(1.0),
                Param::Charges => theta.extend_from_slice(self.base_system.charges()),
                Param::Stiffnesses => {
                    theta.extend(self.base_system.springs().iter().map(|s| s.stiffness))
                }
                Param::ExternalCharge { index } => {
                    theta.push(self.base_config.external_charges[index].charge)
                }
                Param::ExternalPosition { index } => {
                    let x = self.base_config.external_charges[index].position;
                    theta.extend([x.x, x.y, x.z]);
                }
            }
        }
        theta
    }

    /// The system and configuration that theta describes, validated (a negative stiffness
    /// or a non-finite value is a [`GradError::Model`] or [`GradError::Config`]).
    pub fn instantiate(&self, theta: &[f64]) -> Result<(System, Config), GradError> {
        self.check_len(theta)?;
        let b = &self.base_system;
        let mut desc = SystemDesc {
            positions: b.positions().to_vec(),
            velocities: b.velocities().to_vec(),
            masses: b.masses().to_vec(),
            charges: b.charges().to_vec(),
            pinned: b.pinned().to_vec(),
            springs: b.springs().to_vec(),
            faces: b.faces().to_vec(),
        };
        let mut config = self.base_config.clone();
        for (a, p) in self.params.iter().enumerate() {
            let v = &theta[self.range(a)];
            match *p {
                Param::ChargeScale => desc.charges.iter_mut().for_each(|q| *q *= v[0]),
                Param::StiffnessScale => desc.springs.iter_mut().for_each(|s| s.stiffness *= v[0]),
                Param::Charges => desc.charges.copy_from_slice(v),
                Param::Stiffnesses => {
                    for (s, &k) in desc.springs.iter_mut().zip(v) {
                        s.stiffness = k;
                    }
                }
                Param::ExternalCharge { index } => config.external_charges[index].charge = v[0],
                Param::ExternalPosition { index } => {
                    config.external_charges[index].position = DVec3::new(v[0], v[1], v[2])
                }
            }
        }
        let system = System::new(desc)?;
        config.validate()?;
        Ok((system, config))
    }

    /// d(physical quantities)/d(theta_p) for every component p (constant: every
    /// parameterization is affine).
    pub fn directions(&self) -> Vec<Direction> {
        let n = self.base_system.len();
        let m = self.base_system.springs().len();
        let ne = self.base_config.external_charges.len();
        let mut dirs = Vec::with_capacity(self.len());
        for p in &self.params {
            match *p {
                Param::ChargeScale => dirs.push(Direction {
                    dq: Some(self.base_system.charges().to_vec()),
                    ..Default::default()
                }),
                Param::StiffnessScale => dirs.push(Direction {
                    dk: Some(
                        self.base_system
                            .springs()
                            .iter()
                            .map(|s| s.stiffness)
                            .collect(),
                    ),
                    ..Default::default()
                }),
                Param::Charges => dirs.extend((0..n).map(|i| {
                    let mut dq = vec![0.0; n];
                    dq[i] = 1.0;
                    Direction {
                        dq: Some(dq),
                        ..Default::default()
                    }
                })),
                Param::Stiffnesses => dirs.extend((0..m).map(|k| {
                    let mut dk = vec![0.0; m];
                    dk[k] = 1.0;
                    Direction {
                        dk: Some(dk),
                        ..Default::default()
                    }
                })),
                Param::ExternalCharge { index } => {
                    let mut dqe = vec![0.0; ne];
                    dqe[index] = 1.0;
                    dirs.push(Direction {
                        dqe,
                        ..Default::default()
                    });
                }
                Param::ExternalPosition { index } => {
                    for axis in [DVec3::X, DVec3::Y, DVec3::Z] {
                        let mut dxe = vec![DVec3::ZERO; ne];
                        dxe[index] = axis;
                        dirs.push(Direction {
                            dxe,
                            ..Default::default()
                        });
                    }
                }
            }
        }
        dirs
    }

    fn check_len(&self, theta: &[f64]) -> Result<(), GradError> {
        if theta.len() != self.len() {
            return Err(GradError::Param(format!(
                "theta has {} components, the parameters have {}",
                theta.len(),
                self.len()
            )));
        }
        if let Some(k) = theta.iter().position(|v| !v.is_finite()) {
            return Err(GradError::Param(format!(
                "theta component {k} is not finite ({})",
                theta[k]
            )));
        }
        Ok(())
    }
}
