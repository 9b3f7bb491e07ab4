//! The checks of a [`Config`] against the [`System`] it will advance, before a run starts
//! (`Config::validate_for`, which every backend calls, and the scene loader): the explicit
//! drag's stability (finite external forces at t = 0: `physics::external_check`).

use super::{Config, ConfigError};
use crate::display::num;
use crate::model::System;

impl Config {
    /// The drag is explicit: each step scales a free particle's velocity by 1 - c h / m
    /// (its own part), which grows without bound past c h / m = 2.
    pub(super) fn check_drag(&self, system: &System) -> Result<(), ConfigError> {
        let c = self.world.drag;
        let free = (system.masses().iter().zip(system.pinned())).enumerate();
        let lightest = free
            .filter(|(_, (_, &pinned))| !pinned)
            .map(|(i, (&m, _))| (i, m))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match lightest {
            Some((i, m)) if c * self.dt / m >= 2.0 => Err(ConfigError::new(
                "world.drag",
                format!(
                    "c dt / m = {} for particle {i} (mass {} kg): the explicit drag is \
                     unstable from 2 on; lower world.drag or integrator.dt",
                    num(c * self.dt / m),
                    num(m)
                ),
            )),
            _ => Ok(()),
        }
    }
}
