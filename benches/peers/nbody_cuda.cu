// Peer for `msc bench --workload coulomb`: a hand-written CUDA all-pairs Coulomb kernel in
// the manner of the CUDA n-body sample (GPU Gems 3, ch. 31): sources staged in shared memory
// one tile at a time, float4 positions with the (scaled) charge in w, rsqrtf, an unrolled
// inner loop of constant length, softening so that no pair needs a test.
//
// Same workload as msc (src/bench/workload.rs): n charges uniformly in a 1 m cube centred on
// the origin, drawn with SplitMix64 from the same seed in the same order (x, y, z, sign per
// charge), 1 uC of total |charge|, softening 1 mm. Charges are scaled by sqrt(k_c) as msc's
// `coulomb_sources` does. Like msc's `coulomb_tiled` the kernel returns the force
// q_i sum_j q_j d / (r^2 + eps^2)^(3/2) and the potential q_i sum_{j != i} q_j / sqrt(r^2 + eps^2)
// (the self pair adds 0 to the force since d = 0; its potential term q_i / eps is subtracted
// once per target after the loop).
//
// Build: nvcc -O3 -arch=sm_90 -o nbody_cuda nbody_cuda.cu
// Run:   nbody_cuda --sizes 4K,16K,...  -> one JSON line per size on stdout
//        nbody_cuda --check 8 --sizes 4K -> forces at 8 strided charges, f32 GPU vs f64 host
// Counted work: 20 flops per interaction, self pair included (the n-body convention msc uses).

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifndef TILE
#define TILE 256
#endif

static const double COULOMB_K = 8.9875517923e9;
static const double CLOUD_SIZE = 1.0;
static const double CLOUD_CHARGE = 1e-6;
static const double CLOUD_SOFTENING = 1e-3;
static const uint64_t CLOUD_SEED = 0x6d73635f62656e63ull;
// --check: the largest relative force error accepted against the f64 sum.
static const double CHECK_TOLERANCE = 1e-3;

#define CK(call)                                                                     \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) {                                                     \
            fprintf(stderr, "nbody_cuda: %s failed: %s\n", #call, cudaGetErrorString(e_)); \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

// SplitMix64, as msc's workload generator.
struct SplitMix {
    uint64_t s;
    uint64_t next() {
        s += 0x9e3779b97f4a7c15ull;
        uint64_t z = s;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double unit() { return (double)(next() >> 11) / (double)(1ull << 53); }
};

// The cloud in f64: positions (x, y, z) and charges (C), exactly msc's.
static void build_cloud(int n, std::vector<double>& pos, std::vector<double>& q) {
    SplitMix rng{CLOUD_SEED};
    pos.resize(3 * (size_t)n);
    q.resize(n);
    const double qa = CLOUD_CHARGE / n;
    for (int i = 0; i < n; ++i) {
        double x = rng.unit(), y = rng.unit(), z = rng.unit();
        pos[3 * i + 0] = (x - 0.5) * CLOUD_SIZE;
        pos[3 * i + 1] = (y - 0.5) * CLOUD_SIZE;
        pos[3 * i + 2] = (z - 0.5) * CLOUD_SIZE;
        q[i] = (rng.next() & 1) == 0 ? qa : -qa;
    }
}

// One thread per target; sources padded to whole tiles with zero charges (which add
// nothing because eps2 > 0), so the inner loop has a constant trip count and unrolls.
// out[i] = (sum_j q_j d / r_eps^3, sum_j q_j / r_eps) with d = x_i - x_j, charges scaled.
__global__ void coulomb_tiled(const float4* __restrict__ src, float4* __restrict__ out,
                              int n, int n_padded, float eps2) {
    __shared__ float4 tile[TILE];
    const int i = blockIdx.x * TILE + threadIdx.x;
    const float4 me = src[i];  // i < n_padded: whole tiles
    float ax = 0.f, ay = 0.f, az = 0.f, pot = 0.f;
    for (int base = 0; base < n_padded; base += TILE) {
        tile[threadIdx.x] = src[base + threadIdx.x];
        __syncthreads();
#pragma unroll 32
        for (int k = 0; k < TILE; ++k) {
            const float4 s = tile[k];
            const float dx = me.x - s.x;                            // 3 flops
            const float dy = me.y - s.y;
            const float dz = me.z - s.z;
            const float r2 = fmaf(dx, dx, fmaf(dy, dy, fmaf(dz, dz, eps2)));  // 6
            const float inv = rsqrtf(r2);                           // 1
            const float w = s.w * inv;                              // 1
            const float w3 = w * inv * inv;                         // 2
            ax = fmaf(w3, dx, ax);                                  // 6
            ay = fmaf(w3, dy, ay);
            az = fmaf(w3, dz, az);
            pot += w;                                               // 1
        }
        __syncthreads();
    }
    if (i < n) {
        // The self pair's potential term (d = 0): q_i / eps.
        pot -= me.w * rsqrtf(eps2);
        out[i] = make_float4(me.w * ax, me.w * ay, me.w * az, me.w * pot);
    }
}

static long parse_size(const std::string& t) {
    if (t.empty()) return -1;
    long mult = 1;
    std::string d = t;
    char last = t.back();
    if (last == 'K' || last == 'k') { mult = 1024; d = t.substr(0, t.size() - 1); }
    if (last == 'M' || last == 'm') { mult = 1048576; d = t.substr(0, t.size() - 1); }
    char* end = nullptr;
    long v = strtol(d.c_str(), &end, 10);
    if (d.empty() || *end != '\0' || v <= 0) return -1;
    return v * mult;
}

static void usage() {
    fprintf(stderr,
            "usage: nbody_cuda [--sizes N,N,...] [--min-seconds S] [--min-iters K] "
            "[--check K]\n"
            "  sizes: charges, K = 1024, M = 1048576 (default 4K)\n"
            "  --min-seconds S: time at least S seconds per size (default 1)\n"
            "  --min-iters K: and at least K evaluations (default 5)\n"
            "  --check K: also compare the forces at K strided charges with an f64 host sum\n"
            "             (exit 1 when a relative error exceeds 1e-3)\n");
}

int main(int argc, char** argv) {
    std::vector<long> sizes;
    double min_seconds = 1.0;
    int min_iters = 5, check = 0;
    bool check_failed = false;
    for (int a = 1; a < argc; ++a) {
        std::string arg = argv[a];
        auto value = [&]() -> std::string {
            if (a + 1 >= argc) { usage(); exit(2); }
            return argv[++a];
        };
        if (arg == "--sizes") {
            std::string list = value();
            size_t p = 0;
            while (p <= list.size()) {
                size_t c = list.find(',', p);
                if (c == std::string::npos) c = list.size();
                long v = parse_size(list.substr(p, c - p));
                if (v < 2 || v > (1L << 30)) {
                    fprintf(stderr, "nbody_cuda: --sizes: bad size '%s'\n",
                            list.substr(p, c - p).c_str());
                    return 2;
                }
                sizes.push_back(v);
                p = c + 1;
            }
        } else if (arg == "--min-seconds") {
            min_seconds = atof(value().c_str());
        } else if (arg == "--min-iters") {
            min_iters = atoi(value().c_str());
        } else if (arg == "--check") {
            check = atoi(value().c_str());
        } else {
            usage();
            return 2;
        }
    }
    if (sizes.empty()) sizes.push_back(4096);
    if (min_iters < 1) min_iters = 1;

    int dev = 0;
    cudaDeviceProp prop;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    const float eps2 = (float)(CLOUD_SOFTENING * CLOUD_SOFTENING);
    const double sqrt_k = std::sqrt(COULOMB_K);

    for (long nl : sizes) {
        const int n = (int)nl;
        const int n_padded = (n + TILE - 1) / TILE * TILE;
        std::vector<double> pos, q;
        build_cloud(n, pos, q);
        std::vector<float4> h(n_padded, make_float4(0.f, 0.f, 0.f, 0.f));
        for (int i = 0; i < n; ++i)
            h[i] = make_float4((float)pos[3 * i], (float)pos[3 * i + 1], (float)pos[3 * i + 2],
                               (float)(q[i] * sqrt_k));
        float4 *d_src = nullptr, *d_out = nullptr;
        CK(cudaMalloc(&d_src, sizeof(float4) * n_padded));
        CK(cudaMalloc(&d_out, sizeof(float4) * n_padded));
        CK(cudaMemcpy(d_src, h.data(), sizeof(float4) * n_padded, cudaMemcpyHostToDevice));
        const int blocks = n_padded / TILE;

        // Warm-up by time (at least 2 launches and ~0.2 s), which also sizes the timed run.
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        int warm = 0;
        float warm_ms = 0.f;
        CK(cudaEventRecord(e0));
        do {
            coulomb_tiled<<<blocks, TILE>>>(d_src, d_out, n, n_padded, eps2);
            ++warm;
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&warm_ms, e0, e1));
        } while (warm < 2 || warm_ms < 200.f);
        CK(cudaGetLastError());
        const double est = warm_ms / warm;
        int iters = (int)std::ceil(min_seconds * 1e3 / (est > 1e-6 ? est : 1e-6));
        if (iters < min_iters) iters = min_iters;

        CK(cudaEventRecord(e0));
        for (int it = 0; it < iters; ++it)
            coulomb_tiled<<<blocks, TILE>>>(d_src, d_out, n, n_padded, eps2);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        float total_ms = 0.f;
        CK(cudaEventElapsedTime(&total_ms, e0, e1));
        const double ms = total_ms / iters;
        const double inter = (double)n * (double)n;
        const double ips = inter / (ms * 1e-3);

        std::vector<float4> f(n_padded);
        CK(cudaMemcpy(f.data(), d_out, sizeof(float4) * n_padded, cudaMemcpyDeviceToHost));
        bool finite = true;
        for (int i = 0; i < n; ++i)
            finite = finite && std::isfinite(f[i].x) && std::isfinite(f[i].y) &&
                     std::isfinite(f[i].z) && std::isfinite(f[i].w);

        printf("{\"peer\":\"cuda\",\"workload\":\"coulomb\",\"status\":\"ok\",\"n\":%d,"
               "\"ms_per_eval\":%.6f,\"iterations\":%d,\"interactions_per_eval\":%.0f,"
               "\"interactions_per_second\":%.6e,\"flops_per_interaction\":20,"
               "\"gflops\":%.3f,\"finite\":%s,\"tile\":%d,\"device\":\"%s\","
               "\"sm_count\":%d,\"cc\":\"%d.%d\"}\n",
               n, ms, iters, inter, ips, 20.0 * ips * 1e-9, finite ? "true" : "false", TILE,
               prop.name, prop.multiProcessorCount, prop.major, prop.minor);
        fflush(stdout);

        if (check > 0) {
            // Forces (N) at `check` strided charges: f32 GPU against an f64 sum over the
            // same f64 positions; the f32 rounding of the positions (~3e-8 m in a 1 m cube)
            // and of the sum bound the expected relative error to ~1e-5 at these sizes.
            double worst = 0.0;
            const int stride = n / check > 0 ? n / check : 1;
            for (int c = 0, i = 0; c < check && i < n; ++c, i += stride) {
                double fx = 0, fy = 0, fz = 0;
                for (int j = 0; j < n; ++j) {
                    double dx = pos[3 * i] - pos[3 * j], dy = pos[3 * i + 1] - pos[3 * j + 1],
                           dz = pos[3 * i + 2] - pos[3 * j + 2];
                    double r2 = dx * dx + dy * dy + dz * dz + CLOUD_SOFTENING * CLOUD_SOFTENING;
                    double s = COULOMB_K * q[i] * q[j] / (r2 * std::sqrt(r2));
                    fx += s * dx;
                    fy += s * dy;
                    fz += s * dz;
                }
                double ex = f[i].x - fx, ey = f[i].y - fy, ez = f[i].z - fz;
                double rel = std::sqrt(ex * ex + ey * ey + ez * ez) /
                             std::sqrt(fx * fx + fy * fy + fz * fz);
                if (rel > worst) worst = rel;
                printf("{\"peer\":\"cuda\",\"check\":true,\"n\":%d,\"i\":%d,"
                       "\"x\":[%.9g,%.9g,%.9g],\"q\":%.9g,\"force_f32\":[%.9g,%.9g,%.9g],"
                       "\"force_f64\":[%.12g,%.12g,%.12g],\"rel_error\":%.3e}\n",
                       n, i, pos[3 * i], pos[3 * i + 1], pos[3 * i + 2], q[i], f[i].x, f[i].y,
                       f[i].z, fx, fy, fz, rel);
            }
            fprintf(stderr, "nbody_cuda: n %d: max relative force error %.3e at %d charges\n", n,
                    worst, check);
            // f32 gives ~1e-6 here; a wrong term or sign gives O(1).
            if (!(worst <= CHECK_TOLERANCE)) {
                fprintf(stderr, "nbody_cuda: check failed: %.3e exceeds %.0e\n", worst,
                        CHECK_TOLERANCE);
                check_failed = true;
            }
        }
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
        CK(cudaFree(d_src));
        CK(cudaFree(d_out));
    }
    return check_failed ? 1 : 0;
}
