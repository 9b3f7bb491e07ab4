//! A solver's DDEF plans (`coulomb.method = "ddef"` on the lattice grid): per world the
//! plan made at set-up from its initial charges (the CPU reference's first plan), the
//! packed layout of the DDEF buffers, and the re-plan between steps: when a frame has
//! drifted from its plan (the flag `ddef_frame` raises, read with the energies), the host
//! makes the next plan from that frame's box, as the CPU reference does, and writes it.
//! No other host work: every evaluation runs on the device.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::config::{Config, DdefGrid};
use crate::ddef::plan::LatticePlan;
use crate::ddef::{DdefSolver, DdefVariant};
use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::{Buf, Buffers, DdefSizes};
use crate::gpu::host::ddef_layout::DdefLayout;
use crate::gpu::layout::{DdefWorld, DDEF_PLAN_BYTES};
use crate::gpu::shader::CellLoad;
use crate::model::System;
use glam::DVec3;

/// One world's DDEF settings and first plan.
#[derive(Clone, Copy, Debug)]
pub(in crate::gpu) struct WorldPlan {
    pub plan: LatticePlan,
    pub variant: DdefVariant,
    pub eps2: f32,
    /// Its cells' load at the initial positions (the gather's shape for `Auto`).
    pub load: CellLoad,
}

impl WorldPlan {
    /// The plan of `system` under `config` (DDEF on the lattice grid), as the CPU
    /// reference makes it at its first evaluation (without a charge: a one-cell plan,
    /// never evaluated); `None` without DDEF.
    pub(in crate::gpu) fn of(system: &System, config: &Config) -> Result<Option<Self>, GpuError> {
        let Some(d) = config.coulomb.method.ddef() else {
            return Ok(None);
        };
        if d.grid == DdefGrid::Delaunay {
            return Err(delaunay_refused());
        }
        let (x, q) = (system.positions(), system.charges());
        let (plan, load) = if system.charged_count() == 0 {
            (
                LatticePlan::new(DVec3::ZERO, DVec3::ZERO, 0)?,
                CellLoad::default(),
            )
        } else {
            let plan = DdefSolver::plan_for(d, x, q)?;
            let counts = DdefSolver::cell_counts(&plan, x, q)?;
            (plan, CellLoad::of_counts(&counts))
        };
        let eps = config.coulomb.softening;
        Ok(Some(Self {
            plan,
            variant: d.variant,
            eps2: crate::gpu::host::params::to_f32(eps * eps, "coulomb softening^2", 0)?,
            load,
        }))
    }
}

/// The Delaunay grid's refusal on the GPU.
pub(in crate::gpu) fn delaunay_refused() -> GpuError {
    GpuError::Unsupported(
        "coulomb.ddef_grid = \"delaunay\" on the GPU: the paper's Halton + Delaunay grid is \
         built on the host and runs on the CPU backend only; the GPU runs DDEF on \
         coulomb.ddef_grid = \"lattice\" (the default), every stage on the device"
            .into(),
    )
}

/// The DDEF state of a solver (see the module doc).
pub(in crate::gpu) struct SolverDdef {
    pub(in crate::gpu) layout: DdefLayout,
    worlds: Mutex<Vec<WorldPlan>>,
    /// Plans made per world (the first included) and evaluations recorded so far.
    plans: Mutex<Vec<u64>>,
    evaluations: AtomicU64,
}

impl SolverDdef {
    /// The state for `worlds` of `charges[w]` charged particles whose sources are the
    /// slots `slots[w]`.
    pub(in crate::gpu) fn new(
        worlds: Vec<WorldPlan>,
        charges: &[u32],
        slots: &[(u32, u32)],
        cpu: bool,
    ) -> Self {
        let samples: Vec<u32> = worlds.iter().map(|w| w.plan.samples).collect();
        let layout = DdefLayout::new(&samples, charges, slots, cpu);
        Self {
            layout,
            plans: Mutex::new(vec![1; worlds.len()]),
            worlds: Mutex::new(worlds),
            evaluations: AtomicU64::new(0),
        }
    }

    /// Every world's cells' load at set-up, together.
    pub(in crate::gpu) fn load(&self) -> CellLoad {
        let worlds = self.worlds.lock().unwrap_or_else(|e| e.into_inner());
        worlds
            .iter()
            .fold(CellLoad::default(), |sum, w| sum + w.load)
    }

    /// What the DDEF buffers are sized for.
    pub(in crate::gpu) fn sizes(&self, tables: usize) -> DdefSizes {
        let l = &self.layout;
        DdefSizes {
            worlds: l.worlds.len() as u64,
            tets: l.tets,
            cells: l.cells,
            sites: l.sites,
            chunks: l.chunks,
            site_chunks: l.site_chunks,
            scratch: l.scratch.max(1),
            tables: tables as u64,
        }
    }

    fn records(&self) -> Vec<DdefWorld> {
        let worlds = self.worlds.lock().unwrap_or_else(|e| e.into_inner());
        worlds
            .iter()
            .enumerate()
            .map(|(w, p)| self.layout.record(w, &p.plan, p.variant, p.eps2))
            .collect()
    }

    /// Creates the DDEF buffers in `buffers`: the world records, the tables, the rest
    /// zeroed (the tetrahedron counts must start at 0).
    pub(in crate::gpu) fn create_buffers(
        &self,
        device: &wgpu::Device,
        buffers: &mut Buffers,
        tables: &[u32],
    ) {
        for &b in DDEF_BUFFERS {
            let data: Vec<u8> = match b {
                Buf::DdefWorlds => bytemuck::cast_slice(&self.records()).to_vec(),
                Buf::DdefTables => bytemuck::cast_slice(tables).to_vec(),
                _ => Vec::new(),
            };
            buffers.put(device, b, &data);
        }
    }

    /// Plans made so far for world `w`: its first, then one per re-plan.
    pub(in crate::gpu) fn plans(&self, w: usize) -> u64 {
        let plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        plans.get(w).copied().unwrap_or(0)
    }

    pub(in crate::gpu) fn evaluations(&self) -> u64 {
        self.evaluations.load(Ordering::Relaxed)
    }

    /// Counts `n` evaluations recorded.
    pub(in crate::gpu) fn count(&self, n: u64) {
        self.evaluations.fetch_add(n, Ordering::Relaxed);
    }

    /// Re-plans every world whose frame (in `records`, read back with the energies) has
    /// drifted, writing its new plan and clearing its flag; returns how many. A plan that
    /// would not fit the world's reserved lattice is a typed error.
    pub(in crate::gpu) fn replan(
        &self,
        queue: &wgpu::Queue,
        buffer: &wgpu::Buffer,
        records: &[DdefWorld],
    ) -> Result<u64, GpuError> {
        check_loop_budget(records)?;
        let mut worlds = self.worlds.lock().unwrap_or_else(|e| e.into_inner());
        let mut done = 0;
        for (w, r) in records.iter().enumerate() {
            if r.flags[0] == 0 {
                continue;
            }
            let corner = |v: [f32; 4]| DVec3::new(v[0].into(), v[1].into(), v[2].into());
            let old = worlds[w];
            let plan = old.plan.replanned_box(corner(r.lo), corner(r.hi))?;
            if !self.layout.fits(w, &plan) {
                return Err(GpuError::Unsupported(format!(
                    "DDEF re-plan of world {w}: {} sites do not fit the {} reserved",
                    plan.sites(),
                    self.layout.worlds[w].1[2]
                )));
            }
            worlds[w].plan = plan;
            self.plans.lock().unwrap_or_else(|e| e.into_inner())[w] += 1;
            let rec = self.layout.record(w, &plan, old.variant, old.eps2);
            let offset = (w * std::mem::size_of::<DdefWorld>()) as u64;
            let bytes = bytemuck::bytes_of(&rec);
            queue.write_buffer(buffer, offset, &bytes[..DDEF_PLAN_BYTES as usize]);
            let flags = offset + std::mem::offset_of!(DdefWorld, flags) as u64;
            queue.write_buffer(buffer, flags, bytemuck::bytes_of(&[0u32; 4]));
            done += 1;
        }
        Ok(done)
    }
}

/// Loop-budget excesses an error names one by one; the rest are counted.
const EXCESSES_NAMED: usize = 8;

/// The error for the worlds where an evaluation raised a loop-budget flag (a CPU adapter
/// only: the kernels skip such a walk rather than let llvmpipe cut it short, so the
/// forces of that evaluation, and the tangents and adjoints over its structure, are
/// wrong). The flags stay raised until a re-plan, which checks them first. The error
/// names every flagged world (the first [`EXCESSES_NAMED`] excesses, each with its walk
/// and needed > limit, then how many more); its `needed` and `limit` are the first's.
pub(in crate::gpu) fn check_loop_budget(records: &[DdefWorld]) -> Result<(), GpuError> {
    use crate::gpu::shader::{CPU_GATHER_SOURCES, CPU_LOOP_ITERATIONS, CPU_WALK_BUDGET};
    let walks = [
        (1, "charged particles in one tetrahedron", CPU_WALK_BUDGET),
        (2, "sources around one lattice cell", CPU_GATHER_SOURCES),
    ];
    let excesses: Vec<(usize, &str, u32, u32)> = records
        .iter()
        .enumerate()
        .flat_map(|(w, r)| {
            walks
                .iter()
                .filter(|(flag, ..)| r.flags[*flag] != 0)
                .map(move |&(flag, what, limit)| (w, what, r.flags[flag], limit))
        })
        .collect();
    let Some(&(w, what, needed, limit)) = excesses.first() else {
        return Ok(());
    };
    let mut worlds: Vec<usize> = excesses.iter().map(|e| e.0).collect();
    worlds.dedup();
    let list = crate::display::first_of(
        excesses
            .iter()
            .map(|(w, what, needed, limit)| format!("world {w}: {what}, {needed} > {limit}")),
        EXCESSES_NAMED,
        "; ",
    );
    let cap = CPU_LOOP_ITERATIONS;
    Err(GpuError::LimitExceeded {
        what: format!(
            "DDEF on a CPU adapter, {} world(s) past the loop budget ({}) (llvmpipe ends a \
             shader's loops after {},{:03} iterations, so the walk would drop sources \
             silently; raise coulomb.samples, or use --backend cpu or a hardware GPU); the \
             first, world {w}: {what}",
            worlds.len(),
            list,
            cap / 1000,
            cap % 1000
        ),
        needed: needed.into(),
        limit: limit.into(),
    })
}

/// The buffers of `Part::Ddef`.
pub(in crate::gpu) const DDEF_BUFFERS: &[Buf] = &[
    Buf::DdefWorlds,
    Buf::DdefTables,
    Buf::DdefBounds,
    Buf::SrcTet,
    Buf::TetCount,
    Buf::CellCount,
    Buf::Starts,
    Buf::ScanScratch,
    Buf::Scattered,
    Buf::SortedSrc,
    Buf::SortedKey,
    Buf::FarPart,
    Buf::Far,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Records of `n` worlds, world w flagged as `flags(w)` ([tetrahedron, cell] counts).
    fn records(n: usize, flags: impl Fn(usize) -> [u32; 2]) -> Vec<DdefWorld> {
        (0..n)
            .map(|w| {
                let [tet, cell] = flags(w);
                DdefWorld {
                    flags: [0, tet, cell, 0],
                    ..Default::default()
                }
            })
            .collect()
    }

    fn what(e: GpuError) -> (String, u64) {
        match e {
            GpuError::LimitExceeded { what, needed, .. } => (what, needed),
            e => panic!("unexpected error: {e}"),
        }
    }

    #[test]
    fn every_flagged_world_is_named_with_its_walk_and_count() {
        assert!(check_loop_budget(&records(3, |_| [0, 0])).is_ok());
        let r = records(4, |w| match w {
            1 => [70_001, 70_002],
            3 => [0, 80_003],
            _ => [0, 0],
        });
        let (what, needed) = what(check_loop_budget(&r).unwrap_err());
        assert_eq!(needed, 70_001, "{what}");
        for part in [
            "2 world(s)",
            "world 1: charged particles in one tetrahedron, 70001 >",
            "world 1: sources around one lattice cell, 70002 >",
            "world 3: sources around one lattice cell, 80003 >",
            "the first, world 1",
        ] {
            assert!(what.contains(part), "{part:?} missing from: {what}");
        }
        assert!(
            !what.contains("world 0") && !what.contains("world 2"),
            "{what}"
        );
    }

    #[test]
    fn past_eight_excesses_the_rest_are_counted() {
        let r = records(11, |w| [70_000 + w as u32, 0]);
        let (what, _) = what(check_loop_budget(&r).unwrap_err());
        assert!(
            what.contains("11 world(s)") && what.contains("3 more"),
            "{what}"
        );
        assert!(
            what.contains("world 7:") && !what.contains("world 8:"),
            "{what}"
        );
    }
}
