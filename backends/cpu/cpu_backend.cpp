#include "backends/cpu/cpu_backend.h"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

#include <sys/mman.h>
#include <unistd.h>

#include "quant/quant.h"

namespace deskside::backends::cpu {

namespace {
// Rows handed to SIMD kernels start on a cache line.
constexpr size_t kAlignment = 64;
// How long idle pool threads spin before sleeping: DESKSIDE_CPU_SPIN_US, else the pool's
// default. Spinning pays on a quiet machine and costs on a crowded one (thread_pool.h), so the
// choice is the user's, as llama.cpp's --poll is.
int spin_us_from_env() {
    constexpr int kMaxSpinUs = 10000;
    const char* env = std::getenv("DESKSIDE_CPU_SPIN_US");
    if (env == nullptr || *env == '\0') return ThreadPool::kDefaultSpinUs;
    const std::string_view text(env);
    int us = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), us);
    if (ec != std::errc() || end != text.data() + text.size() || us < 0 || us > kMaxSpinUs)
        throw std::runtime_error("DESKSIDE_CPU_SPIN_US=" + std::string(text) + ": expected a whole number of microseconds in [0, " +
                                 std::to_string(kMaxSpinUs) + "]");
    return us;
}

}  // namespace

HostBuffer::~HostBuffer() {
    if (owned_) std::free(data_);
}

uint8_t* host_row(const Tensor& t, int64_t row) {
    uint8_t* data = t.buffer->host_data();
    if (!data) throw std::invalid_argument("cpu: a tensor of device '" + t.buffer->owner().name() + "' is not in host memory");
    return data + t.offset + static_cast<size_t>(row) * t.row_stride;
}

std::span<const int32_t> host_i32(const Tensor& t, int64_t n, const char* op) {
    if (t.type != quant::TypeId::I32 || t.ne0 < n)
        throw std::invalid_argument(std::string("cpu ") + op + ": the index tensor must be I32 with at least " +
                                    std::to_string(n) + " entries, got [" + std::to_string(t.ne0) + ", " +
                                    std::to_string(t.ne1) + "] " + std::string(quant::type_info(t.type).name));
    if (n > 0 && (t.offset + static_cast<size_t>(n) * sizeof(int32_t) > t.buffer->size()))
        throw std::out_of_range(std::string("cpu ") + op + ": the index tensor lies outside its buffer");
    return {reinterpret_cast<const int32_t*>(host_row(t)), static_cast<size_t>(n)};
}

bool CpuBackend::supports(Op op, quant::TypeId type) const {
    switch (op) {
        case Op::GetRows:
        case Op::Matmul:
        case Op::MatmulId:
        case Op::Attention: return quant::quant_traits(type) != nullptr;
        case Op::Copy:
        case Op::SetRows: {
            const quant::QuantTraits* t = quant::quant_traits(type);
            return t && t->from_float;
        }
        default: return type == quant::TypeId::F32;
    }
}

CpuBackend::CpuBackend(int n_threads) : pool_(n_threads > 0 ? n_threads : physical_cores(), spin_us_from_env()) {}

std::unique_ptr<Buffer> CpuBackend::alloc(size_t bytes) {
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (!p) throw std::bad_alloc();
    return std::make_unique<HostBuffer>(*this, static_cast<uint8_t*>(p), bytes, true);
}

std::unique_ptr<Buffer> CpuBackend::map_weights(const void* host, size_t bytes) {
    // The mapping is read-only; no op writes to a weights buffer.
    return std::make_unique<HostBuffer>(*this, static_cast<uint8_t*>(const_cast<void*>(host)), bytes, false);
}

std::unique_ptr<Buffer> CpuBackend::map_weight_matrix(const void* host, quant::TypeId type, int64_t ne0, int64_t ne1) {
    const size_t row_bytes = quant::row_bytes(type, ne0);
    const size_t bytes = row_bytes * static_cast<size_t>(ne1);
    const WeightLayout layout = weight_layout_for(type, ne1);
    if (layout == WeightLayout::Plain) return map_weights(host, bytes);

    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    auto* data = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, rounded));
    if (!data) throw std::bad_alloc();
    auto buf = std::make_unique<HostBuffer>(*this, data, bytes, true, layout);
    const auto* src = static_cast<const uint8_t*>(host);
    // Independent slices of whole groups (the last one also takes the plain tail rows).
    constexpr int64_t kRowsPerSlice = 64;
    const int64_t n_slices = (ne1 + kRowsPerSlice - 1) / kRowsPerSlice;
    for_each(n_slices, kRowsPerSlice * ne0, [&](int64_t i, int) {
        const int64_t r0 = i * kRowsPerSlice, n = std::min(kRowsPerSlice, ne1 - r0);
        repack_matrix(layout, src + r0 * row_bytes, ne0, n, data + r0 * row_bytes);
    });
    // Nothing reads the source again: let the kernel reclaim its pages (whole pages inside it
    // only). PAGEOUT, unlike DONTNEED, never loses data: an anonymous source (a checkpoint
    // quantized on load) is swapped rather than zeroed, a file mapping re-reads on access.
#ifdef MADV_PAGEOUT
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t first = (reinterpret_cast<uintptr_t>(src) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(src) + bytes) / page * page;
    // Advice only: a failure (an old kernel without PAGEOUT) leaves the pages where they are.
    if (end > first) (void)::madvise(reinterpret_cast<void*>(first), end - first, MADV_PAGEOUT);
#endif
    return buf;
}

void CpuBackend::upload(Buffer& dst, size_t offset, const void* src, size_t bytes) {
    if (offset + bytes > dst.size()) throw std::out_of_range("cpu upload: past the end of the buffer");
    std::memcpy(owned_by<HostBuffer>(*this, dst, "upload").data() + offset, src, bytes);
}

void CpuBackend::download(const Buffer& src, size_t offset, void* dst, size_t bytes) {
    if (offset + bytes > src.size()) throw std::out_of_range("cpu download: past the end of the buffer");
    std::memcpy(dst, owned_by<HostBuffer>(*this, src, "download").data() + offset, bytes);
}

}  // namespace deskside::backends::cpu
