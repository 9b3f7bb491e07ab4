//! The f64 physics formulas, each written once with its derivative beside it, for the CPU
//! reference, DDEF and the gradients (the WGSL kernels mirror them line for line).
//! The external field and the orbit are written as methods of their `crate::config` data
//! types (`ExternalField::at`, `ExternalCharge::position_at`), so `config` holds data only;
//! so is the t = 0 check of their forces (`Config::check_external`).

pub mod external_check;
pub mod external_field;
pub mod orbit;
pub mod point_charge;
pub mod spring;
