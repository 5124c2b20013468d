// Helpers for backend op conformance tests: device tensors filled from host vectors, outputs
// pre-filled with NaN and followed by a guard region that must survive the op.
#pragma once

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backends/backend.h"
#include "backends/devices.h"
#include "quant/quant.h"

namespace deskside::test {

// Bytes after every tensor that no op may touch.
constexpr size_t kGuardBytes = 256;
constexpr uint8_t kGuardByte = 0xA5;

class DeviceTensor {
   public:
    // A tensor of `type` holding `values` (converted with the type's reference quantizer).
    DeviceTensor(backends::Backend& be, quant::TypeId type, int64_t ne0, int64_t ne1, const std::vector<float>& values)
        : DeviceTensor(be, type, ne0, ne1, values, 0, quant::row_bytes(type, ne0)) {}
    // The same as a strided view: row r at byte offset + r * row_stride of the buffer; the bytes
    // around and between rows are guard bytes too (tests offsets and strides a backend must honour).
    DeviceTensor(backends::Backend& be, quant::TypeId type, int64_t ne0, int64_t ne1, const std::vector<float>& values,
                 size_t offset, size_t row_stride)
        : be_(be) {
        init(type, ne0, ne1, offset, row_stride);
        std::vector<uint8_t> bytes(size_, kGuardByte);
        for (int64_t r = 0; r < ne1; ++r)
            quant::quant_traits(type)->from_float(values.data() + r * ne0, bytes.data() + offset + r * row_stride, ne0);
        be_.upload(*buffer_, 0, bytes.data(), bytes.size());
    }
    // An output tensor pre-filled with NaN.
    DeviceTensor(backends::Backend& be, quant::TypeId type, int64_t ne0, int64_t ne1)
        : DeviceTensor(be, type, ne0, ne1, 0, quant::row_bytes(type, ne0)) {}
    // The same as a strided view (see above).
    DeviceTensor(backends::Backend& be, quant::TypeId type, int64_t ne0, int64_t ne1, size_t offset, size_t row_stride)
        : be_(be) {
        init(type, ne0, ne1, offset, row_stride);
        std::vector<uint8_t> bytes(size_, kGuardByte);
        const size_t row = quant::row_bytes(type, ne0);
        for (int64_t r = 0; r < ne1; ++r)  // all-ones is a NaN in F32, F16, BF16
            std::memset(bytes.data() + offset + r * row_stride, 0xFF, row);
        be_.upload(*buffer_, 0, bytes.data(), bytes.size());
    }

    const backends::Tensor& t() const { return tensor_; }
    // Contents as floats (dequantized with the reference).
    std::vector<float> values() const {
        std::vector<uint8_t> bytes = raw();
        std::vector<float> out(tensor_.ne0 * tensor_.ne1);
        for (int64_t r = 0; r < tensor_.ne1; ++r)
            quant::quant_traits(tensor_.type)
                ->to_float(bytes.data() + tensor_.offset + r * tensor_.row_stride, out.data() + r * tensor_.ne0, tensor_.ne0);
        return out;
    }
    // The raw bytes of the rows, concatenated (for exact comparisons of quantized outputs).
    std::vector<uint8_t> row_bytes() const {
        std::vector<uint8_t> bytes = raw();
        const size_t row = tensor_.row_bytes();
        std::vector<uint8_t> out;
        for (int64_t r = 0; r < tensor_.ne1; ++r) {
            const uint8_t* p = bytes.data() + tensor_.offset + r * tensor_.row_stride;
            out.insert(out.end(), p, p + row);
        }
        return out;
    }
    bool guard_intact() const {
        std::vector<uint8_t> bytes = raw();
        std::vector<bool> is_data(size_, false);
        const size_t row = tensor_.row_bytes();
        for (int64_t r = 0; r < tensor_.ne1; ++r)
            for (size_t i = 0; i < row; ++i) is_data[tensor_.offset + r * tensor_.row_stride + i] = true;
        for (size_t i = 0; i < size_; ++i)
            if (!is_data[i] && bytes[i] != kGuardByte) return false;
        return true;
    }

   private:
    void init(quant::TypeId type, int64_t ne0, int64_t ne1, size_t offset, size_t row_stride) {
        const size_t row = quant::row_bytes(type, ne0);
        data_bytes_ = ne1 == 0 ? 0 : offset + (ne1 - 1) * row_stride + row;
        size_ = data_bytes_ + kGuardBytes;
        buffer_ = be_.alloc(size_);
        tensor_ = backends::Tensor{buffer_.get(), offset, type, ne0, ne1, row_stride};
    }
    std::vector<uint8_t> raw() const {
        std::vector<uint8_t> bytes(size_);
        be_.download(*buffer_, 0, bytes.data(), size_);
        return bytes;
    }

    backends::Backend& be_;
    std::unique_ptr<backends::Buffer> buffer_;
    backends::Tensor tensor_;
    size_t data_bytes_ = 0;
    size_t size_ = 0;
};

inline std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// Largest |a - b|; infinity if either holds a NaN (an element the op did not write).
inline double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
        m = std::max(m, std::fabs(a[i] - b[i]));
    }
    return m;
}

// Largest |a - b| between two backends' outputs; infinity if either holds a NaN.
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
        m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
    }
    return a.size() == b.size() ? m : INFINITY;
}

// Largest |a - b| / max(1, |b|): absolute below 1, relative above.
inline double max_scaled_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
        m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::fabs(static_cast<double>(b[i]))));
    }
    return a.size() == b.size() ? m : INFINITY;
}

// The first usable Vulkan device, or nullptr after a WARN saying why (tests then return: a
// machine without Vulkan skips them, it does not fail them).
inline std::unique_ptr<backends::Backend> vulkan_or_skip() {
    for (const backends::DeviceInfo& d : backends::list_devices())
        if (d.api == "vulkan" && d.usable) return backends::open_device(d.name);
    WARN("SKIPPED: no Vulkan device (see `deskside devices`)");
    return nullptr;
}

}  // namespace deskside::test
