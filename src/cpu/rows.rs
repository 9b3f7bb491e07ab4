//! Parallel per-row loops whose results do not depend on the thread count: each element
//! is written once, and sums are cut into fixed chunks of [`PAR_CHUNK`], each chunk summed
//! in row order, then the chunks in order.

use glam::DVec3;
use rayon::prelude::*;
use std::cell::RefCell;

/// Rows per rayon task for per-particle and per-spring loops; smaller inputs run inline.
pub(crate) const PAR_CHUNK: usize = 1024;

/// Runs `kernel(i, &mut out[i])` for every i: sequentially for short slices, else in
/// parallel chunks of at least [`PAR_CHUNK`] (each element is written once, so the result
/// does not depend on the split).
pub(crate) fn for_each_indexed<T: Send>(
    out: &mut [T],
    kernel: impl Fn((usize, &mut T)) + Sync + Send,
) {
    if out.len() <= PAR_CHUNK {
        out.iter_mut().enumerate().for_each(kernel);
    } else {
        out.par_iter_mut()
            .enumerate()
            .with_min_len(PAR_CHUNK)
            .for_each(kernel);
    }
}

/// out[i] = f(i) for every row, in parallel chunks for large inputs.
pub(crate) fn map_rows(out: &mut [DVec3], f: impl Fn(usize) -> DVec3 + Sync) {
    if out.len() <= PAR_CHUNK {
        out.iter_mut().enumerate().for_each(|(i, o)| *o = f(i));
    } else {
        out.par_chunks_mut(PAR_CHUNK)
            .enumerate()
            .for_each(|(c, chunk)| {
                for (k, o) in chunk.iter_mut().enumerate() {
                    *o = f(c * PAR_CHUNK + k);
                }
            });
    }
}

/// out[i] = f(i).0 and the sum of f(i).1, summed per chunk then over chunks in order, so
/// the result does not depend on the thread count. The chunk sums go to a per-thread
/// buffer kept between calls (a fresh one only if that buffer is in use, e.g. by a loop
/// that rayon interleaved on this thread).
pub(crate) fn map_rows_sum(out: &mut [DVec3], f: impl Fn(usize) -> (DVec3, f64) + Sync) -> f64 {
    let chunk_sum = |c: usize, chunk: &mut [DVec3]| {
        let mut s = 0.0;
        for (k, o) in chunk.iter_mut().enumerate() {
            let (val, r2) = f(c * PAR_CHUNK + k);
            *o = val;
            s += r2;
        }
        s
    };
    if out.len() <= PAR_CHUNK {
        chunk_sum(0, out)
    } else {
        thread_local! {
            static PARTIAL: RefCell<Vec<f64>> = const { RefCell::new(Vec::new()) };
        }
        let mut run = |partial: &mut Vec<f64>| {
            partial.resize(out.len().div_ceil(PAR_CHUNK), 0.0);
            out.par_chunks_mut(PAR_CHUNK)
                .zip(partial.par_iter_mut())
                .enumerate()
                .for_each(|(c, (chunk, p))| *p = chunk_sum(c, chunk));
            partial.iter().sum()
        };
        PARTIAL.with(|cell| match cell.try_borrow_mut() {
            Ok(mut partial) => run(&mut partial),
            Err(_) => run(&mut Vec::new()),
        })
    }
}
