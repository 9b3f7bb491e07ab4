//! A VTU whose zlib header declares far more than its block inflates to (but no more
//! than zlib's 1032-fold could): the reader's memory must follow the data, not the
//! declaration, so a small hostile file is refused naming the array and the declared
//! size without reserving it. This binary's allocator records its largest request.

use msc::model::mesh::{self, FileOptions};
use msc::model::MeshError;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

#[path = "vtu_files/mod.rs"]
mod vtu_files;

use vtu_files::{block_of, vtu, zlib};

static LARGEST: AtomicUsize = AtomicUsize::new(0);

struct Recording;

unsafe impl GlobalAlloc for Recording {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Recording = Recording;

/// 1M points of Float64 declared (24 MiB) in one zlib block of 25,000 bytes (enough for
/// zlib to honestly reach 24 MiB), which holds a stream of 24 bytes and padding after
/// it. The whole 24 MiB was reserved before inflating.
#[test]
fn a_block_declaring_more_than_it_inflates_to_reserves_no_more_than_it_holds() {
    let n: u64 = 1 << 20;
    let declared = (n * 24) as u32;
    let mut c = zlib(&[0u8; 24]);
    c.resize(25_000, 0);
    assert!(c.len() as u64 * 1032 >= declared as u64);
    let file = vtu(n, "Float64", &block_of(&c, declared));

    LARGEST.store(0, Ordering::Relaxed);
    let e = mesh::load_bytes(
        "lie.vtu",
        &file,
        mesh::MeshFormat::Vtu,
        &FileOptions::default(),
    )
    .unwrap_err();
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(matches!(e, MeshError::File { .. }), "{e:?}");
    let said = e.to_string();
    assert!(
        said.contains("DataArray Points")
            && said.contains(&format!("inflates to 24 bytes, its header says {declared}")),
        "{said}"
    );
    assert!(
        largest <= 4 * file.len(),
        "an allocation of {largest} bytes for a file of {} bytes",
        file.len()
    );
}
