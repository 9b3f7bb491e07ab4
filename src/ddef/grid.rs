//! The DDEF grid (Algorithm 1 step 1): the tetrahedralized domain (Delaunay or lattice),
//! point location with walk starts, the nearby sites of a tetrahedron, and the CSR rows
//! the later steps store their lists in.

use super::delaunay::{Tetrahedralization, NONE};
use super::halton::{domain_box, halton_sites};
use super::lattice::Lattice;
use super::{DdefConfig, DdefError, DdefGrid};
use glam::DVec3;
use rayon::prelude::*;

/// Points per rayon task when locating; each task walks its points in order.
const CHUNK: usize = 256;

/// Compressed rows: row r is `entries[offsets[r]..offsets[r + 1]]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Csr<T> {
    pub offsets: Vec<u32>,
    pub entries: Vec<T>,
}

impl<T> Csr<T> {
    pub fn rows(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
    pub fn row(&self, r: usize) -> &[T] {
        &self.entries[self.offsets[r] as usize..self.offsets[r + 1] as usize]
    }
    pub(super) fn from_rows(rows: Vec<Vec<T>>) -> Self {
        let mut offsets = Vec::with_capacity(rows.len() + 1);
        offsets.push(0u32);
        let mut entries = Vec::with_capacity(rows.iter().map(Vec::len).sum());
        for r in rows {
            entries.extend(r);
            offsets.push(entries.len() as u32);
        }
        Self { offsets, entries }
    }
}

/// The tetrahedralized domain: sites (8 box corners, then the Halton samples) and their
/// Delaunay tetrahedra, or (the lattice variant) the 8 corners and the other sites of a
/// regular lattice with its Kuhn tetrahedra ([`Lattice`]).
#[derive(Clone, Debug)]
pub struct Grid {
    tri: Tetrahedralization,
    samples: usize,
    /// Walk starts: a uniform lattice of `cells^3` boxes over the domain, each holding a
    /// tetrahedron at a site in (or near) it, so a walk from it takes a few steps.
    /// Empty for the lattice grid, which locates in closed form.
    cells: usize,
    cell_tet: Vec<u32>,
    /// The lattice grid's closed-form location; `None` for the Delaunay grid.
    lattice: Option<Lattice>,
}

impl Grid {
    /// m Halton samples in [lo, hi] plus its corners, tetrahedralized.
    pub fn new(lo: DVec3, hi: DVec3, samples: usize) -> Result<Self, DdefError> {
        let limit = DdefConfig::MAX_SAMPLES as usize;
        if samples > limit {
            return Err(DdefError::TooManySamples { samples, limit });
        }
        let interior = halton_sites(lo, hi, samples);
        let tri = Tetrahedralization::box_delaunay(lo, hi, &interior)?;
        // About 2 sites per cell; the corners' tetrahedra fill cells no sample lands in.
        let cells = ((tri.points().len() as f64 / 2.0).cbrt().floor() as usize).clamp(1, 128);
        let mut grid = Self {
            tri,
            samples,
            cells,
            cell_tet: vec![0; cells * cells * cells],
            lattice: None,
        };
        let mut filled = vec![false; grid.cell_tet.len()];
        for (i, &p) in grid.tri.points().iter().enumerate() {
            let t = grid.tri.point_tet(i);
            let c = grid.cell_of(p);
            if t != NONE && !filled[c] {
                grid.cell_tet[c] = t;
                filled[c] = true;
            }
        }
        // Empty cells borrow the previous filled cell's start (in cell order).
        let mut last = 0;
        for (c, f) in filled.iter().enumerate() {
            if *f {
                last = grid.cell_tet[c];
            } else {
                grid.cell_tet[c] = last;
            }
        }
        Ok(grid)
    }

    /// The lattice grid on [lo, hi]: about `samples` + 8 sites in a regular lattice, no
    /// Delaunay step (see [`Lattice`]).
    pub fn new_lattice(lo: DVec3, hi: DVec3, samples: usize) -> Result<Self, DdefError> {
        let limit = DdefConfig::MAX_SAMPLES as usize;
        if samples > limit {
            return Err(DdefError::TooManySamples { samples, limit });
        }
        let (lattice, tri) = Lattice::build(lo, hi, samples)?;
        Ok(Self {
            tri,
            samples,
            cells: 0,
            cell_tet: Vec::new(),
            lattice: Some(lattice),
        })
    }

    /// The grid of the given kind on [lo, hi].
    pub fn with_kind(
        lo: DVec3,
        hi: DVec3,
        samples: usize,
        kind: DdefGrid,
    ) -> Result<Self, DdefError> {
        match kind {
            DdefGrid::Delaunay => Self::new(lo, hi, samples),
            DdefGrid::Lattice => Self::new_lattice(lo, hi, samples),
        }
    }

    /// Which kind of grid this is.
    pub fn kind(&self) -> DdefGrid {
        if self.lattice.is_some() {
            DdefGrid::Lattice
        } else {
            DdefGrid::Delaunay
        }
    }

    /// The lattice of a lattice grid (sites per axis, coordinates, closed-form location).
    pub fn lattice(&self) -> Option<&Lattice> {
        self.lattice.as_ref()
    }

    fn cell_of(&self, p: DVec3) -> usize {
        let (lo, hi) = self.tri.bounds();
        let r = self.cells;
        let u = (p - lo) / (hi - lo) * r as f64;
        let idx = |x: f64| (x.max(0.0) as usize).min(r - 1);
        (idx(u.z) * r + idx(u.y)) * r + idx(u.x)
    }

    /// A tetrahedron near p: the start of a short walk.
    pub fn start_near(&self, p: DVec3) -> u32 {
        if let Some(l) = &self.lattice {
            return l.locate(p).map_or(0, |(t, _)| t);
        }
        if p.is_finite() {
            self.cell_tet[self.cell_of(p)]
        } else {
            0
        }
    }
    /// A grid on [`domain_box`] of `points` (widened by `margin` of its size per side).
    pub fn around(points: &[DVec3], samples: usize, margin: f64) -> Result<Self, DdefError> {
        Self::around_with(points, samples, margin, DdefGrid::Delaunay)
    }
    /// [`Grid::around`] with the grid kind chosen.
    pub fn around_with(
        points: &[DVec3],
        samples: usize,
        margin: f64,
        kind: DdefGrid,
    ) -> Result<Self, DdefError> {
        let (lo, hi) = domain_box(points, margin)?;
        Self::with_kind(lo, hi, samples, kind)
    }
    /// m as requested (the Delaunay grid has m + 8 sites, the lattice about as many).
    pub fn samples(&self) -> usize {
        self.samples
    }
    /// Grid sites u_j: 8 corners, then the samples (or the other lattice sites).
    pub fn sites(&self) -> &[DVec3] {
        self.tri.points()
    }
    pub fn tetrahedralization(&self) -> &Tetrahedralization {
        &self.tri
    }
    pub fn bounds(&self) -> (DVec3, DVec3) {
        self.tri.bounds()
    }
    pub fn contains(&self, p: DVec3) -> bool {
        self.tri.box_contains(p)
    }
    /// Containing tetrahedron and barycentric weights (see [`Tetrahedralization::locate`]);
    /// on the lattice grid in closed form, `hint` unused ([`Lattice::locate`]).
    pub fn locate(&self, p: DVec3, hint: u32) -> Option<(u32, [f64; 4])> {
        match &self.lattice {
            Some(l) => l.locate(p),
            None => self.tri.locate(p, hint),
        }
    }
    /// N(tau): the vertices of `tet` (in its order) followed by the vertex of each face
    /// neighbour that is not on the shared face. Returns the distinct sites and their count (4..=8).
    pub fn nearby_sites(&self, tet: u32) -> ([u32; 8], usize) {
        let v = self.tri.tets()[tet as usize];
        let mut out = [0u32; 8];
        out[..4].copy_from_slice(&v);
        let mut n = 4;
        for &nb in &self.tri.neighbors()[tet as usize] {
            if nb == NONE {
                continue;
            }
            // The neighbour's vertex off the shared face (two neighbours can share it
            // when an edge of `tet` has degree 3).
            if let Some(&w) = self.tri.tets()[nb as usize].iter().find(|w| !v.contains(w)) {
                if !out[4..n].contains(&w) {
                    out[n] = w;
                    n += 1;
                }
            }
        }
        (out, n)
    }
}

/// A point's tetrahedron and barycentric weights.
pub(super) type Located = (u32, [f64; 4]);

/// Locates every point, in parallel chunks; each walk starts at the point's hint when
/// given, else at the grid's start for its cell. Err(k) names the first point outside.
pub(super) fn locate_all(
    grid: &Grid,
    points: &[DVec3],
    hint: impl Fn(usize) -> u32 + Sync,
) -> Result<Vec<Located>, usize> {
    let chunks: Vec<Result<Vec<Located>, usize>> = points
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(c, chunk)| {
            let mut out = Vec::with_capacity(chunk.len());
            for (k, &p) in chunk.iter().enumerate() {
                let i = c * CHUNK + k;
                let h = hint(i);
                let start = if h != NONE { h } else { grid.start_near(p) };
                out.push(grid.locate(p, start).ok_or(i)?);
            }
            Ok(out)
        })
        .collect();
    let mut out = Vec::with_capacity(points.len());
    for c in chunks {
        out.extend(c?);
    }
    Ok(out)
}
