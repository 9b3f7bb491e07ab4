//! Energy terms (DESIGN section 1). Mirrors `shaders/energy_reduce.wgsl`.

use crate::config::Config;
use crate::model::{State, System};
use crate::sim::Energies;

/// Kinetic, elastic, Coulomb, gravity and external energies of `state`.
pub fn energies(system: &System, config: &Config, state: &State) -> Energies {
    let _ = (system, config, state);
    todo!("cpu helper")
}
