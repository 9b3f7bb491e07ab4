//! The GPU solver's tuning: how some kernels are shaped on a GPU, never what they compute.
//! Every choice adds the same terms in the same order, so gives the same bits
//! (tests/gpu_ddef_staged.rs); `msc bench --ddef-gather` and `--ddef-far` measure them
//! against each other, and the defaults are the shapes measured fastest (BENCHMARKS.md).

use std::fmt;
use std::str::FromStr;

/// Invocations per `ddef_gather` workgroup on its staged path: a work item's WG targets
/// split over WG / lanes workgroups (fewer idle invocations in a cell of few charges, more
/// passes over its neighbourhood in a crowded one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GatherLanes {
    L64,
    L128,
    #[default]
    L256,
}

impl GatherLanes {
    pub const ALL: [Self; 3] = [Self::L64, Self::L128, Self::L256];

    /// The workgroup size (`LANES`), a divisor of `WORKGROUP_SIZE`.
    pub const fn count(self) -> u32 {
        match self {
            Self::L64 => 64,
            Self::L128 => 128,
            Self::L256 => 256,
        }
    }
}

/// How `ddef_gather`'s staged path fills its workgroup-memory tiles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GatherStaging {
    /// One neighbour cell's sources at a time (a tile per cell, two barriers each).
    #[default]
    PerCell,
    /// The neighbourhood's cells one after another as one list (`PACKED`): full tiles,
    /// fewer barriers, when cells hold fewer sources than a tile.
    Packed,
}

/// How `ddef_gather`'s per-cell walk adds a tetrahedron's staged sources (`UNROLLED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GatherPairs {
    /// One source per loop trip, each tested against the target's own.
    Plain,
    /// Outside the target's own cell (which alone holds its own source) without the test
    /// and four sources per trip: fewer loop instructions per pair, four pulls in flight.
    Unrolled,
    /// `Unrolled` with two consecutive targets per invocation (`DUAL`): each staged
    /// source read, loop trip and membership read serves both, a workgroup takes twice
    /// its lanes' targets, and a warp spans twice the targets (more Kuhn types, so more
    /// pair slots: `examples/gather_warps.rs N M ORDER 2`). 64 or 128 lanes.
    Dual,
}

/// The shape of `ddef_gather` on a GPU (its staged path; a CPU adapter's direct path has
/// one shape). Written and parsed as `cell/256`, `packed/128`, `cell/256/unrolled`, ...
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DdefGather {
    pub staging: GatherStaging,
    pub lanes: GatherLanes,
    /// `Unrolled` and `Dual` with `PerCell` staging only; `Dual` with at most 128 lanes.
    pub pairs: GatherPairs,
}

/// `cell/256/unrolled`: 9-10% faster steps than `cell/256` at 256K and 1M charges on an
/// H200, the fastest shape there of those with 256 lanes (BENCHMARKS.md, "The near
/// gather's and far field's shapes"); [`GatherChoice::Auto`] takes it for crowded cells.
/// Also the one shape of a CPU adapter's direct path.
impl Default for DdefGather {
    fn default() -> Self {
        Self {
            staging: GatherStaging::PerCell,
            lanes: GatherLanes::L256,
            pairs: GatherPairs::Unrolled,
        }
    }
}

impl DdefGather {
    /// Every shape, for benchmarks and tests.
    pub fn all() -> impl Iterator<Item = Self> {
        let cell = |pairs| {
            GatherLanes::ALL.map(move |lanes| Self {
                staging: GatherStaging::PerCell,
                lanes,
                pairs,
            })
        };
        let packed = GatherLanes::ALL.map(|lanes| Self {
            staging: GatherStaging::Packed,
            lanes,
            pairs: GatherPairs::Plain,
        });
        let dual = [GatherLanes::L128, GatherLanes::L64].map(|lanes| Self {
            staging: GatherStaging::PerCell,
            lanes,
            pairs: GatherPairs::Dual,
        });
        cell(GatherPairs::Plain)
            .into_iter()
            .chain(packed)
            .chain(cell(GatherPairs::Unrolled))
            .chain(dual)
    }

    /// The shape [`GatherChoice::Auto`] runs for `load`: `cell/128/unrolled` while at most
    /// 15% of the charges lie in cells of more than 128 (`CellLoad::crowded`), else
    /// `cell/256/unrolled`. A cell of at most 128 charges leaves half as many invocations
    /// idle in a 128-lane workgroup, a fuller one takes two such workgroups, each walking
    /// the whole neighbourhood. On an H200 the gather with 128 lanes was 8-22% faster at
    /// crowded fractions 0 to 0.06, equal at 0.23, and from 0.51 up between as fast and 22%
    /// slower (uniform and crowded clouds, 64K to 1M charges; BENCHMARKS.md, "The gather's
    /// lanes by cell load").
    pub fn for_load(load: CellLoad) -> Self {
        let lanes = if 20 * load.crowded <= 3 * load.charges {
            GatherLanes::L128
        } else {
            GatherLanes::L256
        };
        Self {
            lanes,
            ..Self::default()
        }
    }

    /// Targets one workgroup takes (`LANES`, twice that `Dual`): a divisor of
    /// `WORKGROUP_SIZE`, whose work items each take `WORKGROUP_SIZE / this` workgroups.
    pub const fn targets_per_workgroup(self) -> u32 {
        match self.pairs {
            GatherPairs::Dual => 2 * self.lanes.count(),
            _ => self.lanes.count(),
        }
    }
}

impl fmt::Display for DdefGather {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let staging = match self.staging {
            GatherStaging::PerCell => "cell",
            GatherStaging::Packed => "packed",
        };
        write!(f, "{staging}/{}", self.lanes.count())?;
        match self.pairs {
            GatherPairs::Plain => Ok(()),
            GatherPairs::Unrolled => write!(f, "/unrolled"),
            GatherPairs::Dual => write!(f, "/dual"),
        }
    }
}

impl FromStr for DdefGather {
    /// What a value that names no shape was, and the shapes there are.
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::all()
            .find(|g| g.to_string() == s.trim())
            .ok_or_else(|| {
                format!(
                "unknown DDEF gather shape '{s}': expected cell/N, cell/N/unrolled or packed/N, \
                 N = 64, 128 or 256, or cell/N/dual, N = 64 or 128"
            )
            })
    }
}

/// How crowded a solver's lattice cells are at set-up: its charges at their initial
/// positions under their first DDEF plan, every world of a batch together. The gather's
/// shape is fixed when its pipeline is made, so a re-plan keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CellLoad {
    /// Charges located.
    pub charges: u64,
    /// Those of them in cells of more than 128 charges (`GatherLanes::L128`).
    pub crowded: u64,
}

impl CellLoad {
    /// The load of cells holding `counts` charges.
    pub fn of_counts(counts: &[u32]) -> Self {
        let most = GatherLanes::L128.count();
        counts.iter().fold(Self::default(), |l, &c| Self {
            charges: l.charges + u64::from(c),
            crowded: l.crowded + if c > most { u64::from(c) } else { 0 },
        })
    }
}

/// Both loads together (the worlds of a batch).
impl std::ops::Add for CellLoad {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            charges: self.charges + other.charges,
            crowded: self.crowded + other.crowded,
        }
    }
}

/// Which shape `ddef_gather` runs: chosen from the cells' load at set-up (the default), or
/// the caller's. Written and parsed as `auto` or a shape's name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GatherChoice {
    /// [`DdefGather::for_load`].
    #[default]
    Auto,
    Fixed(DdefGather),
}

impl GatherChoice {
    /// The shape for cells of `load`.
    pub fn shape(self, load: CellLoad) -> DdefGather {
        match self {
            Self::Auto => DdefGather::for_load(load),
            Self::Fixed(g) => g,
        }
    }
}

impl From<DdefGather> for GatherChoice {
    fn from(g: DdefGather) -> Self {
        Self::Fixed(g)
    }
}

impl fmt::Display for GatherChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => write!(f, "auto"),
            Self::Fixed(g) => g.fmt(f),
        }
    }
}

impl FromStr for GatherChoice {
    /// What a value that names no shape was, and the shapes there are.
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim() == "auto" {
            return Ok(Self::Auto);
        }
        s.parse()
            .map(Self::Fixed)
            .map_err(|e| format!("{e}, or auto"))
    }
}

/// The shape of `ddef_far` on a GPU: sources staged in workgroup memory, one site per
/// invocation (`staged`), or read directly (every invocation of a warp reads the same
/// source) with 1, 2 or 4 sites per invocation sharing each read (`direct/N`, the CPU
/// adapter's path, which runs 16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DdefFar {
    #[default]
    Staged,
    Direct1,
    Direct2,
    Direct4,
}

impl DdefFar {
    pub const ALL: [Self; 4] = [Self::Staged, Self::Direct1, Self::Direct2, Self::Direct4];

    /// Sites per invocation of the direct path (its `TARGETS`); `None` staged.
    pub const fn direct_sites(self) -> Option<u32> {
        match self {
            Self::Staged => None,
            Self::Direct1 => Some(1),
            Self::Direct2 => Some(2),
            Self::Direct4 => Some(4),
        }
    }
}

impl fmt::Display for DdefFar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.direct_sites() {
            None => write!(f, "staged"),
            Some(n) => write!(f, "direct/{n}"),
        }
    }
}

impl FromStr for DdefFar {
    /// What a value that names no shape was, and the shapes there are.
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|g| g.to_string() == s.trim())
            .ok_or_else(|| {
                format!("unknown DDEF far-field shape '{s}': expected staged or direct/N, N = 1, 2 or 4")
            })
    }
}

/// The caller's choices of kernel shape ([`crate::gpu::GpuSolver::new_tuned`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuning {
    /// `ddef_gather`'s shape on a GPU (on a CPU adapter, with `staged_on_cpu`).
    pub ddef_gather: GatherChoice,
    /// `ddef_far`'s shape on a GPU (on a CPU adapter, with `staged_on_cpu`).
    pub ddef_far: DdefFar,
    /// On a CPU adapter, keep the DDEF far field's and near gathers' staged path
    /// ([`super::UNSTAGED_ON_CPU`]: sources through workgroup memory and one target per
    /// invocation, what hardware GPUs run) instead of their direct reads, so that path is
    /// tested on lavapipe too: both add the same terms in the same order (the same bits).
    /// No effect on a hardware GPU.
    #[doc(hidden)]
    pub staged_on_cpu: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::layout::WORKGROUP_SIZE;

    #[test]
    fn every_gather_shape_reads_back_from_its_name() {
        for g in DdefGather::all() {
            assert_eq!(g.to_string().parse::<DdefGather>(), Ok(g));
        }
        assert_eq!(DdefGather::all().count(), 11);
        for g in DdefGather::all() {
            let per = g.targets_per_workgroup();
            assert!(
                per >= g.lanes.count() && WORKGROUP_SIZE.is_multiple_of(per),
                "{g}"
            );
        }
        assert_eq!(
            "cell/128/unrolled".parse::<DdefGather>().map(|g| g.pairs),
            Ok(GatherPairs::Unrolled)
        );
        assert_eq!(DdefGather::default().to_string(), "cell/256/unrolled");
        for f in DdefFar::ALL {
            assert_eq!(f.to_string().parse::<DdefFar>(), Ok(f));
        }
        assert_eq!(DdefFar::default().to_string(), "staged");
        assert!("direct/16"
            .parse::<DdefFar>()
            .unwrap_err()
            .contains("direct/N"));
        assert_eq!(
            "cell/128/dual"
                .parse::<DdefGather>()
                .map(|g| g.targets_per_workgroup()),
            Ok(256)
        );
        for bad in [
            "cell/32",
            "packed",
            "cells/256",
            "packed/256/unrolled",
            "cell/256/dual",
            "packed/128/dual",
            "",
        ] {
            let e = bad.parse::<DdefGather>().unwrap_err();
            assert!(
                e.contains(&format!("'{bad}'")) && e.contains("packed/N"),
                "{e}"
            );
        }
    }

    #[test]
    fn the_automatic_gather_takes_128_lanes_while_few_charges_crowd() {
        // Cells of 128 charges are not crowded, of 129 are.
        let load = CellLoad::of_counts(&[0, 5, 128, 129, 300]);
        assert_eq!(
            load,
            CellLoad {
                charges: 562,
                crowded: 429
            }
        );
        assert_eq!(
            load + load,
            CellLoad {
                charges: 1124,
                crowded: 858
            }
        );
        let lanes = |charges, crowded| {
            let g = GatherChoice::Auto.shape(CellLoad { charges, crowded });
            assert_eq!(
                (g.staging, g.pairs),
                (GatherStaging::PerCell, GatherPairs::Unrolled)
            );
            g.lanes.count()
        };
        assert_eq!(lanes(0, 0), 128);
        assert_eq!(lanes(1000, 150), 128);
        assert_eq!(lanes(1000, 151), 256);
        assert_eq!(lanes(1000, 1000), 256);
        let fixed: DdefGather = "packed/64".parse().unwrap();
        assert_eq!(GatherChoice::from(fixed).shape(load), fixed);
        assert_eq!("auto".parse::<GatherChoice>(), Ok(GatherChoice::Auto));
        assert_eq!(GatherChoice::Auto.to_string(), "auto");
        assert_eq!(GatherChoice::default(), GatherChoice::Auto);
        for g in DdefGather::all() {
            let c = GatherChoice::Fixed(g);
            assert_eq!(c.to_string().parse::<GatherChoice>(), Ok(c));
        }
        let e = "cell/32".parse::<GatherChoice>().unwrap_err();
        assert!(e.contains("'cell/32'") && e.ends_with("or auto"), "{e}");
    }
}
