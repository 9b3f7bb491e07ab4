//! The device limits the kernels rely on and the buffer sizes of the table
//! (`buffers::Buf::spec`), checked before anything is allocated (and, from the counts
//! alone, before a scene's mesh is built) so a too-large mesh fails with the size it
//! needs; and the workgroup grid of a dispatch.

use super::buffers::Shape;
use crate::config::Config;
use crate::gpu::error::GpuError;
use crate::gpu::layout::{Params, MAX_STORAGE_BUFFERS, WORKGROUP_MEMORY, WORKGROUP_SIZE};

/// Checks the device limits the kernels rely on and the buffer sizes of this system.
pub(in crate::gpu) fn check_limits(limits: &wgpu::Limits, shape: &Shape) -> Result<(), GpuError> {
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
    // Group 0 binds `Params` at 0 and the storage buffers after it; group 1 `Dispatch`.
    need(
        "bindings per bind group",
        u64::from(MAX_STORAGE_BUFFERS) + 1,
        limits.max_bindings_per_bind_group.into(),
    )?;
    need(
        "uniform buffers per shader stage",
        2,
        limits.max_uniform_buffers_per_shader_stage.into(),
    )?;
    need(
        "uniform buffer binding size (bytes of the Params uniform)",
        std::mem::size_of::<Params>() as u64,
        limits.max_uniform_buffer_binding_size,
    )?;
    need(
        "dynamic uniform buffers per pipeline layout",
        1,
        limits
            .max_dynamic_uniform_buffers_per_pipeline_layout
            .into(),
    )?;
    if let Some(b) = first_oversized(limits, shape) {
        return Err(GpuError::LimitExceeded {
            what: b.to_string(),
            needed: b.bytes,
            limit: b.limit,
        });
    }
    let per_dim = u64::from(limits.max_compute_workgroups_per_dimension);
    need(
        "workgroups of one dispatch",
        shape.n.max(shape.ns).div_ceil(u64::from(WORKGROUP_SIZE)),
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

/// The first buffer of `shape` larger than an adapter limit allows.
pub(in crate::gpu) fn first_oversized(
    limits: &wgpu::Limits,
    shape: &Shape,
) -> Option<OversizedBuffer> {
    shape.created().find_map(|(_, spec)| {
        let (buffer, bytes) = (spec.name, spec.bytes);
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
    first_oversized(limits, &Shape::new(particles, springs, charged, config))
}

/// Workgroup grid of a 1D dispatch over `count` items with at most `max` workgroups per
/// dimension: tight (x y - groups < y), so at most a few workgroups idle.
pub(in crate::gpu) fn grid(count: u32, max: u32) -> [u32; 2] {
    let groups = count.div_ceil(WORKGROUP_SIZE).max(1);
    let y = groups.div_ceil(max.max(1));
    [groups.div_ceil(y), y]
}

/// The most charged particles one world may hold for all-pairs Coulomb on a CPU adapter.
/// llvmpipe (Mesa's software rasterizer, behind lavapipe and its GL driver) silently
/// ends a shader invocation's loops once they have run 65,535 iterations in all
/// (`LP_MAX_TGSI_LOOP_ITERATIONS`); the all-pairs kernels walk every source of their world
/// in each invocation (one iteration per source, one per tile), so past about 65K charges
/// sources would be dropped without an error. Measured on lavapipe: 60K charges agree with
/// the f64 sum to 2.3e-5, 65K differ by 0.53. 240 tiles of 256 leave a margin.
pub const CPU_ADAPTER_ALL_PAIRS_CHARGES: u64 = 61_440;

/// Refuses all-pairs Coulomb over more than [`CPU_ADAPTER_ALL_PAIRS_CHARGES`] charged
/// particles in one world on a CPU adapter (`cpu`), naming the count and the limit.
pub(in crate::gpu) fn check_cpu_loop_budget(
    cpu: bool,
    config: &Config,
    charged: u64,
) -> Result<(), GpuError> {
    if cpu
        && config.coulomb.method == crate::config::CoulombMethod::AllPairs
        && charged > CPU_ADAPTER_ALL_PAIRS_CHARGES
    {
        return Err(GpuError::LimitExceeded {
            what: "all-pairs Coulomb on a CPU adapter (llvmpipe ends a shader's loops after \
                   65,535 iterations, so more sources would be dropped silently; use \
                   coulomb.method = \"ddef\", --backend cpu or a hardware GPU): charged \
                   particles"
                .into(),
            needed: charged,
            limit: CPU_ADAPTER_ALL_PAIRS_CHARGES,
        });
    }
    Ok(())
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
