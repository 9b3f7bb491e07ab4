//! The GPU's SM clock where the platform reports it: on an NVIDIA adapter, `nvidia-smi`
//! (when installed) is asked for the current and maximum SM clock of the adapter's GPU,
//! so a record can show whether the timed steps ran at full clock.

use super::record::Record;
use std::process::Command;

/// NVIDIA's PCI vendor id.
const NVIDIA: u32 = 0x10de;

/// One GPU's clocks as `nvidia-smi` reports them, in MHz.
#[derive(Clone, Copy, Debug, PartialEq)]
struct SmClock {
    pub current_mhz: f64,
    pub max_mhz: f64,
}

/// The SM clock of the GPU behind `info`, or why it cannot be had.
fn sm_clock(info: &wgpu::AdapterInfo) -> Result<SmClock, String> {
    if info.vendor != NVIDIA {
        return Err(format!(
            "the adapter is not an NVIDIA GPU (vendor 0x{:04x}); only nvidia-smi is asked",
            info.vendor
        ));
    }
    let out = Command::new("nvidia-smi")
        .args([
            "--query-gpu=pci.bus_id,clocks.sm,clocks.max.sm",
            "--format=csv,noheader,nounits",
        ])
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "nvidia-smi not found".to_string(),
            _ => format!("cannot run nvidia-smi: {e}"),
        })?;
    if !out.status.success() {
        return Err(format!(
            "nvidia-smi failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    pick(
        &String::from_utf8_lossy(&out.stdout),
        &info.device_pci_bus_id,
    )
}

/// Reads the SM clock of the GPU behind `info` into the record through `set`, or adds a
/// `sm_clock_mhz:` note saying why there is none (once).
pub(super) fn read(rec: &mut Record, info: &wgpu::AdapterInfo, set: fn(&mut Record, f64, f64)) {
    match sm_clock(info) {
        Ok(c) => set(rec, c.current_mhz, c.max_mhz),
        Err(why) if !rec.notes.iter().any(|n| n.starts_with("sm_clock_mhz:")) => {
            rec.note("sm_clock_mhz", why)
        }
        Err(_) => {}
    }
}

/// The clock of the GPU at PCI address `bus_id` (wgpu's `dddd:bb:dd.f`, empty when the
/// driver does not say) among `nvidia-smi`'s lines `bus id, sm MHz, max sm MHz`; without
/// an address, the only GPU listed.
fn pick(csv: &str, bus_id: &str) -> Result<SmClock, String> {
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').map(str::trim).collect())
        .collect();
    let want = pci_address(bus_id);
    let row = match want {
        Some(w) => rows
            .iter()
            .find(|r| pci_address(r[0]) == Some(w))
            .ok_or_else(|| format!("nvidia-smi lists no GPU at PCI address {bus_id}"))?,
        None if rows.len() == 1 => &rows[0],
        None => {
            return Err(format!(
                "the adapter reports no PCI address and nvidia-smi lists {} GPUs",
                rows.len()
            ))
        }
    };
    let mhz = |k: usize| -> Result<f64, String> {
        let field = row.get(k).copied().unwrap_or("");
        field
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| format!("nvidia-smi reports the SM clock as '{field}'"))
    };
    Ok(SmClock {
        current_mhz: mhz(1)?,
        max_mhz: mhz(2)?,
    })
}

/// (domain, bus, device, function) of `dddd:bb:dd.f` or nvidia-smi's `dddddddd:bb:dd.f`.
fn pci_address(s: &str) -> Option<(u32, u32, u32, u32)> {
    let mut parts = s.trim().split(':');
    let (domain, bus, rest) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (device, function) = rest.split_once('.')?;
    let hex = |t: &str| u32::from_str_radix(t, 16).ok();
    Some((hex(domain)?, hex(bus)?, hex(device)?, hex(function)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = "00000000:18:00.0, 1980, 1980\n00000000:2A:00.0, 345, 1980\n";

    #[test]
    fn the_adapters_gpu_is_found_by_pci_address_across_formats() {
        let c = pick(TWO, "0000:2a:00.0").unwrap();
        assert_eq!((c.current_mhz, c.max_mhz), (345.0, 1980.0));
        let c = pick(TWO, "0000:18:00.0").unwrap();
        assert_eq!(c.current_mhz, 1980.0);
        let e = pick(TWO, "0000:3b:00.0").unwrap_err();
        assert!(e.contains("0000:3b:00.0"), "{e}");
    }

    #[test]
    fn without_an_address_only_a_single_gpu_is_taken() {
        let e = pick(TWO, "").unwrap_err();
        assert!(e.contains("2 GPUs"), "{e}");
        let one = "00000000:01:00.0, 1755, 1980\n";
        assert_eq!(pick(one, "").unwrap().current_mhz, 1755.0);
    }

    #[test]
    fn unreadable_clocks_are_errors_not_zeros() {
        for bad in [
            "00000000:01:00.0, [N/A], 1980",
            "00000000:01:00.0, 0, 1980",
            "00000000:01:00.0, 1980",
        ] {
            let e = pick(bad, "").unwrap_err();
            assert!(e.contains("SM clock"), "{bad}: {e}");
        }
        assert_eq!(pci_address("0000:01:00"), None);
        assert_eq!(pci_address("00000001:AB:1f.3"), Some((1, 0xab, 0x1f, 3)));
    }
}
