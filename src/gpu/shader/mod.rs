//! What a kernel is and how its compute pipeline is made. A kernel ([`Kernel`]) is its own
//! WGSL file (beside the Rust of its family in `gpu::kernels`) after the shared libraries
//! it lists ([`Library`], the `.wgsl` files of this folder, one job each), so every module
//! is self-contained and carries only what it uses:
//! - `layout`: constants, the uniform structs and their bindings, dispatch indexing
//!   (every kernel);
//! - `world`: world w's values (time step, softening, fields, ...): an accessor per plain
//!   field of `gpu::layout::World`, generated, and the others written in `world.wgsl`,
//!   composed for one system (`world_one.wgsl`: the `Params` uniform's) or for a batch of
//!   worlds (`world_batch.wgsl`: a world table bound as group 2);
//! - `reduce`: the workgroup tree sum;
//! - `adjacency`: the spring adjacency's rows and entries (SELL-32 or CSR);
//! - `blocks`: how A's blocks are stored (springs' W_k, the per-particle `bd` rows:
//!   right-hand side, inverse diagonal, mass) and products with them;
//! - `operator`: the matrix-free row product (A u)_i;
//! - `physics`: the f32 formulas mirroring `crate::physics` and the CPU reference;
//! - `lattice`: the lattice DDEF's geometry (location, Kuhn types, stencil entries),
//!   mirroring `crate::ddef::plan` and `crate::ddef::stencil`;
//! - `far_walk`: the DDEF far field's chunks and its walk over the excluded sources M_j
//!   (reads its kernel's `ddef_worlds`, `tables`, `starts`);
//! - `adjoint`, `adjoint_spring`, `adjoint_gather`, `adjoint_end`: what the adjoint
//!   kernels share: their mode bits; the per-spring header (it declares its kernels'
//!   first three bindings); the gather of their spring rows; a particle row's Dirichlet
//!   and field-transpose end (these two read their kernel's bindings).
//! - `near_walk`: the DDEF near gathers' walk over a work item's neighbour cells, their
//!   membership bits and tetrahedron ranges (reads `ddef_worlds`, `tables`, `starts`,
//!   `sorted_key`).
//!
//! `tuning`: the kernel shapes a caller may choose (they change no result);
//! `kernel_files`: a kernel's body from a file, to time variants (a development feature).

pub mod kernel_files;
pub mod tuning;

use std::borrow::Cow;

use crate::gpu::layout::{world_wgsl, Params, World, TILE, WORKGROUP_SIZE};
pub use tuning::{
    CellLoad, DdefFar, DdefGather, GatherChoice, GatherLanes, GatherPairs, GatherStaging, Tuning,
};

/// How a kernel accesses a storage binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    ReadWrite,
}

/// A shared WGSL library, in the order a kernel lists them (`Layout` first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Library {
    Layout,
    World,
    Reduce,
    Adjacency,
    Blocks,
    Operator,
    Physics,
    Lattice,
    DdefWork,
    FarWalk,
    Adjoint,
    AdjointSpring,
    AdjointGather,
    AdjointEnd,
    NearWalk,
}

/// Which worlds a module serves: one system, or a batch of worlds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Worlds {
    One,
    Batch,
}

/// `world.wgsl`'s placeholder for the world's record.
const WORLD_RECORD: &str = "{world}";
/// `layout.wgsl`'s placeholder for `struct World`.
const WORLD_STRUCT: &str = "{World}";

impl Library {
    pub const ALL: [Library; 15] = [
        Library::Layout,
        Library::World,
        Library::Reduce,
        Library::Adjacency,
        Library::Blocks,
        Library::Operator,
        Library::Physics,
        Library::Lattice,
        Library::DdefWork,
        Library::FarWalk,
        Library::Adjoint,
        Library::AdjointSpring,
        Library::AdjointGather,
        Library::AdjointEnd,
        Library::NearWalk,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Library::Layout => "layout",
            Library::World => "world",
            Library::Reduce => "reduce",
            Library::Adjacency => "adjacency",
            Library::Blocks => "blocks",
            Library::Operator => "operator",
            Library::Physics => "physics",
            Library::Lattice => "lattice",
            Library::DdefWork => "ddef_work",
            Library::FarWalk => "far_walk",
            Library::Adjoint => "adjoint",
            Library::AdjointSpring => "adjoint_spring",
            Library::AdjointGather => "adjoint_gather",
            Library::AdjointEnd => "adjoint_end",
            Library::NearWalk => "near_walk",
        }
    }

    /// The library's WGSL for `worlds` (only `World` differs between the two).
    pub fn text(self, worlds: Worlds) -> Cow<'static, str> {
        match self {
            Library::Layout => Cow::Owned(layout()),
            Library::World => {
                let (what, record) = match worlds {
                    Worlds::One => (include_str!("world_one.wgsl"), "params.world"),
                    Worlds::Batch => (include_str!("world_batch.wgsl"), "worlds[w]"),
                };
                let values = world_values().replace(WORLD_RECORD, record);
                Cow::Owned(format!("{what}\n{values}"))
            }
            Library::Reduce => Cow::Borrowed(include_str!("reduce.wgsl")),
            Library::Adjacency => Cow::Borrowed(include_str!("adjacency.wgsl")),
            Library::Blocks => Cow::Borrowed(include_str!("blocks.wgsl")),
            Library::Operator => Cow::Borrowed(include_str!("operator.wgsl")),
            Library::Physics => Cow::Borrowed(include_str!("physics.wgsl")),
            Library::Lattice => Cow::Borrowed(include_str!("lattice.wgsl")),
            Library::DdefWork => Cow::Borrowed(include_str!("ddef_work.wgsl")),
            Library::FarWalk => Cow::Borrowed(include_str!("far_walk.wgsl")),
            Library::Adjoint => Cow::Borrowed(include_str!("adjoint.wgsl")),
            Library::AdjointSpring => Cow::Borrowed(include_str!("adjoint_spring.wgsl")),
            Library::AdjointGather => Cow::Borrowed(include_str!("adjoint_gather.wgsl")),
            Library::AdjointEnd => Cow::Borrowed(include_str!("adjoint_end.wgsl")),
            Library::NearWalk => Cow::Borrowed(include_str!("near_walk.wgsl")),
        }
    }
}

/// The layout library alone (constants and structs the host mirrors; no entry point).
pub fn layout() -> String {
    include_str!("layout.wgsl").replace(WORLD_STRUCT, &world_wgsl())
}

/// World w's values against `{world}`: `world.wgsl`, after an accessor
/// `world_<field>(w)` for each plain field of [`World`] (a scalar or `vec4<f32>`, not
/// padding) that it does not write itself.
fn world_values() -> String {
    let written = include_str!("world.wgsl");
    let mut s = String::new();
    for (name, ty) in World::WGSL_FIELDS {
        let plain = matches!(*ty, "f32" | "u32" | "vec4<f32>") && !name.starts_with('_');
        if plain && !written.contains(&format!("fn world_{name}(")) {
            s.push_str(&format!(
                "fn world_{name}(w: u32) -> {ty} {{\n    return {WORLD_RECORD}.{name};\n}}\n\n"
            ));
        }
    }
    s.push_str(written);
    s
}

/// One compute kernel: entry point `main`. A solver kernel has the `Params` uniform at
/// group 0 binding 0, the storage buffers in `storage` at bindings 1.., and the `Dispatch`
/// uniform (dynamic offset) at group 1 binding 0 (see `kernel_pipeline`).
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    pub name: &'static str,
    /// Its own file.
    pub body: &'static str,
    /// The shared libraries composed before `body`, in [`Library`] order.
    pub libs: &'static [Library],
    pub storage: &'static [Access],
    /// The mode constants its body declares (name, value), from the Rust enum the
    /// launcher passes (`wgsl_enum!`); empty for a kernel without modes.
    pub constants: &'static [(&'static str, u32)],
    /// Targets per invocation (its `TARGETS` override) on a CPU adapter; `None` for a
    /// kernel without that override.
    pub cpu_targets: Option<u32>,
}

impl Kernel {
    /// The module of `libs` and then `body`, for `worlds`.
    pub fn compose(libs: &[Library], body: &str, worlds: Worlds) -> String {
        let mut s = String::new();
        for l in libs {
            s.push_str(&l.text(worlds));
            s.push('\n');
        }
        s.push_str(body);
        s
    }

    /// The module for one system.
    pub fn source(&self) -> String {
        Self::compose(self.libs, self.body, Worlds::One)
    }

    /// The module for a batch of worlds (`gpu::batch`): per-world values from the world
    /// table; the same as [`Self::source`] for a kernel that does not read them.
    pub fn batch_source(&self) -> String {
        Self::compose(self.libs, self.body, Worlds::Batch)
    }

    /// Whether it reads per-world values (lists `World`), so a batch binds its world
    /// table (group 2).
    pub fn reads_worlds(&self) -> bool {
        self.libs.contains(&Library::World)
    }
}

/// Compiles `k` and returns its compute pipeline and group-0 layout, all labelled with the
/// kernel's name. With `dispatch` (the solver's `Dispatch` records layout), group 0 starts
/// with the `Params` uniform at binding 0 and `dispatch` is group 1, as the solver's kernels
/// declare; without it (the DDEF kernels, which read their sizes from a storage buffer so
/// they run outside a solver) group 0 holds only the storage bindings. With `worlds` (a
/// batch's world table layout) a kernel that reads per-world values is compiled from its
/// batch source and binds the table as group 2.
pub(crate) fn kernel_pipeline(
    device: &wgpu::Device,
    k: Kernel,
    dispatch: Option<&wgpu::BindGroupLayout>,
    worlds: Option<&wgpu::BindGroupLayout>,
    spec: Specialization,
) -> (wgpu::ComputePipeline, wgpu::BindGroupLayout) {
    let k = Kernel {
        body: kernel_files::body(k.name, k.body),
        ..k
    };
    let worlds = worlds.filter(|_| k.reads_worlds() && dispatch.is_some());
    let source = if worlds.is_some() {
        k.batch_source()
    } else {
        k.source()
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
            min_binding_size: wgpu::BufferSize::new(std::mem::size_of::<Params>() as u64),
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
const _: () = assert!(TILE.is_multiple_of(COULOMB_TARGETS_CPU) && COULOMB_TARGETS_CPU <= 16);
/// The same for `tangent_coulomb`, whose targets carry four vectors each (fewer fit in
/// registers).
pub const TANGENT_COULOMB_TARGETS_CPU: u32 = 8;
const _: () = assert!(
    WORKGROUP_SIZE.is_multiple_of(TANGENT_COULOMB_TARGETS_CPU) && TANGENT_COULOMB_TARGETS_CPU <= 8
);

/// `ddef_far`'s sites per invocation on a CPU adapter (its `TARGETS`, with `STAGED` off):
/// one source read serves them all, as in the all-pairs kernel (BENCHMARKS.md). At most
/// the 16 its unstaged path writes out, and a divisor of the WG sites of a workgroup.
pub const DDEF_FAR_SITES_CPU: u32 = 16;
const _: () =
    assert!(WORKGROUP_SIZE.is_multiple_of(DDEF_FAR_SITES_CPU) && DDEF_FAR_SITES_CPU <= 16);

/// Kernels whose `STAGED` override is off on a CPU (software) adapter: they read their
/// sources directly instead of through workgroup memory, whose barriers cost lavapipe
/// more than the pairs between them (the DDEF far field and near gathers: BENCHMARKS.md).
pub const UNSTAGED_ON_CPU: &[&str] = &[
    "ddef_far",
    "ddef_gather",
    "ddef_gather_tangent",
    "ddef_gather_adjoint",
    "ddef_source_adjoint",
];

/// Loop iterations llvmpipe lets one shader invocation run, all its loops together
/// (`LP_MAX_TGSI_LOOP_ITERATIONS`), counted per SIMD batch of invocations; past them every
/// loop of the invocation ends early, without an error.
pub const CPU_LOOP_ITERATIONS: u32 = 65_535;

/// What a capped DDEF kernel keeps of [`CPU_LOOP_ITERATIONS`] for its long loop (the
/// sources it walks: `ddef_gather`, `ddef_rank`, and the adjoint's walks over the same
/// ranges, `ddef_gather_adjoint`, `ddef_source_adjoint`, `ddef_tet_adjoint`); the rest
/// covers its short loops (a gather invocation's searches, stencil, membership and
/// interpolation loops: about 2,900 at most; `ddef_source_adjoint`'s about 3,100 plus
/// one per site chunk of the far transpose).
pub const CPU_WALK_BUDGET: u32 = CPU_LOOP_ITERATIONS - 4_096;

/// The most sources around one cell (its neighbourhood: the near stencils' cell offsets)
/// on a CPU adapter: a `ddef_gather` invocation (and SIMD batch) walks them at most once
/// (its targets' near sums, or a cell corner's `corrected` sums).
pub const CPU_GATHER_SOURCES: u32 = CPU_WALK_BUDGET;

/// Kernels whose `LOOP_BUDGET` override is set on a CPU adapter, and to what:
/// `ddef_rank` walks a tetrahedron's charges and `ddef_cells` bounds the gather's walk
/// around a cell; longer walks would be cut short by llvmpipe's loop budget, silently, so
/// they are skipped and flagged in the DDEF world record instead, which the host turns
/// into an error (`solver::ddef::check_loop_budget`).
pub const LOOP_BUDGET_ON_CPU: &[(&str, u32)] = &[
    ("ddef_rank", CPU_WALK_BUDGET),
    ("ddef_cells", CPU_GATHER_SOURCES),
];

/// What a solver fixes when its pipelines are created (WGSL `override`s, so the branches
/// on them compile away instead of testing a uniform per invocation; on lavapipe a
/// uniform-dependent branch also made a batch's `jacobi_sweep` recompile at every
/// dispatch, BENCHMARKS.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Specialization {
    /// `BLOCK_DIAG` of `blocks.wgsl`: `bd` holds the 3x3 diagonal blocks' off-diagonal
    /// entries (3 rows per particle, else 2).
    pub block_diag: bool,
    /// The caller's kernel shapes.
    pub tuning: Tuning,
    /// The cells' load at set-up, which `GatherChoice::Auto` shapes `ddef_gather` by.
    pub ddef_load: CellLoad,
}

impl Specialization {
    /// Whether the [`UNSTAGED_ON_CPU`] kernels run their staged paths on `device`: on a
    /// GPU, and on a CPU adapter only with `Tuning::staged_on_cpu`.
    pub fn staged_on(&self, device: &wgpu::Device) -> bool {
        !is_cpu(device) || self.tuning.staged_on_cpu
    }

    /// The shape `ddef_gather` runs on `device`: the tuning's choice for the cells' load
    /// on its staged path; on a CPU adapter's direct path (one invocation per WG targets'
    /// group) the default.
    pub fn ddef_gather(&self, device: &wgpu::Device) -> DdefGather {
        if self.staged_on(device) {
            self.tuning.ddef_gather.shape(self.ddef_load)
        } else {
            DdefGather::default()
        }
    }
}

/// Whether `device` is a CPU (software) adapter: the DDEF kernels' direct paths and far
/// field chunking, the all-pairs loop budget (`limits::check_cpu_loop_budget`).
pub(crate) fn is_cpu(device: &wgpu::Device) -> bool {
    device.adapter_info().device_type == wgpu::DeviceType::Cpu
}

/// The pipeline-overridable constants of kernel `k` on `device` (WGSL `override`).
fn pipeline_constants(
    device: &wgpu::Device,
    k: Kernel,
    spec: Specialization,
) -> Vec<(&'static str, f64)> {
    let mut constants = Vec::new();
    if k.libs.contains(&Library::Blocks) {
        constants.push(("BLOCK_DIAG", f64::from(u8::from(spec.block_diag))));
    }
    let cpu = is_cpu(device);
    // Direct on a CPU adapter (unless its staged path is asked for), or for the caller's
    // direct far-field shape.
    let direct = UNSTAGED_ON_CPU.contains(&k.name) && !spec.staged_on(device);
    let far_sites = spec
        .tuning
        .ddef_far
        .direct_sites()
        .filter(|_| k.name == "ddef_far");
    if let Some(t) = k.cpu_targets.filter(|_| direct).or(far_sites) {
        constants.push(("TARGETS", f64::from(t)));
    }
    if direct || far_sites.is_some() {
        constants.push(("STAGED", 0.0));
    }
    if k.name == "ddef_gather" {
        let g = spec.ddef_gather(device);
        constants.push(("LANES", f64::from(g.lanes.count())));
        let packed = g.staging == GatherStaging::Packed;
        constants.push(("PACKED", f64::from(u8::from(packed))));
        let unrolled = g.pairs != GatherPairs::Plain;
        constants.push(("UNROLLED", f64::from(u8::from(unrolled))));
        let dual = g.pairs == GatherPairs::Dual;
        constants.push(("DUAL", f64::from(u8::from(dual))));
    }
    if let Some(&(_, budget)) = LOOP_BUDGET_ON_CPU.iter().find(|(n, _)| cpu && *n == k.name) {
        constants.push(("LOOP_BUDGET", f64::from(budget)));
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
