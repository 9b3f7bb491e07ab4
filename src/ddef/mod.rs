//! DDEF, the paper's domain-discretized electric field (Section 3.3, Algorithm 1): a fast
//! approximation of the all-pairs Coulomb field. The f64 CPU reference.
//!
//! 1. Grid: m Halton samples (bases 2, 3, 5) in the charges' padded bounding box plus the
//!    8 box corners, tetrahedralized by Delaunay ([`delaunay`], Bowyer-Watson with exact
//!    predicates). Sites are numbered corners first (0..8), then the samples.
//! 2. Per source s (a charged particle): the containing tetrahedron tau_s, its
//!    barycentric weights, and the nearby sites N_s = vertices of tau_s and of its face
//!    neighbours (at most 8). The inverse lists M_j = {s : j in N_s}.
//! 3. Far field at every site j from the sources not in M_j (paper eq. 17), O(m n).
//! 4. At a target x (a charge or any point): S(x) = union of M_k over k in N(x) is summed
//!    exactly (near field); the far field is interpolated over tau(x).
//!
//! Grids ([`DdefGrid`]): `delaunay` (the paper's, above) or `lattice` ([`lattice`]): a
//! regular lattice of about m + 8 sites over the same box, each cell split into 6 Kuhn
//! tetrahedra, with closed-form location and neighbours and no Delaunay step. Everything
//! after step 1 is the same code on either.
//!
//! Variants ([`DdefVariant`]): `paper` interpolates the grid far field as is. Because
//! S(x) is larger than M_v for a vertex v of tau(x), a source in S(x) \ M_v is counted
//! both exactly and (with weight psi_v) in the interpolation. `corrected` removes exactly
//! that: far(x) = sum_v psi_v [E_far(u_v) - sum_{s in S(x) \ M_v} E_s(u_v)], so every
//! source is counted once, either exactly or interpolated.
//!
//! S(x) depends on tau(x) only, so the near list and the (corrected) far values at the
//! four vertices are built once per occupied tetrahedron and shared by its targets.
//!
//! Data layout for a GPU gather: per source the tetrahedron and 4 weights, CSR lists
//! N_s and M_j, and per occupied tetrahedron a CSR near list of (source, mask) where bit
//! v of the mask says "source not in M of vertex v of tau" (the `corrected` terms); see
//! [`GatherPlan`]. The far field excludes M_j source by source (no add-then-subtract, which
//! would cancel catastrophically in f32 for a source next to a site).

pub mod delaunay;
pub mod error_study;
pub mod field;
pub mod grid;
pub mod halton;
pub mod lattice;
pub mod lattice_adjoint;
pub mod lattice_field;
pub mod lattice_tangent;
mod once;
pub mod plan;
pub mod solver;
pub mod stencil;

pub use crate::config::{DdefConfig, DdefGrid, DdefSamples, DdefVariant};
pub use delaunay::{DelaunayError, Tetrahedralization};
pub use field::{exact_fields_at, Csr, Ddef, Evaluation, GatherPlan, Grid, NearEntry};
pub use halton::{domain_box, halton3, halton_sites};
pub use lattice::Lattice;
pub use lattice_field::{LatticeDdef, NearRange};
pub use plan::{Frame, LatticePlan, Located};
pub use solver::{DdefSolver, Evaluated};

use glam::DVec3;

/// DDEF failures; each names the offending item.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DdefError {
    #[error("DDEF needs at least one charged particle to size its grid")]
    NoCharges,
    #[error("particle {index}: position is not finite")]
    NonFinitePosition { index: usize },
    #[error("DDEF grid box [{lo}, {hi}] has no volume in floating point")]
    DegenerateBox { lo: DVec3, hi: DVec3 },
    #[error("DDEF tetrahedralization: {0}")]
    Delaunay(#[from] DelaunayError),
    #[error("{what} {index} at {position} is outside the DDEF grid box [{lo}, {hi}]")]
    OutsideGrid {
        what: &'static str,
        index: usize,
        position: DVec3,
        lo: DVec3,
        hi: DVec3,
    },
    #[error("{what}: expected {expected} entries, got {got}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("coulomb.samples: {samples} exceeds the limit {limit}")]
    TooManySamples { samples: usize, limit: usize },
}
