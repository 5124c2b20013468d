// Helpers for backend op conformance tests: device tensors filled from host vectors, outputs
// pre-filled with NaN and followed by a guard region that must survive the op.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backends/backend.h"
#include "quant/quant.h"

namespace deskside::test {

// Bytes after every tensor that no op may touch.
constexpr size_t kGuardBytes = 256;
constexpr uint8_t kGuardByte = 0xA5;

class DeviceTensor {
   public:
    // A tensor of `type` holding `values` (converted with the type's reference quantizer).
    DeviceTensor(backends::Backend& be, quant::TypeId type, int64_t ne0, int64_t ne1, const std::vector<float>& values)
        : be_(be) {
        init(type, ne0, ne1);
        std::vector<uint8_t> bytes(size_, kGuardByte);
        const size_t row = quant::row_bytes(type, ne0);
        for (int64_t r = 0; r < ne1; ++r) quant::quant_traits(type)->from_float(values.data() + r * ne0, bytes.data() + r * row, ne0);
        be_.upload(*buffer_, 0, bytes.data(), bytes.size());
    }
    // An F32 output tensor pre-filled with NaN.
    DeviceTensor(backends::Backend& be, quant::TypeId type, int64_t ne0, int64_t ne1) : be_(be) {
        init(type, ne0, ne1);
        std::vector<uint8_t> bytes(size_, kGuardByte);
        std::vector<uint8_t> nan_bytes(data_bytes_, 0xFF);  // all-ones is a NaN in F32, F16, BF16
        std::memcpy(bytes.data(), nan_bytes.data(), data_bytes_);
        be_.upload(*buffer_, 0, bytes.data(), bytes.size());
    }

    const backends::Tensor& t() const { return tensor_; }
    // Contents as floats (dequantized with the reference).
    std::vector<float> values() const {
        std::vector<uint8_t> bytes = raw();
        std::vector<float> out(tensor_.ne0 * tensor_.ne1);
        const size_t row = tensor_.row_bytes();
        for (int64_t r = 0; r < tensor_.ne1; ++r)
            quant::quant_traits(tensor_.type)->to_float(bytes.data() + r * row, out.data() + r * tensor_.ne0, tensor_.ne0);
        return out;
    }
    bool guard_intact() const {
        std::vector<uint8_t> bytes = raw();
        for (size_t i = data_bytes_; i < size_; ++i)
            if (bytes[i] != kGuardByte) return false;
        return true;
    }

   private:
    void init(quant::TypeId type, int64_t ne0, int64_t ne1) {
        data_bytes_ = quant::row_bytes(type, ne0) * ne1;
        size_ = data_bytes_ + kGuardBytes;
        buffer_ = be_.alloc(size_);
        tensor_ = backends::make_tensor(buffer_.get(), 0, type, ne0, ne1);
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

}  // namespace deskside::test
