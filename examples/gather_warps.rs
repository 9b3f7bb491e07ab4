//! How much of the staged near gather's work is useful: per 32-lane warp (consecutive
//! targets of a cell's work item of up to 256, the cell's Kuhn types laid out in ORDER, as
//! `ddef_gather` assigns them with its KUHN_ORDER), the pair slots it walks (the union of
//! its lanes' S(tau): the kernel walks each tetrahedron any lane takes, the other lanes
//! idle) against the pairs its targets need. f64 reference structures only; no GPU.
//! Prints the waste from lanes of mixed Kuhn types (active lanes only) and with the idle
//! lanes of a work item's last, partial warp; and the pair slots all warps walk per
//! target (a warp's time), with PER consecutive targets per lane (the kernel has 1; 2
//! scores a warp that reads each source once for two targets).
//!
//! `cargo run --release --example gather_warps -- [N] [M] [ORDER] [PER]` (default 262144
//! 2918 0,1,2,3,4,5 1: sorted order; the kernel's is 3,2,0,1,4,5).

use std::collections::BTreeMap;

use msc::bench::{workload, Cloud};
use msc::config::DdefVariant;
use msc::ddef::DdefSolver;

/// Targets per work item and lanes per warp (`ddef_gather`'s `WG`; NVIDIA's warp).
const ITEM: u32 = 256;
const WARP: u32 = 32;
// A warp never straddles two work items.
const _: () = assert!(ITEM.is_multiple_of(WARP));

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let whole = |i: usize, default: usize| {
        args.get(i)
            .map_or(default, |a| a.parse().expect("N M: whole numbers"))
    };
    let (n, m) = (whole(0, 262_144), whole(1, 2918));
    let order: Vec<usize> = args.get(2).map_or((0..6).collect(), |a| {
        a.split(',')
            .map(|k| k.parse().expect("ORDER: Kuhn types 0..5, comma-separated"))
            .collect()
    });
    // Targets per lane: a warp covers WARP * per consecutive targets.
    let per: u32 = args
        .get(3)
        .map_or(1, |a| {
            a.parse().expect("PER: targets per lane, a whole number")
        })
        .max(1);
    let mut seen = order.clone();
    seen.sort_unstable();
    assert_eq!(seen, (0..6).collect::<Vec<_>>(), "ORDER: each of 0..5 once");
    for cloud in Cloud::ALL {
        let built = workload::ddef(n, m, 1, DdefVariant::Corrected, cloud).expect("workload");
        let (system, config) = (&built.system, &built.config);
        let Some(d) = config.coulomb.method.ddef() else {
            unreachable!("the DDEF workload")
        };
        let (x, q) = (system.positions(), system.charges());
        let cpu = DdefSolver::reference_for(d, x, q, config.coulomb.softening).expect("reference");
        let s = cpu.tet_starts();
        let (mut useful, mut active, mut all, mut tets, mut warps, mut wslots) =
            (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
        for c in 0..(s.len() - 1) / 6 {
            // Each tetrahedron's S(tau) as (begin -> end) and its size.
            let near: Vec<(BTreeMap<u32, u32>, u64)> = (6 * c..6 * c + 6)
                .map(|t| {
                    let r: BTreeMap<u32, u32> = cpu
                        .near_ranges(t as u32)
                        .iter()
                        .map(|r| (r.begin, r.end))
                        .collect();
                    let size = r.iter().map(|(b, e)| u64::from(e - b)).sum();
                    (r, size)
                })
                .collect();
            // The cell's targets in the lanes' order: their Kuhn types.
            let lanes: Vec<usize> = order
                .iter()
                .flat_map(|&k| std::iter::repeat_n(k, (s[6 * c + k + 1] - s[6 * c + k]) as usize))
                .collect();
            let total = lanes.len() as u32;
            for w in (0..total).step_by((WARP * per) as usize) {
                let we = (w + WARP * per).min(total);
                let mut union: BTreeMap<u32, u32> = BTreeMap::new();
                let mut kinds = 0u32;
                for &k in &lanes[w as usize..we as usize] {
                    kinds |= 1 << k;
                    union.extend(near[k].0.iter());
                    useful += near[k].1;
                }
                let slots: u64 = union.iter().map(|(b, e)| u64::from(*e - *b)).sum();
                active += slots * u64::from(we - w);
                all += slots * u64::from(WARP * per);
                tets += u64::from(kinds.count_ones());
                wslots += slots;
                warps += 1;
            }
        }
        println!(
            "{:<6} n {n} m {m} order {order:?}: {:.0} near pairs per target; pair slots walked / needed: {:.3} \
             (active lanes), {:.3} (with idle lanes); {:.2} tetrahedra per warp; warp slots per target {:.1}",
            cloud.name(),
            useful as f64 / n as f64,
            active as f64 / useful as f64,
            all as f64 / useful as f64,
            tets as f64 / warps as f64,
            wslots as f64 / n as f64
        );
    }
}
