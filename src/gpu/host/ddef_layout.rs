//! The DDEF buffers' layout: where each world's tetrahedra, cells, sites and source
//! slots start, the far field's chunks, the scan levels and the constant tables (the
//! kernels that use it are in `kernels::ddef`; the recorder carries one).

use crate::ddef::plan::LatticePlan;
use crate::ddef::stencil::Stencils;
use crate::ddef::DdefVariant;
use crate::gpu::layout::{DdefWorld, TILE, WORKGROUP_SIZE};

/// Elements of one `ddef_scan` block (`SCAN_BLOCK`: 4 per invocation).
pub const SCAN_BLOCK: u64 = 4 * WORKGROUP_SIZE as u64;
/// Words of the tables' header (`SITE_STENCIL` in `lattice.wgsl`).
const HEADER: usize = 4;

/// One level of a `ddef_scan`: level, length, input length (level 0), where its data
/// lives (level 0: the output buffer; else the scratch), where the level above's lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::gpu) struct ScanLevel {
    pub level: u32,
    pub len: u32,
    pub in_len: u32,
    pub off: u32,
    pub sums: u32,
}

/// The levels of a scan of `count` counts into `count + 1` starts at `out` of the output
/// buffer, its higher levels from scratch word `scratch` on; returns them and the scratch
/// words used.
fn scan_levels(count: u64, out: u64, scratch: u64) -> (Vec<ScanLevel>, u64) {
    let mut levels = Vec::new();
    let mut len = count + 1;
    let mut at = scratch;
    let mut level = 0u32;
    loop {
        let blocks = len.div_ceil(SCAN_BLOCK);
        // The totals of this level's blocks (a single block's total: unused).
        let sums = at;
        at += blocks;
        levels.push(ScanLevel {
            level,
            len: len as u32,
            in_len: count as u32,
            off: if level == 0 {
                out as u32
            } else {
                (sums - len) as u32
            },
            sums: sums as u32,
        });
        if blocks == 1 {
            break;
        }
        len = blocks;
        level += 1;
    }
    (levels, at - scratch)
}

/// Where each world's lattice lives in the packed DDEF buffers, sized for its m, with
/// room for any re-plan at the same m; and the scans over them. Fixed at set-up.
#[derive(Clone, Debug, PartialEq)]
pub(in crate::gpu) struct DdefLayout {
    /// Per world: first tetrahedron, cell, site, Coulomb source slot; and the reserved
    /// tetrahedra, cells, sites, end of its source slots; far-field source chunks.
    pub worlds: Vec<([u32; 4], [u32; 4], u32)>,
    /// Totals over the worlds: tetrahedra, cells, sites, source slots.
    pub tets: u64,
    pub cells: u64,
    pub sites: u64,
    pub slots: u64,
    /// The most far-field chunks of a world.
    pub chunks: u64,
    /// Site chunks of the adjoint's far transpose (`adjoint_site_chunks`).
    pub site_chunks: u64,
    pub tet_scan: Vec<ScanLevel>,
    pub cell_scan: Vec<ScanLevel>,
    pub scratch: u64,
}

/// Sites reserved for a world of m = `samples`: every lattice the sites-per-axis rule
/// picks for m has about m + 8 sites (at most twice that), in whole dispatch blocks.
pub fn reserved_sites(samples: u32) -> u64 {
    (2 * (u64::from(samples) + 8))
        .max(64)
        .next_multiple_of(u64::from(WORKGROUP_SIZE))
}

/// The most sources one far-field chunk takes on a CPU adapter. llvmpipe ends every loop
/// of an invocation after 65,535 iterations in all (one budget shared by all its loops,
/// without an error); `ddef_far`'s direct walk spent about 3 per source, so a longer
/// chunk silently dropped its tail (from about 44K charges in two chunks). Its masked walk
/// spends about 2 (the source, plus two per site and block of 32), but the chunks' sums,
/// so the golden digests, stay as they were.
pub const CPU_CHUNK_SOURCES: u64 = 16_384;

/// Source chunks of a world's far field with `sites` sites: enough workgroups to fill the
/// device (about 16 on a CPU adapter, 4096 on a GPU: on an H200 the far field ran up to
/// 13% faster than with 2048 and 16-28% faster than with 1024, BENCHMARKS.md) but at
/// least two tiles of sources each; on a CPU adapter also at most `CPU_CHUNK_SOURCES` each.
pub fn far_chunks(sites: u64, sources: u64, cpu: bool) -> u64 {
    let target: u64 = if cpu { 16 } else { 4096 };
    let blocks = sites.div_ceil(u64::from(WORKGROUP_SIZE)).max(1);
    let most = sources.div_ceil(2 * u64::from(TILE)).max(1);
    let chunks = target.div_ceil(blocks).clamp(1, most);
    if cpu {
        chunks.max(sources.div_ceil(CPU_CHUNK_SOURCES))
    } else {
        chunks
    }
}

/// The most sites one chunk of the adjoint's far transpose (`ddef_far_adjoint`) walks on
/// a CPU adapter: about one loop iteration per site, plus at most 8 per site of the
/// source's own 4^3 block, inside llvmpipe's 65,535 (see `CPU_CHUNK_SOURCES`).
pub const CPU_CHUNK_SITES: u64 = 16_384;

/// Site chunks of the adjoint's far transpose for worlds of at most `sites` reserved
/// sites: one on a GPU (its sources fill the device), enough on a CPU adapter to keep a
/// chunk under `CPU_CHUNK_SITES`.
pub fn adjoint_site_chunks(sites: u64, cpu: bool) -> u64 {
    if cpu {
        sites.div_ceil(CPU_CHUNK_SITES).max(1)
    } else {
        1
    }
}

impl DdefLayout {
    /// The layout for worlds of m = `samples[w]` and `charges[w]` charged particles
    /// whose sources are the slots `slots[w]` (a batch: whole tiles apart), on a CPU
    /// adapter or not. A world's share depends on its own m and charges only, so its
    /// evaluation is the same alone or in a batch.
    pub fn new(samples: &[u32], charges: &[u32], slots: &[(u32, u32)], cpu: bool) -> Self {
        let mut worlds = Vec::with_capacity(samples.len());
        let (mut tets, mut cells, mut sites, mut chunks) = (0u64, 0u64, 0u64, 1u64);
        let mut site_chunks = 1u64;
        for ((&m, &nc), &(b, e)) in samples.iter().zip(charges).zip(slots) {
            let s = reserved_sites(m);
            // On a GPU, chunks for the sites a lattice for m has (about m + 8; the rest
            // are reserved for re-plans, and ddef_far skips their blocks). A CPU adapter
            // keeps the reserved count: more chunks gain nothing on a few cores, and its
            // chunk sums (so the golden digests) stay as they were.
            let live = if cpu { s } else { u64::from(m) + 8 };
            let k = far_chunks(live, u64::from(nc), cpu);
            worlds.push((
                [tets as u32, cells as u32, sites as u32, b],
                [(6 * s) as u32, s as u32, s as u32, e],
                k as u32,
            ));
            tets += 6 * s;
            cells += s;
            sites += s;
            chunks = chunks.max(k);
            site_chunks = site_chunks.max(adjoint_site_chunks(s, cpu));
        }
        let (tet_scan, used) = scan_levels(tets, 0, 0);
        let (cell_scan, more) = scan_levels(cells, tets + 1, used);
        Self {
            worlds,
            tets,
            cells,
            sites,
            slots: slots.last().map_or(0, |s| u64::from(s.1)),
            chunks,
            site_chunks,
            tet_scan,
            cell_scan,
            scratch: used + more,
        }
    }

    /// World `w`'s record for `plan` (the frame zeroed: `ddef_frame` writes it).
    pub fn record(
        &self,
        w: usize,
        plan: &LatticePlan,
        variant: DdefVariant,
        eps2: f32,
    ) -> DdefWorld {
        let (base, cap, chunks) = self.worlds[w];
        let thin = (0..3).map(|a| u32::from(plan.thin[a]) << a).sum();
        let [px, py, pz] = plan.planned_quanta.map(|k| k as i32);
        DdefWorld {
            dims: [plan.dims[0], plan.dims[1], plan.dims[2], thin],
            quanta: [
                plan.log2_quantum,
                plan.log2_fine,
                plan.thin_quanta as i32,
                i32::from(variant == DdefVariant::Corrected),
            ],
            planned: [px, py, pz, chunks as i32],
            base,
            cap,
            eps2: [eps2, 0.0, 0.0, 0.0],
            ..Default::default()
        }
    }

    /// Whether `plan` fits world `w`'s reserved lattice.
    pub fn fits(&self, w: usize, plan: &LatticePlan) -> bool {
        plan.sites() as u64 <= u64::from(self.worlds[w].1[2])
            && plan.cells() as u64 <= u64::from(self.worlds[w].1[1])
    }

    /// The constant tables: the header, the site stencil, the near stencils' cell
    /// offsets, the membership table (shared-slot masks by (type of tau, offset, type of
    /// T)) and the scan levels (see `lattice.wgsl`).
    pub fn tables(&self) -> Vec<u32> {
        let st = Stencils::get();
        let pack = |d: [i32; 3], t: u8| {
            let c = |v: i32| (v + 4) as u32 & 15;
            c(d[0]) | c(d[1]) << 4 | c(d[2]) << 8 | u32::from(t) << 12
        };
        let nd = st.dcells.len();
        let dcells = HEADER + st.site.len();
        let member = dcells + nd;
        let levels = member + st.member.len();
        let mut t = vec![nd as u32, dcells as u32, member as u32, levels as u32];
        t.extend(st.site.iter().map(|e| pack(e.dcell, e.kuhn)));
        t.extend(st.dcells.iter().map(|&d| pack(d, 0)));
        t.extend(st.member.iter().map(|&m| u32::from(m)));
        for l in self.tet_scan.iter().chain(&self.cell_scan) {
            t.extend([l.level, l.len, l.in_len, l.off, l.sums]);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn far_chunks_on_a_cpu_adapter_stay_under_its_loop_budget() {
        for sources in [1, 1000, 16_384, 16_385, 44_000, 65_536, 1 << 20] {
            for sites in [256, 2048, 16_384] {
                let k = far_chunks(sites, sources, true);
                // ddef_far's chunk length: the sources split evenly, rounded up to tiles.
                let per = sources.div_ceil(k).next_multiple_of(u64::from(TILE));
                assert!(
                    per <= CPU_CHUNK_SOURCES,
                    "{sources} sources, {sites} sites: {k} chunks of {per}"
                );
            }
        }
    }

    #[test]
    fn scan_levels_cover_counts_and_starts() {
        let (l, used) = scan_levels(10, 0, 0);
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].len, l[0].in_len), (11, 10));
        assert_eq!(used, 1);
        // 3 levels: 2^21 counts.
        let (l, used) = scan_levels(1 << 21, 7, 0);
        assert_eq!(
            l.iter().map(|x| x.len).collect::<Vec<_>>(),
            vec![(1 << 21) + 1, 2049, 3]
        );
        assert_eq!(l[0].off, 7);
        // Level 1's data is level 0's totals; level 2's is level 1's.
        assert_eq!(l[1].off, l[0].sums);
        assert_eq!(l[2].off, l[1].sums);
        assert_eq!(used, 2049 + 3 + 1);
    }
}
