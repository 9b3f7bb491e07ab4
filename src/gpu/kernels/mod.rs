//! The kernels, by family: each family's Rust file declares its kernels (their WGSL in
//! the folder of the same name: `springs.rs` beside `springs/spring_assemble.wgsl`), their
//! mode enums, and the typed launchers that record them into a
//! `host::recorder::Recorder`. The kernel table ([`all`]) is gathered from the families'
//! lists, so a new kernel is added in its family's file only.

pub mod adjoint;
pub mod adjoint_kicks;
pub mod adjoint_lg;
pub mod coulomb;
pub mod ddef;
pub mod ddef_adjoint;
pub mod ddef_tangent;
pub mod field;
pub mod reductions;
pub mod solvers;
pub mod springs;
pub mod steps;
pub mod tangents;

use crate::gpu::shader::Kernel;

/// Every family's kernels.
const FAMILIES: &[&[Kernel]] = &[
    springs::KERNELS,
    field::KERNELS,
    coulomb::KERNELS,
    steps::KERNELS,
    solvers::KERNELS,
    reductions::KERNELS,
    tangents::KERNELS,
    adjoint::KERNELS,
    adjoint_kicks::KERNELS,
    adjoint_lg::KERNELS,
    ddef::KERNELS,
    ddef_tangent::KERNELS,
    ddef_adjoint::KERNELS,
];

/// Every kernel, family by family.
pub fn all() -> impl Iterator<Item = &'static Kernel> {
    FAMILIES.iter().flat_map(|f| f.iter())
}

/// The `kernel-files` feature's folder, checked against the kernel table (every file
/// names a kernel); `Ok` without the feature or the variable.
pub fn check_files() -> Result<(), crate::gpu::error::GpuError> {
    crate::gpu::shader::kernel_files::check(|name| all().any(|k| k.name == name))
}

#[cfg(test)]
mod tests;
