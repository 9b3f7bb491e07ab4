//! All-pairs Coulomb forces with each unordered pair evaluated once (Newton's third law),
//! in an order fixed by the charge count alone.
//!
//! The sources are cut into blocks of [`block_len`] charges. A task takes a pair of blocks
//! (I, J), I < J: for each target i of I in increasing order it walks J's sources in
//! chunks of [`LANES`] from the first, computing d = x_i - x_j and s = 1 / r^3 once per
//! pair; i's lanes gain q_j s d (combined in [`Acc`]'s fixed tree and added to i's field
//! after the walk) and each source's field, kept in memory, gains -q_i s d at once. A
//! diagonal task (I, I) does the same with the sources after i only (chunks starting at
//! i + 1), so it sees each of its pairs once and never the self pair. Diagonal tasks form
//! the first round; the block pairs follow in the rounds of a round-robin tournament
//! ([`rounds`]), in which no block appears twice, so the tasks of a round run in parallel
//! on disjoint fields. Every field thus receives its terms in one order, whatever the
//! thread count or the rayon split, and every vector build computes the very same fused
//! operations ([`super::inv_r3`]): the same bits everywhere.
//!
//! The ragged last chunk of a walk runs on a local copy whose missing lanes sit at the
//! target with charge 0 and r^2 padded by 1 (exact zero terms, never written back).
//! Should any r^2 leave [`inv_r3`]'s range (then rarely), the whole sum is redone with the
//! exact expression in the same order.

use super::{inv_r3, lanes, Acc, Sources, LANES};
use crate::model::COULOMB_K;
use crate::physics::point_charge;
use glam::DVec3;
use rayon::prelude::*;

/// Charges per block, a multiple of [`LANES`], from the charge count alone (never the
/// thread count): blocks small enough that a walk's sources (4 f64 each) and their fields
/// (3 f64) stay in L1, and enough of them for a round to feed a few threads.
pub(super) fn block_len(m: usize) -> usize {
    (m / 16).next_multiple_of(LANES).clamp(64, 512)
}

/// Below this many charges the sum runs on the calling thread: a round of small tasks
/// costs more in rayon hand-offs than it saves (256 charges: at best 0.061 ms per step in
/// parallel rounds on 2 cores, 0.039 ms on the calling thread). The order, and so the
/// bits, are the same either way.
const SERIAL_BELOW: usize = 512;

/// The round-robin tournament of `blocks` blocks (circle method, with a bye when the
/// count is odd): every pair (I, J), I < J, exactly once, no block twice in a round.
pub(super) fn rounds(blocks: usize) -> Vec<Vec<(usize, usize)>> {
    let n = blocks + blocks % 2;
    (0..n.saturating_sub(1))
        .map(|r| {
            let mut round = Vec::with_capacity(n / 2);
            if n - 1 < blocks {
                round.push((r, n - 1));
            }
            for k in 1..n / 2 {
                let (a, b) = ((r + k) % (n - 1), (r + n - 1 - k) % (n - 1));
                round.push((a.min(b), a.max(b)));
            }
            round
        })
        .collect()
}

/// Which build of the block kernels runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Isa {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Portable,
}

impl Isa {
    /// The widest build the processor has (each needs FMA).
    pub(super) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Self::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Self::Avx2;
            }
        }
        Self::Portable
    }
}

/// f_i = k_c q_i sum_{j != i, q_j != 0} q_j (x_i - x_j) / (r^2 + eps^2)^(3/2) for every
/// particle (zero for an uncharged one), with `sources` refilled from (x, q).
pub fn forces_into(
    x: &[DVec3],
    q: &[f64],
    softening: f64,
    sources: &mut Sources,
    out: &mut [DVec3],
) {
    forces_with(Isa::detect(), x, q, softening, sources, out);
}

/// [`forces_into`] on the given build.
pub(super) fn forces_with(
    isa: Isa,
    x: &[DVec3],
    q: &[f64],
    softening: f64,
    sources: &mut Sources,
    out: &mut [DVec3],
) {
    assert_eq!(q.len(), x.len(), "coulomb_forces: charges");
    assert_eq!(out.len(), x.len(), "coulomb_forces: out");
    sources.fill(x, q);
    let m = sources.len();
    let bs = block_len(m);
    let eps2 = softening * softening;
    let mut field = std::mem::take(&mut sources.field);
    if !sum::<false>(isa, sources, &mut field, bs, eps2) {
        sum::<true>(isa, sources, &mut field, bs, eps2);
    }
    let src = &*sources;
    let f = &field;
    let target = |(i, o): (usize, &mut DVec3)| {
        *o = match src.slot_of(i) {
            Some(s) => {
                let (b, l) = (s / bs * 3 * bs, s % bs);
                DVec3::new(f[b + l], f[b + bs + l], f[b + 2 * bs + l]) * (COULOMB_K * q[i])
            }
            None => DVec3::ZERO,
        };
    };
    if out.len() <= 1024 {
        out.iter_mut().enumerate().for_each(target);
    } else {
        out.par_iter_mut()
            .enumerate()
            .with_min_len(1024)
            .for_each(target);
    }
    sources.field = field;
}

/// Every block's field (without k_c), block b at `3 bs b` as x, y, z runs of `bs`.
/// Returns whether every r^2 was in [`inv_r3`]'s range (always true when `EXACT`).
fn sum<const EXACT: bool>(
    isa: Isa,
    src: &Sources,
    field: &mut Vec<f64>,
    bs: usize,
    eps2: f64,
) -> bool {
    let m = src.len();
    let blocks = m.div_ceil(bs);
    field.clear();
    field.resize(3 * bs * blocks, 0.0);
    let block = |b: usize| Block::of(src, b * bs, ((b + 1) * bs).min(m));
    let serial = m < SERIAL_BELOW;
    let diagonal = |(b, f): (usize, &mut [f64])| task::<EXACT>(isa, block(b), None, f, eps2);
    let mut ok = if serial {
        field
            .chunks_mut(3 * bs)
            .enumerate()
            .map(diagonal)
            .filter(|&in_range| !in_range)
            .count()
            == 0
    } else {
        field
            .par_chunks_mut(3 * bs)
            .enumerate()
            .map(diagonal)
            .reduce(|| true, |a, b| a && b)
    };
    for round in rounds(blocks) {
        let mut slots: Vec<Option<&mut [f64]>> = field.chunks_mut(3 * bs).map(Some).collect();
        let tasks: Vec<_> = round
            .iter()
            .map(|&(i, j)| {
                let (fi, fj) = (slots[i].take(), slots[j].take());
                (i, j, fi.expect("a block once per round"), fj.expect("idem"))
            })
            .collect();
        let pair = |(i, j, fi, fj): (usize, usize, &mut [f64], &mut [f64])| {
            task::<EXACT>(isa, block(i), Some((block(j), fj)), fi, eps2)
        };
        ok &= if serial {
            tasks
                .into_iter()
                .map(pair)
                .filter(|&in_range| !in_range)
                .count()
                == 0
        } else {
            tasks
                .into_par_iter()
                .map(pair)
                .reduce(|| true, |a, b| a && b)
        };
    }
    ok
}

/// One block's sources.
#[derive(Clone, Copy)]
struct Block<'a> {
    x: &'a [f64],
    y: &'a [f64],
    z: &'a [f64],
    q: &'a [f64],
}

impl<'a> Block<'a> {
    fn of(s: &'a Sources, from: usize, to: usize) -> Self {
        Self {
            x: &s.x[from..to],
            y: &s.y[from..to],
            z: &s.z[from..to],
            q: &s.q[from..to],
        }
    }
}

/// A block's field as its x, y and z runs.
fn runs(f: &mut [f64]) -> [&mut [f64]; 3] {
    let bs = f.len() / 3;
    let (x, rest) = f.split_at_mut(bs);
    let (y, z) = rest.split_at_mut(bs);
    [x, y, z]
}

/// The task (I, J) on the chosen build; J = None is the diagonal (I, I).
fn task<const EXACT: bool>(
    isa: Isa,
    bi: Block,
    bj: Option<(Block, &mut [f64])>,
    fi: &mut [f64],
    eps2: f64,
) -> bool {
    match isa {
        // SAFETY: `Isa::detect` found the features on this processor.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { task_avx512::<EXACT>(bi, bj, fi, eps2) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { task_avx2::<EXACT>(bi, bj, fi, eps2) },
        Isa::Portable => task_body::<EXACT>(bi, bj, fi, eps2),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
fn task_avx512<const EXACT: bool>(
    bi: Block,
    bj: Option<(Block, &mut [f64])>,
    fi: &mut [f64],
    eps2: f64,
) -> bool {
    task_body::<EXACT>(bi, bj, fi, eps2)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn task_avx2<const EXACT: bool>(
    bi: Block,
    bj: Option<(Block, &mut [f64])>,
    fi: &mut [f64],
    eps2: f64,
) -> bool {
    task_body::<EXACT>(bi, bj, fi, eps2)
}

#[inline(always)]
fn task_body<const EXACT: bool>(
    bi: Block,
    bj: Option<(Block, &mut [f64])>,
    fi: &mut [f64],
    eps2: f64,
) -> bool {
    let mut ok = true;
    match bj {
        Some((bj, fj)) => {
            let [fx, fy, fz] = runs(fi);
            let mut fj = runs(fj);
            for a in 0..bi.q.len() {
                let p = DVec3::new(bi.x[a], bi.y[a], bi.z[a]);
                let t = walk::<EXACT>(p, bi.q[a], &bj, 0, &mut fj, eps2, &mut ok);
                fx[a] += t.x;
                fy[a] += t.y;
                fz[a] += t.z;
            }
        }
        None => {
            let mut f = runs(fi);
            for a in 0..bi.q.len() {
                let p = DVec3::new(bi.x[a], bi.y[a], bi.z[a]);
                let t = walk::<EXACT>(p, bi.q[a], &bi, a + 1, &mut f, eps2, &mut ok);
                f[0][a] += t.x;
                f[1][a] += t.y;
                f[2][a] += t.z;
            }
        }
    }
    ok
}

/// Target p (charge qi) against the sources `from..` of `s` in chunks from `from`: returns
/// the target's field from them and adds each source's -q_i s d to `f`; clears `ok` when
/// an r^2 left [`inv_r3`]'s range.
#[inline(always)]
fn walk<const EXACT: bool>(
    p: DVec3,
    qi: f64,
    s: &Block,
    from: usize,
    f: &mut [&mut [f64]; 3],
    eps2: f64,
    ok: &mut bool,
) -> DVec3 {
    let m = s.q.len();
    let b = from + (m - from) / LANES * LANES;
    let mut acc = Acc::default();
    {
        // Zipped exact chunks: no bounds check in the loop.
        let c = |v| chunks(v, from, b);
        let [fx, fy, fz] = f;
        let cm = |v| chunks_mut(v, from, b);
        let src = c(s.x).zip(c(s.y)).zip(c(s.z)).zip(c(s.q));
        let fields = cm(fx).zip(cm(fy)).zip(cm(fz));
        for ((((xs, ys), zs), qs), ((ex, ey), ez)) in src.zip(fields) {
            pair_chunk::<EXACT, false>(
                p,
                qi,
                [xs, ys, zs, qs],
                &[0.0; LANES],
                [ex, ey, ez],
                eps2,
                &mut acc,
            );
        }
    }
    if b < m {
        let mut src = [[p.x; LANES], [p.y; LANES], [p.z; LANES], [0.0; LANES]];
        let mut pad = [1.0; LANES];
        let mut fl = [[0.0; LANES]; 3];
        for l in 0..m - b {
            for (k, v) in [s.x, s.y, s.z, s.q].into_iter().enumerate() {
                src[k][l] = v[b + l];
            }
            for k in 0..3 {
                fl[k][l] = f[k][b + l];
            }
            pad[l] = 0.0;
        }
        let [fx, fy, fz] = &mut fl;
        pair_chunk::<EXACT, true>(
            p,
            qi,
            [&src[0], &src[1], &src[2], &src[3]],
            &pad,
            [fx, fy, fz],
            eps2,
            &mut acc,
        );
        for l in 0..m - b {
            for k in 0..3 {
                f[k][b + l] = fl[k][l];
            }
        }
    }
    *ok &= acc.in_range();
    acc.total()
}

/// The chunks of `v[from..to]`.
#[inline(always)]
fn chunks(v: &[f64], from: usize, to: usize) -> impl Iterator<Item = &[f64; LANES]> {
    v[from..to].chunks_exact(LANES).map(lanes)
}

#[inline(always)]
fn chunks_mut(v: &mut [f64], from: usize, to: usize) -> impl Iterator<Item = &mut [f64; LANES]> {
    v[from..to].chunks_exact_mut(LANES).map(lanes_mut)
}

#[inline(always)]
fn lanes_mut(s: &mut [f64]) -> &mut [f64; LANES] {
    s.try_into().expect("a full chunk")
}

/// One chunk: with d = p - x_j and s = 1 / r^3 ([`inv_r3`], or the unit point-charge
/// factor when `EXACT`), the target's lanes gain q_j s d and the sources' fields `f` gain -q_i s d.
/// `pad` is added to r^2 when `PAD` (1 on masked lanes, whose d and q are 0).
#[inline(always)]
fn pair_chunk<const EXACT: bool, const PAD: bool>(
    p: DVec3,
    qi: f64,
    [xs, ys, zs, qs]: [&[f64; LANES]; 4],
    pad: &[f64; LANES],
    [fx, fy, fz]: [&mut [f64; LANES]; 3],
    eps2: f64,
    acc: &mut Acc,
) {
    // On copies: the three runs are written whole, with no aliasing to rule out (else the
    // loop stays scalar).
    let mut e = [*fx, *fy, *fz];
    for l in 0..LANES {
        let dx = p.x - xs[l];
        let dy = p.y - ys[l];
        let dz = p.z - zs[l];
        let mut r2 = dz.mul_add(dz, dy.mul_add(dy, dx.mul_add(dx, eps2)));
        if PAD {
            r2 += pad[l];
        }
        let s = if EXACT {
            // The unit factor, shared by both charges of the pair.
            point_charge::factor(1.0, r2)
        } else {
            // Selects, not `f64::min`: one vminpd / vmaxpd each, no NaN fix-up.
            acc.lo[l] = if r2 < acc.lo[l] { r2 } else { acc.lo[l] };
            acc.hi[l] = if r2 > acc.hi[l] { r2 } else { acc.hi[l] };
            inv_r3(r2)
        };
        let (sj, si) = (qs[l] * s, qi * s);
        acc.x[l] = dx.mul_add(sj, acc.x[l]);
        acc.y[l] = dy.mul_add(sj, acc.y[l]);
        acc.z[l] = dz.mul_add(sj, acc.z[l]);
        e[0][l] = (-dx).mul_add(si, e[0][l]);
        e[1][l] = (-dy).mul_add(si, e[1][l]);
        e[2][l] = (-dz).mul_add(si, e[2][l]);
    }
    [*fx, *fy, *fz] = e;
}
