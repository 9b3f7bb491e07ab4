//! Tests that malformed Gmsh, TetGen, Medit, PLY, OBJ and STL files are refused naming
//! the problem (wrong header counts, data after the end, self-loop edges, duplicated
//! elements, misleading places), not read with data silently dropped.

use super::gmsh;

const G41: &str = "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n$Nodes\n1 5 1 5\n3 1 0 5\n1\n2\n3\n4\n5\n\
                   0 0 0\n1 0 0\n0 1 0\n0 0 1\n1 1 1\n$EndNodes\n$Elements\n1 2 1 2\n3 1 4 2\n\
                   1 1 2 3 4\n2 2 3 4 5\n$EndElements\n";

#[test]
fn gmsh41_section_counts_must_match_their_blocks() {
    let ok = gmsh::parse(G41.as_bytes()).unwrap();
    assert_eq!((ok.positions.len(), ok.tets.len()), (5, 2));
    for (from, to, says) in [
        (
            "1 5 1 5\n",
            "1 6 1 5\n",
            "$Nodes: the header gives 6 nodes, but its blocks hold 5",
        ),
        (
            "1 5 1 5\n",
            "1 3 1 5\n",
            "$Nodes: the header gives 3 nodes, but its blocks hold 5",
        ),
        (
            "1 2 1 2\n",
            "1 7 1 2\n",
            "$Elements: the header gives 7 elements, but its blocks hold 2",
        ),
        (
            "1 2 1 2\n",
            "1 1 1 2\n",
            "$Elements: the header gives 1 elements, but its blocks hold 2",
        ),
    ] {
        let e = gmsh::parse(G41.replace(from, to).as_bytes()).unwrap_err();
        assert!(e.message.contains(says), "{to}: {e:?}");
        let line = if says.starts_with("$Nodes") { 5 } else { 19 };
        assert_eq!(e.at, Some(super::At::Line(line)), "{e:?}");
    }
}
