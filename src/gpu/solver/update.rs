//! Writing into a running GPU solver instead of rebuilding it (embedders, notebooks,
//! parameter studies): a replacement state, new per-particle and per-spring parameters on
//! the same topology, the positions and velocities read as the f32 the device holds, and
//! a wait for the steps submitted so far.

use std::sync::atomic::Ordering;

use glam::DVec3;

use super::gpu_solver::{Fixed, GpuSolver};
use crate::config::{CoulombMethod, Integrator};
use crate::cpu::parameters_fixed;
use crate::gpu::device::{poll_error, scoped};
use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::params::TimeStep;
use crate::gpu::host::range;
use crate::gpu::host::rows::{local_global_init, particle_props, spring_params, state_vec4};
use crate::model::{check_coulomb_pairs, check_state, System};

impl GpuSolver {
    fn fixed(&self, what: &str) -> Result<&Fixed, GpuError> {
        if self.tangents.is_some() {
            return Err(GpuError::Unsupported(format!(
                "{what} on a solver that carries tangents (they start from the initial state)"
            )));
        }
        self.fixed
            .as_ref()
            .ok_or_else(|| GpuError::Unsupported(format!("{what} on a batch of worlds")))
    }

    /// Replaces the positions and velocities (one per particle, SI units) from the host;
    /// the time and step count stay. Queued behind the steps already submitted, so it
    /// applies after them. Checked as the initial state is: lengths, finite values, the
    /// f32 bounds of `range::check` and no charged pair whose Coulomb force is not finite
    /// (in f64, or in the kernels' f32).
    pub fn write_state(&mut self, x: &[DVec3], v: &[DVec3]) -> Result<(), GpuError> {
        let fixed = self.fixed("writing a state")?;
        check_state(self.n as usize, x, v)?;
        let (config, q) = (&fixed.config, &fixed.charges);
        if config.coulomb.method != CoulombMethod::None {
            check_coulomb_pairs(x, q, config.coulomb.softening)?;
        }
        range::check_state(x, v, q, config)?;
        let (x4, v4) = state_vec4(x, v)?;
        let queue = &self.host.queue;
        queue.write_buffer(self.buffer(Buf::X), 0, bytemuck::cast_slice(&x4));
        queue.write_buffer(self.buffer(Buf::V), 0, bytemuck::cast_slice(&v4));
        // Verlet's forces were computed at the old positions (DDEF rebuilds its
        // structures on the device at every evaluation).
        self.field_fresh.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Replaces the masses, charges, pins and spring parameters (stiffness, rest length,
    /// damping) with `system`'s, without a rebuild; the state stays (`system`'s positions
    /// and velocities are not used). `system` must keep the solver's [`Topology`](crate::model::Topology): its
    /// particle count, its springs in order, and charge only on particles charged at the
    /// start. Refused where the configuration fixes the parameters
    /// ([`parameters_fixed`]: DDEF, Chebyshev with an estimated spectral radius).
    pub fn set_parameters(&mut self, system: &System) -> Result<(), GpuError> {
        let fixed = self.fixed("setting parameters")?;
        fixed.topology.check(system)?;
        let config = &fixed.config;
        if let Some(e) = parameters_fixed(config) {
            return Err(e.into());
        }
        config.validate_for(system)?;
        range::check(system, config)?;
        let charges = system.charges().to_vec();
        let props = particle_props(system)?;
        let sparams = spring_params(system)?;
        let lg = match self.integrator {
            Integrator::LocalGlobal => {
                let h = TimeStep::new(config).seconds();
                Some(local_global_init(system, &|_| h)?)
            }
            _ => None,
        };
        let queue = &self.host.queue;
        let write = |b: Buf, data: &[[f32; 4]]| {
            if !data.is_empty() {
                queue.write_buffer(self.buffer(b), 0, bytemuck::cast_slice(data));
            }
        };
        write(Buf::Props, &props);
        write(Buf::SpringParams, &sparams);
        if let Some((sf, bd)) = &lg {
            // The constant matrix P = M + h C_L + h^2 L and its diagonal.
            write(Buf::SpringBlocks, sf);
            write(Buf::RhsDiagonal, bd);
        }
        if let Some(f) = self.fixed.as_mut() {
            f.charges = charges;
        }
        // Verlet's forces were computed with the old charges and springs.
        self.field_fresh.store(false, Ordering::Relaxed);
        Ok(())
    }

    fn read_xyz(&self, b: Buf) -> Result<Vec<[f32; 3]>, GpuError> {
        let data = self.read_at_step(&[(b, 0, 16 * u64::from(self.n))])?;
        let v4: &[[f32; 4]] = bytemuck::cast_slice(&data);
        Ok(v4.iter().map(|p| [p[0], p[1], p[2]]).collect())
    }

    /// The positions as the device holds them (f32, no conversion to f64): one readback,
    /// which waits for the steps submitted so far (steps recorded but not submitted are
    /// a [`GpuError::Unsubmitted`], as for [`Self::read_state`]).
    pub fn read_positions_f32(&self) -> Result<Vec<[f32; 3]>, GpuError> {
        self.read_xyz(Buf::X)
    }

    /// The velocities as the device holds them (see [`Self::read_positions_f32`]).
    pub fn read_velocities_f32(&self) -> Result<Vec<[f32; 3]>, GpuError> {
        self.read_xyz(Buf::V)
    }

    /// Waits until the GPU has finished every step submitted so far (steps return as soon
    /// as they are submitted; reads wait by themselves).
    pub fn synchronize(&mut self) -> Result<(), GpuError> {
        let device = self.host.device.clone();
        scoped(&device, || {
            device
                .poll(wgpu::PollType::wait_indefinitely())
                .map(|_| ())
                .map_err(poll_error)
        })?;
        self.in_flight = None;
        self.host.check_lost()
    }
}
