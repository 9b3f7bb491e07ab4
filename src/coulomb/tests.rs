//! Tests of the fast Coulomb sums against the straightforward one, across builds and
//! thread counts.

use super::*;

fn cloud(n: usize, seed: u64, charged_every: usize) -> (Vec<DVec3>, Vec<f64>) {
    let mut s = seed;
    let mut unit = move || {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let x = (0..n).map(|_| DVec3::new(unit(), unit(), unit())).collect();
    let q = (0..n)
        .map(|i| {
            let v = (unit() - 0.5) * 1e-5;
            if i % charged_every == 0 {
                v
            } else {
                0.0
            }
        })
        .collect();
    (x, q)
}

fn fast(x: &[DVec3], q: &[f64], eps: f64) -> Vec<DVec3> {
    let mut out = vec![DVec3::splat(7.0); x.len()];
    forces_into(x, q, eps, &mut Sources::default(), &mut out);
    out
}

/// Fast and straightforward sums agree to reassociation: |f - f_ref| <= 1e-13 sum|terms|
/// (n <= 1000 terms of relative rounding 2^-53 each, reordered), for every source count
/// modulo LANES, one block or several (odd and even counts, a ragged last one), and with
/// uncharged particles interleaved.
#[test]
fn fast_matches_reference_to_reassociation() {
    for (n, every, eps) in [
        (1, 1, 0.0),
        (2, 1, 0.0),
        (7, 1, 1e-3),
        (8, 1, 0.0),
        (9, 2, 0.0),
        (61, 3, 1e-2),
        (300, 1, 1e-3),
        (700, 1, 1e-3),
        (999, 2, 0.0),
        (1000, 1, 0.0),
    ] {
        let (x, q) = cloud(n, 11 + n as u64, every);
        let f = fast(&x, &q, eps);
        let r = reference::forces(&x, &q, eps);
        let mag = reference::magnitudes(&x, &q, eps);
        for i in 0..n {
            let err = (f[i] - r[i]).abs().max_element();
            assert!(f[i].is_finite(), "n {n} target {i}: {:?}", f[i]);
            assert!(
                err <= 1e-13 * mag[i],
                "n {n} target {i}: err {err:e}, scale {:e}",
                mag[i]
            );
            if q[i] == 0.0 {
                assert_eq!(f[i], DVec3::ZERO);
            }
        }
    }
}

/// The refined 1 / r^3 is within 8 ulp (relative 2e-15) of the exact IEEE expression
/// over the whole range where it is used.
#[test]
fn inv_r3_is_f64_accurate() {
    let mut worst: f64 = 0.0;
    let mut r2 = R2_MIN;
    while r2 <= R2_MAX {
        for k in 0..200 {
            let v = r2 * (1.0 + k as f64 * 0.0499);
            if v > R2_MAX {
                break;
            }
            let exact = 1.0 / (v * v.sqrt());
            worst = worst.max(((inv_r3(v) - exact) / exact).abs());
        }
        r2 *= 10.0;
    }
    assert!(worst <= 2e-15, "worst relative error {worst:e}");
}

/// Sources far outside the f32 range take the exact expression and stay accurate.
#[test]
fn extreme_distances_use_the_exact_expression() {
    let x = vec![
        DVec3::ZERO,
        DVec3::new(1e20, 0.0, 0.0),
        DVec3::new(0.0, 1e-18, 0.0),
    ];
    let q = vec![1e-6, 2e-6, 3e-6];
    let f = fast(&x, &q, 0.0);
    let r = reference::forces(&x, &q, 0.0);
    for i in 0..3 {
        assert!(
            ((f[i] - r[i]).length() / r[i].length()) <= 1e-15,
            "{i}: {} {}",
            f[i],
            r[i]
        );
    }
}

/// The vector build the processor runs and the portable one give the same bits, for the
/// field at a point and for the forces between all charges.
#[test]
fn every_isa_build_gives_the_same_bits() {
    let (x, q) = cloud(203, 9, 1);
    let mut src = Sources::default();
    src.fill(&x, &q);
    for (i, &p) in x.iter().enumerate() {
        let ex = [i as u32];
        let a = src.field_excluding(p, &ex, 0.0);
        let b = src.field_portable(p, &ex, 0.0);
        assert_eq!(
            a.to_array().map(f64::to_bits),
            b.to_array().map(f64::to_bits)
        );
    }
    for (n, eps) in [(203, 0.0), (1500, 1e-3)] {
        let (x, q) = cloud(n, 9, 1);
        let mut a = vec![DVec3::ZERO; n];
        let mut b = vec![DVec3::ZERO; n];
        let mut src = Sources::default();
        pairs::forces_with(pairs::Isa::detect(), &x, &q, eps, &mut src, &mut a);
        pairs::forces_with(pairs::Isa::Portable, &x, &q, eps, &mut src, &mut b);
        for (u, v) in a.iter().zip(&b) {
            assert_eq!(
                u.to_array().map(f64::to_bits),
                v.to_array().map(f64::to_bits)
            );
        }
    }
}

/// The round-robin schedule holds every block pair (I, J), I < J, exactly once and no
/// block twice in a round, for even and odd block counts.
#[test]
fn rounds_hold_every_block_pair_once() {
    for blocks in 0..20 {
        let mut seen = vec![vec![0; blocks]; blocks];
        for round in pairs::rounds(blocks) {
            let mut busy = vec![false; blocks];
            for (i, j) in round {
                assert!(i < j && j < blocks, "{blocks}: ({i}, {j})");
                assert!(!busy[i] && !busy[j], "{blocks}: a block twice in a round");
                busy[i] = true;
                busy[j] = true;
                seen[i][j] += 1;
            }
        }
        for (i, row) in seen.iter().enumerate() {
            for (j, &count) in row.iter().enumerate().skip(i + 1) {
                assert_eq!(count, 1, "{blocks}: ({i}, {j})");
            }
        }
    }
}

/// The order of the terms is fixed: 1, 2 and 3 rayon threads give the same bits (2000
/// charges: 16 blocks, the last one ragged).
#[test]
fn bit_identical_across_thread_counts() {
    let (x, q) = cloud(2000, 5, 1);
    assert!(2000usize.div_ceil(pairs::block_len(2000)) > 8);
    let run = |threads| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| fast(&x, &q, 1e-3))
    };
    let a = run(1);
    for b in [run(2), run(3)] {
        for (u, v) in a.iter().zip(&b) {
            for k in 0..3 {
                assert_eq!(u[k].to_bits(), v[k].to_bits());
            }
        }
    }
}

/// Two distinct charges at the same point with eps = 0: non-finite, never dropped;
/// a third charge elsewhere still sees finite forces from each.
#[test]
fn coincident_distinct_charges_are_non_finite() {
    let x = vec![DVec3::ZERO, DVec3::ZERO, DVec3::X];
    let q = vec![1e-6, 2e-6, 1e-6];
    let f = fast(&x, &q, 0.0);
    assert!(!f[0].is_finite() && !f[1].is_finite(), "{f:?}");
    assert!(f[2].is_finite());
    // Softened, the same pair is finite and the self pair never contributes.
    let g = fast(&x, &q, 1e-2);
    assert!(g.iter().all(|v| v.is_finite()));
    let single = fast(&[DVec3::ZERO], &[1e-6], 0.0);
    assert_eq!(single[0], DVec3::ZERO);
}
