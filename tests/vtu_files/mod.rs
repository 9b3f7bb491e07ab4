//! Small VTU files built in memory for the reader's memory tests (each test binary has
//! its own allocator, so they share this by `#[path]`, not through `common`).

use std::io::Write;

/// `data` compressed by zlib at its best.
pub fn zlib(data: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(data).unwrap();
    z.finish().unwrap()
}

/// One compressed block `c` under a UInt32 header that declares `size` bytes.
pub fn block_of(c: &[u8], size: u32) -> Vec<u8> {
    let mut out: Vec<u8> = [1, size, size, c.len() as u32]
        .into_iter()
        .flat_map(u32::to_le_bytes)
        .collect();
    out.extend_from_slice(c);
    out
}

/// A VTU of `n` points whose coordinates (of `ty`) are the appended raw `points` block,
/// and one tetrahedron in ASCII.
pub fn vtu(n: u64, ty: &str, points: &[u8]) -> Vec<u8> {
    let mut f = format!(
        "<?xml version=\"1.0\"?>\n<VTKFile type=\"UnstructuredGrid\" version=\"0.1\" \
         byte_order=\"LittleEndian\" compressor=\"vtkZLibDataCompressor\">\n\
         <UnstructuredGrid><Piece NumberOfPoints=\"{n}\" NumberOfCells=\"1\">\n\
         <Points><DataArray type=\"{ty}\" Name=\"Points\" NumberOfComponents=\"3\" \
         format=\"appended\" offset=\"0\"/></Points>\n<Cells>\n\
         <DataArray type=\"Int64\" Name=\"connectivity\" format=\"ascii\">0 1 2 3</DataArray>\n\
         <DataArray type=\"Int64\" Name=\"offsets\" format=\"ascii\">4</DataArray>\n\
         <DataArray type=\"UInt8\" Name=\"types\" format=\"ascii\">10</DataArray>\n\
         </Cells></Piece></UnstructuredGrid>\n<AppendedData encoding=\"raw\">_"
    )
    .into_bytes();
    f.extend_from_slice(points);
    f.extend_from_slice(b"\n</AppendedData></VTKFile>\n");
    f
}
