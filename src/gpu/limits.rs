//! Buffer sizes a system needs and the device limits the kernels rely on, checked before
//! anything is allocated (and, from the counts alone, before a scene's mesh is built) so a
//! too-large mesh fails with the size it needs.

use super::adjacency;
use super::layout::{MAX_STORAGE_BUFFERS, SCALAR_SLOTS, WORKGROUP_MEMORY, WORKGROUP_SIZE};
use super::params::bd_row_bytes;
use super::GpuError;
use crate::config::{Config, Integrator, SolverMethod};
use crate::model::System;

/// Sizes the solver allocates, for limit checks before anything is created.
pub(super) struct Sizes {
    /// (buffer, bytes) of every storage buffer.
    pub storage: Vec<(&'static str, u64)>,
    /// Workgroups of the largest 1D dispatch.
    pub groups: u64,
}

pub(super) fn sizes(system: &System, config: &Config) -> Sizes {
    sizes_for(
        system.len() as u64,
        system.springs().len() as u64,
        system.charged_count() as u64,
        config,
    )
}

/// [`sizes`] from the counts alone: `n` particles, `ns` springs, `nc` charged particles.
pub(super) fn sizes_for(n: u64, ns: u64, nc: u64, config: &Config) -> Sizes {
    let implicit = config.integrator.is_implicit();
    let cg = implicit && config.solver.method == SolverMethod::Cg;
    let lg = config.integrator == Integrator::LocalGlobal;
    let wg = u64::from(WORKGROUP_SIZE);
    let groups = n.max(ns).div_ceil(wg);
    let per = |on: bool, bytes: u64| if on { bytes } else { 16 };
    Sizes {
        storage: vec![
            ("positions", 16 * n),
            ("velocities", 16 * n),
            ("particle properties", 16 * n),
            ("forces", 16 * n),
            ("Coulomb sources", 16 * nc.max(1)),
            ("charged indices", 4 * nc.max(1)),
            ("clock", 16),
            ("springs", 8 * ns.max(1)),
            ("spring parameters", 16 * ns.max(1)),
            ("spring blocks", 32 * ns.max(1)),
            ("adjacency", 4 * adjacency::bound_words(n, ns)),
            (
                "right-hand side and diagonal",
                per(implicit, bd_row_bytes(config) * n),
            ),
            ("solver scratch", per(implicit, 16 * n)),
            ("x_t", per(lg, 16 * n)),
            ("b0", per(lg, 16 * n)),
            ("cg r", per(cg, 16 * n)),
            ("cg p", per(cg, 16 * n)),
            ("cg q", per(cg, 16 * n)),
            // 32 bytes per workgroup (a few more on a 2D grid; see `grid`).
            ("partial sums", 32 * (n.div_ceil(wg).max(1) + 64)),
            ("scalars", 16 * u64::from(SCALAR_SLOTS)),
        ],
        groups,
    }
}

/// Checks the device limits the kernels rely on and the buffer sizes of this system.
pub(super) fn check_limits(limits: &wgpu::Limits, sizes: &Sizes) -> Result<(), GpuError> {
    let need = |what: &str, needed: u64, limit: u64| {
        if needed > limit {
            Err(GpuError::LimitExceeded {
                what: what.to_string(),
                needed,
                limit,
            })
        } else {
            Ok(())
        }
    };
    need(
        "storage buffers per shader stage",
        MAX_STORAGE_BUFFERS.into(),
        limits.max_storage_buffers_per_shader_stage.into(),
    )?;
    need(
        "workgroup memory (bytes)",
        WORKGROUP_MEMORY.into(),
        limits.max_compute_workgroup_storage_size.into(),
    )?;
    need(
        "invocations per workgroup",
        WORKGROUP_SIZE.into(),
        limits.max_compute_invocations_per_workgroup.into(),
    )?;
    need(
        "workgroup size x",
        WORKGROUP_SIZE.into(),
        limits.max_compute_workgroup_size_x.into(),
    )?;
    need("bind groups", 2, limits.max_bind_groups.into())?;
    need(
        "dynamic uniform buffers per pipeline layout",
        1,
        limits
            .max_dynamic_uniform_buffers_per_pipeline_layout
            .into(),
    )?;
    if let Some(b) = first_oversized(limits, sizes) {
        return Err(GpuError::LimitExceeded {
            what: b.to_string(),
            needed: b.bytes,
            limit: b.limit,
        });
    }
    let per_dim = u64::from(limits.max_compute_workgroups_per_dimension);
    need(
        "workgroups of one dispatch",
        sizes.groups,
        per_dim * per_dim,
    )?;
    Ok(())
}

/// A solver buffer larger than an adapter limit allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OversizedBuffer {
    /// The buffer, e.g. "spring blocks".
    pub buffer: &'static str,
    pub bytes: u64,
    /// `max_storage_buffer_binding_size` or `max_buffer_size`.
    pub limit_name: &'static str,
    pub limit: u64,
}

impl std::fmt::Display for OversizedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.limit_name == "max_storage_buffer_binding_size" {
            "storage buffer"
        } else {
            "buffer"
        };
        write!(
            f,
            "{kind} '{}' (bytes; limit {})",
            self.buffer, self.limit_name
        )
    }
}

pub(super) fn first_oversized(limits: &wgpu::Limits, sizes: &Sizes) -> Option<OversizedBuffer> {
    sizes.storage.iter().find_map(|&(buffer, bytes)| {
        [
            (
                "max_storage_buffer_binding_size",
                limits.max_storage_buffer_binding_size,
            ),
            ("max_buffer_size", limits.max_buffer_size),
        ]
        .into_iter()
        .find(|&(_, limit)| bytes > limit)
        .map(|(limit_name, limit)| OversizedBuffer {
            buffer,
            bytes,
            limit_name,
            limit,
        })
    })
}

/// The first solver buffer of a system of `particles` particles, `springs` springs and
/// `charged` charged particles that exceeds `limits`: checked from the counts alone, so
/// a scene too large for the adapter fails before its mesh is built.
pub fn oversized_buffer(
    limits: &wgpu::Limits,
    particles: u64,
    springs: u64,
    charged: u64,
    config: &Config,
) -> Option<OversizedBuffer> {
    first_oversized(limits, &sizes_for(particles, springs, charged, config))
}

/// Workgroup grid of a 1D dispatch over `count` items with at most `max` workgroups per
/// dimension: tight (x y - groups < y), so at most a few workgroups idle.
pub(super) fn grid(count: u32, max: u32) -> [u32; 2] {
    let groups = count.div_ceil(WORKGROUP_SIZE).max(1);
    let y = groups.div_ceil(max.max(1));
    [groups.div_ceil(y), y]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_cover_every_item_tightly() {
        for max in [1, 2, 3, 7, 65535] {
            for count in [1, 255, 256, 257, 1000, 70_000, 10_000_000] {
                let [x, y] = grid(count, max);
                let groups = count.div_ceil(WORKGROUP_SIZE);
                if groups > max * max {
                    continue;
                }
                assert!(x <= max && y <= max, "{count}/{max}: {x} x {y}");
                assert!(
                    x * y >= groups && x * y - groups < y,
                    "{count}/{max}: {x} x {y}"
                );
            }
        }
    }
}
