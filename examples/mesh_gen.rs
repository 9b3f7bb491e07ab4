//! Writes test meshes: a box of cubes split into tetrahedra (Gmsh MSH 4.1, ASCII or
//! binary), and a square grid of quads (binary little-endian PLY). It made the built-in
//! `beam` scene's `assets/meshes/beam.msh` and makes the large files of the mesh-loading
//! benchmark (BENCHMARKS.md), which are not committed.
//!
//! ```text
//! cargo run --release --example mesh_gen -- tet NX NY NZ CELL OUT.msh [binary]
//! cargo run --release --example mesh_gen -- beam              # assets/meshes/beam.msh
//! cargo run --release --example mesh_gen -- quads N OUT.ply   # N x N vertices
//! cargo run --release --example mesh_gen -- load FILE          # time loading a mesh file
//! ```
//!
//! Each cube (i, j, k) of side CELL is split into the 6 tetrahedra around its diagonal
//! from corner (0,0,0) to (1,1,1) (the Kuhn split), so neighbouring cubes share their face
//! diagonals and the mesh is conforming; every tetrahedron is positively oriented.

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize| -> f64 { args[i].parse().expect("a number") };
    match args.first().map(String::as_str) {
        Some("beam") => tet_box([14, 4, 3], 0.1, "assets/meshes/beam.msh", false),
        Some("tet") if args.len() >= 6 => tet_box(
            [num(1) as u32, num(2) as u32, num(3) as u32],
            num(4),
            &args[5],
            args.get(6).is_some_and(|a| a == "binary"),
        ),
        Some("quads") if args.len() >= 3 => quads(num(1) as u32, &args[2]),
        Some("load") if args.len() >= 2 => load(&args[1]),
        _ => {
            eprintln!(
                "usage: mesh_gen tet NX NY NZ CELL OUT.msh [binary] | beam | quads N OUT.ply"
            );
            std::process::exit(2);
        }
    }
}

/// The 6 Kuhn tetrahedra of a cube, as corner numbers (bit 0: +x, bit 1: +y, bit 2: +z).
fn kuhn() -> Vec<[usize; 4]> {
    // Paths 0 -> 7 that add one axis at a time, in every order.
    let orders = [
        [1, 2, 4],
        [1, 4, 2],
        [2, 1, 4],
        [2, 4, 1],
        [4, 1, 2],
        [4, 2, 1],
    ];
    orders
        .iter()
        .map(|o| {
            let (a, b) = (o[0], o[0] | o[1]);
            let mut t = [0, a, b, 7];
            // Orient positively: corner offsets as vectors.
            let v = |c: usize| [(c & 1) as f64, ((c >> 1) & 1) as f64, ((c >> 2) & 1) as f64];
            let (p0, p1, p2, p3) = (v(t[0]), v(t[1]), v(t[2]), v(t[3]));
            let d = |p: [f64; 3]| [p[0] - p0[0], p[1] - p0[1], p[2] - p0[2]];
            let (e1, e2, e3) = (d(p1), d(p2), d(p3));
            let det = e1[0] * (e2[1] * e3[2] - e2[2] * e3[1])
                - e1[1] * (e2[0] * e3[2] - e2[2] * e3[0])
                + e1[2] * (e2[0] * e3[1] - e2[1] * e3[0]);
            if det < 0.0 {
                t.swap(2, 3);
            }
            t
        })
        .collect()
}

fn tet_box(cells: [u32; 3], cell: f64, out: &str, binary: bool) {
    let [cx, cy, cz] = cells.map(|c| c as usize);
    let (nx, ny, nz) = (cx + 1, cy + 1, cz + 1);
    let node = |i: usize, j: usize, k: usize| (k * ny + j) * nx + i + 1;
    let n = nx * ny * nz;
    let mut tets = Vec::with_capacity(6 * cx * cy * cz);
    let split = kuhn();
    for k in 0..cz {
        for j in 0..cy {
            for i in 0..cx {
                let corner = |c: usize| node(i + (c & 1), j + ((c >> 1) & 1), k + ((c >> 2) & 1));
                for t in &split {
                    tets.push(t.map(corner));
                }
            }
        }
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(out).expect("create the output"));
    let w = |f: &mut std::io::BufWriter<std::fs::File>, s: &str| f.write_all(s.as_bytes()).unwrap();
    w(&mut f, &format!("$MeshFormat\n4.1 {} 8\n", binary as u8));
    if binary {
        f.write_all(&1i32.to_le_bytes()).unwrap();
        w(&mut f, "\n");
    }
    w(&mut f, "$EndMeshFormat\n$Nodes\n");
    let (m, nt) = (tets.len(), tets.len());
    if binary {
        for v in [1u64, n as u64, 1, n as u64] {
            f.write_all(&v.to_le_bytes()).unwrap();
        }
        for v in [3i32, 1, 0] {
            f.write_all(&v.to_le_bytes()).unwrap();
        }
        f.write_all(&(n as u64).to_le_bytes()).unwrap();
        for t in 1..=n as u64 {
            f.write_all(&t.to_le_bytes()).unwrap();
        }
    } else {
        w(&mut f, &format!("1 {n} 1 {n}\n3 1 0 {n}\n"));
        for t in 1..=n {
            w(&mut f, &format!("{t}\n"));
        }
    }
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                let p = [i as f64 * cell, j as f64 * cell, k as f64 * cell];
                if binary {
                    for c in p {
                        f.write_all(&c.to_le_bytes()).unwrap();
                    }
                } else {
                    w(&mut f, &format!("{} {} {}\n", p[0], p[1], p[2]));
                }
            }
        }
    }
    w(&mut f, "$EndNodes\n$Elements\n");
    if binary {
        for v in [1u64, m as u64, 1, m as u64] {
            f.write_all(&v.to_le_bytes()).unwrap();
        }
        for v in [3i32, 1, 4] {
            f.write_all(&v.to_le_bytes()).unwrap();
        }
        f.write_all(&(nt as u64).to_le_bytes()).unwrap();
        for (e, t) in tets.iter().enumerate() {
            f.write_all(&(e as u64 + 1).to_le_bytes()).unwrap();
            for &v in t {
                f.write_all(&(v as u64).to_le_bytes()).unwrap();
            }
        }
        w(&mut f, "\n");
    } else {
        w(&mut f, &format!("1 {m} 1 {m}\n3 1 4 {nt}\n"));
        for (e, t) in tets.iter().enumerate() {
            w(
                &mut f,
                &format!("{} {} {} {} {}\n", e + 1, t[0], t[1], t[2], t[3]),
            );
        }
    }
    w(&mut f, "$EndElements\n");
    eprintln!("{out}: {n} nodes, {m} tetrahedra");
}

fn quads(n: u32, out: &str) {
    let n = n as usize;
    let mut f = std::io::BufWriter::new(std::fs::File::create(out).expect("create the output"));
    let faces = (n - 1) * (n - 1);
    write!(
        f,
        "ply\nformat binary_little_endian 1.0\ncomment mesh_gen quads {n}\nelement vertex {}\n\
         property double x\nproperty double y\nproperty double z\nelement face {faces}\n\
         property list uchar int vertex_indices\nend_header\n",
        n * n
    )
    .unwrap();
    let h = 1.0 / (n - 1) as f64;
    for j in 0..n {
        for i in 0..n {
            for c in [i as f64 * h, j as f64 * h, 0.0] {
                f.write_all(&c.to_le_bytes()).unwrap();
            }
        }
    }
    for j in 0..n - 1 {
        for i in 0..n - 1 {
            f.write_all(&[4]).unwrap();
            for v in [
                j * n + i,
                j * n + i + 1,
                (j + 1) * n + i + 1,
                (j + 1) * n + i,
            ] {
                f.write_all(&(v as i32).to_le_bytes()).unwrap();
            }
        }
    }
    eprintln!("{out}: {} vertices, {faces} quads", n * n);
}

/// Loads a mesh file as `mesh.kind` would (format by extension) and reports its size and
/// the wall time; run under `/usr/bin/time -v` for the peak memory.
fn load(path: &str) {
    let start = std::time::Instant::now();
    let options = msc::model::mesh::FileOptions::default();
    match msc::model::mesh::load_file(std::path::Path::new(path), None, &options) {
        Ok(m) => println!(
            "{path}: {} particles, {} springs, {} triangles in {:.3} s",
            m.positions.len(),
            m.edges.len(),
            m.faces.len(),
            start.elapsed().as_secs_f64()
        ),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}
