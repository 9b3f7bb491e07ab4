//! DDEF on the GPU (the paper's Section 3.3, Algorithm 1; DESIGN section 4).
//!
//! The host builds a [`Ddef`] (grid, point location, N_s, M_j, the gather plan: the
//! irregular, branchy part); the device runs the O(m n) far field and the per-charge
//! gathers:
//! 1. `ddef_far`: E_far at every site from the sources not in M_j, tiled like
//!    `coulomb_tiled`, the exclusion exact per source (a cursor over the sorted M_j).
//! 2. `ddef_vertex_far`: per occupied tetrahedron the four vertex far values, minus the
//!    double-counted near sources for the `corrected` variant (`Ddef::vertex_far`).
//! 3. `ddef_gather`: per charge the exact near field over its tetrahedron's list plus
//!    the interpolated far field.
//!
//! [`GpuDdef`] works on its own (benchmarks, tests: fields per source come back) or
//! inside `GpuSolver` (`coulomb.method = "ddef"`), where the sources are the solver's
//! compacted charges and the gather adds q_i E to its force buffer; the solver's host
//! stage before each evaluation is `solver::ddef_stage`. The kernels are in `ddef/`.
//!
//! All device quantities are in units scaled by sqrt(k_c) (charges q sqrt(k_c), fields
//! E / sqrt(k_c)), as in the tiled all-pairs kernel, so products stay in f32 range.

use glam::DVec3;
use wgpu::util::DeviceExt;

use crate::config::DdefVariant;
use crate::ddef::Ddef;
use crate::gpu::device::readback::read_buffers;
use crate::gpu::device::{poll_error, scoped};
use crate::gpu::error::GpuError;
use crate::gpu::host::limits::grid;
use crate::gpu::host::params::{to_f32, vec4};
use crate::gpu::host::recording::StageKernels;
use crate::gpu::layout::DdefCounts;
use crate::gpu::shader::Access::{Read, ReadWrite};
use crate::gpu::shader::{kernel_pipeline, Kernel, Library};
use crate::model::COULOMB_K;

pub const DDEF_FAR: Kernel = Kernel {
    name: "ddef_far",
    body: include_str!("ddef/ddef_far.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Physics],
    storage: &[Read, Read, Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const DDEF_VERTEX_FAR: Kernel = Kernel {
    name: "ddef_vertex_far",
    body: include_str!("ddef/ddef_vertex_far.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Physics],
    storage: &[Read, Read, Read, Read, Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const DDEF_GATHER: Kernel = Kernel {
    name: "ddef_gather",
    body: include_str!("ddef/ddef_gather.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Physics],
    storage: &[Read, Read, Read, Read, Read, Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const KERNELS: &[Kernel] = &[DDEF_FAR, DDEF_VERTEX_FAR, DDEF_GATHER];

/// A storage buffer that grows (never shrinks) as evaluations need more room.
struct Grown {
    label: &'static str,
    buffer: wgpu::Buffer,
    capacity: u64,
}

impl Grown {
    fn new(device: &wgpu::Device, label: &'static str) -> Self {
        Self {
            label,
            buffer: storage_buffer(device, label, 16),
            capacity: 16,
        }
    }
}

fn storage_buffer(device: &wgpu::Device, label: &str, size: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size.max(16),
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

/// The buffers a [`GpuDdef`] owns (growable, per evaluation), by role.
#[derive(Clone, Copy)]
enum Slot {
    Sites,
    SiteSources,
    GroupVertices,
    Near,
    TargetGroup,
    TargetWeights,
    Far,
    VertexFar,
}
const SLOTS: usize = 8;
const SLOT_LABELS: [&str; SLOTS] = [
    "msc ddef sites",
    "msc ddef site sources (M_j)",
    "msc ddef group vertices",
    "msc ddef near lists",
    "msc ddef target groups",
    "msc ddef target weights",
    "msc ddef far field",
    "msc ddef vertex far values",
];

/// Where the sources come from and where the gather writes.
enum Io {
    /// Standalone: our own sources (uploaded from the host), source-to-particle map and
    /// field output (E / sqrt(k_c) per source).
    Own {
        sources: Grown,
        charged: Grown,
        out: Grown,
    },
    /// Inside the solver: its compacted sources, charged indices and force buffer.
    Attached {
        sources: wgpu::Buffer,
        charged: wgpu::Buffer,
        force: wgpu::Buffer,
    },
}

/// The three DDEF kernels and their buffers on one device.
pub struct GpuDdef {
    device: wgpu::Device,
    queue: wgpu::Queue,
    eps2: f32,
    pipelines: [(wgpu::ComputePipeline, wgpu::BindGroupLayout); 3],
    counts: wgpu::Buffer,
    slots: Vec<Grown>,
    io: Io,
    bind_groups: Option<[wgpu::BindGroup; 3]>,
    /// Sizes of the uploaded evaluation: sites, groups, sources (None before any upload).
    uploaded: Option<(u32, u32, u32)>,
    uploads: u64,
}

impl GpuDdef {
    /// The kernels on the caller's device, standalone: [`Self::upload`] takes the sources
    /// from the host and [`Self::read_fields`] returns the field at each source.
    /// `softening` is the Coulomb eps (m) the [`Ddef`] was built with.
    pub fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        softening: f64,
    ) -> Result<Self, GpuError> {
        scoped(device, || {
            let io = Io::Own {
                sources: Grown::new(device, "msc ddef sources"),
                charged: Grown::new(device, "msc ddef source particles"),
                out: Grown::new(device, "msc ddef fields"),
            };
            Self::with_io(device, queue, softening, io)
        })
    }

    /// Inside a solver: sources, source-to-particle map and the force buffer are the
    /// solver's (the gather adds q_i E to the forces).
    pub(in crate::gpu) fn attached(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        softening: f64,
        sources: &wgpu::Buffer,
        charged: &wgpu::Buffer,
        force: &wgpu::Buffer,
    ) -> Result<Self, GpuError> {
        let io = Io::Attached {
            sources: sources.clone(),
            charged: charged.clone(),
            force: force.clone(),
        };
        Self::with_io(device, queue, softening, io)
    }

    fn with_io(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        softening: f64,
        io: Io,
    ) -> Result<Self, GpuError> {
        let eps2 = to_f32(softening * softening, "softening", 0)?;
        let counts = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("msc ddef counts"),
            contents: bytemuck::bytes_of(&DdefCounts::default()),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        });
        Ok(Self {
            device: device.clone(),
            queue: queue.clone(),
            eps2,
            pipelines: [DDEF_FAR, DDEF_VERTEX_FAR, DDEF_GATHER]
                .map(|k| kernel_pipeline(device, k, None, None, Default::default())),
            counts,
            slots: SLOT_LABELS.iter().map(|l| Grown::new(device, l)).collect(),
            io,
            bind_groups: None,
            uploaded: None,
            uploads: 0,
        })
    }

    /// Evaluations uploaded so far.
    pub fn uploads(&self) -> u64 {
        self.uploads
    }

    /// Uploads one evaluation standalone: the sources of `ddef` (its charged particles
    /// of (x, q), the arrays it was built from) and its lists (see [`Self::upload_lists`]).
    pub fn upload(
        &mut self,
        ddef: &Ddef,
        x: &[DVec3],
        q: &[f64],
        variant: DdefVariant,
    ) -> Result<(), GpuError> {
        let sqrt_k = COULOMB_K.sqrt();
        let mut src = Vec::with_capacity(ddef.source_particles().len());
        let mut particles = Vec::with_capacity(src.capacity());
        for &i in ddef.source_particles() {
            let i = i as usize;
            let (Some(&p), Some(&qi)) = (x.get(i), q.get(i)) else {
                return Err(GpuError::Unsupported(format!(
                    "DDEF source particle {i} is past the {} positions and {} charges given",
                    x.len(),
                    q.len()
                )));
            };
            src.push(vec4(
                p,
                to_f32(qi * sqrt_k, "charge of particle", i)?,
                "position of particle",
                i,
            )?);
            particles.push(i as u32);
        }
        let device = self.device.clone();
        scoped(&device, || {
            let Io::Own {
                sources, charged, ..
            } = &mut self.io
            else {
                return Err(GpuError::Unsupported(
                    "the solver's DDEF evaluator takes its sources from the solver".into(),
                ));
            };
            let mut dirty = write_grown(&device, &self.queue, sources, &src)?;
            dirty |= write_grown(&device, &self.queue, charged, &particles)?;
            if dirty {
                self.bind_groups = None;
            }
            self.upload_lists(ddef, variant)
        })
    }

    /// Uploads the lists of one evaluation: the grid sites, M_j per site and the gather
    /// plan (per occupied tetrahedron its vertices and near list, per source its group
    /// and weights). The sources must already be on the device in `ddef`'s source order.
    pub fn upload_lists(&mut self, ddef: &Ddef, variant: DdefVariant) -> Result<(), GpuError> {
        let ns = ddef.source_particles().len();
        let sites = ddef.grid().sites();
        let mut site_data = Vec::with_capacity(sites.len());
        for (j, &u) in sites.iter().enumerate() {
            site_data.push(vec4(u, 0.0, "DDEF grid site", j)?);
        }
        let m_j = ddef.site_sources();
        let site_sources: Vec<u32> = m_j.offsets.iter().chain(&m_j.entries).copied().collect();
        let plan = ddef.gather_plan();
        let groups = plan.tet_vertices.len();
        let near: Vec<u32> = plan
            .near
            .offsets
            .iter()
            .copied()
            .chain(plan.near.entries.iter().flat_map(|e| [e.source, e.mask]))
            .collect();
        let weights: Vec<[f32; 4]> = plan.weights.iter().map(|w| w.map(|c| c as f32)).collect();
        let mut dirty = false;
        let device = self.device.clone();
        let queue = self.queue.clone();
        let mut put = |slot: Slot, data: &[u8]| -> Result<(), GpuError> {
            dirty |= write_grown(&device, &queue, &mut self.slots[slot as usize], data)?;
            Ok(())
        };
        put(Slot::Sites, bytemuck::cast_slice(&site_data))?;
        put(Slot::SiteSources, bytemuck::cast_slice(&site_sources))?;
        put(
            Slot::GroupVertices,
            bytemuck::cast_slice(&plan.tet_vertices),
        )?;
        put(Slot::Near, bytemuck::cast_slice(&near))?;
        put(Slot::TargetGroup, bytemuck::cast_slice(&plan.target_group))?;
        put(Slot::TargetWeights, bytemuck::cast_slice(&weights))?;
        // Outputs: sized, not written.
        for (slot, bytes) in [
            (Slot::Far, 16 * sites.len() as u64),
            (Slot::VertexFar, 64 * groups as u64),
        ] {
            dirty |= reserve(&device, &mut self.slots[slot as usize], bytes)?;
        }
        if let Io::Own { out, .. } = &mut self.io {
            dirty |= reserve(&device, out, 16 * ns as u64)?;
        }
        if dirty {
            self.bind_groups = None;
        }
        let counts = DdefCounts {
            n_sites: sites.len() as u32,
            n_groups: groups as u32,
            n_sources: ns as u32,
            corrected: u32::from(variant == DdefVariant::Corrected),
            eps2: self.eps2,
            mode: match self.io {
                Io::Attached { .. } => 0,
                Io::Own { .. } => 1,
            },
            _pad0: 0,
            _pad1: 0,
        };
        self.queue
            .write_buffer(&self.counts, 0, bytemuck::bytes_of(&counts));
        self.uploaded = Some((counts.n_sites, counts.n_groups, counts.n_sources));
        self.uploads += 1;
        if self.bind_groups.is_none() {
            self.bind_groups = Some(self.make_bind_groups());
        }
        Ok(())
    }

    fn make_bind_groups(&self) -> [wgpu::BindGroup; 3] {
        let s = |slot: Slot| &self.slots[slot as usize].buffer;
        let (sources, charged, out) = match &self.io {
            Io::Own {
                sources,
                charged,
                out,
            } => (&sources.buffer, &charged.buffer, &out.buffer),
            Io::Attached {
                sources,
                charged,
                force,
            } => (sources, charged, force),
        };
        let group = |k: usize, name: &str, bufs: &[&wgpu::Buffer]| {
            let entries: Vec<_> = bufs
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupEntry {
                    binding: i as u32 + 1,
                    resource: b.as_entire_binding(),
                })
                .collect();
            self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(name),
                layout: &self.pipelines[k].1,
                entries: &entries,
            })
        };
        [
            group(
                0,
                "msc ddef_far",
                &[
                    &self.counts,
                    s(Slot::Sites),
                    sources,
                    s(Slot::SiteSources),
                    s(Slot::Far),
                ],
            ),
            group(
                1,
                "msc ddef_vertex_far",
                &[
                    &self.counts,
                    s(Slot::GroupVertices),
                    s(Slot::Near),
                    s(Slot::Sites),
                    sources,
                    s(Slot::Far),
                    s(Slot::VertexFar),
                ],
            ),
            group(
                2,
                "msc ddef_gather",
                &[
                    &self.counts,
                    sources,
                    s(Slot::Near),
                    s(Slot::TargetGroup),
                    s(Slot::TargetWeights),
                    s(Slot::VertexFar),
                    charged,
                    out,
                ],
            ),
        ]
    }

    /// Records the three kernels of the uploaded evaluation into `pass` (nothing before
    /// the first upload).
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        let (Some((m, groups, ns)), Some(bind)) = (self.uploaded, &self.bind_groups) else {
            return;
        };
        let max = self.device.limits().max_compute_workgroups_per_dimension;
        for (k, count) in [m, groups, ns].into_iter().enumerate() {
            if count == 0 {
                continue;
            }
            let [x, y] = grid(count, max);
            pass.set_pipeline(&self.pipelines[k].0);
            pass.set_bind_group(0, &bind[k], &[]);
            pass.dispatch_workgroups(x, y, 1);
        }
    }

    /// Runs the uploaded evaluation (one submission) and waits for it.
    pub fn run(&self) -> Result<(), GpuError> {
        scoped(&self.device, || {
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("msc ddef"),
                });
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("msc ddef"),
                    timestamp_writes: None,
                });
                self.record(&mut pass);
            }
            let index = self.queue.submit([encoder.finish()]);
            self.device
                .poll(wgpu::PollType::Wait {
                    submission_index: Some(index),
                    timeout: None,
                })
                .map_err(poll_error)?;
            Ok(())
        })
    }

    /// The field (k_c included) at every source from the last run, in source order
    /// (standalone only).
    pub fn read_fields(&self) -> Result<Vec<DVec3>, GpuError> {
        let Io::Own { out, .. } = &self.io else {
            return Err(GpuError::Unsupported(
                "the solver's DDEF evaluator writes forces, not fields".into(),
            ));
        };
        let ns = self.uploaded.map_or(0, |u| u.2);
        self.read_scaled(&out.buffer, ns)
    }

    /// The far field (k_c included) at every grid site from the last run: paper eq. 17,
    /// to compare with [`Ddef::far_field`].
    pub fn read_far_field(&self) -> Result<Vec<DVec3>, GpuError> {
        let m = self.uploaded.map_or(0, |u| u.0);
        self.read_scaled(&self.slots[Slot::Far as usize].buffer, m)
    }

    fn read_scaled(&self, buffer: &wgpu::Buffer, count: u32) -> Result<Vec<DVec3>, GpuError> {
        let data = read_buffer(&self.device, &self.queue, buffer, 16 * u64::from(count))?;
        let f: &[[f32; 4]] = bytemuck::cast_slice(&data);
        let sqrt_k = COULOMB_K.sqrt();
        Ok(f.iter()
            .map(|a| DVec3::new(a[0] as f64, a[1] as f64, a[2] as f64) * sqrt_k)
            .collect())
    }

    /// Upload, run and read back: the field (k_c included) at every source of `ddef`
    /// built on (x, q), as [`Ddef::fields_at_sources`] with `Evaluation::Ddef(variant)`.
    pub fn fields_at_sources(
        &mut self,
        ddef: &Ddef,
        x: &[DVec3],
        q: &[f64],
        variant: DdefVariant,
    ) -> Result<Vec<DVec3>, GpuError> {
        self.upload(ddef, x, q, variant)?;
        self.run()?;
        self.read_fields()
    }

    /// Coulomb forces q_i E(x_i) on all `x.len()` particles (uncharged ones get zero), as
    /// [`Ddef::forces`].
    pub fn forces(
        &mut self,
        ddef: &Ddef,
        x: &[DVec3],
        q: &[f64],
        variant: DdefVariant,
    ) -> Result<Vec<DVec3>, GpuError> {
        let e = self.fields_at_sources(ddef, x, q, variant)?;
        let mut out = vec![DVec3::ZERO; x.len()];
        for (s, &i) in ddef.source_particles().iter().enumerate() {
            out[i as usize] = e[s] * q[i as usize];
        }
        Ok(out)
    }
}

impl StageKernels for GpuDdef {
    fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        GpuDdef::record(self, pass);
    }
}

/// Grows `b` to hold `bytes` (1.5x headroom, so slowly growing lists do not reallocate
/// every evaluation); true when the buffer was replaced.
fn reserve(device: &wgpu::Device, b: &mut Grown, bytes: u64) -> Result<bool, GpuError> {
    if bytes <= b.capacity {
        return Ok(false);
    }
    let limits = device.limits();
    let limit = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size);
    if bytes > limit {
        return Err(GpuError::LimitExceeded {
            what: format!("storage buffer '{}' (bytes)", b.label),
            needed: bytes,
            limit,
        });
    }
    let size = (bytes + bytes / 2).min(limit).next_multiple_of(16);
    b.buffer = storage_buffer(device, b.label, size);
    b.capacity = size;
    Ok(true)
}

fn write_grown<T: bytemuck::Pod>(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    b: &mut Grown,
    data: &[T],
) -> Result<bool, GpuError> {
    let bytes: &[u8] = bytemuck::cast_slice(data);
    let grown = reserve(device, b, bytes.len() as u64)?;
    // write_buffer needs a multiple of 4 bytes: every element here is 4-byte based.
    if !bytes.is_empty() {
        queue.write_buffer(&b.buffer, 0, bytes);
    }
    Ok(grown)
}

fn read_buffer(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    buffer: &wgpu::Buffer,
    bytes: u64,
) -> Result<Vec<u8>, GpuError> {
    if bytes == 0 {
        return Ok(Vec::new());
    }
    scoped(device, || {
        let encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("msc ddef readback"),
        });
        read_buffers(
            device,
            queue,
            encoder,
            &[(buffer, 0, bytes)],
            "msc ddef readback",
        )
    })
}
