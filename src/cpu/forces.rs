//! Forces and their Jacobians (DESIGN section 1). Mirrors `shaders/spring_assemble.wgsl`,
//! `shaders/coulomb_tiled.wgsl` and the external-force part of `shaders/rhs.wgsl`.

use crate::config::Config;
use crate::model::Spring;
use glam::{DMat3, DVec3};

/// Elastic force on particle i: k (l - L) n, n = (x_j - x_i) / l (seed 002).
pub fn spring_elastic_force(xi: DVec3, xj: DVec3, s: &Spring) -> DVec3 {
    let _ = (xi, xj, s);
    todo!("cpu helper")
}

/// Elastic plus damping force on i: k (l - L) n + c ((v_j - v_i) . n) n (seed 003).
pub fn spring_force(xi: DVec3, xj: DVec3, vi: DVec3, vj: DVec3, s: &Spring) -> DVec3 {
    let _ = (xi, xj, vi, vj, s);
    todo!("cpu helper")
}

/// S_k = d f_i / d x_i = -k [n n^T + (1 - L/l)(I - n n^T)] (seed 003), unclamped.
pub fn spring_stiffness_block(xi: DVec3, xj: DVec3, s: &Spring) -> DMat3 {
    let _ = (xi, xj, s);
    todo!("cpu helper")
}

/// d f_i / d v_i = -c n n^T (seed 003).
pub fn spring_damping_block(xi: DVec3, xj: DVec3, s: &Spring) -> DMat3 {
    let _ = (xi, xj, s);
    todo!("cpu helper")
}

/// W_k = h^2 k [n n^T + max(0, 1 - L/l)(I - n n^T)] + h c n n^T: the clamped, symmetric
/// positive semi-definite block of A = M - h D - h^2 K (DESIGN section 2).
pub fn spring_w_block(xi: DVec3, xj: DVec3, s: &Spring, h: f64) -> DMat3 {
    let _ = (xi, xj, s, h);
    todo!("cpu helper")
}

/// All-pairs Coulomb force on every particle (the paper's eq. 8), with softening.
pub fn coulomb_forces(x: &[DVec3], q: &[f64], softening: f64) -> Vec<DVec3> {
    let _ = (x, q, softening);
    todo!("cpu helper")
}

/// External point charges at time `t` and the external field, on every particle.
pub fn external_forces(x: &[DVec3], q: &[f64], config: &Config, t: f64) -> Vec<DVec3> {
    let _ = (x, q, config, t);
    todo!("cpu helper")
}
