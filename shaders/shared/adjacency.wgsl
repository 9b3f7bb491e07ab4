// The CSR spring adjacency the per-particle kernels walk (built by model::Adjacency).

// Bit 31 of an adjacency entry's second word: the row's particle is the spring's j.
const SIGN_BIT: u32 = 0x80000000u;

// Adjacency: adj[0..=n] are row offsets; entry e is adj[n + 1 + 2e] (spring) and
// adj[n + 2 + 2e] (other endpoint, SIGN_BIT set when the row's particle is j).
fn entry_other(word: u32) -> u32 {
    return word & ~SIGN_BIT;
}

fn entry_sign(word: u32) -> f32 {
    return select(1.0, -1.0, (word & SIGN_BIT) != 0u);
}
