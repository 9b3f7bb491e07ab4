//! CSR adjacency of particles to springs, for scatter-free per-particle gathers.
//!
//! Row `i` lists every spring touching particle `i`. A per-particle kernel sums its
//! springs' contributions through this list instead of scattering from a per-spring
//! kernel, so no float atomics are needed and results are deterministic (docs/architecture.md).

use super::Spring;

/// One adjacency entry: a spring touching the row's particle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdjEntry {
    /// Index into the spring list.
    pub spring: u32,
    /// The spring's other endpoint.
    pub other: u32,
    /// +1 when the row's particle is the spring's `i`, -1 when it is `j`. A spring force
    /// stored as "force on i" is added with this sign.
    pub sign: i32,
}

/// Compressed sparse rows: entries of particle `i` are `entries[offsets[i]..offsets[i + 1]]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Adjacency {
    pub offsets: Vec<u32>,
    pub entries: Vec<AdjEntry>,
}

impl Adjacency {
    /// Builds the adjacency of `n` particles. Springs must already be validated (in range).
    /// Entries in a row are ordered by spring index, so gathers sum in a fixed order.
    pub fn build(n: usize, springs: &[Spring]) -> Self {
        let mut counts = vec![0u32; n + 1];
        for s in springs {
            counts[s.i as usize + 1] += 1;
            counts[s.j as usize + 1] += 1;
        }
        for i in 0..n {
            counts[i + 1] += counts[i];
        }
        let offsets = counts;
        let mut cursor = offsets.clone();
        let mut entries = vec![
            AdjEntry {
                spring: 0,
                other: 0,
                sign: 0
            };
            2 * springs.len()
        ];
        for (k, s) in springs.iter().enumerate() {
            for (me, other, sign) in [(s.i, s.j, 1), (s.j, s.i, -1)] {
                let slot = &mut cursor[me as usize];
                entries[*slot as usize] = AdjEntry {
                    spring: k as u32,
                    other,
                    sign,
                };
                *slot += 1;
            }
        }
        Self { offsets, entries }
    }

    pub fn row(&self, i: usize) -> &[AdjEntry] {
        &self.entries[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// Largest number of springs at one particle.
    pub fn max_degree(&self) -> usize {
        self.offsets
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::unit_spring as spring;

    #[test]
    fn rows_list_each_spring_once_per_endpoint() {
        let springs = [spring(0, 1), spring(1, 2), spring(2, 0), spring(3, 1)];
        let adj = Adjacency::build(5, &springs);
        assert_eq!(adj.offsets.len(), 6);
        assert_eq!(adj.entries.len(), 8);
        assert_eq!(adj.row(4), &[]);
        let r1: Vec<_> = adj
            .row(1)
            .iter()
            .map(|e| (e.spring, e.other, e.sign))
            .collect();
        assert_eq!(r1, vec![(0, 0, -1), (1, 2, 1), (3, 3, -1)]);
        assert_eq!(adj.max_degree(), 3);
        for i in 0..5 {
            for e in adj.row(i) {
                let s = springs[e.spring as usize];
                let (me, other) = if e.sign > 0 { (s.i, s.j) } else { (s.j, s.i) };
                assert_eq!(me as usize, i);
                assert_eq!(other, e.other);
            }
        }
    }
}
