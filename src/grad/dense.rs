//! Small dense linear algebra for Levenberg-Marquardt's normal equations (J^T J + lambda
//! D) delta = -J^T r, with at most a few dozen unknowns.

/// Solves the symmetric positive definite system m x = b (row-major n x n) by Cholesky;
/// None when m is not positive definite to working precision.
pub(crate) fn solve_dense(m: &mut [f64], mut b: Vec<f64>, n: usize) -> Option<Vec<f64>> {
    for j in 0..n {
        let mut d = m[j * n + j];
        for k in 0..j {
            d -= m[j * n + k] * m[j * n + k];
        }
        if !(d > 0.0 && d.is_finite()) {
            return None;
        }
        let d = d.sqrt();
        m[j * n + j] = d;
        for i in j + 1..n {
            let mut s = m[i * n + j];
            for k in 0..j {
                s -= m[i * n + k] * m[j * n + k];
            }
            m[i * n + j] = s / d;
        }
    }
    for i in 0..n {
        let mut s = b[i];
        for k in 0..i {
            s -= m[i * n + k] * b[k];
        }
        b[i] = s / m[i * n + i];
    }
    for i in (0..n).rev() {
        let mut s = b[i];
        for k in i + 1..n {
            s -= m[k * n + i] * b[k];
        }
        b[i] = s / m[i * n + i];
    }
    b.iter().all(|x| x.is_finite()).then_some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cholesky_solves_an_spd_system_and_refuses_an_indefinite_one() {
        let mut m = vec![4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0];
        let a = m.clone();
        let x = solve_dense(&mut m, vec![1.0, 2.0, 3.0], 3).unwrap();
        for i in 0..3 {
            let r: f64 = (0..3).map(|k| a[i * 3 + k] * x[k]).sum();
            assert!((r - [1.0, 2.0, 3.0][i]).abs() < 1e-12);
        }
        let mut bad = vec![1.0, 2.0, 2.0, 1.0];
        assert!(solve_dense(&mut bad, vec![1.0, 1.0], 2).is_none());
    }
}
