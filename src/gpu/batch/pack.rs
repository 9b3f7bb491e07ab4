//! Packing a batch of worlds into one system (`batch::worlds`): each world's particles a
//! contiguous range starting on a workgroup boundary (padding particles between worlds:
//! pinned, uncharged, at rest, in no world), its springs appended in order with shifted
//! indices (so every adjacency row lists its springs in the world's own order), its charged
//! particles a range of Coulomb source slots starting on a tile boundary. A workgroup of
//! a per-particle dispatch, a Coulomb tile and a reduction block therefore never mix
//! worlds, and each world's sums run in the order of that world stepped alone.

use std::ops::Range;

use glam::DVec3;

use crate::config::Config;
use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Shape;
use crate::gpu::layout::{NO_RANK, NO_WORLD, TILE, WORKGROUP_SIZE};
use crate::model::{Spring, System, SystemDesc};

/// Where world w sits in the packed buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::gpu) struct Span {
    /// Its particles (slots of the position buffer).
    pub(in crate::gpu) particles: Range<u32>,
    /// Its springs.
    pub(in crate::gpu) springs: Range<u32>,
    /// Its Coulomb source slots (its charged particles, then padding up to a tile).
    pub(in crate::gpu) charged: Range<u32>,
    /// The workgroups of a per-particle dispatch over its particles.
    pub(in crate::gpu) groups: Range<u32>,
}

/// A batch packed into one system.
pub(in crate::gpu) struct Packed {
    pub(in crate::gpu) system: System,
    pub(in crate::gpu) spans: Vec<Span>,
    /// The world of every particle slot (`NO_WORLD` for padding).
    pub(in crate::gpu) world_of: Vec<u32>,
    /// The Coulomb source slots: a particle index, or `NO_RANK` for padding.
    pub(in crate::gpu) charged: Vec<u32>,
}

fn round_up(x: u64, to: u32) -> u64 {
    x.div_ceil(u64::from(to)) * u64::from(to)
}

/// The packed counts of `worlds` (particle slots, springs, Coulomb source slots) without
/// building anything: for [`batch_shape`] before packing.
pub(in crate::gpu) fn packed_counts(
    worlds: &[(&System, &Config)],
    coulomb: bool,
) -> (u64, u64, u64) {
    let mut n = 0u64;
    let mut ns = 0u64;
    let mut nc = 0u64;
    for (system, _) in worlds {
        n += round_up(system.len() as u64, WORKGROUP_SIZE);
        ns += system.springs().len() as u64;
        if coulomb {
            nc += round_up(system.charged_count() as u64, TILE);
        }
    }
    (n, ns, nc)
}

/// What the buffers of a batch of `worlds` are sized for (the solver's buffers over the
/// packed counts, the scalars of every world, the world parameters and table with the
/// Chebyshev weights of `config`'s solver iterations per world).
pub(in crate::gpu) fn batch_shape(
    worlds: &[(&System, &Config)],
    config: &Config,
    coulomb: bool,
) -> Shape {
    let (n, ns, nc) = packed_counts(worlds, coulomb);
    Shape {
        worlds: worlds.len() as u64,
        iterations: u64::from(config.solver.iterations),
        ..Shape::new(n, ns, nc, config)
    }
}

/// Packs `worlds`; `coulomb`: whether the Coulomb sum runs (else no source slots).
pub(in crate::gpu) fn pack(
    worlds: &[(&System, &Config)],
    coulomb: bool,
) -> Result<Packed, GpuError> {
    let (n, ns, nc) = packed_counts(worlds, coulomb);
    let too_many = |what: &str, count: u64| GpuError::LimitExceeded {
        what: format!("{what} of a batch of {} worlds", worlds.len()),
        needed: count,
        limit: System::MAX_PARTICLES as u64,
    };
    if n > System::MAX_PARTICLES as u64 {
        return Err(too_many("particle slots", n));
    }
    if ns > u64::from(u32::MAX / 2) || nc > u64::from(u32::MAX / 2) {
        return Err(too_many("springs or Coulomb source slots", ns.max(nc)));
    }
    let n = n as usize;
    let mut desc = SystemDesc {
        positions: Vec::with_capacity(n),
        velocities: Vec::with_capacity(n),
        masses: Vec::with_capacity(n),
        charges: Vec::with_capacity(n),
        pinned: Vec::with_capacity(n),
        springs: Vec::with_capacity(ns as usize),
        faces: Vec::new(),
    };
    let mut spans = Vec::with_capacity(worlds.len());
    let mut world_of = Vec::with_capacity(n);
    let mut charged = Vec::with_capacity(nc as usize);
    for (w, (system, _)) in worlds.iter().enumerate() {
        let first = desc.positions.len() as u32;
        let spring0 = desc.springs.len() as u32;
        let charged0 = charged.len() as u32;
        desc.positions.extend_from_slice(system.positions());
        desc.velocities.extend_from_slice(system.velocities());
        desc.masses.extend_from_slice(system.masses());
        desc.charges.extend_from_slice(system.charges());
        desc.pinned.extend_from_slice(system.pinned());
        world_of.resize(world_of.len() + system.len(), w as u32);
        desc.springs.extend(system.springs().iter().map(|s| Spring {
            i: s.i + first,
            j: s.j + first,
            ..*s
        }));
        if coulomb {
            charged.extend(system.charged_indices().iter().map(|&i| i + first));
            let padded = round_up(charged.len() as u64, TILE) as usize;
            charged.resize(padded, NO_RANK);
        }
        // Padding up to the next workgroup: pinned, uncharged, at rest, in no world.
        let end = round_up(desc.positions.len() as u64, WORKGROUP_SIZE) as usize;
        let pad = end - desc.positions.len();
        desc.positions.resize(end, DVec3::ZERO);
        desc.velocities.resize(end, DVec3::ZERO);
        desc.masses.resize(end, 1.0);
        desc.charges.resize(end, 0.0);
        desc.pinned.resize(end, true);
        world_of.resize(world_of.len() + pad, NO_WORLD);
        let last = first + system.len() as u32;
        spans.push(Span {
            particles: first..last,
            springs: spring0..desc.springs.len() as u32,
            charged: charged0..charged.len() as u32,
            groups: first / WORKGROUP_SIZE..end as u32 / WORKGROUP_SIZE,
        });
    }
    let system = System::new(desc).map_err(|e| GpuError::Worlds(format!("packing: {e}")))?;
    Ok(Packed {
        system,
        spans,
        world_of,
        charged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: usize, charged_every: usize) -> System {
        let positions = (0..n).map(|i| DVec3::new(i as f64, 0.0, 0.0)).collect();
        let springs = (1..n as u32)
            .map(|j| Spring {
                i: j - 1,
                j,
                stiffness: 10.0 + f64::from(j),
                rest_length: 1.0,
                damping: 0.1,
            })
            .collect();
        System::new(SystemDesc {
            positions,
            masses: vec![0.01; n],
            charges: (0..n)
                .map(|i| if i % charged_every == 0 { 1e-9 } else { 0.0 })
                .collect(),
            springs,
            ..Default::default()
        })
        .unwrap()
    }

    /// Every world starts on a workgroup and a tile boundary, keeps its particles, springs
    /// (shifted, in order) and charged particles (in order), and padding belongs to no
    /// world and carries no charge.
    #[test]
    fn worlds_are_whole_workgroups_and_tiles_apart() {
        let a = chain(300, 2);
        let b = chain(5, 1);
        let c = chain(257, 3);
        let config = Config::default();
        let worlds = [(&a, &config), (&b, &config), (&c, &config)];
        let p = pack(&worlds, true).unwrap();
        assert_eq!(p.spans.len(), 3);
        for (w, (span, (system, _))) in p.spans.iter().zip(&worlds).enumerate() {
            assert_eq!(span.particles.start % WORKGROUP_SIZE, 0);
            assert_eq!(span.charged.start % TILE, 0);
            assert_eq!(span.particles.len(), system.len());
            assert_eq!(span.groups.start * WORKGROUP_SIZE, span.particles.start);
            let first = span.particles.start;
            for (k, s) in system.springs().iter().enumerate() {
                let packed = p.system.springs()[span.springs.start as usize + k];
                assert_eq!((packed.i, packed.j), (s.i + first, s.j + first));
                assert_eq!(packed.stiffness, s.stiffness);
            }
            let mine: Vec<u32> = system
                .charged_indices()
                .iter()
                .map(|&i| i + first)
                .collect();
            let slots = &p.charged[span.charged.start as usize..][..mine.len()];
            assert_eq!(slots, &mine[..]);
            for i in span.particles.clone() {
                assert_eq!(p.world_of[i as usize], w as u32);
            }
        }
        for (i, &w) in p.world_of.iter().enumerate() {
            if w == NO_WORLD {
                assert!(p.system.pinned()[i] && p.system.charges()[i] == 0.0);
            }
        }
        let (n, ns, nc) = packed_counts(&worlds, true);
        assert_eq!(n as usize, p.system.len());
        assert_eq!(ns as usize, p.system.springs().len());
        assert_eq!(nc as usize, p.charged.len());
        assert_eq!(p.charged.len() % TILE as usize, 0);
    }
}
