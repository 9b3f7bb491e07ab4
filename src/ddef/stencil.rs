//! The lattice DDEF's translation-invariant tables (Algorithm 1's N_s, M_j and S(tau) on
//! the Kuhn lattice), built once from the combinatorics of a cell:
//!
//! - **Slots**: N(tau) of a tetrahedron of Kuhn type t (axis order a, b, c) in cell c0 is
//!   c0 + the 8 offsets [`slot_offsets`]: its path vertices 0, e_a, e_a + e_b, 1 (slots
//!   0..4) and the vertex off the shared face of each face neighbour (slots 4..8: across
//!   face 0, 2 e_a + e_b + e_c, in cell c0 + e_a; face 1, e_b and face 2, e_a + e_c, in
//!   the same cell; face 3, -e_c, in cell c0 - e_c). A neighbour exists exactly when its
//!   off-face vertex is a lattice site, so clipping N at the box is clipping sites.
//! - **Site stencil** ("which tetrahedra have site j in N"): the 48 pairs (cell offset,
//!   type) with j - cell = a slot offset of the type, sorted by tetrahedron index: M_j is
//!   the sources of those tetrahedra, contiguous ranges of the sorted sources.
//! - **Near stencil** per type t: the (cell offset, type) pairs T with N(T) and N(tau)
//!   sharing a site, and which of tau's slots they share (`shared`): S(tau) = the sources
//!   of the T whose shared slots include one inside the lattice. The `corrected` mask of
//!   such a source is the path vertices of tau NOT in N(T): `!shared & 0xF`.
//! - The union of the near stencils' cell offsets ([`Stencils::dcells`]) and a membership
//!   table over (type of tau, offset, type of T) for a kernel that walks a cell's
//!   neighbourhood once for all its targets.

use super::plan::{KUHN, ORDERS};
use std::sync::OnceLock;

/// Slots of N(tau).
pub const SLOTS: usize = 8;

/// Cell-relative lattice offsets of N(tau)'s slots for Kuhn type `t` (see the module doc).
pub fn slot_offsets(t: usize) -> [[i32; 3]; SLOTS] {
    let [a, b, c] = ORDERS[t];
    let e = |axis: usize| {
        let mut v = [0i32; 3];
        v[axis] = 1;
        v
    };
    let add = |u: [i32; 3], v: [i32; 3]| [u[0] + v[0], u[1] + v[1], u[2] + v[2]];
    let p1 = e(a);
    let p2 = add(p1, e(b));
    let p3 = [1, 1, 1];
    let face0 = add(p3, e(a));
    let face3 = [-e(c)[0], -e(c)[1], -e(c)[2]];
    [[0; 3], p1, p2, p3, face0, e(b), add(e(a), e(c)), face3]
}

/// One tetrahedron T relative to a site or to another tetrahedron's cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StencilEntry {
    /// Cell offset of T.
    pub dcell: [i32; 3],
    /// Kuhn type of T.
    pub kuhn: u8,
    /// Site stencil: T's slot that is the site. Near stencil: bit k set when slot k of
    /// tau is in N(T).
    pub slots: u8,
}

impl StencilEntry {
    /// The `corrected` mask of a near entry: bit v when path vertex v of tau is not in
    /// N(T) (T's sources are in that vertex's far field).
    pub fn corrected_mask(&self) -> u32 {
        u32::from(!self.slots) & 0xF
    }
}

/// The tables (see the module doc).
#[derive(Clone, Debug)]
pub struct Stencils {
    /// Site stencil, sorted by (dz, dy, dx, type): increasing tetrahedron index.
    pub site: Vec<StencilEntry>,
    /// Near stencil per type of tau, in the same order.
    pub near: [Vec<StencilEntry>; KUHN],
    /// The distinct cell offsets of the near stencils, in the same order.
    pub dcells: Vec<[i32; 3]>,
    /// Per (type of tau, dcell index, type of T): the shared-slot mask, 0 when T is not in
    /// the stencil. Index `(t * dcells.len() + d) * KUHN + t'`.
    pub member: Vec<u8>,
}

fn order_key(e: &StencilEntry) -> ([i32; 3], u8) {
    ([e.dcell[2], e.dcell[1], e.dcell[0]], e.kuhn)
}

impl Stencils {
    /// The tables, built once.
    pub fn get() -> &'static Stencils {
        static TABLES: OnceLock<Stencils> = OnceLock::new();
        TABLES.get_or_init(Self::build)
    }

    fn build() -> Self {
        let offsets: Vec<[[i32; 3]; SLOTS]> = (0..KUHN).map(slot_offsets).collect();
        let mut site = Vec::with_capacity(KUHN * SLOTS);
        for (t, offs) in offsets.iter().enumerate() {
            for (k, o) in offs.iter().enumerate() {
                site.push(StencilEntry {
                    dcell: [-o[0], -o[1], -o[2]],
                    kuhn: t as u8,
                    slots: k as u8,
                });
            }
        }
        site.sort_by_key(order_key);
        let near: [Vec<StencilEntry>; KUHN] = std::array::from_fn(|t| {
            let mut v = Vec::new();
            for dz in -3..=3 {
                for dy in -3..=3 {
                    for dx in -3..=3 {
                        for (t2, offs2) in offsets.iter().enumerate() {
                            let mut shared = 0u8;
                            for (k, o) in offsets[t].iter().enumerate() {
                                let rel = [o[0] - dx, o[1] - dy, o[2] - dz];
                                if offs2.contains(&rel) {
                                    shared |= 1 << k;
                                }
                            }
                            if shared != 0 {
                                v.push(StencilEntry {
                                    dcell: [dx, dy, dz],
                                    kuhn: t2 as u8,
                                    slots: shared,
                                });
                            }
                        }
                    }
                }
            }
            v.sort_by_key(order_key);
            v
        });
        let mut dcells: Vec<[i32; 3]> = near.iter().flatten().map(|e| e.dcell).collect();
        dcells.sort_by_key(|d| [d[2], d[1], d[0]]);
        dcells.dedup();
        let mut member = vec![0u8; KUHN * dcells.len() * KUHN];
        for (t, list) in near.iter().enumerate() {
            for e in list {
                let d = dcells
                    .iter()
                    .position(|&c| c == e.dcell)
                    .expect("every offset is in the union");
                member[(t * dcells.len() + d) * KUHN + e.kuhn as usize] = e.slots;
            }
        }
        Self {
            site,
            near,
            dcells,
            member,
        }
    }
}

/// The slots of N(tau) inside a lattice of `dims` sites, tau of type `t` in `cell`.
pub fn valid_slots(dims: [u32; 3], cell: [u32; 3], t: usize) -> u8 {
    let mut bits = 0u8;
    for (k, o) in slot_offsets(t).iter().enumerate() {
        if (0..3).all(|a| {
            let s = i64::from(cell[a]) + i64::from(o[a]);
            s >= 0 && s < i64::from(dims[a])
        }) {
            bits |= 1 << k;
        }
    }
    bits
}

/// `cell + d` when it is a cell of a lattice of `dims` sites.
#[inline]
pub fn offset_cell(dims: [u32; 3], cell: [u32; 3], d: [i32; 3]) -> Option<[u32; 3]> {
    let mut out = [0u32; 3];
    for a in 0..3 {
        let c = i64::from(cell[a]) + i64::from(d[a]);
        if c < 0 || c >= i64::from(dims[a]) - 1 {
            return None;
        }
        out[a] = c as u32;
    }
    Some(out)
}

/// `p + d` when it is a site of a lattice of `dims` sites.
#[inline]
pub fn offset_site(dims: [u32; 3], p: [u32; 3], d: [i32; 3]) -> Option<[u32; 3]> {
    let mut out = [0u32; 3];
    for a in 0..3 {
        let c = i64::from(p[a]) + i64::from(d[a]);
        if c < 0 || c >= i64::from(dims[a]) {
            return None;
        }
        out[a] = c as u32;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_eight_distinct_sites() {
        for t in 0..KUHN {
            let s = slot_offsets(t);
            for i in 0..SLOTS {
                for j in 0..i {
                    assert_ne!(s[i], s[j], "type {t}");
                }
            }
        }
    }

    #[test]
    fn the_tables_are_symmetric_and_sized_as_expected() {
        let st = Stencils::get();
        assert_eq!(st.site.len(), 48);
        for t in 0..KUHN {
            let near = &st.near[t];
            // tau is near itself, sharing every slot.
            assert!(near.contains(&StencilEntry {
                dcell: [0; 3],
                kuhn: t as u8,
                slots: 0xFF
            }));
            // T near tau iff tau near T (with the opposite offset).
            for e in near {
                let back = &st.near[e.kuhn as usize];
                let inv = [-e.dcell[0], -e.dcell[1], -e.dcell[2]];
                assert!(back.iter().any(|b| b.dcell == inv && b.kuhn as usize == t));
            }
            assert!(
                (100..=250).contains(&near.len()),
                "type {t}: {}",
                near.len()
            );
        }
    }
}
