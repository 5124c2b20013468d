// Helpers for backend op conformance tests: device tensors filled from host vectors, outputs
// pre-filled with NaN and followed by a guard region that must survive the op; and the devices a
// run tests (every usable non-CPU device, DESKSIDE_REQUIRE_DEVICES for those that must be there).
#pragma once

#include <catch2/catch.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/devices.h"
#include "quant/blocks.h"
#include "quant/float16.h"
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

// Puts the fp16 super-block scale `d` into a block of a type without a quantizer (tests fill
// such blocks with random bytes): its first field for IQ4_NL, IQ4_XS and the low-bit i-quants,
// the top nibbles of the four scale words for IQ1_M (quant/blocks.h).
inline void set_block_scale(quant::TypeId type, uint8_t* block, uint16_t d) {
    if (type != quant::TypeId::IQ1_M) {
        std::memcpy(block, &d, 2);
        return;
    }
    uint8_t* scales = block + quant::kQKK / 8 + quant::kQKK / 16;
    for (int i = 0; i < 4; ++i) {
        uint16_t word;
        std::memcpy(&word, scales + 2 * i, 2);
        word = static_cast<uint16_t>((word & 0x0FFF) | ((d >> (4 * i)) & 0xF) << 12);
        std::memcpy(scales + 2 * i, &word, 2);
    }
}

// n_rows rows of `type`: quantized Gaussians, or random bytes under small scales (set_block_scale)
// for the types quant/ has no quantizer for.
inline std::vector<uint8_t> random_weight_rows(quant::TypeId type, int64_t k, int64_t n_rows, uint32_t seed) {
    std::mt19937 rng(seed);
    const size_t row = quant::row_bytes(type, k);
    std::vector<uint8_t> w(row * n_rows);
    const quant::QuantTraits* t = quant::quant_traits(type);
    if (t != nullptr && t->from_float != nullptr) {
        std::normal_distribution<float> dist(0.0f, 1.0f);
        std::vector<float> v(static_cast<size_t>(k));
        for (int64_t r = 0; r < n_rows; ++r) {
            for (float& x : v) x = dist(rng);
            t->from_float(v.data(), w.data() + r * row, k);
        }
        return w;
    }
    for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
    std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
    for (size_t at = 0; at < w.size(); at += quant::type_info(type).block_bytes)
        set_block_scale(type, w.data() + at, quant::fp32_to_fp16(scale(rng)));
    return w;
}

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

// Devices a run must test, from DESKSIDE_REQUIRE_DEVICES (a comma list, e.g. "vulkan0,cuda0";
// CI sets it, scripts/test.sh): a named device that is absent fails the tests that look for it
// instead of skipping them, so a broken driver install cannot pass green.
inline std::vector<std::string> required_devices() {
    std::vector<std::string> names;
    const char* env = std::getenv("DESKSIDE_REQUIRE_DEVICES");
    std::string list = env ? env : "";
    for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        std::string name = list.substr(at, comma - at);
        name.erase(0, name.find_first_not_of(" \t"));
        name.erase(name.find_last_not_of(" \t") + 1);
        if (!name.empty()) names.push_back(name);
        at = comma + 1;
    }
    return names;
}

// Why the device list holds nothing usable beyond the CPU: each absent API's reason and each
// listed device's note.
inline std::string why_no_devices(const std::vector<backends::DeviceInfo>& devices,
                                  const std::vector<backends::AbsentApi>& absent) {
    std::string why;
    for (const backends::AbsentApi& a : absent) why += (why.empty() ? "" : "; ") + a.api + ": " + a.why;
    for (const backends::DeviceInfo& d : devices)
        if (!d.usable) why += (why.empty() ? "" : "; ") + d.name + " unusable: " + d.note;
    return why.empty() ? "no device API listed anything" : why;
}

// FAILs naming every device of required_devices() whose name starts with `prefix` ("" = any)
// that is not a usable device of `devices`.
inline void fail_for_absent_required(const std::vector<backends::DeviceInfo>& devices,
                                     const std::vector<backends::AbsentApi>& absent, const std::string& prefix) {
    for (const std::string& name : required_devices()) {
        if (name.rfind(prefix, 0) != 0) continue;
        const bool usable = std::any_of(devices.begin(), devices.end(),
                                        [&](const backends::DeviceInfo& d) { return d.name == name && d.usable; });
        if (!usable)
            FAIL("DESKSIDE_REQUIRE_DEVICES names " << name << ", which is not a usable device here ("
                                                   << why_no_devices(devices, absent) << ")");
    }
}

// Every usable non-CPU device (the devices the conformance suites compare with the CPU). FAILs
// for a device DESKSIDE_REQUIRE_DEVICES names that is absent; WARNs why when the list is empty.
inline std::vector<backends::DeviceInfo> devices_under_test() {
    std::vector<backends::AbsentApi> absent;
    const std::vector<backends::DeviceInfo> devices = backends::list_devices(&absent);
    fail_for_absent_required(devices, absent, "");
    std::vector<backends::DeviceInfo> out;
    for (const backends::DeviceInfo& d : devices)
        if (d.api != "cpu" && d.usable) out.push_back(d);
    if (out.empty()) WARN("SKIPPED: no non-CPU device to test (" << why_no_devices(devices, absent) << ")");
    return out;
}

// The variable that splits each physical device of `api` into logical ones (DESKSIDE_VULKAN_SPLIT,
// DESKSIDE_CUDA_SPLIT; backends/devices.h).
inline std::string split_variable(const std::string& api) {
    std::string var = "DESKSIDE_" + api + "_SPLIT";
    std::transform(var.begin(), var.end(), var.begin(), [](unsigned char c) { return std::toupper(c); });
    return var;
}

// The device `name` opened once per process (and per value of its API's split variable) and kept
// open: a Vulkan device compiles its pipelines on first use, which on lavapipe costs more than
// most op tests.
inline backends::Backend& shared_test_device(const backends::DeviceInfo& d) {
    static std::map<std::string, std::unique_ptr<backends::Backend>> opened;
    const char* split = std::getenv(split_variable(d.api).c_str());
    std::unique_ptr<backends::Backend>& device = opened[d.name + "/" + (split ? split : "")];
    if (!device) device = backends::open_device(d.name);
    return *device;
}

// The first usable Vulkan device, or nullptr after a WARN saying why (tests then return: a
// machine without Vulkan skips them, it does not fail them), unless DESKSIDE_REQUIRE_DEVICES
// names a Vulkan device: then the test FAILs.
inline std::unique_ptr<backends::Backend> vulkan_or_skip() {
    std::vector<backends::AbsentApi> absent;
    const std::vector<backends::DeviceInfo> devices = backends::list_devices(&absent);
    for (const backends::DeviceInfo& d : devices)
        if (d.api == "vulkan" && d.usable) return backends::open_device(d.name);
    fail_for_absent_required(devices, absent, "vulkan");
    WARN("SKIPPED: no Vulkan device (see `deskside devices`)");
    return nullptr;
}

}  // namespace deskside::test
