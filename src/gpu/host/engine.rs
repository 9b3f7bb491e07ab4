//! The engine a recording runs on: the compiled pipelines, the bind-group cache and the
//! deduplicated `Dispatch` records (one uniform buffer, picked by dynamic offset), and
//! the replay of a recording into a compute pass. It never owns the device: every call
//! that creates something takes it.

use std::collections::HashMap;

use wgpu::util::DeviceExt;

use super::buffers::{Buf, Buffers};
use super::recording::{DispatchOp, Op};
use crate::gpu::error::GpuError;
use crate::gpu::layout::Dispatch;
use crate::gpu::shader::{kernel_pipeline, Access, Kernel, Specialization};

struct Pipeline {
    kernel: Kernel,
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    /// Binds a batch's world table as group 2.
    batched: bool,
}

/// Pipelines, bind groups and dispatch records of one solver.
pub(in crate::gpu) struct Engine {
    pipelines: Vec<Pipeline>,
    pipeline_index: HashMap<&'static str, usize>,
    groups: Vec<wgpu::BindGroup>,
    group_index: HashMap<(&'static str, Vec<Buf>), usize>,
    dispatch_layout: wgpu::BindGroupLayout,
    records: Vec<Dispatch>,
    record_index: HashMap<[u32; 8], usize>,
    record_stride: u32,
    /// The device's `max_compute_workgroups_per_dimension`, which every grid must meet.
    max_groups: u32,
    /// The records' uniform buffer, once [`Self::seal`]ed.
    dispatch_group: Option<wgpu::BindGroup>,
    /// A batch of worlds: the world table's layout and bind group (group 2).
    worlds_layout: Option<wgpu::BindGroupLayout>,
    worlds_group: Option<wgpu::BindGroup>,
    /// The pipeline constants of this solver's kernels.
    spec: Specialization,
}

/// Checks `bufs` against `k`'s storage bindings: one buffer per binding, and no buffer
/// bound twice when one of its bindings is written (wgpu refuses such a bind group only
/// at dispatch time, with a message that names neither).
pub(in crate::gpu) fn check_bindings(k: Kernel, bufs: &[Buf]) -> Result<(), GpuError> {
    if bufs.len() != k.storage.len() {
        return Err(GpuError::Binding {
            kernel: k.name,
            problem: format!(
                "{} storage buffers given, the kernel binds {}",
                bufs.len(),
                k.storage.len()
            ),
        });
    }
    for (i, (b, a)) in bufs.iter().zip(k.storage).enumerate() {
        if *a == Access::ReadWrite {
            if let Some(j) = bufs.iter().enumerate().position(|(j, o)| j != i && o == b) {
                return Err(GpuError::Binding {
                    kernel: k.name,
                    problem: format!(
                        "buffer {b:?} is bound at {} (written) and at {}",
                        i + 1,
                        j + 1
                    ),
                });
            }
        }
    }
    Ok(())
}

impl Engine {
    /// An engine for one world; [`Self::batched`] for a batch of worlds.
    pub(in crate::gpu) fn new(device: &wgpu::Device, spec: Specialization) -> Self {
        let dispatch_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("msc dispatch records"),
            entries: &[wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: true,
                    min_binding_size: wgpu::BufferSize::new(std::mem::size_of::<Dispatch>() as u64),
                },
                count: None,
            }],
        });
        let align = device.limits().min_uniform_buffer_offset_alignment.max(1);
        Self {
            pipelines: Vec::new(),
            pipeline_index: HashMap::new(),
            groups: Vec::new(),
            group_index: HashMap::new(),
            dispatch_layout,
            records: Vec::new(),
            record_index: HashMap::new(),
            record_stride: (std::mem::size_of::<Dispatch>() as u32).div_ceil(align) * align,
            max_groups: device.limits().max_compute_workgroups_per_dimension,
            dispatch_group: None,
            worlds_layout: None,
            worlds_group: None,
            spec,
        }
    }

    /// An engine for a batch of worlds: the kernels that read per-world values bind
    /// `worlds` (the per-world parameters) and `table` (the world of each particle, then
    /// the Chebyshev weights) as group 2.
    pub(in crate::gpu) fn batched(
        device: &wgpu::Device,
        worlds: &wgpu::Buffer,
        table: &wgpu::Buffer,
        spec: Specialization,
    ) -> Self {
        let entry = |binding| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: true },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("msc world table"),
            entries: &[entry(0), entry(1)],
        });
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("msc world table"),
            layout: &layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: worlds.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: table.as_entire_binding(),
                },
            ],
        });
        Self {
            worlds_layout: Some(layout),
            worlds_group: Some(group),
            ..Self::new(device, spec)
        }
    }

    fn pipeline(&mut self, device: &wgpu::Device, k: Kernel) -> usize {
        if let Some(&i) = self.pipeline_index.get(k.name) {
            return i;
        }
        let (pipeline, layout) = kernel_pipeline(
            device,
            k,
            Some(&self.dispatch_layout),
            self.worlds_layout.as_ref(),
            self.spec,
        );
        self.pipelines.push(Pipeline {
            kernel: k,
            pipeline,
            layout,
            batched: self.worlds_layout.is_some() && k.reads_worlds(),
        });
        let i = self.pipelines.len() - 1;
        self.pipeline_index.insert(k.name, i);
        i
    }

    fn bind_group(
        &mut self,
        device: &wgpu::Device,
        buffers: &Buffers,
        pipeline: usize,
        bufs: &[Buf],
    ) -> Result<usize, GpuError> {
        let name = self.pipelines[pipeline].kernel.name;
        let key = (name, bufs.to_vec());
        if let Some(&g) = self.group_index.get(&key) {
            return Ok(g);
        }
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: buffers.params().as_entire_binding(),
        }];
        for (i, b) in bufs.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: buffers
                    .get(*b)
                    .map_err(|_| GpuError::Binding {
                        kernel: name,
                        problem: format!("buffer {b:?} does not exist on this solver"),
                    })?
                    .as_entire_binding(),
            });
        }
        let label = format!("{name} {bufs:?}");
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&label),
            layout: &self.pipelines[pipeline].layout,
            entries: &entries,
        });
        self.groups.push(group);
        let g = self.groups.len() - 1;
        self.group_index.insert(key, g);
        Ok(g)
    }

    /// The pipeline constants its kernels are built with.
    pub(in crate::gpu) fn spec(&self) -> Specialization {
        self.spec
    }

    /// Byte offset of a dispatch record (deduplicated).
    pub(in crate::gpu) fn record(&mut self, d: Dispatch) -> u32 {
        let key: [u32; 8] = bytemuck::cast(d);
        let records = &mut self.records;
        let i = *self.record_index.entry(key).or_insert_with(|| {
            records.push(d);
            records.len() - 1
        });
        // Past u32, [`Self::seal`] refuses the records before any offset is used.
        u32::try_from(i as u64 * u64::from(self.record_stride)).unwrap_or(u32::MAX)
    }

    /// A launch of `k` on `bufs` (its storage bindings 1.., checked) with the record at
    /// byte offset `record` over the workgroup grid `grid`.
    pub(in crate::gpu) fn dispatch(
        &mut self,
        device: &wgpu::Device,
        buffers: &Buffers,
        k: Kernel,
        bufs: &[Buf],
        record: u32,
        grid: [u32; 2],
    ) -> Result<Op, GpuError> {
        check_bindings(k, bufs)?;
        // wgpu would refuse it only when the pass is submitted (in a caller's encoder, as
        // an uncaptured error).
        if let Some(&g) = grid.iter().find(|&&g| g > self.max_groups) {
            return Err(GpuError::LimitExceeded {
                what: format!(
                    "workgroups per dimension of a {} dispatch (limit \
                     max_compute_workgroups_per_dimension)",
                    k.name
                ),
                needed: g.into(),
                limit: self.max_groups.into(),
            });
        }
        let pipeline = self.pipeline(device, k);
        let group = self.bind_group(device, buffers, pipeline, bufs)?;
        Ok(Op::Dispatch(DispatchOp {
            pipeline,
            group,
            record,
            grid,
        }))
    }

    /// Uploads the records (once every recording is planned): replay needs them. A
    /// Chebyshev solve has a record per iteration, so their buffer grows with the
    /// iteration count: refused past `max_buffer_size` (wgpu would panic) or past the
    /// u32 dynamic offsets.
    pub(in crate::gpu) fn seal(&mut self, device: &wgpu::Device) -> Result<(), GpuError> {
        let bytes = u64::from(self.record_stride) * self.records.len().max(1) as u64;
        let max_buffer = device.limits().max_buffer_size;
        let (limit_name, limit) = if max_buffer <= u64::from(u32::MAX) {
            ("max_buffer_size", max_buffer)
        } else {
            ("u32 dynamic offsets", u64::from(u32::MAX))
        };
        if bytes > limit {
            return Err(GpuError::LimitExceeded {
                what: format!(
                    "buffer 'dispatch records' (bytes; limit {limit_name}; a Chebyshev solve \
                     has one record per iteration: lower integrator.solver.iterations)"
                ),
                needed: bytes,
                limit,
            });
        }
        let stride = self.record_stride as usize;
        let mut bytes = vec![0u8; stride * self.records.len().max(1)];
        for (i, r) in self.records.iter().enumerate() {
            bytes[i * stride..i * stride + std::mem::size_of::<Dispatch>()]
                .copy_from_slice(bytemuck::bytes_of(r));
        }
        let buffer = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("msc dispatch records"),
            contents: &bytes,
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("msc dispatch records"),
            layout: &self.dispatch_layout,
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &buffer,
                    offset: 0,
                    size: wgpu::BufferSize::new(std::mem::size_of::<Dispatch>() as u64),
                }),
            }],
        });
        self.dispatch_group = Some(group);
        Ok(())
    }

    /// The kernel an op launches, for profiles.
    pub(in crate::gpu) fn kernel_name(&self, op: &Op) -> &'static str {
        let Op::Dispatch(d) = op;
        self.pipelines[d.pipeline].kernel.name
    }

    /// Records `ops` into `pass`.
    pub(in crate::gpu) fn replay(&self, pass: &mut wgpu::ComputePass<'_>, ops: &[Op]) {
        let Some(records) = self.dispatch_group.as_ref() else {
            // Not sealed: nothing was planned, so there is nothing to replay.
            return;
        };
        let mut current = usize::MAX;
        for Op::Dispatch(op) in ops {
            if op.pipeline != current {
                let p = &self.pipelines[op.pipeline];
                pass.set_pipeline(&p.pipeline);
                if let (true, Some(g)) = (p.batched, &self.worlds_group) {
                    pass.set_bind_group(2, g, &[]);
                }
                current = op.pipeline;
            }
            pass.set_bind_group(0, &self.groups[op.group], &[]);
            pass.set_bind_group(1, records, &[op.record]);
            pass.dispatch_workgroups(op.grid[0], op.grid[1], 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::kernels::reductions::DOT_REDUCE;
    use crate::gpu::kernels::tangents::TANGENT_COPY;

    #[test]
    fn a_binding_mismatch_is_a_typed_error() {
        // Too few buffers for the kernel's bindings.
        let e = check_bindings(DOT_REDUCE, &[Buf::Partials]).unwrap_err();
        assert!(
            matches!(&e, GpuError::Binding { kernel, problem }
                if *kernel == "dot_reduce" && problem.contains("1 storage buffers given, the kernel binds 2")),
            "{e}"
        );
        // A written buffer bound twice.
        let e = check_bindings(TANGENT_COPY, &[Buf::TanZ, Buf::TanZ]).unwrap_err();
        assert!(
            matches!(&e, GpuError::Binding { problem, .. } if problem.contains("TanZ")),
            "{e}"
        );
        // One buffer per binding, none written twice.
        assert!(check_bindings(DOT_REDUCE, &[Buf::Partials, Buf::Scalars]).is_ok());
    }
}
