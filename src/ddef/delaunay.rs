//! 3-D Delaunay tetrahedralization of a box and points inside it (Bowyer-Watson), with
//! Shewchuk's adaptive exact predicates (`robust::orient3d`, `robust::insphere`).
//!
//! The box's 8 corners are triangulated first (6 tetrahedra around the main diagonal;
//! the corners are cospherical, so any triangulation of them is Delaunay) and every
//! other point is inserted strictly inside that hull. No super-tetrahedron is needed, so
//! the hull is exactly the box and no hull face can go missing.
//!
//! Insertion of p: the tetrahedra whose open circumball contains p (the conflict region)
//! are removed and the boundary of their union is coned to p. With exact predicates the
//! region is star-shaped from p and p is never coplanar with a boundary face (a face
//! between a conflict tetrahedron and a non-conflict one: both circumspheres cut the
//! face's plane in the same circle, so a p in that plane inside one ball is inside the
//! other). Cospherical points are therefore handled without perturbation. Every new
//! tetrahedron's orientation is still checked and a failure is reported, not hidden.

use glam::DVec3;
use robust::{insphere, orient3d, Coord3D};

/// No neighbour (a hull face) / no tetrahedron.
pub const NONE: u32 = u32::MAX;

/// Errors of the construction. They signal a bug or an input outside the contract
/// (a point outside the box), never a panic.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DelaunayError {
    #[error("point {index} at {point} is not finite")]
    NonFinite { index: usize, point: DVec3 },
    #[error("point {index} at {point} lies outside the box [{lo}, {hi}]")]
    OutsideBox {
        index: usize,
        point: DVec3,
        lo: DVec3,
        hi: DVec3,
    },
    #[error("the box [{lo}, {hi}] has no volume")]
    FlatBox { lo: DVec3, hi: DVec3 },
    #[error("inserting point {index}: {what} (a predicate or topology inconsistency)")]
    Inconsistent { index: usize, what: &'static str },
}

#[inline]
fn c3(p: DVec3) -> Coord3D<f64> {
    Coord3D {
        x: p.x,
        y: p.y,
        z: p.z,
    }
}

/// robust's orient3d: > 0 for a positively oriented tetrahedron (the convention of every
/// stored tetrahedron here and the one `insphere` requires).
#[inline]
pub fn orient(a: DVec3, b: DVec3, c: DVec3, d: DVec3) -> f64 {
    orient3d(c3(a), c3(b), c3(c), c3(d))
}

/// A Delaunay tetrahedralization. Points 0..8 are the box corners (corner index bits:
/// x = 1, y = 2, z = 4); the rest follow in the caller's order. Tetrahedra are positively
/// oriented; `neighbors[t][k]` is the tetrahedron across the face opposite vertex k.
#[derive(Clone, Debug)]
pub struct Tetrahedralization {
    points: Vec<DVec3>,
    tets: Vec<[u32; 4]>,
    neighbors: Vec<[u32; 4]>,
    /// One tetrahedron incident to each point (a walk start near that point).
    point_tet: Vec<u32>,
    lo: DVec3,
    hi: DVec3,
}

/// Builder state for Bowyer-Watson: tetrahedra slots with a free list and epoch marks.
struct Builder {
    points: Vec<DVec3>,
    tets: Vec<[u32; 4]>,
    nbr: Vec<[u32; 4]>,
    alive: Vec<bool>,
    free: Vec<u32>,
    in_cavity: Vec<u32>,
    rejected: Vec<u32>,
    epoch: u32,
    // Reused per insertion.
    stack: Vec<u32>,
    cavity: Vec<u32>,
    boundary: Vec<BoundaryFace>,
    links: Vec<(u64, u32, u8)>,
}

#[derive(Clone, Copy)]
struct BoundaryFace {
    verts: [u32; 4],
    opposite: u8,
    outer: u32,
    outer_slot: u8,
}

impl Tetrahedralization {
    /// The Delaunay tetrahedralization of the 8 corners of [lo, hi] and `interior`, which
    /// must lie inside the box (on its faces is accepted but gives flat-hull slivers;
    /// callers pad). A point equal to an earlier one is not inserted (it is kept in
    /// `points` but belongs to no tetrahedron).
    pub fn box_delaunay(lo: DVec3, hi: DVec3, interior: &[DVec3]) -> Result<Self, DelaunayError> {
        if !(lo.is_finite() && hi.is_finite()) || (0..3).any(|a| hi[a] <= lo[a]) {
            return Err(DelaunayError::FlatBox { lo, hi });
        }
        let mut points = Vec::with_capacity(8 + interior.len());
        for c in 0..8u32 {
            points.push(DVec3::new(
                if c & 1 != 0 { hi.x } else { lo.x },
                if c & 2 != 0 { hi.y } else { lo.y },
                if c & 4 != 0 { hi.z } else { lo.z },
            ));
        }
        for (k, p) in interior.iter().enumerate() {
            if !p.is_finite() {
                return Err(DelaunayError::NonFinite {
                    index: 8 + k,
                    point: *p,
                });
            }
            if p.cmplt(lo).any() || p.cmpgt(hi).any() {
                return Err(DelaunayError::OutsideBox {
                    index: 8 + k,
                    point: *p,
                    lo,
                    hi,
                });
            }
            points.push(*p);
        }
        let mut b = Builder::new(points);
        // Kuhn triangulation: one tetrahedron per axis order, along the 0-7 diagonal.
        for (a0, a1) in [(1u32, 2u32), (1, 4), (2, 1), (2, 4), (4, 1), (4, 2)] {
            let mut t = [0, a0, a0 | a1, 7];
            b.orient_positive(&mut t);
            b.tets.push(t);
            b.nbr.push([NONE; 4]);
            b.alive.push(true);
        }
        link_all(&b.tets, &mut b.nbr);
        b.grow_marks();

        // Insert in Morton order so each walk starts next to its target.
        let mut order: Vec<u32> = (8..b.points.len() as u32).collect();
        let ext = hi - lo;
        let key = |p: DVec3| morton((p - lo) / ext);
        order.sort_by_cached_key(|&i| key(b.points[i as usize]));
        let mut hint = 0u32;
        for i in order {
            hint = b.insert(i, hint)?;
        }
        Ok(b.finish(lo, hi))
    }

    /// A tetrahedralization given in full (the lattice grid builds its tetrahedra and
    /// neighbours in closed form). The caller guarantees the invariants [`Self::check`]
    /// tests; `point_tet[i]` is a tetrahedron incident to point i.
    pub(super) fn from_parts(
        points: Vec<DVec3>,
        tets: Vec<[u32; 4]>,
        neighbors: Vec<[u32; 4]>,
        point_tet: Vec<u32>,
        lo: DVec3,
        hi: DVec3,
    ) -> Self {
        Self {
            points,
            tets,
            neighbors,
            point_tet,
            lo,
            hi,
        }
    }

    pub fn points(&self) -> &[DVec3] {
        &self.points
    }
    pub fn tets(&self) -> &[[u32; 4]] {
        &self.tets
    }
    pub fn neighbors(&self) -> &[[u32; 4]] {
        &self.neighbors
    }
    /// The box the tetrahedralization covers.
    pub fn bounds(&self) -> (DVec3, DVec3) {
        (self.lo, self.hi)
    }
    /// A tetrahedron incident to point `i` (`NONE` for a duplicate point).
    pub fn point_tet(&self, i: usize) -> u32 {
        self.point_tet[i]
    }
    /// True when p lies in the closed box.
    pub fn box_contains(&self, p: DVec3) -> bool {
        p.cmpge(self.lo).all() && p.cmple(self.hi).all()
    }

    /// The tetrahedron containing `p` (closed) and p's barycentric weights over its
    /// vertices, by a visibility walk from `hint`; `None` when p is outside the box or
    /// not finite. A p on a shared face, edge or vertex gets one of the tetrahedra
    /// around it (weights of the vertices it is not on are 0).
    pub fn locate(&self, p: DVec3, hint: u32) -> Option<(u32, [f64; 4])> {
        if !p.is_finite() || !self.box_contains(p) || self.tets.is_empty() {
            return None;
        }
        let start = if (hint as usize) < self.tets.len() {
            hint
        } else {
            0
        };
        walk(&self.points, &self.tets, &self.neighbors, p, start)
            .or_else(|| self.locate_brute(p))
            .map(|(t, o)| (t, weights(o)))
    }

    /// Linear scan; the walk's fallback (never needed in exact arithmetic on a Delaunay
    /// tetrahedralization, kept so a surprise costs time, not a wrong answer).
    fn locate_brute(&self, p: DVec3) -> Option<(u32, [f64; 4])> {
        for (t, v) in self.tets.iter().enumerate() {
            let o = face_orients(&self.points, v, p);
            if o.iter().all(|&x| x >= 0.0) {
                return Some((t as u32, o));
            }
        }
        None
    }

    /// Checks the structure: positive orientation, symmetric neighbours that share the
    /// face, and the local Delaunay property on every interior face (which implies the
    /// global one). Returns a description of the first violation.
    pub fn check(&self) -> Result<(), String> {
        let p = &self.points;
        for (t, v) in self.tets.iter().enumerate() {
            let [a, b, c, d] = v.map(|i| p[i as usize]);
            if orient(a, b, c, d) <= 0.0 {
                return Err(format!("tet {t} not positively oriented"));
            }
            for k in 0..4 {
                let n = self.neighbors[t][k];
                if n == NONE {
                    continue;
                }
                let back = self.neighbors[n as usize]
                    .iter()
                    .position(|&x| x == t as u32);
                let Some(back) = back else {
                    return Err(format!(
                        "tet {t} face {k}: neighbour {n} does not point back"
                    ));
                };
                let mut f0: Vec<u32> = (0..4).filter(|&j| j != k).map(|j| v[j]).collect();
                let nv = self.tets[n as usize];
                let mut f1: Vec<u32> = (0..4).filter(|&j| j != back).map(|j| nv[j]).collect();
                f0.sort_unstable();
                f1.sort_unstable();
                if f0 != f1 {
                    return Err(format!(
                        "tet {t} face {k}: neighbour {n} shares another face"
                    ));
                }
                let q = p[nv[back] as usize];
                if insphere(c3(a), c3(b), c3(c), c3(d), c3(q)) > 0.0 {
                    return Err(format!("tet {t} face {k}: not locally Delaunay"));
                }
            }
        }
        Ok(())
    }
}

/// Orientations with vertex k replaced by p (k = 0..4): p's unnormalized barycentric
/// coordinates (all >= 0 exactly when p is in the closed tetrahedron).
#[inline]
fn face_orients(points: &[DVec3], v: &[u32; 4], p: DVec3) -> [f64; 4] {
    let [a, b, c, d] = v.map(|i| points[i as usize]);
    [
        orient(p, b, c, d),
        orient(a, p, c, d),
        orient(a, b, p, d),
        orient(a, b, c, p),
    ]
}

/// Barycentric weights from the (non-negative) face orientations.
#[inline]
fn weights(o: [f64; 4]) -> [f64; 4] {
    let s = o[0] + o[1] + o[2] + o[3];
    if s > 0.0 {
        o.map(|x| x / s)
    } else {
        // Unreachable for a positive tetrahedron; keep the result a partition of unity.
        [0.25; 4]
    }
}

/// Visibility walk: step across any face that has p strictly on its far side, starting
/// the face scan at a rotating offset (no cycling on a Delaunay tetrahedralization, and
/// the offset breaks ties). `None` when it leaves the hull or runs too long.
fn walk(
    points: &[DVec3],
    tets: &[[u32; 4]],
    nbr: &[[u32; 4]],
    p: DVec3,
    start: u32,
) -> Option<(u32, [f64; 4])> {
    let mut t = start;
    let limit = 4 * tets.len() + 64;
    for step in 0..limit {
        let v = &tets[t as usize];
        let o = face_orients(points, v, p);
        let r = step & 3;
        let mut next = None;
        for kk in 0..4 {
            let k = (kk + r) & 3;
            if o[k] < 0.0 {
                next = Some(k);
                break;
            }
        }
        match next {
            None => return Some((t, o)),
            Some(k) => {
                let n = nbr[t as usize][k];
                if n == NONE {
                    return None;
                }
                t = n;
            }
        }
    }
    None
}

/// 30-bit Morton code of a point in [0, 1]^3.
fn morton(u: DVec3) -> u32 {
    let q = |x: f64| ((x.clamp(0.0, 1.0) * 1023.0) as u32).min(1023);
    let spread = |mut x: u32| {
        x = (x | (x << 16)) & 0x0300_00FF;
        x = (x | (x << 8)) & 0x0300_F00F;
        x = (x | (x << 4)) & 0x030C_30C3;
        x = (x | (x << 2)) & 0x0924_9249;
        x
    };
    spread(q(u.x)) | (spread(q(u.y)) << 1) | (spread(q(u.z)) << 2)
}

/// Key of the edge {a, b}.
#[inline]
fn edge_key(a: u32, b: u32) -> u64 {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    ((lo as u64) << 32) | hi as u64
}

/// Sets every neighbour link of a small tetrahedron set by matching faces.
fn link_all(tets: &[[u32; 4]], nbr: &mut [[u32; 4]]) {
    let mut faces: Vec<([u32; 3], u32, u8)> = Vec::new();
    for (t, v) in tets.iter().enumerate() {
        for k in 0..4u8 {
            let mut f = [0u32; 3];
            let mut n = 0;
            for (j, &x) in v.iter().enumerate() {
                if j != k as usize {
                    f[n] = x;
                    n += 1;
                }
            }
            f.sort_unstable();
            faces.push((f, t as u32, k));
        }
    }
    faces.sort_unstable();
    for w in faces.windows(2) {
        if w[0].0 == w[1].0 {
            nbr[w[0].1 as usize][w[0].2 as usize] = w[1].1;
            nbr[w[1].1 as usize][w[1].2 as usize] = w[0].1;
        }
    }
}

impl Builder {
    fn new(points: Vec<DVec3>) -> Self {
        let cap = 7 * points.len() + 16;
        Self {
            points,
            tets: Vec::with_capacity(cap),
            nbr: Vec::with_capacity(cap),
            alive: Vec::with_capacity(cap),
            free: Vec::new(),
            in_cavity: Vec::new(),
            rejected: Vec::new(),
            epoch: 0,
            stack: Vec::new(),
            cavity: Vec::new(),
            boundary: Vec::new(),
            links: Vec::new(),
        }
    }

    fn orient_positive(&self, t: &mut [u32; 4]) {
        let [a, b, c, d] = t.map(|i| self.points[i as usize]);
        if orient(a, b, c, d) < 0.0 {
            t.swap(0, 1);
        }
    }

    fn grow_marks(&mut self) {
        let n = self.tets.len();
        self.in_cavity.resize(n, 0);
        self.rejected.resize(n, 0);
    }

    fn in_conflict(&self, t: u32, p: DVec3) -> bool {
        let [a, b, c, d] = self.tets[t as usize].map(|i| self.points[i as usize]);
        insphere(c3(a), c3(b), c3(c), c3(d), c3(p)) > 0.0
    }

    /// Inserts point `pi`; returns a tetrahedron incident to it (the next walk's start).
    fn insert(&mut self, pi: u32, hint: u32) -> Result<u32, DelaunayError> {
        let p = self.points[pi as usize];
        let err = |what| DelaunayError::Inconsistent {
            index: pi as usize,
            what,
        };
        let start = if self.alive.get(hint as usize).copied().unwrap_or(false) {
            hint
        } else {
            self.alive.iter().position(|&a| a).unwrap_or(0) as u32
        };
        let (t0, o) = match walk(&self.points, &self.tets, &self.nbr, p, start) {
            Some(r) => r,
            None => self
                .brute_locate(p)
                .ok_or(err("point not found in the hull"))?,
        };
        if o.iter().filter(|&&x| x == 0.0).count() >= 3 {
            // p coincides with a vertex: nothing to insert.
            return Ok(t0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.in_cavity.iter_mut().for_each(|m| *m = 0);
            self.rejected.iter_mut().for_each(|m| *m = 0);
            self.epoch = 1;
        }
        let epoch = self.epoch;
        // 1. Conflict region by a search from the containing tetrahedron (which is in
        // conflict: p is in the closed tetrahedron and not at a vertex).
        self.cavity.clear();
        self.boundary.clear();
        self.stack.clear();
        self.stack.push(t0);
        self.in_cavity[t0 as usize] = epoch;
        while let Some(t) = self.stack.pop() {
            self.cavity.push(t);
            for k in 0..4 {
                let n = self.nbr[t as usize][k];
                let outer = if n == NONE {
                    true
                } else if self.in_cavity[n as usize] == epoch {
                    false
                } else if self.rejected[n as usize] == epoch {
                    true
                } else if self.in_conflict(n, p) {
                    self.in_cavity[n as usize] = epoch;
                    self.stack.push(n);
                    false
                } else {
                    self.rejected[n as usize] = epoch;
                    true
                };
                if outer {
                    let outer_slot = if n == NONE {
                        0
                    } else {
                        self.nbr[n as usize]
                            .iter()
                            .position(|&x| x == t)
                            .ok_or(err("asymmetric neighbours"))? as u8
                    };
                    self.boundary.push(BoundaryFace {
                        verts: self.tets[t as usize],
                        opposite: k as u8,
                        outer: n,
                        outer_slot,
                    });
                }
            }
        }
        // 2. Free the cavity, cone its boundary to p.
        for &t in &self.cavity {
            self.alive[t as usize] = false;
            self.free.push(t);
        }
        self.links.clear();
        let mut last = NONE;
        for bi in 0..self.boundary.len() {
            let f = self.boundary[bi];
            let mut v = f.verts;
            let k = f.opposite as usize;
            v[k] = pi;
            let [a, b, c, d] = v.map(|i| self.points[i as usize]);
            if orient(a, b, c, d) <= 0.0 {
                return Err(err("a new tetrahedron is flat or inverted"));
            }
            let s = match self.free.pop() {
                Some(s) => {
                    self.tets[s as usize] = v;
                    self.nbr[s as usize] = [NONE; 4];
                    self.alive[s as usize] = true;
                    s
                }
                None => {
                    self.tets.push(v);
                    self.nbr.push([NONE; 4]);
                    self.alive.push(true);
                    (self.tets.len() - 1) as u32
                }
            };
            self.nbr[s as usize][k] = f.outer;
            if f.outer != NONE {
                self.nbr[f.outer as usize][f.outer_slot as usize] = s;
            }
            for j in 0..4 {
                if j != k {
                    // The face opposite j holds p and the two vertices other than j, k.
                    let mut e = [0u32; 2];
                    let mut n = 0;
                    for (l, &x) in v.iter().enumerate() {
                        if l != j && l != k {
                            e[n] = x;
                            n += 1;
                        }
                    }
                    self.links.push((edge_key(e[0], e[1]), s, j as u8));
                }
            }
            last = s;
        }
        self.grow_marks();
        self.links.sort_unstable_by_key(|l| l.0);
        if !self.links.len().is_multiple_of(2) {
            return Err(err("cavity boundary is not closed"));
        }
        for w in self.links.chunks_exact(2) {
            if w[0].0 != w[1].0 {
                return Err(err("cavity boundary is not a closed surface"));
            }
            self.nbr[w[0].1 as usize][w[0].2 as usize] = w[1].1;
            self.nbr[w[1].1 as usize][w[1].2 as usize] = w[0].1;
        }
        Ok(last)
    }

    fn brute_locate(&self, p: DVec3) -> Option<(u32, [f64; 4])> {
        for (t, v) in self.tets.iter().enumerate() {
            if !self.alive[t] {
                continue;
            }
            let o = face_orients(&self.points, v, p);
            if o.iter().all(|&x| x >= 0.0) {
                return Some((t as u32, o));
            }
        }
        None
    }

    /// Drops dead slots and renumbers the neighbours.
    fn finish(self, lo: DVec3, hi: DVec3) -> Tetrahedralization {
        let mut remap = vec![NONE; self.tets.len()];
        let mut tets = Vec::with_capacity(self.tets.len());
        for (t, v) in self.tets.iter().enumerate() {
            if self.alive[t] {
                remap[t] = tets.len() as u32;
                tets.push(*v);
            }
        }
        let mut neighbors = Vec::with_capacity(tets.len());
        for (t, n) in self.nbr.iter().enumerate() {
            if self.alive[t] {
                neighbors.push(n.map(|x| if x == NONE { NONE } else { remap[x as usize] }));
            }
        }
        let mut point_tet = vec![NONE; self.points.len()];
        for (t, v) in tets.iter().enumerate() {
            for &i in v {
                point_tet[i as usize] = t as u32;
            }
        }
        Tetrahedralization {
            points: self.points,
            tets,
            neighbors,
            point_tet,
            lo,
            hi,
        }
    }
}
