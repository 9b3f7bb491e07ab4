//! Bytes one `jacobi_sweep` dispatch of the bench's Jacobi solver moves
//! (`gpu/kernels/solvers/jacobi_sweep.wgsl`), from the buffer layout of the GPU host
//! (`src/gpu/host/buffers.rs`, `gpu/shader/blocks.wgsl`):
//!
//! | buffer | layout | read by row i |
//! |---|---|---|
//! | `u_in` | vec4 per particle (16 B) | `u_in[i]`, and `u_in[other]` per entry |
//! | `adj` | u32 (`gpu::adjacency`): per slice of 32 rows (1 row where slicing pads too much) its first entry word, per row its degree, then 2 words per entry (spring, other) | its slice's word, its degree, 8 B per entry |
//! | `sf` | per spring W_k as (sqrt(t) n, s) (16 B), then per spring (n, fmag) (16 B) | the first vec4 of each of its springs |
//! | `bd` | 2 vec4 per particle (32 B; Jacobi and CG store no off-diagonal row): (b, 0), (inverse diagonal, mass) | both |
//! | `u_out` | vec4 per particle (16 B) | written once |
//!
//! A row reads its inverse diagonal row first (the mass, 0 when pinned); a pinned row then
//! reads `u_in[i]`
//! and writes `u_out[i]` only (`props` is not read). The Jacobi
//! mode of the bench never reads `u_out` (Chebyshev's mode 1 would add 16 B per free row).
//! The uniforms (params, dispatch record) are a few hundred bytes, cached, not counted.
//!
//! Two counts:
//! - `compulsory`: every distinct byte the sweep must touch once (the DRAM traffic with a
//!   cache large enough to catch the reuse: each spring's `sf` is read by both endpoints,
//!   each `u_in[j]` by j's neighbours; on a grid the reuse distance is about one grid row,
//!   far below an H100's 50 MB L2). This is the figure compared with memory bandwidth.
//! - `issued`: every load and store as the kernel issues them, with no reuse at all (an
//!   upper bound on traffic).
//!
//! For a mesh without pins, compulsory = 68 B per particle (16 u_in + 16 u_out + 32 bd + 4
//! degree) plus 32 B per spring (8 B x 2 entries + 16 B W_k), plus 4 B per slice (its
//! first entry word: per 32 rows when sliced, per row under CSR).

use crate::gpu::adjacency::slice_shift;
use crate::model::Spring;

/// Byte counts of one sweep (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SweepBytes {
    pub compulsory: u64,
    pub issued: u64,
}

const VEC4: u64 = 16;
const WORD: u64 = 4;

/// Counts the bytes of one Jacobi sweep over `n` particles with these springs and pins,
/// in the adjacency layout the GPU host picks for them.
pub fn jacobi_sweep_bytes(n: usize, springs: &[Spring], pinned: &[bool]) -> SweepBytes {
    let free = |i: usize| !pinned.get(i).copied().unwrap_or(false);
    let mut degree = vec![0u64; n];
    let mut sf_needed = 0u64;
    for s in springs {
        degree[s.i as usize] += 1;
        degree[s.j as usize] += 1;
        if free(s.i as usize) || free(s.j as usize) {
            sf_needed += 1;
        }
    }
    let n64 = n as u64;
    // Every row: its inverse diagonal row (mass or pinned), u_in[i], the store of u_out[i].
    let every_row = 3 * VEC4 * n64;
    // Per spring with a free end: its W_k (one vec4).
    let mut compulsory = every_row + VEC4 * sf_needed;
    let mut issued = every_row;
    let lanes = 1usize << slice_shift(n, springs);
    // Each slice's first entry word, read by each of its free rows.
    let slices_read = (0..n.div_ceil(lanes))
        .filter(|s| (s * lanes..((s + 1) * lanes).min(n)).any(free))
        .count();
    compulsory += WORD * slices_read as u64;
    for (i, &deg) in degree.iter().enumerate() {
        if free(i) {
            // The rest of bd (b, 1 vec4), the degree and the entries' two words; issued
            // adds the slice's word and, per entry, W_k (1 vec4) and u_in[other].
            compulsory += VEC4 + WORD + deg * 2 * WORD;
            issued += 2 * WORD + VEC4 + deg * (2 * WORD + VEC4 + VEC4);
        }
    }
    SweepBytes { compulsory, issued }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::workload;

    use crate::model::unit_spring as spring;

    #[test]
    fn a_pinned_chain_counted_by_hand() {
        // 0 - 1 - 2, particle 0 pinned; three rows are one slice of CSR (a 32-row slice
        // would pad them far beyond the bound).
        // compulsory: 3 rows x 48 (bd inverse diagonal, u_in, u_out) = 144; free rows 1,
        // 2: bd's b 2 x 16 = 32, their slice words and degrees 4 x 4 = 16; entries: row 1
        // has 2, row 2 has 1: 3 x 8 = 24; W_k of both springs (each has a free end)
        // 2 x 16 = 32. 144 + 32 + 16 + 24 + 32 = 248.
        // issued: 144; free rows 2 x (8 header + 16 b) = 48; 3 entries x (8 + 16 + 16)
        // = 120. 144 + 48 + 120 = 312.
        let springs = [spring(0, 1), spring(1, 2)];
        assert_eq!(slice_shift(3, &springs), 0);
        let b = jacobi_sweep_bytes(3, &springs, &[true, false, false]);
        assert_eq!(
            b,
            SweepBytes {
                compulsory: 248,
                issued: 312
            }
        );
    }

    #[test]
    fn a_spring_between_pinned_particles_moves_nothing_of_its_own() {
        let springs = [spring(0, 1)];
        let b = jacobi_sweep_bytes(2, &springs, &[true, true]);
        assert_eq!(
            b,
            SweepBytes {
                compulsory: 96,
                issued: 96
            }
        );
    }

    #[test]
    fn an_unpinned_mesh_moves_68_bytes_per_particle_and_32_per_spring() {
        // 16 x 16 grid with shear springs: 480 structural + 450 shear = 930 springs, in
        // 8 slices of 32 rows.
        let m = crate::model::mesh::grid([1.0, 1.0], [16, 16], true, false).unwrap();
        let springs: Vec<Spring> = m.edges.iter().map(|&[i, j]| spring(i, j)).collect();
        assert_eq!(springs.len(), 930);
        assert_eq!(
            slice_shift(256, &springs),
            crate::gpu::adjacency::SLICE_SHIFT
        );
        let b = jacobi_sweep_bytes(256, &springs, &[]);
        assert_eq!(b.compulsory, 68 * 256 + 4 * 8 + 32 * 930);
        // issued: 48 + 8 + 16 = 72 per row, 2 entries x 40 per spring.
        assert_eq!(b.issued, 72 * 256 + 2 * 40 * 930);
        // 4 x 4 (42 springs) is CSR: a slice word per row, 72 B per particle.
        let m = crate::model::mesh::grid([1.0, 1.0], [4, 4], true, false).unwrap();
        let springs: Vec<Spring> = m.edges.iter().map(|&[i, j]| spring(i, j)).collect();
        assert_eq!(slice_shift(16, &springs), 0);
        assert_eq!(
            jacobi_sweep_bytes(16, &springs, &[]).compulsory,
            72 * 16 + 32 * 42
        );
    }

    #[test]
    fn the_bench_cloth_moves_about_196_bytes_per_particle() {
        let c = workload::cloth(1 << 16, 1, 0.0).unwrap();
        let b = jacobi_sweep_bytes(c.system.len(), c.system.springs(), c.system.pinned());
        let per_particle = b.compulsory as f64 / c.system.len() as f64;
        // ~4 springs per particle: 68 + 4 x 32 = 196 B, and 4 B per 32 rows (212 B with
        // 48-byte bd rows, 292 B before the 16-byte W_k and the mass in bd).
        assert!((190.0..200.0).contains(&per_particle), "{per_particle}");
    }
}
