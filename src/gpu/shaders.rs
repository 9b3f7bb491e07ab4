//! The WGSL kernels. Each kernel file is compiled with `shaders/common.wgsl` prepended
//! (shared structs, constants and helpers), so every module is self-contained.

/// How a kernel accesses a storage binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    ReadWrite,
}

/// One compute kernel: entry point `main`, group 0 binding 0 is the `Params` uniform,
/// bindings 1.. are the storage buffers in `storage`, group 1 binding 0 the `Dispatch`
/// uniform (dynamic offset).
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    pub name: &'static str,
    pub source: &'static str,
    pub storage: &'static [Access],
}

macro_rules! kernel {
    ($name:literal, [$($acc:ident),* $(,)?]) => {
        Kernel {
            name: $name,
            source: concat!(
                include_str!("../../shaders/common.wgsl"),
                "\n",
                include_str!(concat!("../../shaders/", $name, ".wgsl"))
            ),
            storage: &[$(Access::$acc),*],
        }
    };
}

/// The common source alone (declarations only, no entry point).
pub const COMMON: &str = include_str!("../../shaders/common.wgsl");

pub const SPRING_ASSEMBLE: Kernel = kernel!("spring_assemble", [Read, Read, Read, Read, ReadWrite]);
pub const COULOMB_SOURCES: Kernel = kernel!("coulomb_sources", [Read, Read, Read, ReadWrite]);
pub const EXTERNAL_FORCES: Kernel = kernel!("external_forces", [Read, Read, Read, ReadWrite]);
pub const COULOMB_TILED: Kernel = kernel!("coulomb_tiled", [Read, Read, ReadWrite]);
pub const RHS: Kernel = kernel!("rhs", [Read, Read, Read, Read, Read, ReadWrite]);
pub const JACOBI_SWEEP: Kernel = kernel!("jacobi_sweep", [Read, Read, Read, Read, Read, ReadWrite]);
pub const RESIDUAL: Kernel = kernel!("residual", [Read, Read, Read, Read, Read, ReadWrite]);
pub const DOT_REDUCE: Kernel = kernel!("dot_reduce", [Read, ReadWrite]);
pub const CG_INIT: Kernel = kernel!(
    "cg_init",
    [Read, Read, Read, Read, Read, ReadWrite, ReadWrite, ReadWrite]
);
pub const CG_MATVEC: Kernel = kernel!("cg_matvec", [Read, Read, Read, Read, ReadWrite, ReadWrite]);
pub const CG_UPDATE: Kernel = kernel!(
    "cg_update",
    [Read, Read, Read, Read, Read, ReadWrite, ReadWrite, ReadWrite]
);
pub const CG_DIRECTION: Kernel = kernel!("cg_direction", [Read, Read, Read, Read, ReadWrite]);
pub const INTEGRATE: Kernel = kernel!(
    "integrate",
    [ReadWrite, ReadWrite, Read, Read, Read, ReadWrite]
);
pub const EXPLICIT_STEP: Kernel = kernel!(
    "explicit_step",
    [ReadWrite, ReadWrite, Read, Read, Read, Read, ReadWrite]
);
pub const LG_PREPARE: Kernel = kernel!(
    "lg_prepare",
    [ReadWrite, Read, Read, Read, ReadWrite, ReadWrite]
);
pub const LG_RHS: Kernel = kernel!("lg_rhs", [Read, Read, Read, Read, Read, Read, ReadWrite]);
pub const ENERGY_REDUCE: Kernel = kernel!(
    "energy_reduce",
    [Read, Read, Read, Read, Read, Read, Read, ReadWrite]
);

pub const DDEF_FAR: Kernel = kernel!("ddef_far", [Read, Read, Read, Read, ReadWrite]);
pub const DDEF_VERTEX_FAR: Kernel = kernel!(
    "ddef_vertex_far",
    [Read, Read, Read, Read, Read, Read, ReadWrite]
);
pub const DDEF_GATHER: Kernel = kernel!(
    "ddef_gather",
    [Read, Read, Read, Read, Read, Read, Read, ReadWrite]
);
pub const TANGENT_COULOMB: Kernel = kernel!(
    "tangent_coulomb",
    [Read, Read, Read, Read, Read, Read, ReadWrite]
);
pub const TANGENT_FORCES: Kernel = kernel!(
    "tangent_forces",
    [Read, Read, Read, Read, Read, Read, ReadWrite, ReadWrite]
);
pub const TANGENT_INTEGRATE: Kernel = kernel!("tangent_integrate", [Read, ReadWrite]);
pub const TANGENT_LG_PREPARE: Kernel = kernel!(
    "tangent_lg_prepare",
    [Read, Read, Read, Read, ReadWrite, ReadWrite]
);
pub const TANGENT_LG_RHS: Kernel = kernel!(
    "tangent_lg_rhs",
    [Read, Read, Read, Read, Read, Read, ReadWrite, ReadWrite]
);
pub const TANGENT_COPY: Kernel = kernel!("tangent_copy", [Read, ReadWrite]);

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
/// they run outside a solver) group 0 holds only the storage bindings.
pub(super) fn kernel_pipeline(
    device: &wgpu::Device,
    k: Kernel,
    dispatch: Option<&wgpu::BindGroupLayout>,
) -> (wgpu::ComputePipeline, wgpu::BindGroupLayout) {
    let checks = shader_checks();
    let desc = wgpu::ShaderModuleDescriptor {
        label: Some(k.name),
        source: wgpu::ShaderSource::Wgsl(k.source.into()),
    };
    let module = if checks {
        device.create_shader_module(desc)
    } else {
        // SAFETY: see `shader_checks`: every index a kernel forms is guarded by a size the
        // host checked against the buffers it bound, every loop is bounded by such a size,
        // and every workgroup array element is written before a barrier and then read.
        // The WGSL is still parsed and validated by naga.
        unsafe {
            device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked())
        }
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
    let groups = [Some(&layout), dispatch];
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(k.name),
        bind_group_layouts: &groups[..if dispatch.is_some() { 2 } else { 1 }],
        immediate_size: 0,
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(k.name),
        layout: Some(&pipeline_layout),
        module: &module,
        entry_point: Some("main"),
        compilation_options: wgpu::PipelineCompilationOptions {
            zero_initialize_workgroup_memory: checks,
            ..Default::default()
        },
        cache: None,
    });
    (pipeline, layout)
}

/// Whether kernels are built with naga's runtime checks (index clamps, loop bounding, and
/// zeroed workgroup memory): only when `MSC_SHADER_CHECKS=1`. Without them the kernels run
/// as written (the checks cost an issue slot per clamp and a 64-bit counter per loop trip);
/// with them an out-of-bounds index would read a clamped element instead of arbitrary
/// memory, for debugging. Both must give bit-identical results (a test runs both).
pub fn shader_checks() -> bool {
    std::env::var("MSC_SHADER_CHECKS").as_deref() == Ok("1")
}
