//! The WGSL kernels, how each is composed and how its compute pipeline is made (the
//! Coulomb kernels' `TARGETS` override on a CPU adapter). A kernel's module is the shared
//! files it declares (`shaders/shared/*.wgsl`, one job each) followed by its own file, so
//! every module is self-contained and carries only what it uses:
//! - `layout`: constants, the uniform structs and their bindings, dispatch indexing
//!   (every kernel);
//! - `reduce`: the workgroup tree sum;
//! - `adjacency`: the spring adjacency's rows and entries (SELL-32 or CSR);
//! - `blocks`: how A's blocks are stored (springs' W_k, the per-particle `bd` rows:
//!   right-hand side, inverse diagonal, mass) and products with them;
//! - `world`: one world's parameters, rows and scalar slots (a batch of worlds composes
//!   `worlds.wgsl` in its place: [`Kernel::batch_source`]);
//! - `physics`: the f32 formulas mirroring `crate::physics` and the CPU reference.

/// How a kernel accesses a storage binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    ReadWrite,
}

/// One compute kernel: entry point `main`. A solver kernel has the `Params` uniform at
/// group 0 binding 0, the storage buffers in `storage` at bindings 1.., and the `Dispatch`
/// uniform (dynamic offset) at group 1 binding 0; a DDEF kernel has only its storage
/// buffers in group 0 (see `kernel_pipeline`).
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    pub name: &'static str,
    /// The shared files prepended, by name (see [`SHARED`]), in order.
    pub shared: &'static [&'static str],
    /// The kernel's own file.
    pub body: &'static str,
    /// The whole module: the shared files, then `body`.
    pub source: &'static str,
    /// The module for a batch of worlds (`gpu::worlds`): `worlds.wgsl` in place of
    /// `world.wgsl`; the same as `source` for a kernel that does not list `world`.
    pub batch_source: &'static str,
    pub storage: &'static [Access],
}

macro_rules! shared_file {
    ($file:ident) => {
        include_str!(concat!("../../shaders/shared/", stringify!($file), ".wgsl"))
    };
}

/// A shared file in a batch's module: `worlds` in place of `world`.
macro_rules! batch_file {
    (world) => {
        include_str!("../../shaders/shared/worlds.wgsl")
    };
    ($file:ident) => {
        shared_file!($file)
    };
}

macro_rules! kernel {
    ($name:literal, [$($file:ident),* $(,)?], [$($acc:ident),* $(,)?] $(,)?) => {
        Kernel {
            name: $name,
            shared: &[$(stringify!($file)),*],
            body: include_str!(concat!("../../shaders/", $name, ".wgsl")),
            source: concat!(
                $(shared_file!($file), "\n",)*
                include_str!(concat!("../../shaders/", $name, ".wgsl"))
            ),
            batch_source: concat!(
                $(batch_file!($file), "\n",)*
                include_str!(concat!("../../shaders/", $name, ".wgsl"))
            ),
            storage: &[$(Access::$acc),*],
        }
    };
}

/// The shared files by name, in the order a kernel lists them (`layout` first).
pub const SHARED: [(&str, &str); 6] = [
    ("layout", shared_file!(layout)),
    ("world", shared_file!(world)),
    ("reduce", shared_file!(reduce)),
    ("adjacency", shared_file!(adjacency)),
    ("blocks", shared_file!(blocks)),
    ("physics", shared_file!(physics)),
];

/// The batch's replacement of the `world` file.
pub const WORLDS: &str = include_str!("../../shaders/shared/worlds.wgsl");

/// Whether kernel `k` reads per-world values (lists `world`), so a batch binds its world
/// table (group 2).
pub fn reads_worlds(k: Kernel) -> bool {
    k.shared.contains(&"world")
}

/// The layout file alone (constants and structs the host mirrors; no entry point).
pub const LAYOUT: &str = shared_file!(layout);

pub const SPRING_ASSEMBLE: Kernel = kernel!(
    "spring_assemble",
    [layout, world, physics],
    [Read, Read, Read, Read, ReadWrite]
);
pub const COULOMB_SOURCES: Kernel =
    kernel!("coulomb_sources", [layout], [Read, Read, Read, ReadWrite]);
pub const EXTERNAL_FORCES: Kernel = kernel!(
    "external_forces",
    [layout, world, physics],
    [Read, Read, Read, ReadWrite]
);
pub const COULOMB_TILED: Kernel = kernel!(
    "coulomb_tiled",
    [layout, world, physics],
    [Read, Read, ReadWrite]
);
pub const RHS: Kernel = kernel!(
    "rhs",
    [layout, world, adjacency, blocks],
    [Read, Read, Read, Read, Read, ReadWrite]
);
pub const JACOBI_SWEEP: Kernel = kernel!(
    "jacobi_sweep",
    [layout, world, adjacency, blocks],
    [Read, Read, Read, Read, ReadWrite]
);
pub const RESIDUAL: Kernel = kernel!(
    "residual",
    [layout, world, reduce, adjacency, blocks],
    [Read, Read, Read, Read, ReadWrite]
);
pub const DOT_REDUCE: Kernel = kernel!("dot_reduce", [layout, world, reduce], [Read, ReadWrite]);
pub const CG_INIT: Kernel = kernel!(
    "cg_init",
    [layout, world, reduce, adjacency, blocks],
    [Read, Read, Read, Read, ReadWrite, ReadWrite, ReadWrite]
);
pub const CG_MATVEC: Kernel = kernel!(
    "cg_matvec",
    [layout, world, reduce, adjacency, blocks],
    [Read, Read, Read, Read, ReadWrite, ReadWrite]
);
pub const CG_UPDATE: Kernel = kernel!(
    "cg_update",
    [layout, world, reduce, blocks],
    [Read, Read, Read, Read, ReadWrite, ReadWrite, ReadWrite]
);
pub const CG_DIRECTION: Kernel = kernel!(
    "cg_direction",
    [layout, world, blocks],
    [Read, Read, Read, ReadWrite]
);
pub const INTEGRATE: Kernel = kernel!(
    "integrate",
    [layout, world],
    [ReadWrite, ReadWrite, Read, Read, Read, ReadWrite]
);
pub const EXPLICIT_STEP: Kernel = kernel!(
    "explicit_step",
    [layout, world, adjacency],
    [ReadWrite, ReadWrite, Read, Read, Read, Read, ReadWrite]
);
pub const LG_PREPARE: Kernel = kernel!(
    "lg_prepare",
    [layout, world],
    [ReadWrite, Read, Read, Read, ReadWrite, ReadWrite]
);
pub const LG_RHS: Kernel = kernel!(
    "lg_rhs",
    [layout, world, adjacency, blocks],
    [Read, Read, Read, Read, Read, Read, ReadWrite]
);
pub const ENERGY_REDUCE: Kernel = kernel!(
    "energy_reduce",
    [layout, world, reduce, adjacency, physics],
    [Read, Read, Read, Read, Read, Read, Read, ReadWrite]
);

pub const DDEF_FAR: Kernel = kernel!(
    "ddef_far",
    [layout, world, physics],
    [Read, Read, Read, Read, ReadWrite]
);
pub const DDEF_VERTEX_FAR: Kernel = kernel!(
    "ddef_vertex_far",
    [layout, world, physics],
    [Read, Read, Read, Read, Read, Read, ReadWrite]
);
pub const DDEF_GATHER: Kernel = kernel!(
    "ddef_gather",
    [layout, world, physics],
    [Read, Read, Read, Read, Read, Read, Read, ReadWrite]
);
pub const TANGENT_COULOMB: Kernel = kernel!(
    "tangent_coulomb",
    [layout, world, blocks, physics],
    [Read, Read, Read, Read, Read, Read, ReadWrite]
);
pub const TANGENT_FORCES: Kernel = kernel!(
    "tangent_forces",
    [layout, world, adjacency, blocks, physics],
    [Read, Read, Read, Read, Read, Read, ReadWrite, ReadWrite]
);
pub const TANGENT_INTEGRATE: Kernel = kernel!("tangent_integrate", [layout], [Read, ReadWrite]);
pub const TANGENT_LG_PREPARE: Kernel = kernel!(
    "tangent_lg_prepare",
    [layout, adjacency, blocks],
    [Read, Read, Read, Read, ReadWrite, ReadWrite]
);
pub const TANGENT_LG_RHS: Kernel = kernel!(
    "tangent_lg_rhs",
    [layout, adjacency, blocks],
    [Read, Read, Read, Read, Read, Read, ReadWrite, ReadWrite]
);
pub const TANGENT_COPY: Kernel = kernel!("tangent_copy", [layout], [Read, ReadWrite]);

/// Every kernel, in a fixed order.
pub const KERNELS: [Kernel; 26] = [
    SPRING_ASSEMBLE,
    COULOMB_SOURCES,
    EXTERNAL_FORCES,
    COULOMB_TILED,
    RHS,
    JACOBI_SWEEP,
    RESIDUAL,
    DOT_REDUCE,
    CG_INIT,
    CG_MATVEC,
    CG_UPDATE,
    CG_DIRECTION,
    INTEGRATE,
    EXPLICIT_STEP,
    LG_PREPARE,
    LG_RHS,
    ENERGY_REDUCE,
    DDEF_FAR,
    DDEF_VERTEX_FAR,
    DDEF_GATHER,
    TANGENT_COULOMB,
    TANGENT_FORCES,
    TANGENT_INTEGRATE,
    TANGENT_LG_PREPARE,
    TANGENT_LG_RHS,
    TANGENT_COPY,
];

/// Compiles `k` and returns its compute pipeline and group-0 layout, all labelled with the
/// kernel's name. With `dispatch` (the solver's `Dispatch` records layout), group 0 starts
/// with the `Params` uniform at binding 0 and `dispatch` is group 1, as the solver's kernels
/// declare; without it (the DDEF kernels, which read their sizes from a storage buffer so
/// they run outside a solver) group 0 holds only the storage bindings. With `worlds` (a
/// batch's world table layout) a kernel that reads per-world values is compiled from its
/// batch source and binds the table as group 2.
pub(super) fn kernel_pipeline(
    device: &wgpu::Device,
    k: Kernel,
    dispatch: Option<&wgpu::BindGroupLayout>,
    worlds: Option<&wgpu::BindGroupLayout>,
    spec: Specialization,
) -> (wgpu::ComputePipeline, wgpu::BindGroupLayout) {
    let worlds = worlds.filter(|_| reads_worlds(k) && dispatch.is_some());
    let source = if worlds.is_some() {
        k.batch_source
    } else {
        k.source
    };
    let checks = shader_checks();
    let desc = wgpu::ShaderModuleDescriptor {
        label: Some(k.name),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    };
    let module = if checks {
        device.create_shader_module(desc)
    } else {
        // SAFETY: see `shader_checks`: every index a kernel forms is guarded by a size the
        // host checked against the buffers it bound, every loop is bounded by such a size,
        // and every workgroup array element is written before a barrier and then read.
        // The WGSL is still parsed and validated by naga.
        unsafe { device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) }
    };
    let params = dispatch.map(|_| wgpu::BindGroupLayoutEntry {
        binding: 0,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: false,
            min_binding_size: wgpu::BufferSize::new(
                std::mem::size_of::<super::layout::Params>() as u64
            ),
        },
        count: None,
    });
    let storage = k
        .storage
        .iter()
        .enumerate()
        .map(|(i, a)| wgpu::BindGroupLayoutEntry {
            binding: i as u32 + 1,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage {
                    read_only: *a == Access::Read,
                },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        });
    let entries: Vec<_> = params.into_iter().chain(storage).collect();
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some(k.name),
        entries: &entries,
    });
    let groups: Vec<Option<&wgpu::BindGroupLayout>> = [Some(&layout), dispatch, worlds]
        .into_iter()
        .take_while(Option::is_some)
        .collect();
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(k.name),
        bind_group_layouts: &groups,
        immediate_size: 0,
    });
    let constants = pipeline_constants(device, k, spec);
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(k.name),
        layout: Some(&pipeline_layout),
        module: &module,
        entry_point: Some("main"),
        compilation_options: wgpu::PipelineCompilationOptions {
            constants: &constants,
            zero_initialize_workgroup_memory: checks,
        },
        cache: None,
    });
    (pipeline, layout)
}

/// Coulomb targets per invocation on a CPU (software) adapter: its compiler runs a
/// workgroup's invocations in a few SIMD batches, so one source load serving 16 targets
/// gave 4x over one target per invocation on lavapipe (BENCHMARKS.md). Hardware GPUs keep
/// one target per invocation (256-invocation workgroups) until measured there.
pub const COULOMB_TARGETS_CPU: u32 = 16;
const _: () =
    assert!(super::layout::TILE.is_multiple_of(COULOMB_TARGETS_CPU) && COULOMB_TARGETS_CPU <= 16);
/// The same for `tangent_coulomb`, whose targets carry four vectors each (fewer fit in
/// registers).
pub const TANGENT_COULOMB_TARGETS_CPU: u32 = 8;
const _: () = assert!(
    super::layout::WORKGROUP_SIZE.is_multiple_of(TANGENT_COULOMB_TARGETS_CPU)
        && TANGENT_COULOMB_TARGETS_CPU <= 8
);

/// What a solver fixes when its pipelines are created (WGSL `override`s, so the branches
/// on them compile away instead of testing a uniform per invocation; on lavapipe a
/// uniform-dependent branch also made a batch's `jacobi_sweep` recompile at every
/// dispatch, BENCHMARKS.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Specialization {
    /// `BLOCK_DIAG` of `shared/blocks.wgsl`: `bd` holds the 3x3 diagonal blocks'
    /// off-diagonal entries (3 rows per particle, else 2).
    pub block_diag: bool,
}

/// The pipeline-overridable constants of kernel `k` on `device` (WGSL `override`).
fn pipeline_constants(
    device: &wgpu::Device,
    k: Kernel,
    spec: Specialization,
) -> Vec<(&'static str, f64)> {
    let mut constants = Vec::new();
    if k.shared.contains(&"blocks") {
        constants.push(("BLOCK_DIAG", f64::from(u8::from(spec.block_diag))));
    }
    let cpu = device.adapter_info().device_type == wgpu::DeviceType::Cpu;
    let targets = match k.name {
        n if n == COULOMB_TILED.name => Some(COULOMB_TARGETS_CPU),
        n if n == TANGENT_COULOMB.name => Some(TANGENT_COULOMB_TARGETS_CPU),
        _ => None,
    };
    if let (true, Some(t)) = (cpu, targets) {
        constants.push(("TARGETS", f64::from(t)));
    }
    constants
}

/// Whether kernels are built with naga's runtime checks (index clamps, loop bounding, and
/// zeroed workgroup memory): only when `MSC_SHADER_CHECKS=1`. Without them the kernels run
/// as written (the checks cost an issue slot per clamp and a 64-bit counter per loop trip);
/// with them an out-of-bounds index would read a clamped element instead of arbitrary
/// memory, for debugging. Both must give bit-identical results (a test runs both).
pub fn shader_checks() -> bool {
    std::env::var("MSC_SHADER_CHECKS").as_deref() == Ok("1")
}
