//! Shader checks that need no GPU: every kernel parses and validates with naga, its
//! bindings match the host's table, and the Rust mirror structs match the WGSL layout.

use msc::gpu::layout::{self, mirror_layouts};
use msc::gpu::shaders::{reads_worlds, Access, Kernel, KERNELS, SHARED};
use naga::valid::{Capabilities, ValidationFlags, Validator};
use naga::{AddressSpace, StorageAccess, TypeInner};

fn parse(k: &Kernel) -> naga::Module {
    naga::front::wgsl::parse_str(k.source)
        .unwrap_or_else(|e| panic!("{}: {}", k.name, e.emit_to_string(k.source)))
}

#[test]
fn every_kernel_parses_and_validates() {
    for k in &KERNELS {
        let module = parse(k);
        Validator::new(ValidationFlags::all(), Capabilities::empty())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{}: {}", k.name, e.emit_to_string(k.source)));
        let entries: Vec<_> = module
            .entry_points
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(entries, ["main"], "{}: one entry point named main", k.name);
        let wg = module.entry_points[0].workgroup_size;
        let invocations: u32 = wg.iter().product();
        assert!(invocations <= 256, "{}: {invocations} invocations", k.name);
    }
}

/// A batch's module of every kernel that reads per-world values (`worlds.wgsl` in place of
/// `world.wgsl`) validates and binds the world table read-only as group 2, bindings 0
/// and 1, beside the same storage as its one-world module; the other kernels have no
/// batch module of their own.
#[test]
fn every_batch_module_validates_with_the_world_table_in_group_2() {
    let mut batched = 0;
    for k in &KERNELS {
        if !reads_worlds(*k) {
            assert_eq!(k.batch_source, k.source, "{}", k.name);
            continue;
        }
        batched += 1;
        assert_ne!(k.batch_source, k.source, "{}", k.name);
        let module = naga::front::wgsl::parse_str(k.batch_source)
            .unwrap_or_else(|e| panic!("{}: {}", k.name, e.emit_to_string(k.batch_source)));
        Validator::new(ValidationFlags::all(), Capabilities::empty())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{} (batch): {}", k.name, e.emit_to_string(k.batch_source)));
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

/// A kernel's module is exactly the shared files it declares, in `SHARED`'s order with
/// `layout` first, then its own file; and it needs every one of them: leaving any one out
/// leaves a name unresolved.
#[test]
fn every_kernel_declares_exactly_the_shared_files_it_uses() {
    let file = |name: &str| {
        SHARED
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("no shared file {name}"))
            .1
    };
    for k in &KERNELS {
        let compose = |names: &[&str]| {
            let mut s: String = names.iter().map(|n| format!("{}\n", file(n))).collect();
            s.push_str(k.body);
            s
        };
        let rank = |name: &str| SHARED.iter().position(|(n, _)| *n == name);
        let ranks: Vec<_> = k.shared.iter().map(|n| rank(n)).collect();
        assert!(
            ranks.windows(2).all(|w| w[0] < w[1]) && ranks.first() == Some(&Some(0)),
            "{}: shared files {:?} not listed in SHARED's order, layout first",
            k.name,
            k.shared
        );
        assert_eq!(compose(k.shared), k.source, "{}: composition", k.name);
        for skip in k.shared {
            let rest: Vec<&str> = k.shared.iter().filter(|n| *n != skip).copied().collect();
            assert!(
                !validates(&compose(&rest)),
                "{}: compiles without shared/{skip}.wgsl, so it should not declare it",
                k.name
            );
        }
    }
}

/// The shared files declare no name twice: all of them together form one valid module,
/// given the one binding a shared file reads from its kernel (`adjacency`'s `adj`, which
/// each kernel binds at its own slot).
#[test]
fn the_shared_files_compose_without_clashes() {
    let mut all: String = SHARED.iter().map(|(_, s)| format!("{s}\n")).collect();
    assert!(
        !validates(&all),
        "adjacency.wgsl should read its kernel's `adj`"
    );
    all.push_str("@group(3) @binding(0) var<storage, read> adj: array<u32>;\n");
    assert!(validates(&all));
}

/// The host builds bind group layouts from `Kernel::storage`; the WGSL declarations must
/// agree binding for binding, and stay within the WebGPU default limits.
#[test]
fn bindings_match_the_host_table_and_default_limits() {
    for k in &KERNELS {
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
    let module = naga::front::wgsl::parse_str(msc::gpu::shaders::LAYOUT).expect("layout parses");
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

#[test]
fn wgsl_constants_match_the_host() {
    let module = naga::front::wgsl::parse_str(msc::gpu::shaders::LAYOUT).expect("layout parses");
    let constant = |name: &str| -> u32 {
        let (_, c) = module
            .constants
            .iter()
            .find(|(_, c)| c.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("const {name}"));
        match module.global_expressions[c.init] {
            naga::Expression::Literal(naga::Literal::U32(v)) => v,
            ref e => panic!("{name}: {e:?}"),
        }
    };
    assert_eq!(constant("WG"), layout::WORKGROUP_SIZE);
    assert_eq!(constant("TILE"), layout::TILE);
    assert_eq!(
        constant("MAX_EXT_CHARGES") as usize,
        layout::MAX_EXT_CHARGES
    );
    assert_eq!(constant("SLOT_PQ"), layout::SLOT_PQ);
    assert_eq!(constant("SLOT_RZ"), layout::SLOT_RZ);
    assert_eq!(constant("SLOT_RESIDUAL"), layout::SLOT_RESIDUAL);
    assert_eq!(constant("SLOT_ENERGY"), layout::SLOT_ENERGY);
    assert_eq!(constant("SCALAR_SLOTS"), layout::SCALAR_SLOTS);
    assert_eq!(constant("NO_WORLD"), layout::NO_WORLD);
    assert_eq!(constant("NO_RANK"), layout::NO_RANK);
}

/// `coulomb_tiled` and `tangent_coulomb` size their workgroups by the `TARGETS` override:
/// with each value the host sets (gpu::shaders), the specialized module must validate with
/// one workgroup per 256 targets (256 / TARGETS invocations, within the default limit).
#[test]
fn coulomb_targets_override_gives_one_tile_per_workgroup() {
    use msc::gpu::shaders::{
        COULOMB_TARGETS_CPU, COULOMB_TILED, TANGENT_COULOMB, TANGENT_COULOMB_TARGETS_CPU,
    };
    for (k, targets, per_group) in [
        (COULOMB_TILED, COULOMB_TARGETS_CPU, layout::TILE),
        (
            TANGENT_COULOMB,
            TANGENT_COULOMB_TARGETS_CPU,
            layout::WORKGROUP_SIZE,
        ),
    ] {
        let module = parse(&k);
        let info = Validator::new(ValidationFlags::all(), Capabilities::empty())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{}: {e}", k.name));
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
                [per_group / targets, 1, 1],
                "{}, TARGETS = {targets}",
                k.name
            );
        }
    }
}
