//! Datasheet limits of known devices (BENCHMARKS.md), matched on the adapter name.

/// FP32 peak (non-tensor) and memory bandwidth of one device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KnownDevice {
    pub name: &'static str,
    /// TFLOP/s.
    pub fp32_tflops: f64,
    /// GB/s (1e9 bytes per second).
    pub bandwidth_gbs: f64,
}

pub const H100_SXM: KnownDevice = KnownDevice {
    name: "H100 SXM",
    fp32_tflops: 66.9,
    bandwidth_gbs: 3350.0,
};
pub const H100_PCIE: KnownDevice = KnownDevice {
    name: "H100 PCIe",
    fp32_tflops: 51.0,
    bandwidth_gbs: 2000.0,
};
pub const H200: KnownDevice = KnownDevice {
    name: "H200",
    fp32_tflops: 67.0,
    bandwidth_gbs: 4800.0,
};

/// The device an adapter name denotes, when it is one of the table's and unambiguous.
///
/// Names are compared by lowercase alphanumeric tokens of the part before the first `/`
/// (OpenGL appends `/PCIe/SSE2` to every renderer name). NVIDIA names the SXM H100
/// "H100 80GB HBM3" and the PCIe card "H100 PCIe"; NVL variants (different clocks and
/// memory) and a bare "H100" are not matched, nor is "GH200" (a different module): give
/// `--peak-tflops` and `--bandwidth-gbs` for those.
pub fn known_device(adapter_name: &str) -> Option<KnownDevice> {
    let lower = adapter_name.to_lowercase();
    let head = lower.split('/').next().unwrap_or("");
    let tokens: Vec<&str> = head
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty())
        .collect();
    let has = |t: &str| tokens.contains(&t);
    let starts = |p: &str| tokens.iter().any(|t| t.starts_with(p));
    if has("nvl") {
        return None;
    }
    if has("h200") {
        return Some(H200);
    }
    if has("h100") {
        if has("pcie") {
            return Some(H100_PCIE);
        }
        if starts("sxm") || has("hbm3") {
            return Some(H100_SXM);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_devices_match_their_driver_names_only() {
        let cases: [(&str, Option<KnownDevice>); 12] = [
            ("NVIDIA H100 80GB HBM3", Some(H100_SXM)),
            ("NVIDIA H100 SXM5 80GB", Some(H100_SXM)),
            ("NVIDIA H100 PCIe", Some(H100_PCIE)),
            // OpenGL renderer strings: the suffix must not make an SXM card PCIe.
            ("NVIDIA H100 80GB HBM3/PCIe/SSE2", Some(H100_SXM)),
            ("NVIDIA H100 PCIe/PCIe/SSE2", Some(H100_PCIE)),
            ("NVIDIA H200", Some(H200)),
            ("nvidia h200 141gb hbm3e", Some(H200)),
            ("NVIDIA H200 NVL", None),
            ("NVIDIA H100 NVL", None),
            ("NVIDIA GH200 480GB", None),
            ("NVIDIA H100", None),
            ("llvmpipe (LLVM 15.0.6, 256 bits)", None),
        ];
        for (name, want) in cases {
            assert_eq!(known_device(name), want, "{name}");
        }
    }

    #[test]
    fn the_table_holds_the_datasheet_figures() {
        // BENCHMARKS.md.
        assert_eq!(
            (H100_SXM.fp32_tflops, H100_SXM.bandwidth_gbs),
            (66.9, 3350.0)
        );
        assert_eq!(
            (H100_PCIE.fp32_tflops, H100_PCIE.bandwidth_gbs),
            (51.0, 2000.0)
        );
        assert_eq!((H200.fp32_tflops, H200.bandwidth_gbs), (67.0, 4800.0));
    }
}
