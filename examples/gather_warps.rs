//! How much of the staged near gather's work is useful: per 32-lane warp (consecutive
//! targets of a cell's work item of up to 256, in sorted order, as `ddef_gather` assigns
//! them), the pair slots it walks (the union of its lanes' S(tau): the kernel walks each
//! tetrahedron any lane takes, the other lanes idle) against the pairs its targets need.
//! f64 reference structures only; no GPU. Prints the waste from lanes of mixed Kuhn types
//! (active lanes only) and with the idle lanes of a work item's last, partial warp.
//!
//! `cargo run --release --example gather_warps -- [N] [M]` (default 262144 2918).

use std::collections::BTreeMap;

use msc::bench::{workload, Cloud};
use msc::config::DdefVariant;
use msc::ddef::{DdefSolver, LatticeDdef};

/// Targets per work item and lanes per warp (`ddef_gather`'s `WG`; NVIDIA's warp).
const ITEM: u32 = 256;
const WARP: u32 = 32;
// A warp never straddles two work items.
const _: () = assert!(ITEM.is_multiple_of(WARP));

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("N M: whole numbers"))
        .collect();
    let n = args.first().copied().unwrap_or(262_144);
    let m = args.get(1).copied().unwrap_or(2918);
    for cloud in Cloud::ALL {
        let built = workload::ddef(n, m, 1, DdefVariant::Corrected, cloud).expect("workload");
        let (system, config) = (&built.system, &built.config);
        let Some(d) = config.coulomb.method.ddef() else {
            unreachable!("the DDEF workload")
        };
        let (x, q) = (system.positions(), system.charges());
        let plan = DdefSolver::plan_for(d, x, q).expect("plan");
        let cpu = LatticeDdef::new(&plan, x, q, config.coulomb.softening).expect("reference");
        let s = cpu.tet_starts();
        let (mut useful, mut active, mut all, mut tets, mut warps) = (0u64, 0u64, 0u64, 0u64, 0u64);
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
            let (cb, ce) = (s[6 * c], s[6 * c + 6]);
            for w in (cb..ce).step_by(WARP as usize) {
                let we = (w + WARP).min(ce);
                let mut union: BTreeMap<u32, u32> = BTreeMap::new();
                let mut kinds = 0u32;
                for p in w..we {
                    let k = (0..6)
                        .rev()
                        .find(|&k| s[6 * c + k] <= p)
                        .expect("in the cell");
                    kinds |= 1 << k;
                    union.extend(near[k].0.iter());
                    useful += near[k].1;
                }
                let slots: u64 = union.iter().map(|(b, e)| u64::from(*e - *b)).sum();
                active += slots * u64::from(we - w);
                all += slots * u64::from(WARP);
                tets += u64::from(kinds.count_ones());
                warps += 1;
            }
        }
        println!(
            "{:<6} n {n} m {m}: {:.0} near pairs per target; pair slots walked / needed: {:.3} \
             (active lanes), {:.3} (with idle lanes); {:.2} tetrahedra per warp",
            cloud.name(),
            useful as f64 / n as f64,
            active as f64 / useful as f64,
            all as f64 / useful as f64,
            tets as f64 / warps as f64
        );
    }
}
