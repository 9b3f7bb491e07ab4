//! Tetrahedral meshes to springs: one spring per unique tetrahedron edge, the boundary
//! triangles (faces of exactly one tetrahedron, wound outward) as the faces, degenerate
//! and inverted tetrahedra refused by index.
//!
//! Orientation: tetrahedron (a, b, c, d) is positive when (b - a) . ((c - a) x (d - a)) > 0,
//! the convention of Gmsh's and VTK's reference tetrahedra. A mesh whose tetrahedra are
//! *all* negative was written in the opposite convention and is re-oriented as a whole
//! (springs do not depend on it; only the boundary faces' winding does); a mesh
//! with both orientations has inverted elements, and the first tetrahedron of the smaller
//! group is refused by index.

use super::file::At;
use super::text::{fail, Parsed};
use super::{scaled, try_vec, unique_edges, Mesh};
use crate::model::System;
use glam::DVec3;

/// What a volume file holds: node positions and tetrahedra (node indices, checked by the
/// readers), with the line each tetrahedron was read from in a text file.
#[derive(Debug, Default)]
pub(super) struct Tets {
    pub positions: Vec<DVec3>,
    pub tets: Vec<[u32; 4]>,
    /// Empty for a binary file.
    pub lines: Vec<u32>,
}

/// A tetrahedron whose |6 V| is below this fraction of its longest edge cubed has no
/// volume in f64 (a regular tetrahedron has 0.707).
const DEGENERATE: f64 = 1e-12;

fn signed_volume6(p: &[DVec3], t: [u32; 4]) -> (f64, f64) {
    let [a, b, c, d] = t.map(|i| p[i as usize]);
    let v6 = (b - a).dot((c - a).cross(d - a));
    let lmax = [b - a, c - a, d - a, c - b, d - b, d - c]
        .iter()
        .map(|e| e.length())
        .fold(0.0, f64::max);
    (v6, lmax)
}

pub(super) fn build(t: Tets, scale: f64) -> Parsed<Mesh> {
    let Tets {
        positions,
        mut tets,
        lines,
    } = t;
    if tets.is_empty() {
        return Err(fail(None, "the file has no tetrahedra"));
    }
    let at = |k: usize| At::Element {
        what: "tetrahedron",
        index: k as u64,
        line: lines.get(k).map(|&l| l as usize),
    };
    // Far nodes first: their edge lengths overflow and would read as degenerate.
    for &i in tets.iter().flatten() {
        scaled(positions[i as usize], scale, "node", i as usize)?;
    }
    let mut negative = 0usize;
    let mut first = [None::<usize>; 2];
    for (k, &tet) in tets.iter().enumerate() {
        let (v6, lmax) = signed_volume6(&positions, tet);
        // NaN compares false: a non-finite volume is degenerate too.
        let has_volume = v6.abs() > DEGENERATE * lmax.powi(3);
        if !has_volume || tet_repeats(tet) {
            return Err(fail(
                at(k),
                format!(
                    "degenerate tetrahedron: nodes {tet:?} have zero volume (6 V = {v6:e}, \
                     longest edge {lmax:e})"
                ),
            ));
        }
        let neg = v6 < 0.0;
        negative += neg as usize;
        first[neg as usize].get_or_insert(k);
    }
    let n = tets.len();
    if negative == n {
        // The file's convention is the opposite one: swap two nodes of every tetrahedron.
        for t in &mut tets {
            t.swap(2, 3);
        }
    } else if negative > 0 {
        // The smaller group is the inverted one; at a tie, the negative tetrahedra are.
        let (k, bad) = if negative <= n - negative {
            (first[1].expect("a negative one"), negative)
        } else {
            (first[0].expect("a positive one"), n - negative)
        };
        let (v6, _) = signed_volume6(&positions, tets[k]);
        return Err(fail(
            at(k),
            format!(
                "inverted tetrahedron: nodes {:?} have signed volume {:e}, opposite to most \
                 of the mesh ({bad} of {n} tetrahedra are inverted)",
                tets[k],
                v6 / 6.0
            ),
        ));
    }
    // Nodes no tetrahedron uses are dropped; the others keep their order.
    let mut particle = vec![u32::MAX; positions.len()];
    for &i in tets.iter().flatten() {
        particle[i as usize] = 0;
    }
    let oom = |what: &str| fail(None, format!("out of memory for the {what}"));
    let used = particle.iter().filter(|&&p| p == 0).count();
    if used > System::MAX_PARTICLES {
        return Err(fail(
            None,
            format!(
                "{used} nodes, more than the limit of {}",
                System::MAX_PARTICLES
            ),
        ));
    }
    coincident(&positions, &particle)?;
    let mut out = try_vec("path", "vertices", used).map_err(|_| oom("nodes"))?;
    for (i, p) in positions.iter().enumerate() {
        if particle[i] == 0 {
            particle[i] = out.len() as u32;
            out.push(scaled(*p, scale, "node", i)?);
        }
    }
    for t in &mut tets {
        *t = t.map(|i| particle[i as usize]);
    }
    let mut edges: Vec<[u32; 2]> = try_vec("path", "edges", 6 * n).map_err(|_| oom("edges"))?;
    for &[a, b, c, d] in &tets {
        edges.extend([[a, b], [a, c], [a, d], [b, c], [b, d], [c, d]]);
    }
    let faces = boundary(&tets, &at)?;
    Ok(Mesh {
        positions: out,
        edges: unique_edges(edges),
        faces,
    })
}

/// Two used nodes (`particle[i] == 0`) at one position are refused: no tetrahedron joins
/// them (it would be degenerate), so the solid was silently split along a crack there,
/// and two charges at one point feel an infinite force. Surface files merge such
/// vertices; in a volume mesh they are a defect of the file (Gmsh: `Coherence`).
fn coincident(positions: &[DVec3], particle: &[u32]) -> Parsed<()> {
    // + 0.0 turns -0 into +0, so equal positions share one key.
    let key = |i: u32| {
        positions[i as usize]
            .to_array()
            .map(|c| (c + 0.0).to_bits())
    };
    let mut order: Vec<u32> = try_vec("path", "nodes", positions.len())
        .map_err(|_| fail(None, "out of memory for the nodes"))?;
    order.extend((0..positions.len() as u32).filter(|&i| particle[i as usize] == 0));
    order.sort_unstable_by_key(|&i| (key(i), i));
    let pair = order.windows(2).filter(|w| key(w[0]) == key(w[1]));
    // The pair whose later node comes first in the file.
    let Some([a, b]) = pair.map(|w| [w[0], w[1]]).min_by_key(|w| w[1]) else {
        return Ok(());
    };
    let p = positions[a as usize];
    Err(fail(
        At::Element {
            what: "node",
            index: b as u64,
            line: None,
        },
        format!(
            "nodes {a} and {b} (counting from 0) are both at ({}, {}, {}): no tetrahedron \
             joins them, so the mesh is split there (merge duplicate nodes)",
            p.x, p.y, p.z
        ),
    ))
}

/// Whether a triangle's winding is an odd permutation of its sorted nodes.
fn odd([a, b, c]: [u32; 3]) -> bool {
    // Rotating to put the smallest first keeps the winding; then it is even iff ascending.
    let (x, y) = if a < b && a < c {
        (b, c)
    } else if b < c {
        (c, a)
    } else {
        (a, b)
    };
    x > y
}

fn tet_repeats(t: [u32; 4]) -> bool {
    (0..4).any(|i| (i + 1..4).any(|j| t[i] == t[j]))
}

/// The faces of exactly one (positive) tetrahedron, wound so their normals point out of
/// it. A face shared by three or more tetrahedra is refused: the mesh is not a manifold.
fn boundary(tets: &[[u32; 4]], at: &dyn Fn(usize) -> At) -> Parsed<Vec<[u32; 3]>> {
    // Outward faces of a positive tetrahedron (a, b, c, d).
    let outward = |[a, b, c, d]: [u32; 4]| [[a, c, b], [a, b, d], [a, d, c], [b, c, d]];
    let mut keys: Vec<([u32; 3], u32)> = try_vec("path", "faces", 4 * tets.len())
        .map_err(|_| fail(None, "out of memory for the faces"))?;
    for (k, &t) in tets.iter().enumerate() {
        for (l, mut f) in outward(t).into_iter().enumerate() {
            f.sort_unstable();
            keys.push((f, (k as u32) << 2 | l as u32));
        }
    }
    keys.sort_unstable();
    let mut faces = Vec::new();
    let mut i = 0;
    while i < keys.len() {
        let mut j = i + 1;
        while j < keys.len() && keys[j].0 == keys[i].0 {
            j += 1;
        }
        match j - i {
            1 => {
                let (k, l) = ((keys[i].1 >> 2) as usize, (keys[i].1 & 3) as usize);
                faces.push(outward(tets[k])[l]);
            }
            2 => {
                // An interior face has one tetrahedron on each side, so their outward
                // windings are opposite; the same winding is two tetrahedra on one side.
                let side = |key: u32| odd(outward(tets[(key >> 2) as usize])[(key & 3) as usize]);
                if side(keys[i].1) == side(keys[i + 1].1) {
                    let (k0, k1) = ((keys[i].1 >> 2) as usize, (keys[i + 1].1 >> 2) as usize);
                    let (k0, k1) = (k0.min(k1), k0.max(k1));
                    return Err(fail(
                        at(k1),
                        format!(
                            "tetrahedra {k0} and {k1} (counting from 0) overlap: both lie on \
                             the same side of their shared face with nodes {:?} (a duplicated \
                             or overlapping element)",
                            keys[i].0
                        ),
                    ));
                }
            }
            m => {
                let k = (keys[i + 2].1 >> 2) as usize;
                return Err(fail(
                    at(k),
                    format!(
                        "the face with nodes {:?} is shared by {m} tetrahedra (at most 2 in \
                         a valid mesh): overlapping or duplicated tetrahedra",
                        keys[i].0
                    ),
                ));
            }
        }
        i = j;
    }
    Ok(faces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cube_corner() -> Vec<DVec3> {
        vec![DVec3::ZERO, DVec3::X, DVec3::Y, DVec3::Z, DVec3::ONE]
    }

    #[test]
    fn two_tetrahedra_share_one_face_and_it_is_not_boundary() {
        // (0,1,2,3) positive; (1,2,3,4) with 4 = (1,1,1) on the other side of face 123.
        let t = Tets {
            positions: cube_corner(),
            tets: vec![[0, 1, 2, 3], [1, 2, 3, 4]],
            lines: vec![],
        };
        let m = build(t, 2.0).unwrap();
        assert_eq!(m.positions.len(), 5);
        assert_eq!(m.edges.len(), 9);
        assert_eq!(m.faces.len(), 6);
        // Every boundary normal points away from the centroid of its tetrahedra.
        let c = m.positions.iter().sum::<DVec3>() / 5.0;
        for f in &m.faces {
            let [a, b, d] = f.map(|i| m.positions[i as usize]);
            let n = (b - a).cross(d - a);
            assert!(n.dot((a + b + d) / 3.0 - c) > 0.0, "{f:?}");
        }
    }

    #[test]
    fn duplicated_and_overlapping_tetrahedra_are_refused_naming_both() {
        let mut p = cube_corner();
        p.push(DVec3::splat(0.1)); // inside (0,1,2,3), on its side of face 1 2 3
        for (tets, pair) in [
            (vec![[0, 1, 2, 3], [0, 1, 2, 3]], "tetrahedra 0 and 1"),
            (
                vec![[0, 1, 2, 3], [1, 2, 3, 4], [0, 1, 2, 5]],
                "tetrahedra 0 and 2",
            ),
            // All negative (re-oriented), the last one twice.
            (
                vec![[1, 3, 2, 4], [0, 2, 1, 5], [0, 2, 1, 5]],
                "tetrahedra 1 and 2",
            ),
        ] {
            let lines = (10..10 + tets.len() as u32).collect();
            let e = build(
                Tets {
                    positions: p.clone(),
                    tets: tets.clone(),
                    lines,
                },
                1.0,
            );
            let e = e.expect_err(&format!("{tets:?} was accepted"));
            assert!(e.message.contains(pair), "{tets:?}: {e:?}");
            assert!(e.message.contains("overlap"), "{e:?}");
            let last = pair.rsplit(' ').next().unwrap().parse::<u64>().unwrap();
            assert!(
                matches!(e.at, Some(At::Element { index, .. }) if index == last),
                "{e:?}"
            );
        }
    }

    #[test]
    fn inverted_and_degenerate_tetrahedra_are_named() {
        let p = cube_corner();
        let e = build(
            Tets {
                positions: p.clone(),
                tets: vec![[0, 1, 2, 3], [1, 2, 3, 4], [0, 2, 1, 4]],
                lines: vec![3, 4, 5],
            },
            1.0,
        )
        .unwrap_err();
        assert!(
            matches!(
                e.at,
                Some(At::Element {
                    index: 2,
                    line: Some(5),
                    ..
                })
            ),
            "{e:?}"
        );
        assert!(e.message.contains("inverted"), "{e:?}");
        let flat = build(
            Tets {
                positions: vec![DVec3::ZERO, DVec3::X, DVec3::Y, DVec3::X + DVec3::Y],
                tets: vec![[0, 1, 2, 3]],
                lines: vec![],
            },
            1.0,
        )
        .unwrap_err();
        assert!(flat.message.contains("degenerate"), "{flat:?}");
        // All negative: the opposite convention, re-oriented.
        let m = build(
            Tets {
                positions: p,
                tets: vec![[0, 2, 1, 3]],
                lines: vec![],
            },
            1.0,
        )
        .unwrap();
        assert_eq!((m.positions.len(), m.edges.len(), m.faces.len()), (4, 6, 4));
    }
}
