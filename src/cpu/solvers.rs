//! Matrix-free linear solvers for A v = b on a [`BlockLaplacian`] (DESIGN section 3):
//! Jacobi, block Jacobi, Chebyshev and CG. Mirrors `gpu/kernels/solvers/jacobi_sweep.wgsl`,
//! `cg_*.wgsl`. Pinned rows are Dirichlet rows, never updated.
//!
//! Every solver warm-starts from the `v` it is given, stops once
//! |b - A v| / |b| <= tolerance (checked before each sweep; tolerance 0 runs all the
//! iterations) and reports the residual of the `v` it returns.

// Per-particle loops index several arrays by particle, as the kernels do.
#![allow(clippy::needless_range_loop)]

use super::rows::map_rows_sum;
use crate::config::{SolverConfig, SolverMethod};
use crate::sim::SolveStats;
use glam::{DMat3, DVec3};

pub use super::operator::{relative_residual, BlockLaplacian};

/// Power-iteration steps used by [`estimate_block_jacobi_rho`] when the run estimates rho.
pub const RHO_ESTIMATE_ITERATIONS: u32 = 100;
/// Upper bound on an estimated rho, keeping the Chebyshev weights finite.
pub const RHO_MAX: f64 = 0.9999;

/// Work buffers reused across solves (no allocation once sized).
#[derive(Clone, Debug, Default)]
pub struct SolverScratch {
    diag_inv: Vec<DVec3>,
    block_inv: Vec<DMat3>,
    a: Vec<DVec3>,
    b: Vec<DVec3>,
    c: Vec<DVec3>,
    d: Vec<DVec3>,
}

impl SolverScratch {
    fn size(&mut self, n: usize) {
        for buf in [&mut self.a, &mut self.b, &mut self.c, &mut self.d] {
            buf.resize(n, DVec3::ZERO);
        }
    }
}

/// Solves with the configured method; `rho` is used by Chebyshev only (already resolved:
/// the config's value or [`estimate_block_jacobi_rho`]'s).
pub fn solve(
    op: &BlockLaplacian,
    b: &[DVec3],
    v: &mut [DVec3],
    config: &SolverConfig,
    rho: f64,
    scratch: &mut SolverScratch,
) -> SolveStats {
    let (it, w, tol) = (config.iterations, config.omega, config.tolerance);
    match config.method {
        SolverMethod::Jacobi => jacobi(op, b, v, it, w, tol, scratch),
        SolverMethod::BlockJacobi => block_jacobi(op, b, v, it, w, tol, scratch),
        SolverMethod::Chebyshev => chebyshev(op, b, v, it, w, rho, tol, scratch),
        SolverMethod::Cg => cg(op, b, v, it, tol, scratch),
    }
}

/// 1 / (scalar diagonal of A), per particle (parallel over rows, no allocation once sized).
pub fn diagonal_inverse(op: &BlockLaplacian, out: &mut Vec<DVec3>) {
    out.resize(op.len(), DVec3::ZERO);
    super::rows::map_rows(out, |i| {
        let d = op.diagonal_block(i);
        DVec3::new(d.x_axis.x, d.y_axis.y, d.z_axis.z).recip()
    });
}

/// A_ii^-1 per particle (SPD blocks, so invertible), parallel over rows.
pub fn block_diagonal_inverse(op: &BlockLaplacian, out: &mut Vec<DMat3>) {
    out.resize(op.len(), DMat3::ZERO);
    let kernel = |(i, o): (usize, &mut DMat3)| *o = op.diagonal_block(i).inverse();
    super::forces::for_each_indexed(out, kernel);
}

/// One weighted Jacobi sweep (`jacobi_sweep`, seed 000 eq. 48):
/// v_out = v_in + omega D^-1 (b - A v_in) on free rows, v_out = v_in on pinned rows.
/// Returns |b - A v_in|^2 over the free rows (the residual of the input iterate).
pub fn jacobi_sweep(
    op: &BlockLaplacian,
    b: &[DVec3],
    diag_inv: &[DVec3],
    omega: f64,
    v_in: &[DVec3],
    v_out: &mut [DVec3],
) -> f64 {
    map_rows_sum(v_out, |i| {
        if op.pinned[i] {
            return (v_in[i], 0.0);
        }
        let r = b[i] - op.apply_row(i, v_in);
        (v_in[i] + diag_inv[i] * r * omega, r.length_squared())
    })
}

/// One block-Jacobi sweep (`block_jacobi_sweep`): v_out = v_in + omega A_ii^-1 (b - A v_in).
/// Returns |b - A v_in|^2 over the free rows.
pub fn block_jacobi_sweep(
    op: &BlockLaplacian,
    b: &[DVec3],
    block_inv: &[DMat3],
    omega: f64,
    v_in: &[DVec3],
    v_out: &mut [DVec3],
) -> f64 {
    map_rows_sum(v_out, |i| {
        if op.pinned[i] {
            return (v_in[i], 0.0);
        }
        let r = b[i] - op.apply_row(i, v_in);
        (v_in[i] + block_inv[i] * r * omega, r.length_squared())
    })
}

/// One Chebyshev sweep (`chebyshev_sweep`, Wang 2015): vhat = block-Jacobi update of
/// v_cur (relaxed by omega), v_next = w (vhat - v_prev) + v_prev. Returns |b - A v_cur|^2.
#[allow(clippy::too_many_arguments)]
pub fn chebyshev_sweep(
    op: &BlockLaplacian,
    b: &[DVec3],
    block_inv: &[DMat3],
    omega: f64,
    weight: f64,
    v_prev: &[DVec3],
    v_cur: &[DVec3],
    v_next: &mut [DVec3],
) -> f64 {
    map_rows_sum(v_next, |i| {
        if op.pinned[i] {
            return (v_cur[i], 0.0);
        }
        let r = b[i] - op.apply_row(i, v_cur);
        let vhat = v_cur[i] + block_inv[i] * r * omega;
        ((vhat - v_prev[i]) * weight + v_prev[i], r.length_squared())
    })
}

/// Chebyshev weights for sweeps 1..=count: omega_1 = 1, omega_2 = 2 / (2 - rho^2),
/// omega_{k+1} = 4 / (4 - rho^2 omega_k) (Wang 2015, no delay).
pub fn chebyshev_weights(rho: f64, count: usize) -> Vec<f64> {
    let r2 = rho * rho;
    let mut w = Vec::with_capacity(count);
    for k in 0..count {
        let next = match k {
            0 => 1.0,
            1 => 2.0 / (2.0 - r2),
            _ => 4.0 / (4.0 - r2 * w[k - 1]),
        };
        w.push(next);
    }
    w
}

/// Runs `sweep(v_cur, v_next) -> |r(v_cur)|^2` with ping-pong buffers, stopping when the
/// input iterate meets the tolerance; returns the stats of the final `v`.
#[allow(clippy::too_many_arguments)]
fn stationary(
    op: &BlockLaplacian,
    b: &[DVec3],
    v: &mut [DVec3],
    iterations: u32,
    tolerance: f64,
    cur: &mut Vec<DVec3>,
    next: &mut Vec<DVec3>,
    mut sweep: impl FnMut(&[DVec3], &mut [DVec3]) -> f64,
) -> SolveStats {
    let b_norm = op.free_norm(b);
    cur.copy_from_slice(v);
    let mut done = 0;
    let mut residual = None;
    while done < iterations {
        let rr = sweep(cur, next);
        let rel = relative_residual(rr.sqrt(), b_norm);
        if tolerance > 0.0 && rel <= tolerance {
            residual = Some(rel);
            break;
        }
        std::mem::swap(cur, next);
        done += 1;
    }
    v.copy_from_slice(cur);
    SolveStats {
        iterations: done,
        residual: residual.unwrap_or_else(|| op.relative_residual_par(b, v, next)),
    }
}

/// Weighted Jacobi with the scalar diagonal (seed 000 eqs. 41-49).
pub fn jacobi(
    op: &BlockLaplacian,
    b: &[DVec3],
    v: &mut [DVec3],
    iterations: u32,
    omega: f64,
    tolerance: f64,
    scratch: &mut SolverScratch,
) -> SolveStats {
    scratch.size(op.len());
    diagonal_inverse(op, &mut scratch.diag_inv);
    let diag_inv = &scratch.diag_inv;
    stationary(
        op,
        b,
        v,
        iterations,
        tolerance,
        &mut scratch.a,
        &mut scratch.b,
        |vi, vo| jacobi_sweep(op, b, diag_inv, omega, vi, vo),
    )
}

/// Block Jacobi: the 3x3 diagonal block A_ii inverted.
pub fn block_jacobi(
    op: &BlockLaplacian,
    b: &[DVec3],
    v: &mut [DVec3],
    iterations: u32,
    omega: f64,
    tolerance: f64,
    scratch: &mut SolverScratch,
) -> SolveStats {
    scratch.size(op.len());
    block_diagonal_inverse(op, &mut scratch.block_inv);
    let block_inv = &scratch.block_inv;
    stationary(
        op,
        b,
        v,
        iterations,
        tolerance,
        &mut scratch.a,
        &mut scratch.b,
        |vi, vo| block_jacobi_sweep(op, b, block_inv, omega, vi, vo),
    )
}

/// Chebyshev-accelerated block Jacobi (Wang 2015) with spectral radius `rho` of the
/// relaxed block-Jacobi iteration matrix I - omega A_B^-1 A.
#[allow(clippy::too_many_arguments)]
pub fn chebyshev(
    op: &BlockLaplacian,
    b: &[DVec3],
    v: &mut [DVec3],
    iterations: u32,
    omega: f64,
    rho: f64,
    tolerance: f64,
    scratch: &mut SolverScratch,
) -> SolveStats {
    scratch.size(op.len());
    block_diagonal_inverse(op, &mut scratch.block_inv);
    let b_norm = op.free_norm(b);
    let weights = chebyshev_weights(rho, iterations as usize);
    let (prev, cur, next) = (&mut scratch.a, &mut scratch.b, &mut scratch.c);
    cur.copy_from_slice(v);
    prev.copy_from_slice(v);
    let mut done = 0u32;
    let mut residual = None;
    while done < iterations {
        // Sweep k = done + 1 uses omega_k.
        let weight = weights[done as usize];
        let rr = chebyshev_sweep(op, b, &scratch.block_inv, omega, weight, prev, cur, next);
        let rel = relative_residual(rr.sqrt(), b_norm);
        if tolerance > 0.0 && rel <= tolerance {
            residual = Some(rel);
            break;
        }
        // prev <- cur, cur <- next.
        std::mem::swap(prev, cur);
        std::mem::swap(cur, next);
        done += 1;
    }
    v.copy_from_slice(cur);
    SolveStats {
        iterations: done,
        residual: residual.unwrap_or_else(|| op.relative_residual_par(b, v, next)),
    }
}

/// Conjugate gradients with the scalar-diagonal (Jacobi) preconditioner on the free rows
/// (seed 004 eq. 3). Stops on the recurrence residual; reports the true residual of `v`.
pub fn cg(
    op: &BlockLaplacian,
    b: &[DVec3],
    v: &mut [DVec3],
    iterations: u32,
    tolerance: f64,
    scratch: &mut SolverScratch,
) -> SolveStats {
    let n = op.len();
    scratch.size(n);
    diagonal_inverse(op, &mut scratch.diag_inv);
    let SolverScratch {
        diag_inv,
        a: r,
        b: z,
        c: p,
        d: ap,
        ..
    } = scratch;
    let free = |i: usize| !op.pinned[i];
    let b_norm = op.free_norm(b);
    // r = b - A v, z = D^-1 r, p = z on free rows; zero on pinned rows.
    op.apply(v, ap);
    for i in 0..n {
        r[i] = if free(i) { b[i] - ap[i] } else { DVec3::ZERO };
        z[i] = diag_inv[i] * r[i];
        p[i] = z[i];
    }
    let mut rz = op.free_dot(r, z);
    let mut done = 0u32;
    while done < iterations {
        let rel = relative_residual(op.free_norm(r), b_norm);
        if tolerance > 0.0 && rel <= tolerance {
            break;
        }
        // p is zero on pinned rows, so the free rows of A p are A_ff p_f.
        op.apply(p, ap);
        let pap = op.free_dot(p, ap);
        if !(pap > 0.0 && pap.is_finite()) {
            break; // exact solution reached (p = 0) or breakdown
        }
        let alpha = rz / pap;
        for i in 0..n {
            if free(i) {
                v[i] += p[i] * alpha;
                r[i] -= ap[i] * alpha;
                z[i] = diag_inv[i] * r[i];
            }
        }
        let rz_new = op.free_dot(r, z);
        let beta = rz_new / rz;
        rz = rz_new;
        for i in 0..n {
            if free(i) {
                p[i] = z[i] + p[i] * beta;
            }
        }
        done += 1;
    }
    SolveStats {
        iterations: done,
        residual: op.relative_residual_par(b, v, ap),
    }
}

/// Spectral radius of the relaxed block-Jacobi iteration matrix G = I - omega A_B^-1 A on
/// the free rows, by `iterations` steps of power iteration from a fixed start vector.
/// G is self-adjoint in the A_B inner product, so the A_B-norm ratio |G x| / |x| used here
/// never exceeds rho: the estimate approaches it from below (an underestimate only slows
/// Chebyshev down; it still converges). Clamped to [0, [`RHO_MAX`]].
pub fn estimate_block_jacobi_rho(op: &BlockLaplacian, omega: f64, iterations: u32) -> f64 {
    let n = op.len();
    if op.free_count() == 0 {
        return 0.0;
    }
    let blocks = op.block_diagonal();
    let inv: Vec<DMat3> = blocks.iter().map(|d| d.inverse()).collect();
    let b_norm = |x: &[DVec3]| -> f64 {
        let mut s = 0.0;
        for i in 0..n {
            if !op.pinned[i] {
                s += x[i].dot(blocks[i] * x[i]);
            }
        }
        s.sqrt()
    };
    // Deterministic, non-smooth start vector (a smooth one can miss the oscillating modes).
    let mut x: Vec<DVec3> = (0..n)
        .map(|i| {
            if op.pinned[i] {
                return DVec3::ZERO;
            }
            let h = |k: u64| {
                let mut s = (i as u64)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    .wrapping_add(k);
                s ^= s >> 31;
                s = s.wrapping_mul(0xBF58_476D_1CE4_E5B9);
                s ^= s >> 29;
                (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            };
            DVec3::new(h(1), h(2), h(3))
        })
        .collect();
    let mut ax = vec![DVec3::ZERO; n];
    let mut rho = 0.0;
    let mut norm = b_norm(&x);
    for _ in 0..iterations {
        if norm == 0.0 {
            return 0.0;
        }
        for xi in x.iter_mut() {
            *xi /= norm;
        }
        op.apply(&x, &mut ax);
        for i in 0..n {
            x[i] = if op.pinned[i] {
                DVec3::ZERO
            } else {
                x[i] - inv[i] * ax[i] * omega
            };
        }
        norm = b_norm(&x);
        rho = norm;
    }
    rho.clamp(0.0, RHO_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Spring;

    /// A 3000-particle chain with IMEX blocks, large enough for the parallel paths.
    fn chain() -> (BlockLaplacian, Vec<DVec3>) {
        let n = 3000;
        let x: Vec<DVec3> = (0..n)
            .map(|i| DVec3::new(i as f64 * 0.01, (i as f64 * 0.3).sin() * 0.002, 0.0))
            .collect();
        let springs: Vec<Spring> = (0..n - 1)
            .map(|i| Spring {
                i: i as u32,
                j: i as u32 + 1,
                stiffness: 100.0,
                rest_length: 0.011,
                damping: 0.1,
            })
            .collect();
        let mut pinned = vec![false; n];
        pinned[0] = true;
        let mut op = BlockLaplacian::new(&vec![1e-3; n], &pinned, &springs);
        op.assemble_imex(&x, &springs, 0.01);
        let b = (0..n)
            .map(|i| DVec3::new(1.0, -(i as f64 * 0.1).cos(), 0.5))
            .collect();
        (op, b)
    }

    /// The parallel residual equals the sequential one to reassociation (1e-12 relative)
    /// and the Jacobi solve gives the same bits on 1 and 2 threads.
    #[test]
    fn parallel_rows_are_exact_and_thread_count_independent() {
        let (op, b) = chain();
        let v: Vec<DVec3> = b.iter().map(|x| *x * 0.3).collect();
        let seq = op.relative_residual(&b, &v);
        let par = op.relative_residual_par(&b, &v, &mut Vec::new());
        assert!((seq - par).abs() <= 1e-12 * seq, "{seq} {par}");
        let solve_on = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    let mut v = vec![DVec3::ZERO; b.len()];
                    let s = jacobi(&op, &b, &mut v, 20, 0.5, 0.0, &mut SolverScratch::default());
                    (v, s.residual)
                })
        };
        let (v1, r1) = solve_on(1);
        let (v2, r2) = solve_on(2);
        assert_eq!(r1.to_bits(), r2.to_bits());
        assert!(v1
            .iter()
            .zip(&v2)
            .all(|(a, c)| a.to_array().map(f64::to_bits) == c.to_array().map(f64::to_bits)));
    }
}
