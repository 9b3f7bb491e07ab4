//! `msc info`: the GPU adapters wgpu finds, and the limits that bound a run's size.

use crate::gpu::{list_adapters, AdapterSummary};

pub fn execute() {
    let adapters = list_adapters();
    if adapters.is_empty() {
        println!(
            "no GPU adapters found; `msc run` uses the CPU reference \
             (a software adapter such as Mesa's lavapipe, package mesa-vulkan-drivers, \
             makes `--backend gpu` available)"
        );
        return;
    }
    for (k, a) in adapters.iter().enumerate() {
        print!("{}", describe(k, a));
    }
    println!(
        "shader runtime checks: {}",
        if crate::gpu::shader::shader_checks() {
            "on (MSC_SHADER_CHECKS=1: index clamps, loop bounds, zeroed workgroup memory)"
        } else {
            "off (kernels are trusted modules; MSC_SHADER_CHECKS=1 turns naga's checks on)"
        }
    );
}

fn bytes(n: u64) -> String {
    format!("{n} B ({:.2} GiB)", n as f64 / (1u64 << 30) as f64)
}

/// The block `msc info` prints for one adapter.
pub fn describe(index: usize, a: &AdapterSummary) -> String {
    let mut s = format!(
        "adapter {index}: {} ({}, {})\n",
        a.name, a.backend, a.device_type
    );
    let driver = [a.driver.as_str(), a.driver_info.as_str()]
        .iter()
        .filter(|t| !t.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    if !driver.is_empty() {
        s.push_str(&format!("  driver: {driver}\n"));
    }
    s.push_str(&format!(
        "  max_storage_buffer_binding_size: {}\n",
        bytes(a.max_storage_buffer_binding_size)
    ));
    s.push_str(&format!(
        "  max_buffer_size: {}\n",
        bytes(a.max_buffer_size)
    ));
    s.push_str(&format!(
        "  max_compute_workgroup_storage_size: {} B\n",
        a.max_compute_workgroup_storage_size
    ));
    s.push_str(&format!(
        "  max_compute_invocations_per_workgroup: {}\n",
        a.max_compute_invocations_per_workgroup
    ));
    s.push_str(&format!(
        "  max_storage_buffers_per_shader_stage: {}\n",
        a.max_storage_buffers_per_shader_stage
    ));
    s.push_str(&format!(
        "  timestamp_queries: {}\n",
        if a.timestamp_queries { "yes" } else { "no" }
    ));
    s
}
