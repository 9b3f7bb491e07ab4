//! The step clock past 2^32 steps: the step kernels carry into its second word, and the
//! time at which the external charges move and the energies are read is the step's. With
//! one word the clock wrapped to step 0, so an orbiting charge jumped back to its start
//! without a word after 2^32 steps (hours of a small system's run).

use super::gpu_solver::GpuSolver;
use crate::config::{Config, ExternalCharge, Integrator, Orbit};
use crate::cpu::CpuSimulation;
use crate::gpu::device::adapter::test_device;
use crate::gpu::host::buffers::Buf;
use crate::measures::time_at;
use crate::model::{State, System, SystemDesc};
use glam::DVec3;

#[test]
fn the_clock_carries_past_2_32_steps_and_the_time_with_it() {
    let Some((device, queue)) = test_device() else {
        return;
    };
    let system = System::new(SystemDesc {
        positions: vec![DVec3::ZERO, DVec3::new(0.0, 0.3, 0.0)],
        masses: vec![0.01; 2],
        charges: vec![1e-6, -2e-6],
        ..Default::default()
    })
    .unwrap();
    // At dt = 1 ns step 2^32 is t = 4.29 s: the charge has turned 4.29 rad from where
    // a wrapped clock puts it.
    let last = 1u64 << 32;
    for integrator in [
        Integrator::Imex,
        Integrator::SymplecticEuler,
        Integrator::Verlet,
    ] {
        let mut config = Config {
            integrator,
            dt: 1e-9,
            ..Config::default()
        };
        config.external_charges.push(ExternalCharge {
            charge: 3e-6,
            position: DVec3::new(1.0, 0.0, 0.0),
            orbit: Some(Orbit {
                center: DVec3::ZERO,
                axis: DVec3::Z,
                angular_velocity: 1.0,
            }),
        });
        let mut gpu = GpuSolver::new(&device, &queue, &system, &config).unwrap();
        let before = [u32::MAX, 0, 0, 0];
        queue.write_buffer(gpu.buffer(Buf::Clock), 0, bytemuck::cast_slice(&before));
        gpu.advance(1).unwrap();
        let data = gpu.run_and_read(&[], &[(Buf::Clock, 0, 16)]).unwrap();
        let clock: [u32; 4] = bytemuck::pod_read_unaligned(&data[..16]);
        assert_eq!([clock[0], clock[1]], [0, 1], "{integrator:?}: the carry");
        let got = gpu.read_energies().unwrap().external;

        // The f64 reference: the same start at step 2^32 - 1, one step.
        let mut cpu = CpuSimulation::new(&system, &config).unwrap();
        cpu.restore(&State {
            x: system.positions().to_vec(),
            v: system.velocities().to_vec(),
            t: time_at(last - 1, config.dt),
            step: last - 1,
        });
        cpu.step_once();
        let want = cpu.energy_terms().external;
        let mut wrapped = cpu.current().clone();
        wrapped.t = 0.0;
        let wrapped = crate::cpu::energy::energies(&system, &config, &wrapped).external;
        // f32 positions, charges and time (4.29 s to 6e-8: a phase error of 3e-7 rad)
        // against a 10% difference at the wrapped time.
        assert!(
            (wrapped - want).abs() > 0.1 * want.abs(),
            "{wrapped} {want}"
        );
        assert!(
            (got - want).abs() <= 1e-4 * want.abs(),
            "{integrator:?}: external energy {got} at step 2^32, f64 {want} (wrapped: {wrapped})"
        );
    }
}
