#include "backends/cpu/cpu_backend.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace deskside::backends::cpu {

namespace {
// Rows handed to SIMD kernels start on a cache line.
constexpr size_t kAlignment = 64;
}  // namespace

HostBuffer::~HostBuffer() {
    if (owned_) std::free(data_);
}

uint8_t* host_row(const Tensor& t, int64_t row) {
    return static_cast<HostBuffer*>(t.buffer)->data() + t.offset + static_cast<size_t>(row) * t.row_stride;
}

CpuBackend::CpuBackend(int n_threads) : pool_(n_threads > 0 ? n_threads : physical_cores()) {}

std::unique_ptr<Buffer> CpuBackend::alloc(size_t bytes) {
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (!p) throw std::bad_alloc();
    return std::make_unique<HostBuffer>(static_cast<uint8_t*>(p), bytes, true);
}

std::unique_ptr<Buffer> CpuBackend::map_weights(const void* host, size_t bytes) {
    // The mapping is read-only; no op writes to a weights buffer.
    return std::make_unique<HostBuffer>(static_cast<uint8_t*>(const_cast<void*>(host)), bytes, false);
}

void CpuBackend::upload(Buffer& dst, size_t offset, const void* src, size_t bytes) {
    if (offset + bytes > dst.size()) throw std::out_of_range("cpu upload: past the end of the buffer");
    std::memcpy(static_cast<HostBuffer&>(dst).data() + offset, src, bytes);
}

void CpuBackend::download(const Buffer& src, size_t offset, void* dst, size_t bytes) {
    if (offset + bytes > src.size()) throw std::out_of_range("cpu download: past the end of the buffer");
    std::memcpy(dst, static_cast<const HostBuffer&>(src).data() + offset, bytes);
}

}  // namespace deskside::backends::cpu
