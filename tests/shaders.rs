//! Shader checks that need no GPU: every kernel parses and validates with naga, its
//! bindings match the host's table, its mode constants match the host's enums, and the
//! Rust mirror structs and shared constants match the WGSL layout.

use msc::gpu::kernels;
use msc::gpu::layout::World;
use msc::gpu::layout::{self, layout_constants, mirror_layouts};
use msc::gpu::shader::{layout, Access, Kernel, Library, Worlds};
use naga::valid::{Capabilities, ValidationFlags, Validator};
use naga::{AddressSpace, StorageAccess, TypeInner};

fn parse_source(name: &str, source: &str) -> naga::Module {
    naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(source)))
}

fn parse(k: &Kernel) -> naga::Module {
    parse_source(k.name, &k.source())
}

fn validate(name: &str, source: &str, module: &naga::Module) -> naga::valid::ModuleInfo {
    Validator::new(ValidationFlags::all(), Capabilities::empty())
        .validate(module)
        .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(source)))
}

#[test]
fn every_kernel_parses_and_validates() {
    let mut names = Vec::new();
    for k in kernels::all() {
        let source = k.source();
        let module = parse(k);
        validate(k.name, &source, &module);
        let entries: Vec<_> = module
            .entry_points
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(entries, ["main"], "{}: one entry point named main", k.name);
        let wg = module.entry_points[0].workgroup_size;
        let invocations: u32 = wg.iter().product();
        assert!(invocations <= 256, "{}: {invocations} invocations", k.name);
        names.push(k.name);
    }
    let count = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), count, "kernel names are unique: {names:?}");
}

/// A batch's module of every kernel that reads per-world values (`world_batch.wgsl`'s
/// world table in place of the `Params` uniform's world) validates and binds the world
/// table read-only as group 2, bindings 0 and 1, beside the same storage as its one-world
/// module; the other kernels have no batch module of their own.
#[test]
fn every_batch_module_validates_with_the_world_table_in_group_2() {
    let mut batched = 0;
    for k in kernels::all() {
        if !k.reads_worlds() {
            assert_eq!(k.batch_source(), k.source(), "{}", k.name);
            continue;
        }
        batched += 1;
        let source = k.batch_source();
        assert_ne!(source, k.source(), "{}", k.name);
        let module = parse_source(k.name, &source);
        validate(&format!("{} (batch)", k.name), &source, &module);
        let mut group2 = Vec::new();
        let mut group0 = 0;
        for (_, g) in module.global_variables.iter() {
            if let (AddressSpace::Storage { access }, Some(b)) = (g.space, g.binding.as_ref()) {
                match b.group {
                    2 => {
                        assert!(!access.contains(StorageAccess::STORE), "{}", k.name);
                        group2.push(b.binding);
                    }
                    0 => group0 += 1,
                    other => panic!("{}: storage in group {other}", k.name),
                }
            }
        }
        group2.sort();
        assert_eq!(group2, [0, 1], "{}: the world table", k.name);
        assert_eq!(group0, k.storage.len(), "{}: its own storage", k.name);
    }
    assert!(batched >= 16, "{batched} kernels read per-world values");
}

fn validates(source: &str) -> bool {
    naga::front::wgsl::parse_str(source).is_ok_and(|m| {
        Validator::new(ValidationFlags::all(), Capabilities::empty())
            .validate(&m)
            .is_ok()
    })
}

/// A kernel's module is exactly the libraries it declares, in `Library` order with
/// `Layout` first, then its own file; and it needs every one of them: leaving any one out
/// leaves a name unresolved.
#[test]
fn every_kernel_declares_exactly_the_libraries_it_uses() {
    for k in kernels::all() {
        assert!(
            k.libs.windows(2).all(|w| w[0] < w[1]) && k.libs.first() == Some(&Library::Layout),
            "{}: libraries {:?} not listed in Library's order, Layout first",
            k.name,
            k.libs
        );
        for skip in k.libs {
            let rest: Vec<Library> = k.libs.iter().filter(|l| *l != skip).copied().collect();
            assert!(
                !validates(&Kernel::compose(&rest, k.body, Worlds::One)),
                "{}: compiles without {skip:?}, so it should not declare it",
                k.name
            );
        }
    }
}

/// The libraries declare no name twice: all of them together form one valid module, for
/// one world and for a batch, given the bindings a library reads from its kernel
/// (`adjacency`'s `adj`, `operator`'s `sf` and `u`, `far_walk`'s `ddef_worlds`, `tables`
/// and `starts`, `ddef_work`'s `ddef_worlds` and `starts`, `near_walk`'s those,
/// `sorted_key` and the `STAGED` override, `adjoint_gather`'s `rows`, and `adjoint_end`'s
/// `props`, `bd`, `lx` and `lv`, which each kernel binds at its own slots).
#[test]
fn the_libraries_compose_without_clashes() {
    for worlds in [Worlds::One, Worlds::Batch] {
        let mut all = Kernel::compose(&Library::ALL, "", worlds);
        assert!(
            !validates(&all),
            "adjacency.wgsl and operator.wgsl should read their kernel's bindings"
        );
        all.push_str(
            "@group(3) @binding(0) var<storage, read> adj: array<u32>;\n\
             @group(3) @binding(1) var<storage, read> sf: array<vec4<f32>>;\n\
             @group(3) @binding(2) var<storage, read> u: array<vec4<f32>>;\n\
             @group(3) @binding(3) var<storage, read> ddef_worlds: array<DdefWorld>;\n\
             @group(3) @binding(4) var<storage, read> tables: array<u32>;\n\
             @group(3) @binding(5) var<storage, read> starts: array<u32>;\n\
             @group(3) @binding(6) var<storage, read> rows: array<vec4<f32>>;\n\
             @group(3) @binding(7) var<storage, read> props: array<vec4<f32>>;\n\
             @group(3) @binding(8) var<storage, read> bd: array<vec4<f32>>;\n\
             @group(3) @binding(9) var<storage, read_write> lx: array<vec4<f32>>;\n\
             @group(3) @binding(10) var<storage, read_write> lv: array<vec4<f32>>;\n\
             @group(3) @binding(11) var<storage, read> sorted_key: array<vec2<u32>>;\n\
             override STAGED: bool = true;\n",
        );
        assert!(validates(&all), "{worlds:?}");
    }
}

/// `world.wgsl` is written once for both compositions: its placeholder never reaches a
/// module, and every accessor it declares exists in both.
#[test]
fn the_world_values_are_written_once_for_both_compositions() {
    let one = Library::World.text(Worlds::One);
    let batch = Library::World.text(Worlds::Batch);
    for text in [&one, &batch] {
        assert!(!text.contains("{world}"), "{text}");
    }
    let functions = |text: &str| -> Vec<String> {
        let mut f: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("fn "))
            .map(|l| l.split('(').next().unwrap().to_string())
            .collect();
        f.sort();
        f
    };
    assert_eq!(functions(&one), functions(&batch));
    // Every plain field of the Rust `World` has its accessor, generated or written.
    for (name, ty) in World::WGSL_FIELDS {
        if matches!(*ty, "f32" | "u32" | "vec4<f32>") && !name.starts_with('_') {
            let f = format!("world_{name}");
            assert!(functions(&one).contains(&f), "no {f}");
        }
    }
}

/// The host builds bind group layouts from `Kernel::storage`; the WGSL declarations must
/// agree binding for binding, and stay within the WebGPU default limits.
#[test]
fn bindings_match_the_host_table_and_default_limits() {
    for k in kernels::all() {
        let module = parse(k);
        let mut storage = Vec::new();
        let mut workgroup_bytes = 0u32;
        for (_, g) in module.global_variables.iter() {
            match g.space {
                AddressSpace::Storage { access } => {
                    let b = g.binding.as_ref().expect("storage binding");
                    assert_eq!(b.group, 0, "{}: storage in group 0", k.name);
                    let acc = if access.contains(StorageAccess::STORE) {
                        Access::ReadWrite
                    } else {
                        Access::Read
                    };
                    storage.push((b.binding, acc));
                }
                AddressSpace::Uniform => {
                    let b = g.binding.as_ref().expect("uniform binding");
                    assert!(
                        (b.group, b.binding) == (0, 0) || (b.group, b.binding) == (1, 0),
                        "{}: unexpected uniform at {b:?}",
                        k.name
                    );
                }
                AddressSpace::WorkGroup => {
                    workgroup_bytes += module.types[g.ty].inner.size(module.to_ctx());
                }
                _ => {}
            }
        }
        storage.sort_by_key(|s| s.0);
        let expected: Vec<_> = k
            .storage
            .iter()
            .enumerate()
            .map(|(i, a)| (i as u32 + 1, *a))
            .collect();
        assert_eq!(storage, expected, "{}: storage bindings", k.name);
        assert!(
            storage.len() <= 8,
            "{}: more than 8 storage buffers",
            k.name
        );
        const { assert!(layout::WORKGROUP_MEMORY <= 16384) };
        assert!(
            workgroup_bytes <= layout::WORKGROUP_MEMORY,
            "{}: {workgroup_bytes} bytes of workgroup memory",
            k.name
        );
    }
}

#[test]
fn mirror_structs_match_wgsl_layout() {
    let module = naga::front::wgsl::parse_str(&layout()).expect("layout parses");
    for layout in mirror_layouts() {
        let (name, size, fields) = (layout.name, layout.size, layout.fields);
        let ty = module
            .types
            .iter()
            .find(|(_, t)| t.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("WGSL struct {name} not found"))
            .1;
        let TypeInner::Struct { members, span } = &ty.inner else {
            panic!("{name} is not a struct");
        };
        assert_eq!(*span as usize, size, "{name}: size");
        let wgsl: Vec<_> = members
            .iter()
            .map(|m| (m.name.clone().unwrap_or_default(), m.offset as usize))
            .collect();
        let rust: Vec<_> = fields.iter().map(|(f, o)| (f.to_string(), *o)).collect();
        assert_eq!(wgsl, rust, "{name}: fields and offsets");
    }
}

/// The `u32` value of the WGSL constant `name` of `module`.
fn constant(module: &naga::Module, what: &str, name: &str) -> u32 {
    let (_, c) = module
        .constants
        .iter()
        .find(|(_, c)| c.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("{what}: const {name} not declared"));
    match module.global_expressions[c.init] {
        naga::Expression::Literal(naga::Literal::U32(v)) => v,
        ref e => panic!("{what}: {name} = {e:?}"),
    }
}

/// The shared constants (sizes, slots, the field kinds) and every kernel's mode
/// constants have the host's values: a mode is a Rust enum on the host and a named
/// constant in the kernel (its own file's, or one library's that a family of kernels
/// shares: the adjoint's bits), never a bare integer on either side.
#[test]
fn wgsl_constants_match_the_host() {
    let module = naga::front::wgsl::parse_str(&layout()).expect("layout parses");
    for (name, value) in layout_constants() {
        assert_eq!(constant(&module, "layout.wgsl", name), value, "{name}");
    }
    let mut modes = 0;
    for k in kernels::all() {
        let module = parse(k);
        for &(name, value) in k.constants {
            assert_eq!(constant(&module, k.name, name), value, "{}: {name}", k.name);
            let declaration = format!("const {name}: u32 = {value}u;");
            let declared_in = std::iter::once(k.body.to_string())
                .chain(k.libs.iter().map(|l| l.text(Worlds::One).into_owned()))
                .filter(|text| text.contains(&declaration))
                .count();
            assert_eq!(
                declared_in, 1,
                "{}: {name} is declared once, by the kernel or one of its libraries",
                k.name
            );
            modes += 1;
        }
    }
    assert!(modes >= 16, "{modes} mode constants checked");
}

/// `coulomb_tiled`, `tangent_coulomb` and `ddef_far` size their workgroups by the
/// `TARGETS` override: with each value the host sets (`Kernel::cpu_targets`), the
/// specialized module must validate with one workgroup per 256 targets (or far-field
/// sites: 256 / TARGETS invocations, within the default limit).
#[test]
fn coulomb_targets_override_gives_one_tile_per_workgroup() {
    let mut checked = 0;
    for k in kernels::all() {
        let Some(targets) = k.cpu_targets else {
            continue;
        };
        checked += 1;
        let source = k.source();
        let module = parse(k);
        let info = validate(k.name, &source, &module);
        for targets in [1, targets] {
            let constants: naga::back::PipelineConstants =
                [("TARGETS".to_string(), f64::from(targets))]
                    .into_iter()
                    .collect();
            let (m, _) = naga::back::pipeline_constants::process_overrides(
                &module,
                &info,
                Some((naga::ShaderStage::Compute, "main")),
                &constants,
            )
            .unwrap_or_else(|e| panic!("{}, TARGETS = {targets}: {e}", k.name));
            assert_eq!(
                m.entry_points[0].workgroup_size,
                [layout::TILE / targets, 1, 1],
                "{}, TARGETS = {targets}",
                k.name
            );
        }
    }
    assert_eq!(checked, 3, "coulomb_tiled, tangent_coulomb and ddef_far");
}
