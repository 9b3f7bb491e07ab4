//! Matrix-free linear solvers for A v = b with A = M + sum_k W_k (graph-Laplacian blocks)
//! (DESIGN section 3). Mirrors `shaders/jacobi_sweep.wgsl`, `shaders/cg_*.wgsl`.
