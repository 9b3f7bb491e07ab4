//! The DDEF family (the paper's Section 3.3, Algorithm 1, on the lattice grid;
//! docs/physics.md §8), every stage on the device and rebuilt at each evaluation in O(n),
//! under the plan of `crate::ddef::plan` (the f64 reference, `crate::ddef::lattice_field`,
//! is the same algorithm step for step). Kernels, in `ddef/`, in the order one evaluation
//! runs them:
//! 1. `ddef_bounds`, `ddef_frame`: the charges' box per world (min/max), quantized; the
//!    cell edges; the drift flag the host reads with the energies;
//! 2. `ddef_locate`: each charge's tetrahedron in closed form, counted per tetrahedron;
//! 3. `ddef_scan` (levels up, then down): the tetrahedra's first sorted positions;
//! 4. `ddef_scatter`, `ddef_rank`: the counting sort by (tetrahedron, particle index);
//! 5. `ddef_cells`, `ddef_scan`: the gather's work list (per cell, one item per WG targets);
//! 6. `ddef_far`, `ddef_far_sum`: eq. 17 at the sites over source chunks, then the chunks
//!    added in order;
//! 7. `ddef_gather`: per work item the exact near sum and the interpolated (`corrected`)
//!    far field, q E added to the force; on a GPU in the shape the caller's
//!    `Tuning::ddef_gather` picks (lanes per workgroup, tiles per cell or packed).
//!
//! No float atomics (integer counts only, their order undone by the sort) and fixed
//! summation orders: reruns and a world alone or in a batch give the same bits. The
//! translation-invariant tables (`crate::ddef::stencil`) and the scan levels are one
//! constant buffer (`DdefLayout::tables`); each world's plan and frame one `DdefWorld` record.
//! All device quantities are scaled by sqrt(k_c), as in the all-pairs kernel.

use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::layout::{Dispatch, WORKGROUP_SIZE};
use crate::gpu::shader::Access::{Read, ReadWrite};
use crate::gpu::shader::{Kernel, Library, DDEF_FAR_SITES_CPU};

wgsl_enum! {
    /// `ddef_scan`'s pass: scan each block and write its total a level up, or add the
    /// level above's scanned totals.
    pub enum ScanMode {
        Up = "SCAN_UP" = 0,
        Down = "SCAN_DOWN" = 1,
    }
}

macro_rules! ddef_kernel {
    ($name:literal, [$($lib:ident),*], [$($acc:ident),*]) => {
        Kernel {
            name: $name,
            body: include_str!(concat!("ddef/", $name, ".wgsl")),
            libs: &[$(Library::$lib),*],
            storage: &[$($acc),*],
            constants: &[],
            cpu_targets: None,
        }
    };
}

pub const DDEF_BOUNDS: Kernel = ddef_kernel!("ddef_bounds", [Layout], [Read, Read, ReadWrite]);
pub const DDEF_FRAME: Kernel = ddef_kernel!("ddef_frame", [Layout], [Read, ReadWrite]);
pub const DDEF_LOCATE: Kernel = ddef_kernel!(
    "ddef_locate",
    [Layout, Lattice],
    [Read, Read, Read, ReadWrite, ReadWrite]
);
pub const DDEF_SCAN: Kernel = Kernel {
    constants: ScanMode::WGSL,
    ..ddef_kernel!("ddef_scan", [Layout], [Read, ReadWrite, ReadWrite, Read])
};
pub const DDEF_SCATTER: Kernel =
    ddef_kernel!("ddef_scatter", [Layout], [Read, Read, ReadWrite, ReadWrite]);
pub const DDEF_RANK: Kernel = ddef_kernel!(
    "ddef_rank",
    [Layout],
    [Read, Read, Read, Read, Read, ReadWrite, ReadWrite, ReadWrite]
);
pub const DDEF_CELLS: Kernel = ddef_kernel!(
    "ddef_cells",
    [Layout, Lattice],
    [Read, ReadWrite, ReadWrite, Read]
);
pub const DDEF_FAR: Kernel = Kernel {
    cpu_targets: Some(DDEF_FAR_SITES_CPU),
    ..ddef_kernel!(
        "ddef_far",
        [Layout, World, Physics, Lattice, FarWalk],
        [Read, Read, Read, Read, ReadWrite]
    )
};
pub const DDEF_FAR_SUM: Kernel = ddef_kernel!("ddef_far_sum", [Layout], [Read, Read, ReadWrite]);
/// Entries of the near neighbourhood a `ddef_gather` workgroup holds when its tiles are
/// packed (`GatherStaging::Packed`): the tables' union of near stencils has 63.
pub const NEAR_CELLS: u32 = 64;
pub const DDEF_GATHER: Kernel = Kernel {
    constants: &[("NEAR_CELLS", NEAR_CELLS)],
    ..ddef_kernel!(
        "ddef_gather",
        [Layout, World, Physics, Lattice, DdefWork, NearWalk],
        [Read, Read, Read, Read, Read, Read, ReadWrite]
    )
};

pub const KERNELS: &[Kernel] = &[
    DDEF_BOUNDS,
    DDEF_FRAME,
    DDEF_LOCATE,
    DDEF_SCAN,
    DDEF_SCATTER,
    DDEF_RANK,
    DDEF_CELLS,
    DDEF_FAR,
    DDEF_FAR_SUM,
    DDEF_GATHER,
];

use crate::gpu::host::ddef_layout::{DdefLayout, ScanLevel, SCAN_BLOCK};

impl Recorder<'_> {
    /// One DDEF evaluation over the compacted sources (after `coulomb_sources`), adding
    /// q E to the force buffer (see the module doc).
    pub(in crate::gpu) fn ddef(&mut self, ops: &mut Vec<Op>) -> Result<(), GpuError> {
        let Some(layout) = self.ddef_layout.clone() else {
            return Ok(());
        };
        let (nc, m0) = (self.nc, self.mode(0));
        let worlds = layout.worlds.len() as u32;
        ops.push(self.dispatch(
            DDEF_BOUNDS,
            &[Buf::Sources, Buf::Charged, Buf::DdefBounds],
            m0,
            nc,
        )?);
        ops.push(self.grid_dispatch(
            DDEF_FRAME,
            &[Buf::DdefBounds, Buf::DdefWorlds],
            m0,
            [worlds, 1],
        )?);
        ops.push(self.dispatch(
            DDEF_LOCATE,
            &[
                Buf::Sources,
                Buf::Charged,
                Buf::DdefWorlds,
                Buf::SrcTet,
                Buf::TetCount,
            ],
            m0,
            nc,
        )?);
        self.scan(ops, Buf::TetCount, &layout.tet_scan, 0)?;
        ops.push(self.dispatch(
            DDEF_SCATTER,
            &[Buf::SrcTet, Buf::Starts, Buf::TetCount, Buf::Scattered],
            m0,
            nc,
        )?);
        ops.push(self.dispatch(
            DDEF_RANK,
            &[
                Buf::Scattered,
                Buf::SrcTet,
                Buf::Starts,
                Buf::Sources,
                Buf::Charged,
                Buf::DdefWorlds,
                Buf::SortedSrc,
                Buf::SortedKey,
            ],
            m0,
            nc,
        )?);
        let cells = layout.cells as u32;
        ops.push(self.dispatch(
            DDEF_CELLS,
            &[
                Buf::Starts,
                Buf::DdefWorlds,
                Buf::CellCount,
                Buf::DdefTables,
            ],
            m0,
            cells,
        )?);
        self.scan(
            ops,
            Buf::CellCount,
            &layout.cell_scan,
            layout.tet_scan.len(),
        )?;
        ops.push(self.grid_dispatch(
            DDEF_FAR,
            &[
                Buf::DdefWorlds,
                Buf::DdefTables,
                Buf::Starts,
                Buf::SortedSrc,
                Buf::FarPart,
            ],
            m0,
            far_grid(&layout),
        )?);
        let sites = layout.sites as u32;
        ops.push(self.dispatch(
            DDEF_FAR_SUM,
            &[Buf::DdefWorlds, Buf::FarPart, Buf::Far],
            m0,
            sites,
        )?);
        // WG / (its targets) workgroups of LANES per work item (its shape, `Tuning`).
        let shape = self.engine.spec().ddef_gather(self.device);
        let per = WORKGROUP_SIZE / shape.targets_per_workgroup();
        let grid = self.grid(gather_invocations(gather_items(&layout, self.nc), per)?);
        ops.push(self.grid_dispatch(
            DDEF_GATHER,
            &[
                Buf::DdefWorlds,
                Buf::DdefTables,
                Buf::Starts,
                Buf::SortedSrc,
                Buf::SortedKey,
                Buf::Far,
                Buf::Force,
            ],
            m0,
            grid,
        )?);
        Ok(())
    }

    /// [`gather_items`] of this recording's sources.
    pub(in crate::gpu) fn gather_items(&self, layout: &DdefLayout) -> u32 {
        gather_items(layout, self.nc)
    }

    /// A `ddef_scan` of `input` into the starts: its levels up, then down; `first` is the
    /// index of its first level among the tables' scan levels.
    fn scan(
        &mut self,
        ops: &mut Vec<Op>,
        input: Buf,
        levels: &[ScanLevel],
        first: usize,
    ) -> Result<(), GpuError> {
        let bufs = [input, Buf::Starts, Buf::ScanScratch, Buf::DdefTables];
        for (i, l) in levels.iter().enumerate() {
            let rec = self.scan_record(first + i, ScanMode::Up);
            let grid = self.grid(scan_blocks(l) * WORKGROUP_SIZE);
            ops.push(self.grid_dispatch(DDEF_SCAN, &bufs, rec, grid)?);
        }
        for (i, l) in levels.iter().enumerate().rev().skip(1) {
            let rec = self.scan_record(first + i, ScanMode::Down);
            let grid = self.grid(scan_blocks(l) * WORKGROUP_SIZE);
            ops.push(self.grid_dispatch(DDEF_SCAN, &bufs, rec, grid)?);
        }
        Ok(())
    }

    fn scan_record(&mut self, entry: usize, mode: ScanMode) -> u32 {
        self.record(Dispatch {
            iter: entry as u32,
            mode: mode.bits(),
            ..Default::default()
        })
    }
}

/// The length the near gathers' work list can reach over `nc` sources: one item per
/// occupied cell and one per WG targets beyond, in every world.
pub(in crate::gpu) fn gather_items(layout: &DdefLayout, nc: u32) -> u32 {
    layout.cells as u32 + nc.div_ceil(WORKGROUP_SIZE) + layout.worlds.len() as u32
}

/// `ddef_far`'s grid: site blocks by source chunks (not folded).
fn far_grid(layout: &DdefLayout) -> [u32; 2] {
    let blocks = layout.sites.div_ceil(u64::from(WORKGROUP_SIZE));
    [blocks as u32, layout.chunks as u32]
}

/// `ddef_scan`'s workgroups over one level.
fn scan_blocks(l: &ScanLevel) -> u32 {
    u64::from(l.len).div_ceil(SCAN_BLOCK) as u32
}

/// Whether every dispatch of one evaluation (`Recorder::ddef`, the same counts) over `nc`
/// sources with `per` gather workgroups a work item fits `max` workgroups per dimension:
/// a 1D dispatch folded into max x max, `ddef_frame` and `ddef_far` as they are. For
/// `GpuWorlds::fitting`, which has no device: a batch it accepts then records.
pub(in crate::gpu) fn ddef_grids_fit(layout: &DdefLayout, nc: u32, per: u32, max: u32) -> bool {
    let folded = |items: u64| items.div_ceil(u64::from(WORKGROUP_SIZE)) <= u64::from(max).pow(2);
    let gather = gather_invocations(gather_items(layout, nc), per).map(u64::from);
    let scans = layout.tet_scan.iter().chain(&layout.cell_scan);
    [u64::from(nc), layout.cells, layout.sites]
        .into_iter()
        .all(folded)
        && scans
            .map(|l| u64::from(scan_blocks(l)))
            .all(|b| b <= u64::from(max).pow(2))
        && gather.is_ok_and(folded)
        && layout.worlds.len() as u64 <= u64::from(max)
        && far_grid(layout).iter().all(|&g| g <= max)
}

/// The near gather's invocations: `per` workgroups for each of `items` work items. A u32
/// index (several million cells at m of millions would wrap, silently dropping work).
fn gather_invocations(items: u32, per: u32) -> Result<u32, GpuError> {
    let needed = u64::from(items) * u64::from(per) * u64::from(WORKGROUP_SIZE);
    u32::try_from(needed).map_err(|_| GpuError::LimitExceeded {
        what: "near gather invocations (a u32 index; lower coulomb.samples)".into(),
        needed,
        limit: u32::MAX.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_gather_invocations_past_u32_are_a_limit_error() {
        assert_eq!(
            gather_invocations(1000, 2).unwrap(),
            1000 * 2 * WORKGROUP_SIZE
        );
        let items = u32::MAX / WORKGROUP_SIZE / 4 + 1;
        match gather_invocations(items, 4) {
            Err(GpuError::LimitExceeded { needed, limit, .. }) => {
                assert!(needed > limit, "{needed} {limit}");
            }
            other => panic!("{other:?}"),
        }
    }
    use crate::ddef::stencil::Stencils;
    use crate::gpu::layout::TILE;
    use crate::gpu::shader::GatherLanes;

    #[test]
    fn a_packed_gather_workgroup_holds_the_whole_near_neighbourhood() {
        // ddef_gather (PACKED) keeps one entry per neighbour cell in workgroup memory and
        // scans them with its first NEAR_CELLS invocations, so every shape has that many.
        let nd = Stencils::get().dcells.len() as u32;
        assert!(nd <= NEAR_CELLS, "{nd} entries");
        for lanes in GatherLanes::ALL.map(GatherLanes::count) {
            assert!(lanes >= NEAR_CELLS, "{lanes} lanes");
            assert!(WORKGROUP_SIZE.is_multiple_of(lanes) && TILE.is_multiple_of(lanes));
        }
    }
}
