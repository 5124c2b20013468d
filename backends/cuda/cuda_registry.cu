// The CUDA part of the device registry (cuda_registry.h), through the CUDA runtime.
//
// A .cu file for one reason: probe_kernel tells whether this build's kernels run on a device
// (SASS for its architecture, or PTX it can JIT), so a GPU the build cannot drive is listed as
// unusable with the reason, instead of failing at its first op.
#include <cuda_runtime.h>

#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_registry.h"
#include "backends/devices.h"

#ifndef DESKSIDE_CUDA_BUILT_ARCHS
#define DESKSIDE_CUDA_BUILT_ARCHS "unknown"
#endif

namespace deskside::backends::cuda {
namespace {

__global__ void probe_kernel() {}

std::string error_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

// "13.0" from 13000.
std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// Why cudaGetDeviceCount failed, in the user's terms. The runtime reports a machine without the
// NVIDIA driver as cudaErrorInsufficientDriver too; the driver version (0: none) tells them apart.
std::string absent_reason(cudaError_t e) {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    if (e == cudaErrorInsufficientDriver) {
        if (driver == 0) return "no NVIDIA driver found (libcuda.so.1 is not installed or does not load)";
        return "the NVIDIA driver supports CUDA " + version_text(driver) + ", this build needs CUDA " +
               version_text(runtime) + " (update the driver)";
    }
    return error_text(e);
}

// "cudaN" -> N, or -1.
int parse_index(const std::string& name) {
    constexpr std::string_view kPrefix = "cuda";
    if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
    int n = 0;
    for (size_t i = kPrefix.size(); i < name.size(); ++i) {
        if (name[i] < '0' || name[i] > '9' || n > 1000) return -1;
        n = n * 10 + (name[i] - '0');
    }
    return n;
}

// Whether this build's kernels load on the current device; the reason when not.
bool kernels_load(std::string* why) {
    cudaFuncAttributes attr{};
    const cudaError_t e = cudaFuncGetAttributes(&attr, probe_kernel);
    if (e == cudaSuccess) return true;
    cudaGetLastError();
    if (why) *why = error_text(e);
    return false;
}

// Restores the calling thread's current device when listing is done.
class DeviceGuard {
   public:
    DeviceGuard() {
        if (cudaGetDevice(&device_) != cudaSuccess) {
            cudaGetLastError();
            device_ = -1;
        }
    }
    ~DeviceGuard() {
        if (device_ >= 0) cudaSetDevice(device_);
    }

   private:
    int device_ = -1;
};

// The CUDA kernels have one variant, "exact" (the CPU's AVX2-level bits, kernels_matmul.cu); what
// else decides the code that runs is the device's architecture and the ones this build carries
// (SASS for it, or PTX the driver compiles).
std::vector<std::string> kernel_variants(int cc) {
    return {"exact", "sm_" + std::to_string(cc), std::string("built=") + DESKSIDE_CUDA_BUILT_ARCHS};
}

}  // namespace

int cuda_split() { return split_from_env("DESKSIDE_CUDA_SPLIT"); }

std::vector<DeviceInfo> list_cuda_devices(std::string* why_absent) {
    std::vector<DeviceInfo> out;
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (why_absent) *why_absent = "CUDA: " + absent_reason(e);
        return out;
    }
    if (count == 0) {
        if (why_absent) *why_absent = "CUDA: the driver reports no device";
        return out;
    }
    int split = 1;
    try {
        split = cuda_split();
    } catch (const std::invalid_argument& ex) {
        if (why_absent) *why_absent = ex.what();
        return out;
    }
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    DeviceGuard guard;
    for (int p = 0; p < count; ++p) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, p) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        size_t free_bytes = prop.totalGlobalMem, total_bytes = prop.totalGlobalMem;
        std::string why_not;
        bool usable = true;
        bool memory_known = false;
        if (cudaSetDevice(p) == cudaSuccess && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
            memory_known = true;
            usable = kernels_load(&why_not);
        } else {
            why_not = error_text(cudaGetLastError());
            usable = false;
        }
        const int cc = prop.major * 10 + prop.minor;
        std::vector<std::string> features;
        features.push_back("sm_" + std::to_string(cc));
        features.push_back("sms=" + std::to_string(prop.multiProcessorCount));
        features.push_back("fp16");
        if (cc >= 80) features.push_back("bf16");
        if (cc >= 61) features.push_back("int8-dot");  // dp4a
        if (cc >= 75) features.push_back("int8-mma");  // Turing's integer tensor cores (mma.sync s8)
        for (int q = 0; q < count; ++q) {
            int can = 0;
            if (q != p && cudaDeviceCanAccessPeer(&can, p, q) == cudaSuccess && can)
                features.push_back("peer=cuda" + std::to_string(q * split));
        }
        cudaGetLastError();
        features.push_back("cuda-driver=" + version_text(driver));
        features.push_back("cuda-runtime=" + version_text(runtime));
        for (int s = 0; s < split; ++s) {
            DeviceInfo d;
            d.name = "cuda" + std::to_string(p * split + s);
            d.api = "cuda";
            d.description = prop.name;
            d.type = prop.integrated ? "integrated-gpu" : "discrete-gpu";
            d.total_memory = total_bytes / split;
            d.free_memory = free_bytes / split;
            d.usable = usable;
            d.features = features;
            d.driver = "NVIDIA";
            d.driver_version = version_text(driver);
            d.runtime_version = version_text(runtime);
            d.kernels = kernel_variants(cc);
            if (!usable) {
                d.note = std::string("cannot run this build's kernels (built for ") + DESKSIDE_CUDA_BUILT_ARCHS +
                         ", the device is sm_" + std::to_string(cc) + "): " + why_not;
            } else if (split > 1) {
                d.note = "logical device " + std::to_string(s + 1) + " of " + std::to_string(split) +
                         " on one GPU (DESKSIDE_CUDA_SPLIT)";
            }
            if (!memory_known) d.note += std::string(d.note.empty() ? "" : "; ") + "free memory unknown";
            out.push_back(std::move(d));
        }
    }
    if (out.empty() && why_absent) *why_absent = "CUDA: no device could be queried";
    return out;
}

std::unique_ptr<Backend> open_cuda_device(const std::string& name) {
    const int index = parse_index(name);
    if (index < 0) return nullptr;
    const int split = cuda_split();
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    const int p = index / split;
    if (p >= count) return nullptr;
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, p), name + ": cudaGetDeviceProperties");
    cuda_check(cudaSetDevice(p), name + ": cudaSetDevice");
    std::string why;
    if (!kernels_load(&why))
        throw std::runtime_error(name + " (" + prop.name + ", sm_" + std::to_string(prop.major * 10 + prop.minor) +
                                 ") cannot run this build's kernels (built for " + DESKSIDE_CUDA_BUILT_ARCHS +
                                 "): " + why);
    return std::make_unique<CudaBackend>(p, name, split > 1 ? prop.totalGlobalMem / split : 0);
}

}  // namespace deskside::backends::cuda
