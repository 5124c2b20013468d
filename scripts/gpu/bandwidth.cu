// Device memory bandwidth of one CUDA device, the ceiling for token generation in
// scripts/gpu-check.sh: a device-to-device copy kernel (bytes read + bytes written per second) and a
// read-only kernel (bytes read per second: what decoding does with the weights), each over a buffer
// many times the L2 cache, timed with CUDA events; the best of several passes counts.
// usage: bandwidth [MiB=2048] [passes=10] [device=0]
// Prints one JSON object: {"device", "bytes", "copy_gbps", "read_gbps"} (GB/s: 1e9 bytes per second).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

#define CHECK(call)                                                                                \
    do {                                                                                           \
        const cudaError_t err_ = (call);                                                           \
        if (err_ != cudaSuccess) {                                                                 \
            std::fprintf(stderr, "bandwidth: %s: %s\n", #call, cudaGetErrorString(err_));         \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

// 16-byte loads and stores, grid-stride so that any grid covers the buffer.
__global__ void copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        dst[i] = src[i];
}

// Reads every element and folds it into one word per thread; the store of that word, which depends
// on every load, keeps the compiler from dropping the loads.
__global__ void read_kernel(const int4* __restrict__ src, size_t n, int* __restrict__ sink) {
    int acc = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const int4 v = src[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7fffffff) *sink = acc;  // practically never true, but the compiler cannot know
}

template <typename Launch>
float best_ms(int passes, Launch launch) {
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    launch();  // warm-up
    CHECK(cudaDeviceSynchronize());
    float best = 1e30f;
    for (int p = 0; p < passes; ++p) {
        CHECK(cudaEventRecord(start));
        launch();
        CHECK(cudaEventRecord(stop));
        CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        if (ms < best) best = ms;
    }
    CHECK(cudaGetLastError());
    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(stop));
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2048;
    const int passes = argc > 2 ? std::atoi(argv[2]) : 10;
    const int device = argc > 3 ? std::atoi(argv[3]) : 0;
    if (mib < 1 || passes < 1) {
        std::fprintf(stderr, "usage: bandwidth [MiB=2048] [passes=10] [device=0]\n");
        return 2;
    }
    CHECK(cudaSetDevice(device));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, device));
    const size_t bytes = mib << 20;
    const size_t n = bytes / sizeof(int4);
    int4 *src = nullptr, *dst = nullptr;
    int* sink = nullptr;
    CHECK(cudaMalloc(&src, bytes));  // plain allocations, never managed memory
    CHECK(cudaMalloc(&dst, bytes));
    CHECK(cudaMalloc(&sink, sizeof(int)));
    CHECK(cudaMemset(src, 1, bytes));

    const int threads = 256;
    const int blocks = prop.multiProcessorCount * 8;
    const float copy_ms = best_ms(passes, [&] { copy_kernel<<<blocks, threads>>>(src, dst, n); });
    const float read_ms = best_ms(passes, [&] { read_kernel<<<blocks, threads>>>(src, n, sink); });

    std::printf("{\"device\": \"%s\", \"bytes\": %zu, \"copy_gbps\": %.1f, \"read_gbps\": %.1f}\n", prop.name, bytes,
                2.0 * bytes / (copy_ms * 1e-3) / 1e9, bytes / (read_ms * 1e-3) / 1e9);
    CHECK(cudaFree(src));
    CHECK(cudaFree(dst));
    CHECK(cudaFree(sink));
    return 0;
}
