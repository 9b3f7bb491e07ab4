//! Gmsh `.msh` import: versions 2.2 and 4.1, ASCII and binary. Nodes by tag; 4-node
//! tetrahedra (type 4) are the mesh; points, lines and surface elements (the boundary and
//! physical groups Gmsh writes beside the volume) are skipped; any other volume element
//! is refused with its type and count. Own reader: `mshio` reads 4.1 only.

use super::text::{after_line_end, capped, fail, line_break, Fail, Parsed};
use super::volume::Tets;
use super::At;
use glam::DVec3;
use std::collections::{BTreeMap, HashMap};

/// Nodes of Gmsh element type `t`, and its dimension.
fn element_type(t: i64) -> Option<(usize, u8)> {
    Some(match t {
        15 => (1, 0),
        1 => (2, 1),
        8 => (3, 1),
        26 => (4, 1),
        27 => (5, 1),
        28 => (6, 1),
        2 => (3, 2),
        3 => (4, 2),
        9 => (6, 2),
        10 => (9, 2),
        16 => (8, 2),
        20 => (9, 2),
        21 => (10, 2),
        22 => (12, 2),
        23 => (15, 2),
        24 => (15, 2),
        25 => (21, 2),
        4 => (4, 3),
        5 => (8, 3),
        6 => (6, 3),
        7 => (5, 3),
        11 => (10, 3),
        12 => (27, 3),
        13 => (18, 3),
        14 => (14, 3),
        17 => (20, 3),
        18 => (15, 3),
        19 => (13, 3),
        29 => (20, 3),
        30 => (35, 3),
        31 => (56, 3),
        92 => (64, 3),
        93 => (125, 3),
        _ => return None,
    })
}

fn type_name(t: i64) -> String {
    let name = match t {
        4 => "4-node tetrahedra",
        11 => "10-node tetrahedra",
        5 => "8-node hexahedra",
        6 => "6-node prisms",
        7 => "5-node pyramids",
        _ => "",
    };
    match element_type(t) {
        _ if !name.is_empty() => format!("{name} (Gmsh type {t})"),
        Some((n, _)) => format!("volume elements of Gmsh type {t} ({n} nodes)"),
        None => format!("elements of Gmsh type {t}"),
    }
}

/// A cursor over a file that mixes ASCII lines and binary blocks.
struct Src<'a> {
    b: &'a [u8],
    pos: usize,
    binary: bool,
    big: bool,
    /// Bytes of a size_t (4.1 binary).
    size_t: usize,
    /// The line of `pos` in the ASCII parts, counted as tokens are read.
    line_no: usize,
}

impl<'a> Src<'a> {
    fn at(&self) -> At {
        if self.binary {
            At::Byte(self.pos as u64)
        } else {
            At::Line(self.line_no)
        }
    }
    fn word(&mut self, what: &str) -> Parsed<&'a str> {
        while self
            .b
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_whitespace())
        {
            // LF, CRLF or a lone CR ends a line, as in the other text formats.
            self.line_no += line_break(self.b, self.pos) as usize;
            self.pos += 1;
        }
        let s = self.pos;
        while self
            .b
            .get(self.pos)
            .is_some_and(|c| !c.is_ascii_whitespace())
        {
            self.pos += 1;
        }
        if s == self.pos {
            return Err(fail(
                self.at(),
                format!("the file ends where {what} was expected (truncated file or wrong count)"),
            ));
        }
        Ok(std::str::from_utf8(&self.b[s..self.pos]).unwrap_or("\u{FFFD}"))
    }
    fn ascii_int(&mut self, what: &str) -> Parsed<i64> {
        let w = self.word(what)?;
        w.parse()
            .map_err(|_| fail(self.at(), format!("{what}: `{w}` is not an integer")))
    }
    fn ascii_f64(&mut self, what: &str) -> Parsed<f64> {
        let w = self.word(what)?;
        w.parse()
            .map_err(|_| fail(self.at(), format!("{what}: `{w}` is not a number")))
    }
    fn take(&mut self, n: usize, what: &str) -> Parsed<&'a [u8]> {
        match self.pos.checked_add(n).filter(|&e| e <= self.b.len()) {
            Some(e) => {
                let s = &self.b[self.pos..e];
                self.pos = e;
                Ok(s)
            }
            None => Err(fail(
                self.at(),
                format!("the file ends inside {what} (truncated file or wrong count)"),
            )),
        }
    }
    fn bin_int(&mut self, size: usize, what: &str) -> Parsed<i64> {
        let s = self.take(size, what)?;
        let mut a = [0u8; 8];
        if self.big {
            a[8 - size..].copy_from_slice(s);
            a.reverse();
        } else {
            a[..size].copy_from_slice(s);
        }
        let v = u64::from_le_bytes(a);
        // Sign-extend 4-byte ints.
        Ok(if size == 4 {
            v as u32 as i32 as i64
        } else {
            v as i64
        })
    }
    /// An int (4 bytes) in binary, a token in ASCII.
    fn int(&mut self, what: &str) -> Parsed<i64> {
        if self.binary {
            self.bin_int(4, what)
        } else {
            self.ascii_int(what)
        }
    }
    /// A size_t in 4.1 binary, a token in ASCII.
    fn size(&mut self, what: &str) -> Parsed<i64> {
        if self.binary {
            self.bin_int(self.size_t, what)
        } else {
            self.ascii_int(what)
        }
    }
    fn f64(&mut self, what: &str) -> Parsed<f64> {
        if !self.binary {
            return self.ascii_f64(what);
        }
        let s = self.take(8, what)?;
        let a = s.try_into().expect("8 bytes");
        Ok(if self.big {
            f64::from_be_bytes(a)
        } else {
            f64::from_le_bytes(a)
        })
    }
    fn count(&mut self, v: i64, what: &str, min_bytes: u64) -> Parsed<usize> {
        if v < 0 {
            return Err(fail(self.at(), format!("{what}: negative count {v}")));
        }
        let left = self.b.len() - self.pos;
        capped(self.at(), what, v as u64, min_bytes, left)
    }
    /// Skips to the line after `$End<name>`.
    fn skip_section(&mut self, name: &str) -> Parsed<()> {
        let end = format!("$End{name}");
        match self.b[self.pos..]
            .windows(end.len())
            .position(|w| w == end.as_bytes())
        {
            Some(k) => {
                let skipped = self.pos..self.pos + k;
                self.line_no += skipped.filter(|&i| line_break(self.b, i)).count();
                self.pos += k + end.len();
                Ok(())
            }
            None => Err(fail(self.at(), format!("no {end} (truncated file)"))),
        }
    }
    /// Past the line break after `what`, where binary data starts: LF, CRLF (Gmsh reads
    /// such lines whole; one byte was skipped, so a CRLF shifted every value) or a lone CR.
    fn end_line(&mut self, what: &str) -> Parsed<()> {
        let next = after_line_end(self.b, self.pos);
        if next == self.pos {
            return Err(fail(
                self.at(),
                format!("{what} must end its line: binary data starts on the next line"),
            ));
        }
        self.pos = next;
        self.line_no += 1;
        Ok(())
    }
    fn expect(&mut self, word: &str) -> Parsed<()> {
        let w = self.word(word)?;
        if w == word {
            Ok(())
        } else {
            Err(fail(
                self.at(),
                format!("expected {word}, found `{w}` (wrong count?)"),
            ))
        }
    }
}

#[derive(Default)]
struct Out {
    tags: Vec<(i64, DVec3)>,
    /// Tetrahedra by node tag, with their line.
    tets: Vec<([i64; 4], u32)>,
    /// Other volume elements: type -> count.
    refused: BTreeMap<i64, u64>,
}

pub(super) fn parse(bytes: &[u8]) -> Parsed<Tets> {
    let mut s = Src {
        b: bytes,
        pos: 0,
        binary: false,
        big: false,
        size_t: 8,
        line_no: 1,
    };
    s.expect("$MeshFormat")?;
    let version = s.word("the version")?;
    let v4 = match version {
        "4.1" => true,
        v if v.starts_with("2.") => false,
        v => {
            return Err(fail(
                s.at(),
                format!("MSH version {v}: versions 2.2 and 4.1 are read (save as 4.1 in Gmsh)"),
            ))
        }
    };
    let file_type = s.ascii_int("the file type")?;
    let data_size = s.ascii_int("the data size")?;
    if data_size != 8 && !(v4 && data_size == 4) {
        return Err(fail(
            s.at(),
            format!("data size {data_size}: only 8-byte doubles are read"),
        ));
    }
    s.size_t = data_size as usize;
    if file_type == 1 {
        // One int 1 after the line break tells the byte order.
        s.end_line("the data size")?;
        let one = s.take(4, "the byte-order mark")?;
        s.big = match one {
            [1, 0, 0, 0] => false,
            [0, 0, 0, 1] => true,
            _ => return Err(fail(s.at(), "the binary byte-order mark is not the int 1")),
        };
        s.binary = true;
    } else if file_type != 0 {
        return Err(fail(
            s.at(),
            format!("file type {file_type}: 0 (ASCII) or 1 (binary)"),
        ));
    }
    let binary = s.binary;
    s.binary = false;
    s.expect("$EndMeshFormat")?;
    let mut out = Out::default();
    while let Ok(w) = s.word("a section") {
        let Some(name) = w.strip_prefix('$') else {
            return Err(fail(
                s.at(),
                format!("expected a section such as $Nodes, found `{w}`"),
            ));
        };
        match name {
            "Nodes" => {
                let tally = if v4 {
                    Some(nodes4(&mut s, binary, &mut out)?)
                } else {
                    nodes2(&mut s, binary, &mut out)?;
                    None
                };
                s.binary = false;
                s.expect("$EndNodes")?;
                // After the end marker, which names rows left after the last block first.
                tally.map_or(Ok(()), Tally::check)?;
            }
            "Elements" => {
                let tally = if v4 {
                    Some(elements4(&mut s, binary, &mut out)?)
                } else {
                    elements2(&mut s, binary, &mut out)?;
                    None
                };
                s.binary = false;
                s.expect("$EndElements")?;
                // After the end marker, which names rows left after the last block first.
                tally.map_or(Ok(()), Tally::check)?;
            }
            other => s.skip_section(other)?,
        }
    }
    finish(out)
}

fn nodes2(s: &mut Src, binary: bool, out: &mut Out) -> Parsed<()> {
    let n = s.ascii_int("the node count")?;
    let n = s.count(n, "nodes", if binary { 28 } else { 8 })?;
    if binary {
        s.end_line("the node count")?;
    }
    s.binary = binary;
    out.tags.reserve(n);
    for _ in 0..n {
        let tag = s.int("a node tag")?;
        let p = DVec3::new(s.f64("x")?, s.f64("y")?, s.f64("z")?);
        super::text::finite(p, s.at(), &format!("node {tag}"))?;
        out.tags.push((tag, p));
    }
    Ok(())
}

fn elements2(s: &mut Src, binary: bool, out: &mut Out) -> Parsed<()> {
    let m = s.ascii_int("the element count")?;
    let m = s.count(m, "elements", if binary { 12 } else { 6 })?;
    if binary {
        s.end_line("the element count")?;
    }
    s.binary = binary;
    let mut done = 0;
    while done < m {
        // Binary: blocks of one type; ASCII: one element per line.
        let (ty, in_block, ntags) = if binary {
            let ty = s.int("an element type")?;
            let k = s.int("an element count")?;
            let nt = s.int("a tag count")?;
            let k = s.count(k, "elements", 4)?;
            // A block past the header's count was read whole (the count silently wrong);
            // an empty one counted as one element.
            if k == 0 || k > m - done {
                return Err(fail(
                    s.at(),
                    format!(
                        "a block of {k} elements, but the header's count of {m} leaves {} \
                         (wrong count)",
                        m - done
                    ),
                ));
            }
            (ty, k, nt)
        } else {
            s.ascii_int("an element number")?;
            let ty = s.ascii_int("an element type")?;
            (ty, 1, s.ascii_int("a tag count")?)
        };
        let line = s.line_no as u32;
        let Some((nodes, dim)) = element_type(ty) else {
            return Err(fail(s.at(), format!("unknown element type {ty}")));
        };
        if !(0..=1000).contains(&ntags) {
            return Err(fail(s.at(), format!("bad tag count {ntags}")));
        }
        for _ in 0..in_block {
            if binary {
                s.int("an element number")?;
            }
            for _ in 0..ntags {
                s.int("an element tag")?;
            }
            let mut t = [0i64; 4];
            for k in 0..nodes {
                let v = s.int("a node tag")?;
                if let Some(slot) = t.get_mut(k) {
                    *slot = v;
                }
            }
            add(out, ty, dim, t, line);
        }
        done += in_block;
    }
    Ok(())
}

fn nodes4(s: &mut Src, binary: bool, out: &mut Out) -> Parsed<Tally> {
    if binary {
        s.end_line("$Nodes")?;
    }
    s.binary = binary;
    let blocks = s.size("the entity-block count")?;
    let n = s.size("the node count")?;
    s.size("the smallest node tag")?;
    s.size("the largest node tag")?;
    let head = s.at();
    let blocks = s.count(blocks, "node blocks", 8)?;
    // The fewest bytes a node takes: a tag and 3 doubles, or `1\n0 0 0\n` in ASCII.
    let node_bytes = if binary { 28 } else { 8 };
    let n = s.count(n, "nodes", node_bytes)?;
    out.tags.reserve(n);
    let start = out.tags.len();
    for _ in 0..blocks {
        s.int("an entity dimension")?;
        s.int("an entity tag")?;
        let parametric = s.int("the parametric flag")?;
        let k = s.size("the block's node count")?;
        let k = s.count(k, "nodes", node_bytes)?;
        let first = out.tags.len();
        for _ in 0..k {
            let tag = s.size("a node tag")?;
            out.tags.push((tag, DVec3::ZERO));
        }
        for j in 0..k {
            let p = DVec3::new(s.f64("x")?, s.f64("y")?, s.f64("z")?);
            let tag = out.tags[first + j].0;
            super::text::finite(p, s.at(), &format!("node {tag}"))?;
            out.tags[first + j].1 = p;
            if parametric != 0 {
                return Err(fail(
                    s.at(),
                    "parametric node coordinates are not read (save without them)",
                ));
            }
        }
    }
    Ok(Tally {
        head,
        section: "$Nodes",
        what: "nodes",
        header: n,
        held: out.tags.len() - start,
    })
}

/// A 4.1 section's header count (read at `head`) of `what`, and what its blocks held.
struct Tally {
    head: At,
    section: &'static str,
    what: &'static str,
    header: usize,
    held: usize,
}

impl Tally {
    /// The blocks must hold the count the header gives.
    fn check(self) -> Parsed<()> {
        let Self {
            head,
            section,
            what,
            header,
            held,
        } = self;
        if header == held {
            return Ok(());
        }
        Err(fail(
            head,
            format!(
                "{section}: the header gives {header} {what}, but its blocks hold {held} \
                 (wrong count)"
            ),
        ))
    }
}

fn elements4(s: &mut Src, binary: bool, out: &mut Out) -> Parsed<Tally> {
    if binary {
        s.end_line("$Elements")?;
    }
    s.binary = binary;
    let blocks = s.size("the entity-block count")?;
    let n = s.size("the element count")?;
    s.size("the smallest element tag")?;
    s.size("the largest element tag")?;
    let head = s.at();
    // A block header: 3 ints and a size_t, or `0 1 15 0\n` in ASCII.
    let blocks = s.count(blocks, "element blocks", if binary { 16 } else { 8 })?;
    let n = s.count(n, "elements", 2)?;
    let mut held = 0;
    for _ in 0..blocks {
        s.int("an entity dimension")?;
        s.int("an entity tag")?;
        let ty = s.int("an element type")?;
        let k = s.size("the block's element count")?;
        let Some((nodes, dim)) = element_type(ty) else {
            return Err(fail(s.at(), format!("unknown element type {ty}")));
        };
        let k = s.count(k, "elements", 2 * (nodes as u64 + 1))?;
        held += k;
        for _ in 0..k {
            s.size("an element tag")?;
            let line = s.line_no as u32;
            let mut t = [0i64; 4];
            for j in 0..nodes {
                let v = s.size("a node tag")?;
                if let Some(slot) = t.get_mut(j) {
                    *slot = v;
                }
            }
            add(out, ty, dim, t, if binary { 0 } else { line });
        }
    }
    Ok(Tally {
        head,
        section: "$Elements",
        what: "elements",
        header: n,
        held,
    })
}

fn add(out: &mut Out, ty: i64, dim: u8, t: [i64; 4], line: u32) {
    if ty == 4 {
        out.tets.push((t, line));
    } else if dim == 3 {
        *out.refused.entry(ty).or_default() += 1;
    }
}

fn finish(out: Out) -> Parsed<Tets> {
    if !out.refused.is_empty() {
        let all: Vec<String> = (out.refused.iter())
            .map(|(t, n)| format!("{n} {}", type_name(*t)))
            .collect();
        return Err(fail(
            None,
            format!(
                "the mesh has {} besides {} tetrahedra: only 4-node tetrahedra are read \
                 (re-mesh with tetrahedra only, e.g. linear elements in Gmsh)",
                all.join(", "),
                out.tets.len()
            ),
        ));
    }
    // Node tags to indices.
    let n = out.tags.len();
    let mut index: HashMap<i64, u32> = HashMap::with_capacity(n);
    for (k, (tag, _)) in out.tags.iter().enumerate() {
        if index.insert(*tag, k as u32).is_some() {
            return Err(fail(
                At::Element {
                    what: "node",
                    index: k as u64,
                    line: None,
                },
                format!("node tag {tag} appears twice"),
            ));
        }
    }
    let mut tets = Vec::with_capacity(out.tets.len());
    let mut lines = Vec::new();
    for (k, (t, line)) in out.tets.iter().enumerate() {
        let mut tet = [0u32; 4];
        for (slot, tag) in tet.iter_mut().zip(t) {
            *slot = *index.get(tag).ok_or_else(|| -> Fail {
                fail(
                    At::Element {
                        what: "tetrahedron",
                        index: k as u64,
                        line: (*line > 0).then_some(*line as usize),
                    },
                    format!("node tag {tag} is not in $Nodes"),
                )
            })?;
        }
        tets.push(tet);
        if *line > 0 {
            lines.push(*line);
        }
    }
    Ok(Tets {
        positions: out.tags.into_iter().map(|(_, p)| p).collect(),
        tets,
        lines,
    })
}
