//! Tests of the benchmark workloads: grid shapes, charged fractions, the cloth's springs
//! and pins, the worlds' parameter box, the clouds' surfaces and the host-memory check.

use super::*;
use std::f64::consts::PI;

#[test]
fn grid_shapes_are_exact_when_n_factors_well() {
    assert_eq!(grid_shape(256), Some([16, 16]));
    assert_eq!(grid_shape(1 << 20), Some([1024, 1024]));
    // 2^11 = 64 x 32: within 4:1, exact.
    assert_eq!(grid_shape(2048), Some([64, 32]));
    assert_eq!(grid_shape(4), Some([2, 2]));
    // A prime: no exact grid; the nearest square-ish one.
    let [nx, ny] = grid_shape(1009).unwrap();
    assert_eq!((nx, ny), (32, 32));
    assert_eq!(grid_shape(3), None);
}

#[test]
fn charged_fraction_picks_round_f_n_particles() {
    for (n, f, want) in [(100, 0.25, 25), (1000, 0.1, 100), (7, 1.0, 7), (50, 0.0, 0)] {
        let got = (0..n).filter(|&i| charged_at(i, f)).count();
        assert_eq!(got, want, "n {n} f {f}");
    }
}

#[test]
fn cloth_has_structural_and_shear_springs_and_two_pins() {
    let b = cloth(256, 20, 0.5).unwrap();
    let s = &b.system;
    assert_eq!(s.len(), 256);
    // 16 x 16: structural 2 * 15 * 16, shear 2 * 15 * 15.
    assert_eq!(s.springs().len(), 2 * 15 * 16 + 2 * 15 * 15);
    assert_eq!(s.charged_count(), 128);
    assert_eq!(s.pinned().iter().filter(|&&p| p).count(), 2);
    assert_eq!(b.config.solver.iterations, 20);
    assert_eq!(b.config.solver.tolerance, 0.0);
    b.config.validate().unwrap();
}

#[test]
fn worlds_vary_parameters_within_the_box_and_world_0_is_the_scene() {
    let base = world_base(WorldScene::Torus, 20, 0.0).unwrap();
    assert_eq!(base.system.len(), 145);
    let ws = worlds(WorldScene::Torus, 64, 20, 0.0).unwrap();
    assert_eq!(ws.len(), 64);
    assert_eq!(ws[0].system.charges(), base.system.charges());
    assert_eq!(ws[0].config.dt, base.config.dt);
    let f = WORLD_PARAMETER_FACTOR;
    let (mut dts, mut qs) = (Vec::new(), Vec::new());
    for w in &ws {
        assert_eq!(w.system.len(), 145);
        assert_eq!(w.system.springs().len(), base.system.springs().len());
        let q = w.system.charges()[0] / base.system.charges()[0];
        let k = w.system.springs()[0].stiffness / base.system.springs()[0].stiffness;
        let h = w.config.dt / base.config.dt;
        assert!(
            (1.0 / f..=f).contains(&q) && (1.0 / f..=f).contains(&k),
            "{q} {k}"
        );
        assert!((f.sqrt().recip()..=f.sqrt()).contains(&h), "{h}");
        w.config.validate().unwrap();
        dts.push(w.config.dt);
        qs.push(q);
    }
    // Spread over the box, not clustered: both halves of each range are used.
    for v in [
        &qs,
        &dts.iter().map(|d| d / base.config.dt).collect::<Vec<_>>(),
    ] {
        assert!(v.iter().filter(|&&x| x < 1.0).count() >= 16, "{v:?}");
        assert!(v.iter().filter(|&&x| x > 1.0).count() >= 16, "{v:?}");
    }
    let cloth = worlds(WorldScene::Cloth, 3, 20, 0.5).unwrap();
    assert_eq!(cloth[2].system.len(), WORLD_CLOTH_PARTICLES);
    assert_eq!(cloth[2].system.charged_count(), WORLD_CLOTH_PARTICLES / 2);
}

/// Each crowded cloud lies on its surface, inside the cube, with the cube's signs; the
/// names read back.
#[test]
fn crowded_clouds_lie_on_their_surfaces() {
    let cube = coulomb(400).unwrap();
    for cloud in Cloud::ALL {
        assert_eq!(Cloud::from_name(cloud.name()), Some(cloud));
        let b = coulomb_on(400, cloud).unwrap();
        assert_eq!(b.system.charges(), cube.system.charges(), "{cloud:?}");
        for p in b.system.positions() {
            assert!(p.abs().max_element() <= 0.5 + 1e-12, "{cloud:?} {p}");
            let off = match cloud {
                Cloud::Cube => 0.0,
                Cloud::Sphere => p.length() - 0.5,
                Cloud::Torus => {
                    let ring = (p.x * p.x + p.y * p.y).sqrt() - 0.35;
                    (ring * ring + p.z * p.z).sqrt() - 0.12
                }
                Cloud::Sheet => {
                    let (u, v) = (p.x + 0.5, p.y + 0.5);
                    p.z - 0.05 * (4.0 * PI * u).sin() * (2.0 * PI * v).cos()
                }
            };
            assert!(
                off.abs() < 1e-12,
                "{cloud:?}: {p} is {off} m off its surface"
            );
        }
    }
    assert_eq!(Cloud::from_name("cone"), None);
}

#[test]
fn coulomb_cloud_is_all_charged_and_reproducible() {
    let a = coulomb(500).unwrap();
    let b = coulomb(500).unwrap();
    assert_eq!(a.system.charged_count(), 500);
    assert!(a.system.springs().is_empty());
    assert_eq!(a.system.positions(), b.system.positions());
    assert!(a
        .system
        .positions()
        .iter()
        .all(|p| p.abs().max_element() <= 0.5));
    let positive = a.system.charges().iter().filter(|&&q| q > 0.0).count();
    assert!((150..350).contains(&positive), "{positive} positive of 500");
    a.config.validate().unwrap();
    assert!(matches!(
        coulomb(1),
        Err(WorkloadError::CoulombTooSmall { .. })
    ));
}

/// A size whose estimate exceeds the memory available is refused with the workload, the
/// size and both byte counts; the estimate grows with the springs; unknown memory is not
/// checked.
#[test]
fn a_size_beyond_the_host_memory_is_refused_by_its_size() {
    let n = System::MAX_PARTICLES;
    let (cloth, cloud) = (
        host_bytes(Workload::Cloth, n).unwrap(),
        host_bytes(Workload::Coulomb, n).unwrap(),
    );
    // Every particle takes at least its position, velocity, mass and charge (f64).
    assert!(cloud >= 56 * n as u64, "{cloud}");
    assert!(cloth > cloud, "{cloth} {cloud}");
    assert_eq!(host_bytes(Workload::Ddef, n), Some(cloud));
    assert_eq!(host_bytes(Workload::Worlds, n), None);
    let available = 64 << 30;
    for w in [Workload::Cloth, Workload::Coulomb, Workload::Ddef] {
        let e = check_host_memory_within(w, n, Some(available)).unwrap_err();
        let WorkloadError::HostMemory {
            workload,
            n: size,
            ref shortfall,
        } = e
        else {
            panic!("{e}");
        };
        assert_eq!((workload, size), (w, n));
        assert_eq!(shortfall.available, available);
        assert_eq!(Some(shortfall.needed), host_bytes(w, n));
        let text = e.to_string();
        for part in [
            w.name(),
            &n.to_string(),
            &shortfall.needed.to_string(),
            &available.to_string(),
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        assert!(check_host_memory_within(w, 1 << 10, Some(available)).is_ok());
        assert!(check_host_memory_within(w, n, None).is_ok());
    }
}
