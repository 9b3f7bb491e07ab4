//! Choosing a wgpu adapter (honouring `WGPU_BACKEND` and `WGPU_ADAPTER_NAME`) and
//! describing it for `msc info` and `summary.json`.

use crate::gpu::error::GpuError;

/// Options for [`GpuSolver::headless`](crate::gpu::GpuSolver::headless).
#[derive(Clone, Debug, Default)]
pub struct HeadlessOptions {
    /// Accept software adapters (lavapipe, llvmpipe, WARP). `false` for `--backend auto`.
    pub allow_software: bool,
}

/// Summary of an adapter for `msc info` and `summary.json`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub driver_info: String,
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_compute_workgroup_storage_size: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_storage_buffers_per_shader_stage: u32,
    pub timestamp_queries: bool,
}

impl AdapterSummary {
    pub(in crate::gpu) fn new(
        info: &wgpu::AdapterInfo,
        limits: &wgpu::Limits,
        features: wgpu::Features,
    ) -> Self {
        Self {
            name: info.name.clone(),
            backend: info.backend.to_str().to_string(),
            device_type: format!("{:?}", info.device_type),
            driver: info.driver.clone(),
            driver_info: info.driver_info.clone(),
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
            max_buffer_size: limits.max_buffer_size,
            max_compute_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
            max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
            max_storage_buffers_per_shader_stage: limits.max_storage_buffers_per_shader_stage,
            timestamp_queries: features.contains(wgpu::Features::TIMESTAMP_QUERY),
        }
    }
}

/// The adapter this process last opened a device on: when a later enumeration finds
/// none, the driver has stopped offering it, and `WGPU_BACKEND` is not why.
static OPENED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Why an enumeration found no adapter, given the adapter this process opened a device on
/// before (if any).
fn none_enumerated(opened_before: Option<&str>) -> GpuError {
    GpuError::NoAdapter(match opened_before {
        None => " (wgpu enumerated none; WGPU_BACKEND may exclude them)".into(),
        Some(name) => format!(
            " (wgpu enumerated none, though this process opened a device on {name} before: \
             the driver no longer offers it, after a lost device or with its resources \
             exhausted)"
        ),
    })
}

/// The process's one wgpu instance, shared by every enumeration and headless device.
/// NVIDIA's Vulkan driver stops listing its GPU after about 30 instances in one process,
/// even when each was dropped (an H100, driver 580.159.04: the 31st enumerated none), so
/// a batch or Python loop that built a solver per run failed there. Its backends are read
/// from `WGPU_BACKEND` once, at the first use.
pub(in crate::gpu) fn instance() -> &'static wgpu::Instance {
    static INSTANCE: std::sync::OnceLock<wgpu::Instance> = std::sync::OnceLock::new();
    INSTANCE.get_or_init(|| {
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env())
    })
}

/// `f` of every adapter of the shared instance, one thread at a time from enumeration to
/// the adapters' drop: wgpu's GL adapters share the instance's EGL context, and dropping
/// one while another thread enumerated made it current on two threads (EGL BadAccess, a
/// panic inside wgpu; seen with tests enumerating in parallel on lavapipe).
fn with_adapters<R>(f: impl FnOnce(Vec<wgpu::Adapter>) -> R) -> R {
    static ADAPTERS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ADAPTERS.lock().unwrap_or_else(|e| e.into_inner());
    let backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all());
    f(pollster::block_on(instance().enumerate_adapters(backends)))
}

/// `f` of the shared instance's adapters ([`with_adapters`]) and the indices of the
/// usable devices among them, best first ([`distinct_devices`] under `WGPU_ADAPTER_NAME`
/// and `allow_software`): the one choice every headless listing and opening makes.
fn with_devices<R>(
    allow_software: bool,
    f: impl FnOnce(Vec<wgpu::Adapter>, Vec<usize>) -> Result<R, GpuError>,
) -> Result<R, GpuError> {
    with_adapters(|adapters| {
        let infos: Vec<wgpu::AdapterInfo> = adapters.iter().map(|a| a.get_info()).collect();
        let wanted = std::env::var("WGPU_ADAPTER_NAME").ok();
        let order = distinct_devices(&infos, wanted.as_deref(), allow_software)?;
        f(adapters, order)
    })
}

/// Every adapter wgpu finds, for `msc info`.
pub fn list_adapters() -> Vec<AdapterSummary> {
    with_adapters(|adapters| {
        adapters
            .iter()
            .map(|a| AdapterSummary::new(&a.get_info(), &a.limits(), a.features()))
            .collect()
    })
}

/// A device and queue opened as [`GpuSolver::headless`] opens them, for several solvers
/// to share through [`GpuSolver::new`] (the runs of `msc sweep` and `msc batch`).
///
/// [`GpuSolver::headless`]: crate::gpu::GpuSolver::headless
/// [`GpuSolver::new`]: crate::gpu::GpuSolver::new
pub struct HeadlessDevice {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: AdapterSummary,
}

/// Picks an adapter (honouring WGPU_BACKEND and WGPU_ADAPTER_NAME; software adapters only
/// when allowed) and opens a device with the adapter's own limits, so large meshes get the
/// largest buffers it allows, and timestamp queries when it has them (for profiling).
pub fn open_headless_device(options: &HeadlessOptions) -> Result<HeadlessDevice, GpuError> {
    open_headless_device_on(options, 0)
}

/// The devices `--devices` spreads runs over, best first: the adapters
/// [`open_headless_device`] could pick (same `WGPU_BACKEND`, `WGPU_ADAPTER_NAME` and
/// software rules), one per physical device: an adapter found through several backends
/// (lavapipe under Vulkan and GL) counts once, through its native backend.
pub fn device_adapters(options: &HeadlessOptions) -> Result<Vec<AdapterSummary>, GpuError> {
    with_devices(options.allow_software, |adapters, order| {
        Ok(order
            .into_iter()
            .map(|i| {
                let a = &adapters[i];
                AdapterSummary::new(&a.get_info(), &a.limits(), a.features())
            })
            .collect())
    })
}

/// As [`open_headless_device`], on the `index`-th device of [`device_adapters`].
pub fn open_headless_device_on(
    options: &HeadlessOptions,
    index: usize,
) -> Result<HeadlessDevice, GpuError> {
    let (device, queue, adapter) = with_devices(options.allow_software, |mut adapters, order| {
        let Some(&chosen) = order.get(index) else {
            return Err(GpuError::NoAdapter(format!(
                ": device {index} was asked for, but only {} are usable",
                order.len()
            )));
        };
        let adapter = adapters.swap_remove(chosen);
        let features = adapter.features() & wgpu::Features::TIMESTAMP_QUERY;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("msc device"),
            required_features: features,
            required_limits: adapter.limits(),
            ..Default::default()
        }))
        .map_err(|e| GpuError::NoAdapter(format!(": requesting a device failed: {e}")))?;
        let summary = AdapterSummary::new(&adapter.get_info(), &device.limits(), device.features());
        Ok((device, queue, summary))
    })?;
    if let Ok(mut opened) = OPENED.lock() {
        *opened = Some(adapter.name.clone());
    }
    Ok(HeadlessDevice {
        device,
        queue,
        adapter,
    })
}

/// The name and limits of the adapter [`open_headless_device`] would open, without
/// opening a device: to check a scene's buffer sizes before its mesh is built.
pub fn headless_adapter_limits(
    options: &HeadlessOptions,
) -> Result<(String, wgpu::Limits), GpuError> {
    // The same choice as `open_headless_device` (device 0 of `device_adapters`).
    with_devices(options.allow_software, |mut adapters, order| {
        let adapter = adapters.swap_remove(order[0]);
        Ok((adapter.get_info().name, adapter.limits()))
    })
}

/// Preference order: discrete, integrated, virtual, other, CPU; then native APIs before GL.
fn adapter_rank(info: &wgpu::AdapterInfo) -> (u8, u8) {
    let ty = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    };
    let backend = match info.backend {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        _ => 1,
    };
    (ty, backend)
}

/// A device on the adapter `choose_adapter` picks (`WGPU_BACKEND` restricts the
/// backends, `WGPU_ADAPTER_NAME` the names; software ones allowed), for the module tests
/// that need one; `None` without an adapter, which fails the test under
/// `MSC_REQUIRE_GPU=1`.
#[cfg(test)]
pub(in crate::gpu) fn test_device() -> Option<(wgpu::Device, wgpu::Queue)> {
    let device = with_adapters(|mut adapters| {
        let infos: Vec<wgpu::AdapterInfo> = adapters.iter().map(|a| a.get_info()).collect();
        let wanted = std::env::var("WGPU_ADAPTER_NAME").ok();
        let index = choose_adapter(&infos, wanted.as_deref(), true).ok()?;
        let adapter = adapters.swap_remove(index);
        Some(pollster::block_on(adapter.request_device(&Default::default())).expect("device"))
    });
    if device.is_none() {
        assert!(
            std::env::var("MSC_REQUIRE_GPU").as_deref() != Ok("1"),
            "MSC_REQUIRE_GPU=1 but no adapter"
        );
    }
    device
}

/// Indices in `infos` of the usable devices, best ranked first: for each (name, device
/// type), only the entries of its best-ranked backend (native API before GL), so a device
/// found through Vulkan and GL counts once while a node's identical GPUs all count.
fn distinct_devices(
    infos: &[wgpu::AdapterInfo],
    wanted: Option<&str>,
    allow_software: bool,
) -> Result<Vec<usize>, GpuError> {
    // choose_adapter applies the filters and says why nothing is left.
    choose_adapter(infos, wanted, allow_software)?;
    let lc = wanted.map(str::to_lowercase);
    let mut candidates: Vec<usize> = (0..infos.len())
        .filter(|&i| {
            lc.as_ref()
                .is_none_or(|w| infos[i].name.to_lowercase().contains(w))
        })
        .filter(|&i| allow_software || infos[i].device_type != wgpu::DeviceType::Cpu)
        .collect();
    candidates.sort_by_key(|&i| adapter_rank(&infos[i]));
    // The GPUs of a node share one name, so entries of one backend are all kept; a
    // (name, type) seen through a better backend already is the same device again.
    let mut kept: Vec<usize> = Vec::new();
    for i in candidates {
        let seen_elsewhere = kept.iter().any(|&k| {
            infos[k].name == infos[i].name
                && infos[k].device_type == infos[i].device_type
                && infos[k].backend != infos[i].backend
        });
        if !seen_elsewhere {
            kept.push(i);
        }
    }
    Ok(kept)
}

/// Index in `infos` of the adapter to use: the best ranked one whose name contains
/// `wanted` (case-insensitive) and that is not a CPU adapter unless `allow_software`.
fn choose_adapter(
    infos: &[wgpu::AdapterInfo],
    wanted: Option<&str>,
    allow_software: bool,
) -> Result<usize, GpuError> {
    // One entry per device, with the backends it was found through (a software adapter
    // often shows up under Vulkan and GL).
    let names = |idx: &[usize]| {
        let mut seen: Vec<(&str, wgpu::DeviceType, Vec<String>)> = Vec::new();
        for &i in idx {
            let (name, ty) = (infos[i].name.as_str(), infos[i].device_type);
            let backend = infos[i].backend.to_string();
            match seen.iter_mut().find(|(n, t, _)| *n == name && *t == ty) {
                Some((_, _, backends)) => {
                    if !backends.contains(&backend) {
                        backends.push(backend)
                    }
                }
                None => seen.push((name, ty, vec![backend])),
            }
        }
        seen.iter()
            .map(|(n, t, b)| format!("{n} ({t:?}; {})", b.join(", ")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut candidates: Vec<usize> = (0..infos.len()).collect();
    if candidates.is_empty() {
        let opened = OPENED.lock().ok().and_then(|o| o.clone());
        return Err(none_enumerated(opened.as_deref()));
    }
    if let Some(wanted) = wanted {
        let all = names(&candidates);
        let lc = wanted.to_lowercase();
        candidates.retain(|&i| infos[i].name.to_lowercase().contains(&lc));
        if candidates.is_empty() {
            return Err(GpuError::NoAdapter(format!(
                " matching WGPU_ADAPTER_NAME={wanted:?} (found: {all})"
            )));
        }
    }
    if !allow_software {
        let all = names(&candidates);
        candidates.retain(|&i| infos[i].device_type != wgpu::DeviceType::Cpu);
        if candidates.is_empty() {
            return Err(GpuError::NoAdapter(format!(
                " other than software adapters, which were not allowed (found: {all})"
            )));
        }
    }
    candidates.sort_by_key(|&i| adapter_rank(&infos[i]));
    Ok(candidates[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(
        name: &str,
        device_type: wgpu::DeviceType,
        backend: wgpu::Backend,
    ) -> wgpu::AdapterInfo {
        wgpu::AdapterInfo {
            name: name.into(),
            vendor: 0,
            device: 0,
            device_type,
            device_pci_bus_id: String::new(),
            driver: String::new(),
            driver_info: String::new(),
            backend,
            subgroup_min_size: 0,
            subgroup_max_size: 0,
            transient_saves_memory: None,
            limit_bucket: None,
        }
    }

    #[test]
    fn adapter_choice_follows_type_name_and_software_rules() {
        use wgpu::{Backend, DeviceType};
        let infos = [
            info("llvmpipe (LLVM 15)", DeviceType::Cpu, Backend::Vulkan),
            info("Intel UHD 770", DeviceType::IntegratedGpu, Backend::Vulkan),
            info("NVIDIA H100", DeviceType::DiscreteGpu, Backend::Gl),
            info("NVIDIA H100", DeviceType::DiscreteGpu, Backend::Vulkan),
        ];
        // Discrete first, native API before GL.
        assert_eq!(choose_adapter(&infos, None, false).unwrap(), 3);
        assert_eq!(choose_adapter(&infos, Some("intel"), false).unwrap(), 1);
        assert_eq!(choose_adapter(&infos, Some("LLVMPIPE"), true).unwrap(), 0);
        // Software rejected when not allowed, even when named.
        match choose_adapter(&infos, Some("llvmpipe"), false) {
            Err(GpuError::NoAdapter(m)) => assert!(m.contains("software"), "{m}"),
            other => panic!("{other:?}"),
        }
        match choose_adapter(&infos[..1], None, false) {
            Err(GpuError::NoAdapter(m)) => assert!(m.contains("llvmpipe"), "{m}"),
            other => panic!("{other:?}"),
        }
        match choose_adapter(&infos, Some("radeon"), true) {
            Err(GpuError::NoAdapter(m)) => assert!(m.contains("radeon"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            choose_adapter(&[], None, true),
            Err(GpuError::NoAdapter(_))
        ));
    }

    #[test]
    fn no_adapter_after_one_was_opened_does_not_blame_wgpu_backend() {
        let first = none_enumerated(None).to_string();
        assert!(first.contains("WGPU_BACKEND may exclude them"), "{first}");
        let later = none_enumerated(Some("NVIDIA H200")).to_string();
        assert!(!later.contains("WGPU_BACKEND"), "{later}");
        assert!(
            later.contains("NVIDIA H200") && later.contains("lost"),
            "{later}"
        );
    }

    #[test]
    fn devices_are_counted_once_per_physical_device_best_backend_first() {
        use wgpu::{Backend, DeviceType};
        let infos = [
            info("llvmpipe (LLVM 15)", DeviceType::Cpu, Backend::Gl),
            info("NVIDIA H100", DeviceType::DiscreteGpu, Backend::Gl),
            info("llvmpipe (LLVM 15)", DeviceType::Cpu, Backend::Vulkan),
            info("NVIDIA H100", DeviceType::DiscreteGpu, Backend::Vulkan),
            info("NVIDIA H100", DeviceType::DiscreteGpu, Backend::Vulkan),
        ];
        // Two H100s through Vulkan are two devices (a node's GPUs share one name); the
        // same names through GL are not more devices.
        let all = distinct_devices(&infos, None, true).unwrap();
        assert_eq!(all, vec![3, 4, 2], "{all:?}");
        assert_eq!(distinct_devices(&infos, None, false).unwrap(), vec![3, 4]);
        assert_eq!(
            distinct_devices(&infos, Some("llvm"), true).unwrap(),
            vec![2]
        );
        assert!(distinct_devices(&infos[..1], None, false).is_err());
    }

    #[test]
    fn a_device_found_through_two_backends_is_listed_once() {
        use wgpu::{Backend, DeviceType};
        let infos = [
            info("llvmpipe (LLVM 15)", DeviceType::Cpu, Backend::Vulkan),
            info("llvmpipe (LLVM 15)", DeviceType::Cpu, Backend::Gl),
        ];
        match choose_adapter(&infos, None, false) {
            Err(GpuError::NoAdapter(m)) => {
                assert_eq!(m.matches("llvmpipe").count(), 1, "{m}");
                let l = m.to_lowercase();
                assert!(l.contains("vulkan") && l.contains("gl"), "{m}");
            }
            other => panic!("{other:?}"),
        }
    }
}
