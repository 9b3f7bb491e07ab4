//! The f64 physics formulas, each written once with its derivative beside it, for the CPU
//! reference, DDEF and the gradients (the WGSL kernels mirror them line for line).
//! Moved here so far: the spring's transverse factor and the point-charge field; the
//! external fields and orbits still live in `config` and `grad::jvp`.

pub mod point_charge;
pub mod spring;
