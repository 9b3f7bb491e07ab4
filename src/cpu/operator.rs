//! The matrix-free operator A = M + sum_k W_k of the implicit solves (docs/physics.md (4.4)):
//! the symmetric 3x3 block of each spring packed to six f64 (48 bytes, not 72: the sweeps
//! are bound by the bytes they read), and the CSR rows as flat arrays of spring and other
//! particle, in row order.
//!
//! (A v)_i = m_i v_i + sum_{k at i} W_k (v_i - v_j), gathered per particle over the CSR
//! adjacency. IMEX fills the blocks with W_k each step (`spring_assemble`, here beside the
//! packing it writes); local-global fills them once with
//! (h c_k + h^2 k_k) I. Pinned particles are Dirichlet rows: never updated, they enter
//! their neighbours' rows with their known values, and residuals and norms run over the
//! free rows only.

// Per-particle loops index several arrays by particle, as the kernels do.
#![allow(clippy::needless_range_loop)]

use super::forces::{spring_elastic_force, spring_w_block};
use super::rows::{for_each_indexed, map_rows, map_rows_sum, PAR_CHUNK};
use crate::model::{Adjacency, Spring, System};
use glam::{DMat3, DVec3};
use rayon::prelude::*;

/// A symmetric 3x3 block packed as [a00, a01, a02, a11, a12, a22].
pub type PackedBlock = [f64; 6];

/// The packed form of a symmetric block (the upper triangle; the blocks of A are exactly
/// symmetric, see [`crate::cpu::forces::outer`]).
#[inline]
pub fn pack(w: &DMat3) -> PackedBlock {
    // Columns: x_axis = (a00, a10, a20), ...; a_ij = a_ji bit for bit.
    [
        w.x_axis.x, w.y_axis.x, w.z_axis.x, w.y_axis.y, w.z_axis.y, w.z_axis.z,
    ]
}

/// The full block of a packed one.
#[inline]
pub fn unpack(w: &PackedBlock) -> DMat3 {
    let [a00, a01, a02, a11, a12, a22] = *w;
    DMat3::from_cols(
        DVec3::new(a00, a01, a02),
        DVec3::new(a01, a11, a12),
        DVec3::new(a02, a12, a22),
    )
}

/// W d for a packed block, in the order of glam's `DMat3 * DVec3`
/// (x_axis d.x + y_axis d.y + z_axis d.z, left to right), so the bits equal the unpacked
/// product's.
#[inline(always)]
fn packed_mul(w: &PackedBlock, d: DVec3) -> DVec3 {
    let [a00, a01, a02, a11, a12, a22] = *w;
    DVec3::new(
        a00 * d.x + a01 * d.y + a02 * d.z,
        a01 * d.x + a11 * d.y + a12 * d.z,
        a02 * d.x + a12 * d.y + a22 * d.z,
    )
}

/// A = M + block graph Laplacian, matrix-free.
#[derive(Clone, Debug)]
pub struct BlockLaplacian {
    /// m_i per particle.
    pub mass: Vec<f64>,
    /// Dirichlet rows.
    pub pinned: Vec<bool>,
    /// Spring endpoints [i, j], in spring order.
    pub ends: Vec<[u32; 2]>,
    /// Symmetric 3x3 block per spring, packed (W_k for IMEX, (h c + h^2 k) I for
    /// local-global).
    blocks: Vec<PackedBlock>,
    /// Particle-to-spring CSR rows for the gathers.
    pub adjacency: Adjacency,
    /// Per CSR entry, in row order: the spring.
    row_spring: Vec<u32>,
    /// Per CSR entry, in row order: the other particle of the spring.
    row_other: Vec<u32>,
}

impl BlockLaplacian {
    /// The operator M (every block zero) over `springs`' graph.
    pub fn new(mass: &[f64], pinned: &[bool], springs: &[Spring]) -> Self {
        assert_eq!(mass.len(), pinned.len(), "BlockLaplacian: pinned");
        let adjacency = Adjacency::build(mass.len(), springs);
        Self {
            mass: mass.to_vec(),
            pinned: pinned.to_vec(),
            ends: springs.iter().map(|s| [s.i, s.j]).collect(),
            blocks: vec![[0.0; 6]; springs.len()],
            row_spring: adjacency.entries.iter().map(|e| e.spring).collect(),
            row_other: adjacency.entries.iter().map(|e| e.other).collect(),
            adjacency,
        }
    }

    /// The operator M over the system's springs and pinned flags.
    pub fn from_system(system: &System) -> Self {
        Self::new(system.masses(), system.pinned(), system.springs())
    }

    /// The IMEX matrix A = M + sum_k W_k at positions `x` (docs/physics.md §4).
    pub fn imex(system: &System, x: &[DVec3], h: f64) -> Self {
        let mut op = Self::from_system(system);
        op.assemble_imex(x, system.springs(), h);
        op
    }

    /// The local-global matrix P = M + h C_L + h^2 L (paper eq. 7 with isotropic damping).
    pub fn local_global(system: &System, h: f64) -> Self {
        let mut op = Self::from_system(system);
        op.assemble_local_global(system.springs(), h);
        op
    }

    /// The block of spring k.
    pub fn block(&self, k: usize) -> DMat3 {
        unpack(&self.blocks[k])
    }

    /// The packed per-spring blocks, in spring order, for a kernel to write (each
    /// symmetric, packed with [`pack`]).
    pub fn blocks_mut(&mut self) -> &mut [PackedBlock] {
        &mut self.blocks
    }

    /// Blocks W_k at positions `x` (docs/physics.md (2.6)).
    pub fn assemble_imex(&mut self, x: &[DVec3], springs: &[Spring], h: f64) {
        for_each_indexed(&mut self.blocks, |(k, w)| {
            let s = &springs[k];
            *w = pack(&spring_w_block(x[s.i as usize], x[s.j as usize], s, h));
        });
    }

    /// Isotropic blocks (h c_k + h^2 k_k) I, constant over a run (paper eq. 5).
    pub fn assemble_local_global(&mut self, springs: &[Spring], h: f64) {
        for (w, s) in self.blocks.iter_mut().zip(springs) {
            let d = h * s.damping + h * h * s.stiffness;
            *w = [d, 0.0, 0.0, d, 0.0, d];
        }
    }

    pub fn len(&self) -> usize {
        self.mass.len()
    }
    pub fn is_empty(&self) -> bool {
        self.mass.is_empty()
    }
    /// Number of free (not pinned) rows.
    pub fn free_count(&self) -> usize {
        self.pinned.iter().filter(|&&p| !p).count()
    }

    /// The CSR entries of row i: a range into the row-ordered arrays.
    #[inline(always)]
    fn row_range(&self, i: usize) -> std::ops::Range<usize> {
        let o = &self.adjacency.offsets;
        o[i] as usize..o[i + 1] as usize
    }

    /// (A v)_i = m_i v_i + sum_{k at i} W_k (v_i - v_j) (docs/physics.md (4.4)), for any row:
    /// the springs summed in row order.
    #[inline]
    pub fn apply_row(&self, i: usize, v: &[DVec3]) -> DVec3 {
        let vi = v[i];
        let mut acc = vi * self.mass[i];
        let r = self.row_range(i);
        for (&k, &j) in self.row_spring[r.clone()].iter().zip(&self.row_other[r]) {
            acc += packed_mul(&self.blocks[k as usize], vi - v[j as usize]);
        }
        acc
    }

    /// [`Self::apply_row`] the straightforward way: full 3x3 blocks through the
    /// adjacency (what the packed rows are tested against).
    pub fn apply_row_unpacked(&self, i: usize, v: &[DVec3]) -> DVec3 {
        let vi = v[i];
        let mut acc = vi * self.mass[i];
        for e in self.adjacency.row(i) {
            acc += self.block(e.spring as usize) * (vi - v[e.other as usize]);
        }
        acc
    }

    /// out = A v over every row (pinned rows included).
    pub fn apply(&self, v: &[DVec3], out: &mut [DVec3]) {
        map_rows(out, |i| self.apply_row(i, v));
    }

    /// A_ii = m_i I + sum_{k at i} W_k (the packed blocks, in row order).
    #[inline]
    pub fn diagonal_block(&self, i: usize) -> DMat3 {
        let (mut a00, mut a01, mut a02, mut a11, mut a12, mut a22) =
            (self.mass[i], 0.0, 0.0, self.mass[i], 0.0, self.mass[i]);
        for &k in &self.row_spring[self.row_range(i)] {
            let w = &self.blocks[k as usize];
            a00 += w[0];
            a01 += w[1];
            a02 += w[2];
            a11 += w[3];
            a12 += w[4];
            a22 += w[5];
        }
        DMat3::from_cols(
            DVec3::new(a00, a01, a02),
            DVec3::new(a01, a11, a12),
            DVec3::new(a02, a12, a22),
        )
    }

    /// The scalar diagonal of A: three entries per particle (docs/physics.md §7).
    pub fn diagonal(&self) -> Vec<DVec3> {
        (0..self.len())
            .map(|i| {
                let d = self.diagonal_block(i);
                DVec3::new(d.x_axis.x, d.y_axis.y, d.z_axis.z)
            })
            .collect()
    }

    /// The 3x3 diagonal blocks A_ii.
    pub fn block_diagonal(&self) -> Vec<DMat3> {
        (0..self.len()).map(|i| self.diagonal_block(i)).collect()
    }

    /// |x| over the free rows.
    pub fn free_norm(&self, x: &[DVec3]) -> f64 {
        self.free_dot(x, x).sqrt()
    }

    /// x . y over the free rows (fixed order).
    pub fn free_dot(&self, x: &[DVec3], y: &[DVec3]) -> f64 {
        let mut s = 0.0;
        for i in 0..self.len() {
            if !self.pinned[i] {
                s += x[i].dot(y[i]);
            }
        }
        s
    }

    /// |b - A v| / |b| over the free rows ([`relative_residual`]).
    pub fn relative_residual(&self, b: &[DVec3], v: &[DVec3]) -> f64 {
        let mut rr = 0.0;
        for i in 0..self.len() {
            if !self.pinned[i] {
                rr += (b[i] - self.apply_row(i, v)).length_squared();
            }
        }
        relative_residual(rr.sqrt(), self.free_norm(b))
    }

    /// [`Self::relative_residual`] in parallel over rows, with `scratch` for the
    /// residual vector; summed per chunk of rows then over chunks in order (the
    /// thread count does not change the result).
    pub fn relative_residual_par(&self, b: &[DVec3], v: &[DVec3], scratch: &mut Vec<DVec3>) -> f64 {
        scratch.resize(v.len(), DVec3::ZERO);
        let rr = map_rows_sum(scratch, |i| {
            if self.pinned[i] {
                return (DVec3::ZERO, 0.0);
            }
            let r = b[i] - self.apply_row(i, v);
            (r, r.length_squared())
        });
        relative_residual(rr.sqrt(), self.free_norm(b))
    }
}

/// |r| / |b|; when |b| = 0 the absolute |r| (0 for an exact solve).
pub fn relative_residual(r_norm: f64, b_norm: f64) -> f64 {
    if b_norm > 0.0 {
        r_norm / b_norm
    } else {
        r_norm
    }
}

/// Per-spring kernel of the IMEX step (`spring_assemble`): the elastic force on i and the
/// block W_k (packed), both at the positions `x` (docs/physics.md (2.6)).
pub fn spring_assemble(
    x: &[DVec3],
    springs: &[Spring],
    h: f64,
    force_out: &mut [DVec3],
    block_out: &mut [PackedBlock],
) {
    assert_eq!(force_out.len(), springs.len(), "spring_assemble: force_out");
    assert_eq!(block_out.len(), springs.len(), "spring_assemble: block_out");
    let kernel = |(k, (f, w)): (usize, (&mut DVec3, &mut PackedBlock))| {
        let s = &springs[k];
        let (xi, xj) = (x[s.i as usize], x[s.j as usize]);
        *f = spring_elastic_force(xi, xj, s);
        *w = pack(&spring_w_block(xi, xj, s, h));
    };
    if springs.len() <= PAR_CHUNK {
        force_out
            .iter_mut()
            .zip(block_out.iter_mut())
            .enumerate()
            .for_each(kernel);
    } else {
        force_out
            .par_iter_mut()
            .zip(block_out.par_iter_mut())
            .enumerate()
            .with_min_len(PAR_CHUNK)
            .for_each(kernel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 40 x 40 grid with structural and shear springs, IMEX blocks at jittered
    /// positions (some springs compressed, so the clamp acts), two pinned rows.
    fn grid_op() -> (BlockLaplacian, Vec<Spring>, Vec<DVec3>) {
        let side = 40usize;
        let idx = |r: usize, c: usize| (r * side + c) as u32;
        let mut springs = Vec::new();
        let mut add = |i: u32, j: u32, l: f64| {
            springs.push(Spring {
                i,
                j,
                stiffness: 50.0 + (i % 7) as f64,
                rest_length: l,
                damping: 0.01 * (j % 3) as f64,
            })
        };
        for r in 0..side {
            for c in 0..side {
                if c + 1 < side {
                    add(idx(r, c), idx(r, c + 1), 0.1);
                }
                if r + 1 < side {
                    add(idx(r, c), idx(r + 1, c), 0.1);
                }
                if r + 1 < side && c + 1 < side {
                    add(idx(r, c), idx(r + 1, c + 1), 0.1414);
                    add(idx(r, c + 1), idx(r + 1, c), 0.1414);
                }
            }
        }
        let n = side * side;
        let x: Vec<DVec3> = (0..n)
            .map(|i| {
                let (r, c) = ((i / side) as f64, (i % side) as f64);
                DVec3::new(c * 0.1, r * 0.1, 0.02 * (i as f64 * 0.7).sin())
            })
            .collect();
        let mut pinned = vec![false; n];
        pinned[0] = true;
        pinned[side - 1] = true;
        let mass: Vec<f64> = (0..n).map(|i| 1e-3 * (1.0 + (i % 5) as f64)).collect();
        let mut op = BlockLaplacian::new(&mass, &pinned, &springs);
        op.assemble_imex(&x, &springs, 0.01);
        (op, springs, x)
    }

    fn bits(v: DVec3) -> [u64; 3] {
        v.to_array().map(f64::to_bits)
    }

    /// The packed row-order product and diagonal blocks are bit for bit the per-spring
    /// DMat3 ones (same products, same order): the packing moves no rounding.
    #[test]
    fn packed_rows_equal_the_straightforward_loops_bit_for_bit() {
        let (op, _, x) = grid_op();
        let v: Vec<DVec3> = x.iter().map(|p| *p * 3.0 - DVec3::ONE).collect();
        for i in 0..op.len() {
            assert_eq!(
                bits(op.apply_row(i, &v)),
                bits(op.apply_row_unpacked(i, &v))
            );
            let mut d = DMat3::from_diagonal(DVec3::splat(op.mass[i]));
            for e in op.adjacency.row(i) {
                d += op.block(e.spring as usize);
            }
            let got = op.diagonal_block(i);
            for (a, b) in got.to_cols_array().iter().zip(d.to_cols_array()) {
                assert_eq!(a.to_bits(), b.to_bits(), "row {i}");
            }
        }
    }

    /// A reassembly at new positions moves the product, packed and unpacked alike.
    #[test]
    fn reassembly_moves_the_rows() {
        let (mut op, springs, x) = grid_op();
        let v: Vec<DVec3> = x.iter().map(|p| DVec3::new(p.y, p.z, -p.x)).collect();
        let before: Vec<DVec3> = (0..op.len()).map(|i| op.apply_row(i, &v)).collect();
        let moved: Vec<DVec3> = x.iter().map(|p| *p * 1.05).collect();
        op.assemble_imex(&moved, &springs, 0.01);
        let mut changed = 0;
        for i in 0..op.len() {
            let a = op.apply_row(i, &v);
            assert_eq!(bits(a), bits(op.apply_row_unpacked(i, &v)));
            changed += usize::from(bits(a) != bits(before[i]));
        }
        assert!(changed > op.len() / 2, "{changed} rows changed");
    }
}
