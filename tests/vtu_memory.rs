//! VTU zlib data that inflates to more than the process can hold: a small file may declare,
//! and honestly inflate to, gigabytes (zlib inflates up to 1032-fold). The reader must
//! refuse with a typed `MeshError::File` naming the file, never abort on an allocation.
//! This binary's allocator refuses any allocation above `CAP`, standing in for a machine
//! without the memory; nothing else in this binary allocates that much.

use msc::model::mesh::{self, FileOptions};
use msc::model::MeshError;
use std::alloc::{GlobalAlloc, Layout, System};

#[path = "vtu_files/mod.rs"]
mod vtu_files;

use vtu_files::{block_of, vtu, zlib};

const CAP: usize = 48 << 20;

struct Capped;

unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > CAP {
            return std::ptr::null_mut();
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > CAP {
            return std::ptr::null_mut();
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Capped = Capped;

/// One zlib block of `data` under a UInt32 header that declares `size` bytes.
fn block(data: &[u8], size: u32) -> Vec<u8> {
    block_of(&zlib(data), size)
}

/// The error of loading `bytes` as a .vtu file, which must be a `MeshError::File`
/// naming it.
fn refused(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bomb.vtu");
    std::fs::write(&p, bytes).unwrap();
    match mesh::load_file(&p, None, &FileOptions::default()) {
        Err(e @ MeshError::File { .. }) => {
            let s = e.to_string();
            assert!(s.contains("bomb.vtu"), "'{s}' does not name the file");
            s
        }
        Err(e) => panic!("expected MeshError::File, got {e:?}"),
        Ok(m) => panic!("loaded {} vertices", m.positions.len()),
    }
}

/// 4M points of Int8 zeros: a 12 kB block that honestly inflates to 12 MB (within the
/// cap), whose 96 MB of f64 coordinates the process cannot allocate. It aborted the
/// process ('memory allocation of 100663296 bytes failed').
#[test]
fn coordinates_the_process_cannot_allocate_are_a_typed_error() {
    let n: u64 = 4 << 20;
    let zeros = vec![0u8; 3 * n as usize];
    let file = vtu(n, "Int8", &block(&zeros, zeros.len() as u32));
    assert!(file.len() < 64 << 10, "{} bytes", file.len());
    let e = refused(&file);
    assert!(
        e.contains("DataArray Points: cannot allocate the 100663296 bytes it needs"),
        "{e}"
    );
}

/// A block declaring more than zlib can inflate its bytes to (1032-fold) is refused before
/// anything is inflated or reserved, naming the block and both sizes.
#[test]
fn a_block_declaring_more_than_zlib_can_inflate_is_refused() {
    let n: u64 = 1 << 26; // 1.5 GiB of Float64 coordinates declared
    let zeros = [0u8; 120];
    let declared = (n * 24) as u32;
    let data = block(&zeros, declared);
    let c = data.len() - 16;
    let e = refused(&vtu(n, "Float64", &data));
    assert!(
        e.contains(&format!(
            "compressed block 0 holds {c} bytes, which cannot inflate to the {declared} its \
             header says"
        )),
        "{e}"
    );
}
