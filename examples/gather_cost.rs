//! What the staged near gather's time is made of: per workgroup shape (128 or 256 lanes,
//! `ddef_gather`'s work items, targets laid out in KUHN_ORDER, the 24 `corrected` sums on
//! the lanes `near_correction` gives them), three counts from the f64 reference's
//! structures (no GPU):
//! - `wg_entries`: (workgroup, neighbour cell, tile of TILE sources) steps, each with its
//!   staging and barriers;
//! - `warp_entries`: (warp, neighbour cell, tile) steps, idle warps included (each reads
//!   its membership rows and waits at the barriers);
//! - `slots`: pair slots the warps walk (per warp, the sources of every tetrahedron any of
//!   its lanes' near or `corrected` sums takes, the near and correction loops apart);
//!
//! and `needed_entries`, the (warp, neighbour cell) steps of the direct shape (`direct/N`:
//! nothing staged, one pass over a cell, a warp skips the cells none of its sums takes). A least-squares fit
//! of measured gather times to the three counts predicts a shape's time (BENCHMARKS.md,
//! "A gather without staging").
//!
//! `cargo run --release --example gather_cost -- N M[,M...] [CLOUD]` (default 262144 2918
//! cube; CLOUD as `msc bench --cloud`).

use msc::bench::{workload, Cloud};
use msc::config::DdefVariant;
use msc::ddef::stencil::{offset_cell, valid_slots, Stencils};
use msc::ddef::DdefSolver;

/// A work item's targets (`ddef_gather`'s WG), NVIDIA's warp, and the sources a staged
/// tile holds (`gpu::layout::TILE`).
const ITEM: usize = 256;
const WARP: usize = 32;
const TILE: u32 = 256;
/// `near_walk.wgsl`'s KUHN_ORDER.
const ORDER: [usize; 6] = [3, 2, 0, 1, 4, 5];

#[derive(Default)]
struct Counts {
    wg_entries: u64,
    warp_entries: u64,
    slots: u64,
    needed_entries: u64,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args
        .first()
        .map_or(262_144, |a| a.parse().expect("N: a whole number"));
    let ms: Vec<usize> = args.get(1).map_or(vec![2918], |a| {
        a.split(',')
            .map(|m| m.parse().expect("M: whole numbers, comma-separated"))
            .collect()
    });
    let cloud = args.get(2).map_or(Cloud::Cube, |c| {
        Cloud::from_name(c).expect("CLOUD: cube, sphere, torus or sheet")
    });
    for m in ms {
        let built = workload::ddef(n, m, 1, DdefVariant::Corrected, cloud).expect("workload");
        let (system, config) = (&built.system, &built.config);
        let Some(d) = config.coulomb.method.ddef() else {
            unreachable!("the DDEF workload")
        };
        let (x, q) = (system.positions(), system.charges());
        let cpu = DdefSolver::reference_for(d, x, q, config.coulomb.softening).expect("reference");
        for lanes in [128, 256] {
            let c = counts(&cpu, lanes);
            println!(
                "n {n} m {m} {} lanes {lanes}: wg_entries {} warp_entries {} slots {} needed_entries {}",
                cloud.name(),
                c.wg_entries,
                c.warp_entries,
                c.slots,
                c.needed_entries
            );
        }
    }
}

fn counts(cpu: &msc::ddef::lattice_field::LatticeDdef, lanes: usize) -> Counts {
    let st = Stencils::get();
    let nd = st.dcells.len();
    let s = cpu.tet_starts();
    let dims = cpu.frame().dims;
    let cd = dims.map(|r| r - 1);
    let mut out = Counts::default();
    for (cell, point) in (0..cd[2])
        .flat_map(|z| (0..cd[1]).flat_map(move |y| (0..cd[0]).map(move |x| [x, y, z])))
        .enumerate()
    {
        let count = (s[6 * cell + 6] - s[6 * cell]) as usize;
        if count == 0 {
            continue;
        }
        // The targets' Kuhn types in lane order.
        let layout: Vec<usize> = ORDER
            .iter()
            .flat_map(|&k| std::iter::repeat_n(k, (s[6 * cell + k + 1] - s[6 * cell + k]) as usize))
            .collect();
        // Per neighbourhood entry inside the lattice, its tetrahedra's source counts.
        let sources: Vec<Option<[u32; 6]>> = (0..nd)
            .map(|e| {
                offset_cell(dims, point, st.dcells[e]).map(|nc| {
                    let c = ((nc[2] * cd[1] + nc[1]) * cd[0] + nc[0]) as usize;
                    std::array::from_fn(|t| s[6 * c + t + 1] - s[6 * c + t])
                })
            })
            .collect();
        let valid: [u8; 6] = std::array::from_fn(|k| valid_slots(dims, point, k));
        // The tetrahedra (bits) of entry e that a near sum of type k, or the correction
        // (k, v), takes: as `member_bits`.
        let row = |k: usize, e: usize, t: usize| st.member[(k * nd + e) * 6 + t];
        let near = |k: usize, e: usize| {
            (0..6).fold(0u32, |b, t| {
                b | u32::from(row(k, e, t) & valid[k] != 0) << t
            })
        };
        let corr = |k: usize, v: usize, e: usize| {
            (0..6).fold(0u32, |b, t| {
                let mc = row(k, e, t);
                b | u32::from(mc & valid[k] != 0 && (mc >> v) & 1 == 0) << t
            })
        };
        for item in (0..count).step_by(ITEM) {
            let item_end = (item + ITEM).min(count);
            for first in (item..item_end).step_by(lanes) {
                let busy = (first + lanes).min(item_end) - first;
                // near_correction: the last 24 lanes when the targets leave them free.
                let corr_first = if busy <= lanes - 24 { lanes - 24 } else { 0 };
                // Tiles of each neighbour cell inside the lattice (one at least).
                let tiles =
                    |src: &[u32; 6]| u64::from(src.iter().sum::<u32>().div_ceil(TILE).max(1));
                out.wg_entries += sources.iter().flatten().map(tiles).sum::<u64>();
                for w in (0..lanes).step_by(WARP) {
                    let types = (w..w + WARP)
                        .filter(|&l| l < busy)
                        .fold(0u32, |b, l| b | 1 << layout[first + l]);
                    let sums: Vec<(usize, usize)> = (w..w + WARP)
                        .filter(|&l| l >= corr_first && l - corr_first < 24)
                        .map(|l| ((l - corr_first) / 4, (l - corr_first) % 4))
                        .collect();
                    for (e, src) in sources.iter().enumerate() {
                        let Some(src) = src else { continue };
                        let nb = (0..6)
                            .filter(|k| types >> k & 1 == 1)
                            .fold(0, |b, k| b | near(k, e));
                        let cb = sums.iter().fold(0, |b, &(k, v)| b | corr(k, v, e));
                        out.warp_entries += tiles(src);
                        out.needed_entries += u64::from(nb | cb != 0);
                        out.slots += (0..6)
                            .map(|t| u64::from((nb >> t & 1) + (cb >> t & 1)) * u64::from(src[t]))
                            .sum::<u64>();
                    }
                }
            }
        }
    }
    out
}
