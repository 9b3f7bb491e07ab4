//! What the Vulkan driver compiled msc's kernels to: registers, spills, shared memory and
//! whatever else it reports through `VK_KHR_pipeline_executable_properties`, the figures
//! no timing shows (how many warps of `ddef_gather` an SM holds, BENCHMARKS.md). Each
//! kernel is compiled as msc compiles it on a GPU (naga's SPIR-V without runtime checks,
//! the staged paths, its default overrides), `ddef_gather` in each of its lane counts.
//!
//! ```sh
//! cargo run --release --example pipeline_stats                  # every kernel
//! cargo run --release --example pipeline_stats -- ddef_ coulomb # names containing either
//! MSC_STATS_ADAPTER=NVIDIA ...                                  # the first device named like it
//! MSC_STATS_VARIANTS=dir ...                                     # also dir/V/<kernel>.wgsl as kernel@V
//! ```
//!
//! One line per kernel and executable: `name [overrides] | statistic=value ...`, then the
//! workgroup memory naga lays out. A driver without the extension still compiles every
//! kernel (a check that the SPIR-V is accepted) and says so.

use std::ffi::CStr;

use ash::vk;
use msc::gpu::kernels;
use naga::back::spv;

/// The overrides msc sets for kernel `name` on a GPU, by variant (`Specialization`):
/// `ddef_gather` in both lane counts, unrolled and cell-staged (its defaults by load).
fn variants(name: &str) -> Vec<Vec<(&'static str, f64)>> {
    if name == "ddef_gather" {
        [128.0, 256.0]
            .map(|lanes| {
                vec![
                    ("LANES", lanes),
                    ("UNROLLED", 1.0),
                    ("PACKED", 0.0),
                    ("DUAL", 0.0),
                ]
            })
            .to_vec()
    } else {
        vec![Vec::new()]
    }
}

/// SPIR-V for one kernel as wgpu-hal writes it with `ShaderRuntimeChecks::unchecked()`
/// and no workgroup memory zeroing (`shader::kernel_pipeline` on a GPU).
fn spirv(
    source: &str,
    constants: &[(&str, f64)],
    lang: (u8, u8),
) -> Result<(Vec<u32>, naga::Module), String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| format!("{e:?}"))?;
    let mut values = naga::back::PipelineConstants::default();
    for &(k, v) in constants {
        values.insert(k.to_string(), v);
    }
    let stage = Some((naga::ShaderStage::Compute, "main"));
    let (module, info) =
        naga::back::pipeline_constants::process_overrides(&module, &info, stage, &values)
            .map_err(|e| format!("{e:?}"))?;
    let unchecked = naga::proc::BoundsCheckPolicy::Unchecked;
    let options = spv::Options {
        lang_version: lang,
        flags: spv::WriterFlags::empty(),
        bounds_check_policies: naga::proc::BoundsCheckPolicies {
            index: unchecked,
            buffer: unchecked,
            image_load: unchecked,
            binding_array: unchecked,
        },
        zero_initialize_workgroup_memory: spv::ZeroInitializeWorkgroupMemoryMode::None,
        force_loop_bounding: false,
        ray_query_initialization_tracking: false,
        emit_int_div_checks: false,
        task_dispatch_limits: None,
        ..spv::Options::default()
    };
    let pipeline = spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: "main".into(),
    };
    let words =
        spv::write_vec(&module, &info, &options, Some(&pipeline)).map_err(|e| format!("{e:?}"))?;
    Ok((words, module.into_owned()))
}

/// The module's bindings as descriptor types, per group (a uniform or a storage buffer).
fn bindings(module: &naga::Module) -> Vec<Vec<(u32, vk::DescriptorType)>> {
    let mut sets: Vec<Vec<(u32, vk::DescriptorType)>> = Vec::new();
    for (_, g) in module.global_variables.iter() {
        let Some(b) = &g.binding else { continue };
        let ty = match g.space {
            naga::AddressSpace::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
            _ => vk::DescriptorType::STORAGE_BUFFER,
        };
        let set = b.group as usize;
        if sets.len() <= set {
            sets.resize(set + 1, Vec::new());
        }
        sets[set].push((b.binding, ty));
    }
    sets
}

/// Bytes of workgroup memory the module declares (naga's layout).
fn workgroup_bytes(module: &naga::Module) -> u32 {
    let mut layouter = naga::proc::Layouter::default();
    if layouter.update(module.to_ctx()).is_err() {
        return 0;
    }
    module
        .global_variables
        .iter()
        .filter(|(_, g)| g.space == naga::AddressSpace::WorkGroup)
        .map(|(_, g)| layouter[g.ty].size)
        .sum()
}

fn statistic(s: &vk::PipelineExecutableStatisticKHR) -> String {
    let name = s
        .name_as_c_str()
        .map(CStr::to_string_lossy)
        .unwrap_or_default();
    // SAFETY: the union member read is the one `format` names.
    let value = unsafe {
        match s.format {
            vk::PipelineExecutableStatisticFormatKHR::BOOL32 => (s.value.b32 != 0).to_string(),
            vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
            vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
            vk::PipelineExecutableStatisticFormatKHR::FLOAT64 => s.value.f64.to_string(),
            _ => "?".into(),
        }
    };
    format!("{}={value}", name.replace(' ', "_"))
}

struct Gpu {
    // Kept loaded until the device and instance are destroyed.
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    stats: Option<ash::khr::pipeline_executable_properties::Device>,
    lang: (u8, u8),
}

const EXTENSION: &CStr = ash::khr::pipeline_executable_properties::NAME;

fn open() -> Result<Gpu, String> {
    // SAFETY: plain Vulkan set-up calls with valid create infos; the handles live as long
    // as the process (it exits when done).
    unsafe {
        let entry = ash::Entry::load().map_err(|e| format!("no Vulkan loader: {e}"))?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
        let instance = entry
            .create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )
            .map_err(|e| format!("vkCreateInstance: {e}"))?;
        let want = std::env::var("MSC_STATS_ADAPTER").unwrap_or_default();
        let physical = instance
            .enumerate_physical_devices()
            .map_err(|e| e.to_string())?;
        let name = |p: vk::PhysicalDevice| {
            let props = instance.get_physical_device_properties(p);
            props
                .device_name_as_c_str()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let pd = *physical
            .iter()
            .find(|&&p| name(p).contains(&want))
            .ok_or(format!("no Vulkan device named like {want:?}"))?;
        let props = instance.get_physical_device_properties(pd);
        println!(
            "device: {} (Vulkan {}.{}, driver version {:#x}), maxComputeSharedMemorySize {}",
            name(pd),
            vk::api_version_major(props.api_version),
            vk::api_version_minor(props.api_version),
            props.driver_version,
            props.limits.max_compute_shared_memory_size
        );
        let lang = if props.api_version >= vk::API_VERSION_1_2 {
            (1, 5)
        } else {
            (1, 3)
        };
        let has = instance
            .enumerate_device_extension_properties(pd)
            .map_err(|e| e.to_string())?
            .iter()
            .any(|e| e.extension_name_as_c_str() == Ok(EXTENSION));
        let family = instance
            .get_physical_device_queue_family_properties(pd)
            .iter()
            .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or("no compute queue")? as u32;
        let priorities = [1.0];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let extensions = if has {
            vec![EXTENSION.as_ptr()]
        } else {
            Vec::new()
        };
        let mut feature = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
            .pipeline_executable_info(true);
        let mut info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&extensions);
        if has {
            info = info.push_next(&mut feature);
        }
        let device = instance
            .create_device(pd, &info, None)
            .map_err(|e| format!("vkCreateDevice: {e}"))?;
        let stats =
            has.then(|| ash::khr::pipeline_executable_properties::Device::new(&instance, &device));
        if !has {
            println!("the driver has no VK_KHR_pipeline_executable_properties: compiling only");
        }
        Ok(Gpu {
            _entry: entry,
            instance,
            device,
            stats,
            lang,
        })
    }
}

/// Compiles one kernel's SPIR-V and prints what the driver says of it.
fn report(gpu: &Gpu, label: &str, words: &[u32], module: &naga::Module) -> Result<(), String> {
    let d = &gpu.device;
    // SAFETY: every handle is created here from valid create infos and destroyed after use.
    unsafe {
        let mut layouts = Vec::new();
        for set in bindings(module) {
            let b: Vec<_> = set
                .iter()
                .map(|&(binding, ty)| {
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(binding)
                        .descriptor_type(ty)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE)
                })
                .collect();
            let l = d
                .create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&b),
                    None,
                )
                .map_err(|e| e.to_string())?;
            layouts.push(l);
        }
        let layout = d
            .create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts),
                None,
            )
            .map_err(|e| e.to_string())?;
        let shader = d
            .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(words), None)
            .map_err(|e| format!("vkCreateShaderModule: {e}"))?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(shader)
            .name(c"main");
        let flags = if gpu.stats.is_some() {
            vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR
        } else {
            vk::PipelineCreateFlags::empty()
        };
        let info = vk::ComputePipelineCreateInfo::default()
            .flags(flags)
            .stage(stage)
            .layout(layout);
        let pipeline = d
            .create_compute_pipelines(vk::PipelineCache::null(), &[info], None)
            .map_err(|(_, e)| format!("vkCreateComputePipelines: {e}"))?[0];
        let smem = workgroup_bytes(module);
        match &gpu.stats {
            None => println!("{label} | compiled | workgroup_bytes={smem}"),
            Some(x) => {
                let p = vk::PipelineInfoKHR::default().pipeline(pipeline);
                let exes = x
                    .get_pipeline_executable_properties(&p)
                    .map_err(|e| e.to_string())?;
                for (i, e) in exes.iter().enumerate() {
                    let ei = vk::PipelineExecutableInfoKHR::default()
                        .pipeline(pipeline)
                        .executable_index(i as u32);
                    let stats = x
                        .get_pipeline_executable_statistics(&ei)
                        .map_err(|e| e.to_string())?;
                    let s: Vec<_> = stats.iter().map(statistic).collect();
                    let name = e
                        .name_as_c_str()
                        .map(CStr::to_string_lossy)
                        .unwrap_or_default();
                    println!(
                        "{label} | {name} subgroup={} | {} | workgroup_bytes={smem}",
                        e.subgroup_size,
                        s.join(" ")
                    );
                }
            }
        }
        d.destroy_pipeline(pipeline, None);
        d.destroy_shader_module(shader, None);
        d.destroy_pipeline_layout(layout, None);
        for l in layouts {
            d.destroy_descriptor_set_layout(l, None);
        }
    }
    Ok(())
}

/// Other bodies of kernel `name` to compile beside its own: `$MSC_STATS_VARIANTS/V/name.wgsl`
/// for each folder V (tag V), in name order.
fn variant_bodies(name: &str) -> Vec<(String, String)> {
    let Ok(dir) = std::env::var("MSC_STATS_VARIANTS") else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<_> = entries
        .flatten()
        .filter_map(|e| {
            let body = std::fs::read_to_string(e.path().join(format!("{name}.wgsl"))).ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), body))
        })
        .collect();
    out.sort();
    out
}

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).collect();
    let gpu = match open() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let mut failed = 0;
    for k in kernels::all() {
        if !filters.is_empty() && !filters.iter().any(|f| k.name.contains(f.as_str())) {
            continue;
        }
        let mut bodies = vec![(k.name.to_string(), k.source())];
        for (tag, body) in variant_bodies(k.name) {
            let source =
                msc::gpu::shader::Kernel::compose(k.libs, &body, msc::gpu::shader::Worlds::One);
            bodies.push((format!("{}@{tag}", k.name), source));
        }
        for (name, source) in &bodies {
            for constants in variants(k.name) {
                let label = if constants.is_empty() {
                    name.clone()
                } else {
                    let c: Vec<_> = constants.iter().map(|(n, v)| format!("{n}={v}")).collect();
                    format!("{name} [{}]", c.join(","))
                };
                let result = spirv(source, &constants, gpu.lang)
                    .and_then(|(words, module)| report(&gpu, &label, &words, &module));
                if let Err(e) = result {
                    println!("{label} | error: {e}");
                    failed += 1;
                }
            }
        }
    }
    // SAFETY: nothing created from the device is alive any more.
    unsafe {
        gpu.device.destroy_device(None);
        gpu.instance.destroy_instance(None);
    }
    if failed > 0 {
        std::process::exit(1);
    }
}
