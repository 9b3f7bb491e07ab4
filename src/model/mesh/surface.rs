//! Surface meshes to springs: the polygons and polylines a surface file holds (OBJ, PLY,
//! STL) become particles, springs and triangles under the [`Polygons`] policy, with
//! coincident vertices merged and unused ones dropped.

use super::text::{fail, Parsed};
use super::{scaled, try_vec, unique_edges, At, Mesh};
use crate::model::System;
use glam::DVec3;
use std::collections::HashMap;

/// Which springs a polygon of n >= 4 vertices gets (`mesh.polygons`). Triangles always get
/// their three edges; every polygon is drawn and written as a fan of triangles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Polygons {
    /// The edges of a fan from the polygon's first vertex: one diagonal per quad, in the
    /// direction the file's vertex order happens to give (shear stiffer one way).
    Triangulate,
    /// The polygon's own edges only: a quad has no shear spring.
    Edges,
    /// The default: a quad gets both its diagonals, a polygon of 5 or more vertices every
    /// diagonal, so the springs are invariant under the polygon's symmetries and a quad
    /// cloth shears the same both ways.
    #[default]
    BothDiagonals,
}

impl Polygons {
    pub const NAMES: [&'static str; 3] = ["triangulate", "edges", "both_diagonals"];
}

/// The most diagonals one polygon gets under [`Polygons::BothDiagonals`] (a polygon of
/// about 1450 vertices): they grow as n^2 / 2, so a 2 MB file holding one polygon of 40000
/// vertices asked for 8e8 springs and aborted the process allocating them.
pub const MAX_POLYGON_DIAGONALS: u64 = 1 << 20;

/// The most springs a surface file's faces and lines may give before duplicates merge
/// (2 GiB of indices): far beyond what a GPU's spring buffers hold.
pub const MAX_FILE_SPRINGS: u64 = 1 << 28;

/// How coincident vertices are found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Merge {
    /// Equal f64 coordinates (-0 equals 0).
    Exact,
    /// Within this distance in every coordinate (max-norm).
    Within(f64),
}

/// What a surface file holds, before merging: vertex positions, polygons (the vertex
/// indices of polygon k are `corners[starts[k]..starts[k + 1]]`) and two-vertex segments
/// from polylines and edge records. Indices are checked by the readers.
#[derive(Debug, Default)]
pub(super) struct Soup {
    pub positions: Vec<DVec3>,
    pub corners: Vec<u32>,
    pub starts: Vec<usize>,
    pub segments: Vec<[u32; 2]>,
}

impl Soup {
    pub fn new() -> Self {
        Self {
            starts: vec![0],
            ..Self::default()
        }
    }
    /// Ends the polygon whose corners were just pushed.
    pub fn close_polygon(&mut self) {
        self.starts.push(self.corners.len());
    }
}

/// The particles, springs and triangles of `soup`, positions multiplied by `scale`.
pub(super) fn build(soup: Soup, policy: Polygons, merge: Merge, scale: f64) -> Parsed<Mesh> {
    let Soup {
        positions,
        corners,
        starts,
        segments,
    } = soup;
    // Which file vertices are used, then one particle per used vertex, coincident ones
    // sharing the first one's particle (two charges at one point feel an infinite force).
    let mut used = vec![false; positions.len()];
    for &c in corners.iter().chain(segments.iter().flatten()) {
        used[c as usize] = true;
    }
    let oom = |what: &str| fail(None, format!("out of memory for the {what}"));
    let n_used = used.iter().filter(|&&u| u).count();
    let mut particle = vec![u32::MAX; positions.len()];
    let mut out: Vec<DVec3> = try_vec("path", "vertices", n_used).map_err(|_| oom("vertices"))?;
    let mut merger = Merger::new(merge);
    for (v, p) in positions.iter().enumerate() {
        if !used[v] {
            continue;
        }
        let p = scaled(*p, scale, "vertex", v)?;
        particle[v] = merger.find_or_add(p, &mut out);
        if out.len() > System::MAX_PARTICLES {
            return Err(fail(
                None,
                format!("more than the limit of {} vertices", System::MAX_PARTICLES),
            ));
        }
    }
    if out.is_empty() {
        return Err(fail(
            None,
            "the file has no vertices used by a face or line",
        ));
    }
    // Many polygons over the same vertices repeat springs that are merged only at the
    // end: their count is bounded before any is pushed.
    let total = (0..starts.len() - 1)
        .map(|k| springs_of(starts[k + 1] - starts[k], policy))
        .fold(segments.len() as u64, u64::saturating_add);
    if total > MAX_FILE_SPRINGS {
        return Err(fail(
            None,
            format!(
                "the faces and lines give {total} springs before merging, more than the limit \
                 of {MAX_FILE_SPRINGS} (mesh.polygons = \"triangulate\" or \"edges\" gives \
                 large polygons fewer)"
            ),
        ));
    }
    let mut edges: Vec<[u32; 2]> =
        try_vec("path", "springs", total as usize).map_err(|_| oom("springs"))?;
    let mut faces = Vec::new();
    edges.extend(segments.iter().map(|s| s.map(|v| particle[v as usize])));
    let mut poly: Vec<u32> = Vec::new();
    for k in 0..starts.len() - 1 {
        poly.clear();
        poly.extend(
            corners[starts[k]..starts[k + 1]]
                .iter()
                .map(|&v| particle[v as usize]),
        );
        let n = poly.len() as u64;
        let diagonals = n * n.saturating_sub(3) / 2;
        if policy == Polygons::BothDiagonals && diagonals > MAX_POLYGON_DIAGONALS {
            return Err(fail(
                At::Element {
                    what: "face",
                    index: k as u64,
                    line: None,
                },
                format!(
                    "a polygon of {n} vertices has {diagonals} diagonals under mesh.polygons = \
                     \"both_diagonals\", more than the limit of {MAX_POLYGON_DIAGONALS}: use \
                     \"triangulate\" or \"edges\""
                ),
            ));
        }
        polygon_edges(&poly, policy, &mut edges);
        for i in 2..poly.len() {
            let f = [poly[0], poly[i - 1], poly[i]];
            // A triangle degenerate after merging has no area: its edges stay, not the face.
            if f[0] != f[1] && f[1] != f[2] && f[2] != f[0] {
                faces.push(f);
            }
        }
    }
    let edges = unique_edges(edges);
    // A polygon or line whose vertices all merge into one point has no springs: its
    // particle was kept, free, though no spring or face used it.
    let mut sprung = vec![false; out.len()];
    for &i in edges.iter().flatten() {
        sprung[i as usize] = true;
    }
    if let Some(v) = (0..positions.len()).find(|&v| used[v] && !sprung[particle[v] as usize]) {
        let p = positions[v];
        let point = format!("({}, {}, {})", p.x, p.y, p.z);
        // The first face that has it (a triangle of an STL), else the vertex of a line.
        let (what, index, message) = match (0..starts.len() - 1)
            .find(|&k| corners[starts[k]..starts[k + 1]].contains(&(v as u32)))
        {
            Some(k) => (
                "face",
                k,
                format!("the face's vertices all merge into one point {point}"),
            ),
            None => (
                "vertex",
                v,
                format!("every line from this vertex at {point} ends at that same point"),
            ),
        };
        return Err(fail(
            At::Element {
                what,
                index: index as u64,
                line: None,
            },
            format!(
                "{message}, used by no other face or line: it has no springs, and the point \
                 would be a free particle"
            ),
        ));
    }
    Ok(Mesh {
        positions: out,
        edges,
        faces,
    })
}

/// How many springs [`polygon_edges`] pushes for a polygon of `n` vertices.
fn springs_of(n: usize, policy: Polygons) -> u64 {
    let n = n as u64;
    match n {
        0 | 1 => 0,
        2 | 3 => n,
        _ => match policy {
            Policy::Edges => n,
            Policy::Triangulate => n + n - 3,
            Policy::BothDiagonals => n + n * (n - 3) / 2,
        },
    }
}

/// The springs of one polygon (its vertex indices, in order) under `policy`.
pub(super) fn polygon_edges(poly: &[u32], policy: Polygons, edges: &mut Vec<[u32; 2]>) {
    let n = poly.len();
    if n < 2 {
        return;
    }
    for i in 0..n {
        edges.push([poly[i], poly[(i + 1) % n]]);
    }
    if n < 4 {
        return;
    }
    match policy {
        Policy::Edges => {}
        Policy::Triangulate => edges.extend((2..n - 1).map(|i| [poly[0], poly[i]])),
        Policy::BothDiagonals => {
            for i in 0..n {
                // Every non-adjacent pair once.
                for j in i + 2..n {
                    if !(i == 0 && j == n - 1) {
                        edges.push([poly[i], poly[j]]);
                    }
                }
            }
        }
    }
}

use Polygons as Policy;

/// Finds the particle a position merges into, or adds a new one.
struct Merger {
    merge: Merge,
    exact: HashMap<[u64; 3], u32>,
    cells: HashMap<[i64; 3], Vec<u32>>,
}

impl Merger {
    fn new(merge: Merge) -> Self {
        Self {
            merge,
            exact: HashMap::new(),
            cells: HashMap::new(),
        }
    }

    fn find_or_add(&mut self, p: DVec3, out: &mut Vec<DVec3>) -> u32 {
        let next = out.len() as u32;
        match self.merge {
            Merge::Exact => {
                // + 0.0 turns -0 into +0, so equal positions share one key.
                let key = [p.x, p.y, p.z].map(|c| (c + 0.0).to_bits());
                *self.exact.entry(key).or_insert_with(|| {
                    out.push(p);
                    next
                })
            }
            Merge::Within(tol) => {
                // Cells of side tol: a match lies in this cell or one of its 26 neighbours.
                let cell = (p / tol).floor().as_i64vec3().to_array();
                let mut best: Option<(f64, u32)> = None;
                for dx in -1..=1 {
                    for dy in -1..=1 {
                        for dz in -1..=1 {
                            let c = [cell[0] + dx, cell[1] + dy, cell[2] + dz];
                            for &q in self.cells.get(&c).into_iter().flatten() {
                                let d = (out[q as usize] - p).abs().max_element();
                                if d <= tol && best.is_none_or(|(bd, _)| d < bd) {
                                    best = Some((d, q));
                                }
                            }
                        }
                    }
                }
                if let Some((_, q)) = best {
                    return q;
                }
                out.push(p);
                self.cells.entry(cell).or_default().push(next);
                next
            }
        }
    }
}

/// A vertex a polygon names twice (the first in sorted order), if any; `scratch` is
/// reused between polygons.
pub(super) fn repeated(poly: &[u32], scratch: &mut Vec<u32>) -> Option<u32> {
    scratch.clear();
    scratch.extend_from_slice(poly);
    scratch.sort_unstable();
    scratch.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
}

/// A vertex index read from a file, checked against the vertex count.
pub(super) fn vertex_index(at: At, what: &str, index: i64, vertices: usize) -> Parsed<u32> {
    if index >= 0 && (index as u64) < vertices as u64 {
        Ok(index as u32)
    } else {
        Err(fail(
            at,
            format!(
                "{what}: vertex index {index} is out of range (the file has {vertices} vertices)"
            ),
        ))
    }
}
