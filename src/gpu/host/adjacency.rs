//! The spring adjacency as the GPU stores it: sliced rows (SELL-32), so the 32 rows a
//! warp walks read neighbouring words, or plain CSR rows when slicing would pad too much.
//!
//! Words (one `u32` buffer, read through `gpu/shader/adjacency.wgsl`), with C = 2^shift
//! rows per slice (C = 32, or C = 1: CSR):
//! - `[0, S)`: per slice s, the word of its first entry (S = ceil(n / C));
//! - `[S, S + n)`: per row i, its degree;
//! - then the entries. Entry e of row i (slice s = i / C, lane l = i mod C) is its spring at
//!   `base[s] + 2 C e + l` and its other endpoint at `base[s] + 2 C e + C + l`, bit 31 set
//!   when the row's particle is the spring's j. A slice is as wide as its longest row;
//!   shorter rows leave their tail unread (zero).
//!
//! Each row keeps `model::Adjacency`'s order (by spring index), so the gathers sum in the
//! same order under either layout and give bit-identical results.

use crate::model::{Adjacency, Spring};

/// log2 of the rows per slice when sliced: a warp of 32 invocations reads 32 neighbouring
/// words per entry (one 128-byte line) instead of 32 words 8 B x degree apart.
pub const SLICE_SHIFT: u32 = 5;

/// Bit 31 of an entry's second word: the row's particle is the spring's j.
const SIGN_BIT: u32 = 1 << 31;

/// Words the adjacency of `n` particles and `ns` springs may take under either layout:
/// the limit checks use it before a mesh is built. The sliced layout is used only while
/// it fits (see [`slice_shift`]): its entries may take up to 1.5x CSR's 4 ns words, the
/// padding unread (memory, not traffic). CSR takes 2n + 4 ns.
pub fn bound_words(n: u64, ns: u64) -> u64 {
    2 * n + 1 + 6 * ns
}

fn degrees(n: usize, springs: &[Spring]) -> Vec<u32> {
    let mut deg = vec![0u32; n];
    for s in springs {
        deg[s.i as usize] += 1;
        deg[s.j as usize] += 1;
    }
    deg
}

/// Words of the layout with 2^`shift` rows per slice.
fn words_with(shift: u32, deg: &[u32]) -> u64 {
    let lanes = 1usize << shift;
    let slices = deg.len().div_ceil(lanes) as u64;
    let entries: u64 = deg
        .chunks(lanes)
        .map(|c| 2 * lanes as u64 * u64::from(c.iter().copied().max().unwrap_or(0)))
        .sum();
    slices + deg.len() as u64 + entries
}

/// `Params.adj_shift` for this mesh: [`SLICE_SHIFT`] unless the padding of the slices
/// (a slice is as wide as its longest row) would exceed [`bound_words`] (a particle with
/// far more springs than its 31 neighbours), then 0 (CSR).
pub fn slice_shift(n: usize, springs: &[Spring]) -> u32 {
    let deg = degrees(n, springs);
    if words_with(SLICE_SHIFT, &deg) <= bound_words(n as u64, springs.len() as u64) {
        SLICE_SHIFT
    } else {
        0
    }
}

/// The adjacency words of `n` particles and their springs (module documentation) and
/// the slice shift they use.
pub fn words(n: usize, springs: &[Spring]) -> (u32, Vec<u32>) {
    let shift = slice_shift(n, springs);
    let adjacency = Adjacency::build(n, springs);
    let lanes = 1usize << shift;
    let slices = n.div_ceil(lanes);
    let mut out = vec![0u32; slices + n];
    for i in 0..n {
        out[slices + i] = adjacency.offsets[i + 1] - adjacency.offsets[i];
    }
    for s in 0..slices {
        let rows = s * lanes..((s + 1) * lanes).min(n);
        let width = rows.clone().map(|i| out[slices + i]).max().unwrap_or(0) as usize;
        let base = out.len();
        out[s] = base as u32;
        out.resize(base + 2 * lanes * width, 0);
        for i in rows {
            let lane = i - s * lanes;
            for (e, entry) in adjacency.row(i).iter().enumerate() {
                let at = base + 2 * lanes * e + lane;
                out[at] = entry.spring;
                out[at + lanes] = entry.other | if entry.sign < 0 { SIGN_BIT } else { 0 };
            }
        }
    }
    (shift, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::unit_spring as spring;

    /// Row i read back the way `gpu/shader/adjacency.wgsl` reads it.
    fn read_row(n: usize, shift: u32, w: &[u32], i: usize) -> Vec<(u32, u32, i32)> {
        let lanes = 1usize << shift;
        let slices = n.div_ceil(lanes);
        let start = w[i >> shift] as usize + (i & (lanes - 1));
        let step = 2 * lanes;
        let end = start + w[slices + i] as usize * step;
        (start..end)
            .step_by(step)
            .map(|at| {
                let word = w[at + lanes];
                let sign = if word & SIGN_BIT != 0 { -1 } else { 1 };
                (w[at], word & !SIGN_BIT, sign)
            })
            .collect()
    }

    fn assert_rows_match(n: usize, springs: &[Spring]) -> u32 {
        let (shift, w) = words(n, springs);
        let adj = Adjacency::build(n, springs);
        for i in 0..n {
            let want: Vec<_> = adj
                .row(i)
                .iter()
                .map(|e| (e.spring, e.other, e.sign))
                .collect();
            assert_eq!(read_row(n, shift, &w, i), want, "row {i}");
        }
        assert!(w.len() as u64 <= bound_words(n as u64, springs.len() as u64));
        shift
    }

    #[test]
    fn a_grid_is_sliced_and_reads_back_row_by_row() {
        // 13 x 11 grid with shear springs: 143 rows (4 full slices and a partial one),
        // degrees 3 to 8.
        let m = crate::model::mesh::grid([1.0, 1.0], [13, 11], true, false).unwrap();
        let springs: Vec<Spring> = m.edges.iter().map(|&[i, j]| spring(i, j)).collect();
        assert_eq!(assert_rows_match(143, &springs), SLICE_SHIFT);
    }

    #[test]
    fn a_hub_falls_back_to_csr_and_reads_back_row_by_row() {
        // Particle 0 joined to all 200 others: its slice would be 200 entries wide.
        let springs: Vec<Spring> = (1..=200).map(|j| spring(0, j)).collect();
        assert_eq!(assert_rows_match(201, &springs), 0);
        // Two hubs, and a spring whose row particle is j.
        let mut springs = springs;
        springs.push(spring(150, 7));
        assert_eq!(assert_rows_match(201, &springs), 0);
    }

    #[test]
    fn rows_without_springs_and_an_empty_mesh() {
        // One spring among 40 rows: two slices one entry wide pad more than 1.5x.
        assert_eq!(assert_rows_match(40, &[spring(39, 3)]), 0);
        assert_eq!(assert_rows_match(40, &[spring(39, 3), spring(0, 1)]), 0);
        assert_eq!(assert_rows_match(5, &[]), SLICE_SHIFT);
        assert_eq!(words(0, &[]), (SLICE_SHIFT, Vec::new()));
    }
}
