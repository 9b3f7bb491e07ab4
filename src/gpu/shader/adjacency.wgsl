// The spring adjacency the per-particle kernels walk (laid out by src/gpu/host/adjacency.rs;
// each kernel that includes this file binds it as `adj`).

// Bit 31 of an adjacency entry's second word: the row's particle is the spring's j.
const SIGN_BIT: u32 = 0x80000000u;

// Rows come in slices of C = 2^params.adj_shift (32: SELL-32, 1: CSR). adj[s] is slice
// s's first entry word, adj[S + i] row i's degree (S slices), and entry e of row i (lane
// l in its slice) is its spring at adj[at + 2 C e] and its other endpoint at
// adj[at + 2 C e + C], at = adj[i >> shift] + l: the C rows of a slice read C
// neighbouring words per entry. A kernel walks a row as
//   for (var at = row.at; at < row.end; at = at + row.step) { adj_spring(at) ... }
// (a cursor, not at + step * e: llvmpipe does not strength-reduce a product by a
// uniform, and the sweep lost 9% to it).
struct AdjRow {
    // word of the first entry's spring, one past the last entry's, words between entries
    at: u32,
    end: u32,
    step: u32,
    lanes: u32,
}

fn adj_row(i: u32) -> AdjRow {
    let lanes = 1u << params.adj_shift;
    let slices = (params.n + lanes - 1u) >> params.adj_shift;
    let at = adj[i >> params.adj_shift] + (i & (lanes - 1u));
    let step = 2u * lanes;
    return AdjRow(at, at + adj[slices + i] * step, step, lanes);
}

// The spring of the entry at word `at`.
fn adj_spring(at: u32) -> u32 {
    return adj[at];
}

// The entry's second word: the other endpoint and SIGN_BIT (entry_other, entry_sign).
fn adj_word(row: AdjRow, at: u32) -> u32 {
    return adj[at + row.lanes];
}

fn entry_other(word: u32) -> u32 {
    return word & ~SIGN_BIT;
}

fn entry_sign(word: u32) -> f32 {
    return select(1.0, -1.0, (word & SIGN_BIT) != 0u);
}
