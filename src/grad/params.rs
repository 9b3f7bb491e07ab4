//! The parameters a simulation is differentiated with respect to, and how a parameter
//! vector theta is applied to a base system and configuration.
//!
//! Every linear parameterization is affine in theta (a scale multiplies the base values;
//! the others replace them), so the derivative of the physical quantities with respect to
//! each component of theta is a constant [`Direction`]. A log parameter
//! ([`ParamSet::with_log`]) is value = sign(base) exp(theta): it keeps a positive quantity
//! positive (and a charge its sign) whatever step an optimizer takes; its direction is
//! the value itself ([`ParamSet::directions_at`]).

use super::GradError;
use crate::config::{Config, Integrator};
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
    /// The springs in `count` consecutive blocks of their order (as equal as can be), one
    /// scale per block on its springs' stiffnesses: a coarse per-region fit between
    /// [`Param::StiffnessScale`] (1 block) and [`Param::Stiffnesses`].
    StiffnessBlocks { count: usize },
    /// Every particle's mass m_i (kg): one component per particle.
    Masses,
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
            Self::StiffnessBlocks { count } => format!("stiffness_blocks[{count}]"),
            Self::Masses => "masses".into(),
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
    /// dm_i / dtheta per particle.
    pub dm: Option<Vec<f64>>,
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
    pub(crate) fn dm(&self, i: usize) -> f64 {
        self.dm.as_ref().map_or(0.0, |v| v[i])
    }
    pub(crate) fn dqe(&self, e: usize) -> f64 {
        self.dqe.get(e).copied().unwrap_or(0.0)
    }
    pub(crate) fn dxe(&self, e: usize) -> DVec3 {
        self.dxe.get(e).copied().unwrap_or(DVec3::ZERO)
    }
    /// Multiplies every entry by `s`.
    fn scale(&mut self, s: f64) {
        for v in [&mut self.dq, &mut self.dk, &mut self.dm]
            .into_iter()
            .flatten()
        {
            v.iter_mut().for_each(|x| *x *= s);
        }
        self.dqe.iter_mut().for_each(|x| *x *= s);
        self.dxe.iter_mut().for_each(|x| *x *= s);
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
    /// Per parameter: log-scaled (value = sign(base) exp(theta)).
    log: Vec<bool>,
    /// Per component of a log parameter: the sign of its base value (1 for a scale).
    sign: Vec<f64>,
}

impl ParamSet {
    /// Checks the parameters against the system and configuration: external-charge indices
    /// in range, no parameter twice, no scale together with the per-element values it scales.
    pub fn new(system: &System, config: &Config, params: &[Param]) -> Result<Self, GradError> {
        if params.is_empty() {
            return Err(GradError::Param("no parameter to differentiate".into()));
        }
        // What the tangents cannot differentiate is refused, never dropped. DDEF is
        // differentiated with its structure frozen (grid, tetrahedra, near/far split:
        // `crate::ddef::lattice_tangent`), on the lattice grid only.
        if let Some(e) = config.not_differentiable() {
            return Err(GradError::Param(e.to_string()));
        }
        // The charged set is part of DDEF's frozen structure: an uncharged particle's
        // charge has no derivative there (a charge would add a source).
        if config.coulomb.method.ddef().is_some() && params.contains(&Param::Charges) {
            if let Some(i) = system.charges().iter().position(|&q| q == 0.0) {
                return Err(GradError::Param(format!(
                    "charges: particle {i} is uncharged; with coulomb.method = \"ddef\" \
                     the charged particles are part of the frozen DDEF structure, so an \
                     uncharged particle's charge cannot be differentiated (give every \
                     particle a nonzero starting charge, or fit with \"all_pairs\")"
                )));
            }
        }
        // The explicit kicks' mass tangent (step::mass_kick_jvp) evaluates the force
        // without a DDEF structure: refused rather than silently missing the far field.
        if config.coulomb.method.ddef().is_some()
            && params.contains(&Param::Masses)
            && matches!(
                config.integrator,
                Integrator::SymplecticEuler | Integrator::Verlet
            )
        {
            return Err(GradError::Param(
                "masses: the mass tangent of the explicit integrators does not carry the \
                 DDEF field yet; fit masses with imex or local_global, or with \"all_pairs\""
                    .into(),
            ));
        }
        let externals = config.external_charges.len();
        let mut offsets = vec![0];
        for (a, p) in params.iter().enumerate() {
            if params[..a].contains(p) {
                return Err(GradError::Param(format!("{} is listed twice", p.name())));
            }
            let stiffness = |q: &Param| {
                matches!(
                    q,
                    Param::StiffnessScale | Param::Stiffnesses | Param::StiffnessBlocks { .. }
                )
            };
            let clash = match p {
                Param::ChargeScale => params.iter().find(|q| **q == Param::Charges).copied(),
                _ if stiffness(p) => params[..a].iter().find(|q| stiffness(q)).copied(),
                _ => None,
            };
            if let Some(c) = clash {
                return Err(GradError::Param(format!(
                    "{} and {} describe the same values; use one of them",
                    p.name(),
                    c.name()
                )));
            }
            let count = match *p {
                Param::ChargeScale | Param::StiffnessScale => 1,
                Param::Charges | Param::Masses => system.len(),
                Param::Stiffnesses => {
                    if system.springs().is_empty() {
                        return Err(GradError::Param(
                            "stiffnesses: the system has no springs".into(),
                        ));
                    }
                    system.springs().len()
                }
                Param::StiffnessBlocks { count } => {
                    let ns = system.springs().len();
                    if count == 0 || count > ns {
                        return Err(GradError::Param(format!(
                            "{}: between 1 and the {ns} springs",
                            p.name()
                        )));
                    }
                    count
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
        let len = *offsets.last().unwrap_or(&0);
        Ok(Self {
            params: params.to_vec(),
            base_system: system.clone(),
            base_config: config.clone(),
            offsets,
            log: vec![false; params.len()],
            sign: vec![1.0; len],
        })
    }

    /// Makes the parameters flagged in `log` (one flag per parameter, in order) log
    /// parameters: value = sign(base) exp(theta). Refused for positions (no sign to keep)
    /// and for a component whose base value is 0 (no logarithm), naming it.
    pub fn with_log(mut self, log: &[bool]) -> Result<Self, GradError> {
        if log.len() != self.params.len() {
            return Err(GradError::Param(format!(
                "{} log flags for {} parameters",
                log.len(),
                self.params.len()
            )));
        }
        let base = self.linear_initial();
        let names = self.component_names();
        for (a, p) in self.params.iter().enumerate() {
            if !log[a] {
                continue;
            }
            if matches!(p, Param::ExternalPosition { .. }) {
                return Err(GradError::Param(format!(
                    "{}: a position cannot be a log parameter",
                    p.name()
                )));
            }
            for c in self.range(a) {
                if base[c] == 0.0 {
                    return Err(GradError::Param(format!(
                        "{} is 0: a log parameter needs a non-zero base value",
                        names[c]
                    )));
                }
                self.sign[c] = base[c].signum();
            }
        }
        self.log = log.to_vec();
        Ok(self)
    }

    /// Whether parameter `a` is log-scaled.
    pub fn is_log(&self, a: usize) -> bool {
        self.log[a]
    }

    /// The physical value of each component (theta itself for a linear parameter).
    /// [`GradError::Param`] when theta has the wrong length or a non-finite component.
    pub fn values(&self, theta: &[f64]) -> Result<Vec<f64>, GradError> {
        self.check_len(theta)?;
        let mut v = theta.to_vec();
        for a in 0..self.params.len() {
            if self.log[a] {
                for c in self.range(a) {
                    v[c] = self.sign[c] * theta[c].exp();
                }
            }
        }
        Ok(v)
    }

    /// theta for physical values (the inverse of [`Self::values`]); a log component whose
    /// value has lost its base sign or is 0 has no theta.
    pub fn from_values(&self, values: &[f64]) -> Result<Vec<f64>, GradError> {
        self.check_len(values)?;
        let names = self.component_names();
        let mut theta = values.to_vec();
        for a in 0..self.params.len() {
            if self.log[a] {
                for c in self.range(a) {
                    let r = values[c] * self.sign[c];
                    if r <= 0.0 {
                        return Err(GradError::Param(format!(
                            "{} = {}: a log parameter keeps the sign of its base value",
                            names[c], values[c]
                        )));
                    }
                    theta[c] = r.ln();
                }
            }
        }
        Ok(theta)
    }

    /// d value / d theta per component (1 for linear, the value for log).
    /// [`GradError::Param`] when theta has the wrong length or a non-finite component.
    pub fn value_derivatives(&self, theta: &[f64]) -> Result<Vec<f64>, GradError> {
        self.check_len(theta)?;
        let mut d = vec![1.0; theta.len()];
        for a in 0..self.params.len() {
            if self.log[a] {
                for c in self.range(a) {
                    d[c] = self.sign[c] * theta[c].exp();
                }
            }
        }
        Ok(d)
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
                Param::Charges | Param::Stiffnesses | Param::Masses => {
                    names.extend((0..n).map(|k| format!("{}[{k}]", p.name())))
                }
                Param::ExternalPosition { .. } => {
                    names.extend(["x", "y", "z"].map(|c| format!("{}.{c}", p.name())))
                }
                Param::StiffnessBlocks { .. } => {
                    names.extend((0..n).map(|k| format!("stiffness_blocks[{k}]")))
                }
                _ => names.push(p.name()),
            }
        }
        names
    }

    /// theta of the base system: scales 1, the other values as the base has them (for a
    /// log parameter, their logarithms).
    pub fn initial(&self) -> Vec<f64> {
        let values = self.linear_initial();
        self.from_values(&values)
            .expect("with_log checked that every log base value is non-zero")
    }

    /// The base system's physical values (those of [`Self::initial`], exactly so for a
    /// linear parameter).
    pub(crate) fn linear_initial(&self) -> Vec<f64> {
        let mut theta = Vec::with_capacity(self.len());
        for p in &self.params {
            match *p {
                Param::ChargeScale | Param::StiffnessScale => theta.push(1.0),
                Param::StiffnessBlocks { count } => theta.extend(std::iter::repeat_n(1.0, count)),
                Param::Charges => theta.extend_from_slice(self.base_system.charges()),
                Param::Stiffnesses => {
                    theta.extend(self.base_system.springs().iter().map(|s| s.stiffness))
                }
                Param::Masses => theta.extend_from_slice(self.base_system.masses()),
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
        let values = self.values(theta)?;
        let theta = values.as_slice();
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
                Param::StiffnessBlocks { count } => {
                    let ns = desc.springs.len();
                    for (k, s) in desc.springs.iter_mut().enumerate() {
                        s.stiffness *= v[spring_block(k, ns, count)];
                    }
                }
                Param::Charges => desc.charges.copy_from_slice(v),
                Param::Stiffnesses => {
                    for (s, &k) in desc.springs.iter_mut().zip(v) {
                        s.stiffness = k;
                    }
                }
                Param::Masses => desc.masses.copy_from_slice(v),
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

    /// d(physical quantities)/d(theta_p) for every component p at `theta` (the linear
    /// directions scaled by d value / d theta for log parameters).
    /// [`GradError::Param`] when theta has the wrong length or a non-finite component.
    pub fn directions_at(&self, theta: &[f64]) -> Result<Vec<Direction>, GradError> {
        let scale = self.value_derivatives(theta)?;
        let mut dirs = self.directions();
        for (d, s) in dirs.iter_mut().zip(scale) {
            if s != 1.0 {
                d.scale(s);
            }
        }
        Ok(dirs)
    }

    /// d(physical quantities)/d(theta_p) for every component p of the linear
    /// parameterization (constant: it is affine); [`Self::directions_at`] for log ones.
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
                Param::StiffnessBlocks { count } => dirs.extend((0..count).map(|b| {
                    let dk = self
                        .base_system
                        .springs()
                        .iter()
                        .enumerate()
                        .map(|(k, s)| {
                            if spring_block(k, m, count) == b {
                                s.stiffness
                            } else {
                                0.0
                            }
                        })
                        .collect();
                    Direction {
                        dk: Some(dk),
                        ..Default::default()
                    }
                })),
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
                Param::Masses => dirs.extend((0..n).map(|i| {
                    let mut dm = vec![0.0; n];
                    dm[i] = 1.0;
                    Direction {
                        dm: Some(dm),
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

    /// [`spring_block`] of spring `k` under parameter `a` (a `StiffnessBlocks`).
    pub(crate) fn block_of(&self, k: usize, count: usize) -> usize {
        spring_block(k, self.base_system.springs().len(), count)
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

/// The block of spring `k` of `ns` split into `count` consecutive blocks (sizes differing
/// by at most one).
fn spring_block(k: usize, ns: usize, count: usize) -> usize {
    (k * count) / ns
}
