// The CUDA matmul's per-output arithmetic (backends/cuda/device/exact_dot.cuh, block_dot.cuh),
// compiled here as plain C++ and run in the kernels' order, gives the CPU backend's matmul and
// matmul_id bits at its AVX2 level: every output compared with memcmp, for every weight type the
// CUDA backend supports, on random rows and on the shared models' tensors, with n_out a multiple of
// 8 (the CPU's row-interleaved layouts for Q4_0, Q8_0, Q4_K, Q6_K) and not, m = 1, 3, 17 (the CPU's
// vec_dot, its tiled gemm and its x8 kernel). The activations are quantized with the device code
// (device/quantize_activation.cuh, which test_cuda_device_code.cpp holds to quant/'s bytes).
// The low-bit types (IQ1-IQ3, TQ1_0, TQ2_0, MXFP4) have test cases of their own: random rows,
// random bytes in every field, the shared low-bit models (gpt-oss's MXFP4 experts through
// matmul_id as well).
//
// Each case also checks that the other order (the x8 chain for lane rows, the lanes for chain
// rows) changes some outputs, so a wrong order cannot pass by accident.
#include "quant/strict_fp.h"  // first: the device code's float steps must stay unfused here too

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "../engine/reference_check.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/device/exact_dot.cuh"
#include "models/gguf.h"
#include "op_harness.h"
#include "quant/float16.h"
#include "quant/quant.h"

namespace deskside::backends {
namespace {

namespace dev = cuda::device;
using quant::TypeId;
using test::DeviceTensor;

constexpr TypeId kWeightTypes[] = {TypeId::F32,  TypeId::F16,  TypeId::BF16, TypeId::Q4_0,   TypeId::Q4_1,
                                   TypeId::Q5_0, TypeId::Q5_1, TypeId::Q8_0, TypeId::IQ4_NL, TypeId::Q2_K,
                                   TypeId::Q3_K, TypeId::Q4_K, TypeId::Q5_K, TypeId::Q6_K,   TypeId::IQ4_XS};
// The low-bit types (device/block_dot_lowbit.cuh), checked in test cases of their own.
constexpr TypeId kLowbitTypes[] = {TypeId::IQ2_XXS, TypeId::IQ2_XS, TypeId::IQ2_S, TypeId::IQ3_XXS, TypeId::IQ3_S,
                                   TypeId::IQ1_S,   TypeId::IQ1_M,  TypeId::TQ1_0, TypeId::TQ2_0,   TypeId::MXFP4};

// Activations as the CUDA launcher quantizes them: rows of W's vec_dot_type.
template <class T>
std::vector<uint8_t> device_activations(const std::vector<float>& x, int64_t k) {
    const int64_t rows = static_cast<int64_t>(x.size()) / k;
    const size_t stride = quant::row_bytes(T::kActType, k);
    std::vector<uint8_t> out(stride * rows);
    for (int64_t r = 0; r < rows; ++r) {
        const float* src = x.data() + r * k;
        uint8_t* dst = out.data() + r * stride;
        if constexpr (T::kActType == TypeId::F32) {
            std::memcpy(dst, src, stride);
        } else if constexpr (T::kFloat) {
            auto* h = reinterpret_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < k; ++i)
                h[i] = T::kActType == TypeId::F16 ? dev::quantize_activation_f16(src[i])
                                                  : dev::quantize_activation_bf16(src[i]);
        } else {
            auto* blocks = reinterpret_cast<typename T::ActBlock*>(dst);
            for (int64_t b = 0; b < k / T::kActElems; ++b) dev::quantize_activation(src + b * T::kActElems, blocks[b]);
        }
    }
    return out;
}

// One output as the kernels compute it; `chain`: the row is one the CPU sums as one chain.
template <class T>
float device_dot(const uint8_t* w, const uint8_t* a, int64_t k, bool chain) {
    if constexpr (T::kFloat) {
        return dev::exact_float_row_dot<T::kType>(w, a, k);
    } else {
        return dev::exact_row_dot<T::kType>(reinterpret_cast<const typename T::Block*>(w),
                                            reinterpret_cast<const typename T::ActBlock*>(a), k / T::kElems, chain);
    }
}

// Counts of outputs compared, differing, and differing in the other order.
struct Tally {
    int64_t compared = 0, differing = 0, other_order_differs = 0;
    std::ostringstream first;
    void add(float cpu, float device, float other, const std::string& where) {
        ++compared;
        if (std::memcmp(&cpu, &device, sizeof cpu) != 0 && ++differing <= 3)
            first << " " << where << ": cpu " << cpu << ", cuda model " << device << ";";
        other_order_differs += std::memcmp(&cpu, &other, sizeof cpu) != 0;
    }
};

// y = W x on the CPU backend (W mapped as a weight matrix, so repacked where the CPU repacks).
std::vector<float> cpu_matmul(cpu::CpuBackend& cpu, TypeId type, const uint8_t* w, int64_t k, int64_t n_out,
                              const std::vector<float>& x) {
    const int64_t m = static_cast<int64_t>(x.size()) / k;
    auto wbuf = cpu.map_weight_matrix(w, type, k, n_out);
    DeviceTensor xt(cpu, TypeId::F32, k, m, x);
    DeviceTensor yt(cpu, TypeId::F32, n_out, m);
    cpu.matmul(make_tensor(wbuf.get(), 0, type, k, n_out), xt.t(), yt.t());
    return yt.values();
}

// Every output of y = W x against the device model; W: n_out rows of `type` in the GGUF layout.
void check_matmul(cpu::CpuBackend& cpu, TypeId type, const uint8_t* w, int64_t k, int64_t n_out, int64_t m,
                  uint32_t seed, Tally& tally) {
    const std::vector<float> x = test::random_values(static_cast<size_t>(k * m), seed, -3.0f, 3.0f);
    const std::vector<float> want = cpu_matmul(cpu, type, w, k, n_out, x);
    const int64_t chain_rows = dev::cpu_chain_rows(type, n_out);
    dev::visit_weight_type(type, [&](auto traits) {
        using T = decltype(traits);
        const std::vector<uint8_t> act = device_activations<T>(x, k);
        const size_t w_row = quant::row_bytes(type, k), a_row = act.size() / m;
        for (int64_t t = 0; t < m; ++t) {
            for (int64_t r = 0; r < n_out; ++r) {
                const uint8_t* wr = w + r * w_row;
                const uint8_t* ar = act.data() + t * a_row;
                const bool chain = r < chain_rows;
                // The other order: for float weights the plain sequential fma chain.
                float other = 0.0f;
                if constexpr (T::kFloat) {
                    for (int64_t i = 0; i < k; ++i)
                        other = dev::fma_rn(dev::float_element<T::kType>(wr, i), dev::float_element<T::kType>(ar, i),
                                            other);
                } else {
                    other = device_dot<T>(wr, ar, k, !chain);
                }
                tally.add(want[t * n_out + r], device_dot<T>(wr, ar, k, chain), other,
                          "k " + std::to_string(k) + " n_out " + std::to_string(n_out) + " row " + std::to_string(r) +
                              " col " + std::to_string(t));
            }
        }
    });
}

void report(const std::string& what, const Tally& tally) {
    INFO(what << ": " << tally.differing << " of " << tally.compared << " outputs differ:" << tally.first.str());
    CHECK(tally.differing == 0);
    INFO(what << ": the other order changes " << tally.other_order_differs << " of " << tally.compared);
    CHECK(tally.other_order_differs > 0);
}

void check_random_matmuls(std::span<const TypeId> types) {
    cpu::CpuBackend cpu(2);
    int64_t total = 0;
    uint32_t seed = 100;
    for (const TypeId type : types) {
        const int64_t block = quant::type_info(type).block_size;
        Tally tally;
        // k: one block, several, and for the float types lengths with whole 8-steps and a tail.
        std::vector<int64_t> ks = {block, 4 * block, 2048};
        if (block == 1) ks = {8, 37, 96, 203, 1000 + 5};
        for (const int64_t k : ks) {
            for (const int64_t n_out : {16, 13, 44}) {
                const std::vector<uint8_t> w = test::random_weight_rows(type, k, n_out, ++seed);
                for (const int64_t m : {1, 3, 17}) check_matmul(cpu, type, w.data(), k, n_out, m, ++seed, tally);
            }
        }
        report(std::string(quant::type_info(type).name) + " random rows", tally);
        total += tally.compared;
    }
    WARN("matmul: " << total << " outputs compared bit for bit");
}

void check_matmul_id(cpu::CpuBackend& cpu, TypeId type, const uint8_t* w, int64_t k, int64_t n_out,
                     int64_t n_expert, uint32_t& seed, Tally& tally);

// The first tensors of each supported type (up to 64 rows; of an expert tensor, its first
// expert's, and matmul_id over all its experts) of the shared models.
void check_model_matmuls(std::span<const char* const> files) {
    cpu::CpuBackend cpu(2);
    int64_t total = 0;
    uint32_t seed = 500;
    for (const char* stem : files) {
        const std::string path = std::string(DESKSIDE_SHARED_DIR) + "/models/" + stem + ".gguf";
        if (!std::filesystem::exists(path)) {
            WARN("SKIPPED: " << path << " is missing");
            continue;
        }
        const models::GgufFile file = models::GgufFile::open(path);
        std::vector<TypeId> seen;
        for (const models::GgufTensorInfo& t : file.tensors()) {
            if (t.shape.size() < 2 || t.shape.size() > 3 || !dev::visit_weight_type(t.type, [](auto) {})) continue;
            if (std::find(seen.begin(), seen.end(), t.type) != seen.end()) continue;
            seen.push_back(t.type);
            const int64_t k = t.shape[0], n_out = std::min<int64_t>(t.shape[1], 64);
            Tally tally;
            for (const int64_t m : {1, 3, 17}) check_matmul(cpu, t.type, t.data, k, n_out, m, ++seed, tally);
            if (t.shape.size() == 3) check_matmul_id(cpu, t.type, t.data, k, t.shape[1], t.shape[2], seed, tally);
            report(std::string(stem) + " " + t.name, tally);
            total += tally.compared;
        }
    }
    WARN("matmul on model tensors: " << total << " outputs compared bit for bit");
}

// matmul_id over n_expert stacked experts of n_out rows each (W in the GGUF layout), against the
// device model: 1, 3 and 17 tokens of two distinct experts each, x per token and per slot.
void check_matmul_id(cpu::CpuBackend& cpu, TypeId type, const uint8_t* w, int64_t k, int64_t n_out,
                     int64_t n_expert, uint32_t& seed, Tally& tally) {
    const int64_t n_used = 2;
    const size_t w_row = quant::row_bytes(type, k);
    for (const int64_t n : {1, 3, 17}) {
        std::mt19937 rng(++seed);
        std::vector<int32_t> ids(static_cast<size_t>(n_used * n));
        for (int64_t t = 0; t < n; ++t) {
            ids[t * n_used] = static_cast<int32_t>(rng() % n_expert);
            ids[t * n_used + 1] = static_cast<int32_t>((ids[t * n_used] + 1 + rng() % (n_expert - 1)) % n_expert);
        }
        for (const bool per_slot : {false, true}) {
            const int64_t x_rows = per_slot ? n_used * n : n;
            const std::vector<float> x = test::random_values(static_cast<size_t>(k * x_rows), ++seed, -3.0f, 3.0f);
            auto wbuf = cpu.map_weight_matrix(w, type, k, n_expert * n_out);
            DeviceTensor xt(cpu, TypeId::F32, k, x_rows, x);
            auto ibuf = cpu.alloc(ids.size() * sizeof(int32_t));
            cpu.upload(*ibuf, 0, ids.data(), ids.size() * sizeof(int32_t));
            DeviceTensor yt(cpu, TypeId::F32, n_out, n_used * n);
            cpu.matmul_id(make_tensor(wbuf.get(), 0, type, k, n_expert * n_out), n_expert, xt.t(),
                          make_tensor(ibuf.get(), 0, TypeId::I32, n_used, n), yt.t());
            const std::vector<float> want = yt.values();
            const int64_t chain_rows = dev::cpu_chain_rows_per_expert(type, n_out);
            dev::visit_weight_type(type, [&](auto traits) {
                using T = decltype(traits);
                const std::vector<uint8_t> act = device_activations<T>(x, k);
                const size_t a_row = act.size() / x_rows;
                for (int64_t j = 0; j < n_used * n; ++j) {
                    const uint8_t* ar = act.data() + (per_slot ? j : j / n_used) * a_row;
                    const uint8_t* we = w + ids[j] * n_out * w_row;
                    for (int64_t r = 0; r < n_out; ++r) {
                        const bool chain = r < chain_rows;
                        const float got = device_dot<T>(we + r * w_row, ar, k, chain);
                        const float other = T::kFloat ? -got : device_dot<T>(we + r * w_row, ar, k, !chain);
                        tally.add(want[j * n_out + r], got, other,
                                  "row " + std::to_string(r) + " slot " + std::to_string(j));
                    }
                }
            });
        }
    }
}

// matmul_id: stacked experts, n_out a multiple of 8 (each expert whole x8 groups) and not (groups
// straddle experts: the CPU dots every row with vec_dot), x per token and per slot.
void check_random_matmul_ids(std::span<const TypeId> types) {
    cpu::CpuBackend cpu(2);
    int64_t total = 0;
    uint32_t seed = 900;
    for (const TypeId type : types) {
        const int64_t block = quant::type_info(type).block_size;
        const int64_t k = block == 1 ? 200 : 2 * std::max<int64_t>(block, 128);
        Tally tally;
        for (const int64_t n_out : {16, 12}) {
            const int64_t n_expert = 5;
            const std::vector<uint8_t> w = test::random_weight_rows(type, k, n_expert * n_out, ++seed);
            check_matmul_id(cpu, type, w.data(), k, n_out, n_expert, seed, tally);
        }
        report(std::string(quant::type_info(type).name) + " matmul_id", tally);
        total += tally.compared;
    }
    WARN("matmul_id: " << total << " outputs compared bit for bit");
}

// ---- the low-bit types (IQ1-IQ3, TQ1_0, TQ2_0, MXFP4) ----

// Random bytes in every field, for the types whose quantizer leaves fields unexplored (TQ2_0's
// digit 3, TQ1_0's bytes above 242, any MXFP4 nibble mix), under a sane scale: TQ's fp16 d at the
// block's end, MXFP4's exponent near 2^0.
std::vector<uint8_t> random_block_bytes(TypeId type, int64_t k, int64_t n_rows, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> w(quant::row_bytes(type, k) * n_rows);
    for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
    const size_t block = quant::type_info(type).block_bytes;
    std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
    for (size_t at = 0; at < w.size(); at += block) {
        if (type == TypeId::MXFP4) {
            w[at] = static_cast<uint8_t>(120 + rng() % 12);
        } else {
            const uint16_t d = quant::fp32_to_fp16(scale(rng));
            std::memcpy(w.data() + at + block - 2, &d, 2);
        }
    }
    return w;
}

void check_random_lowbit_bytes() {
    cpu::CpuBackend cpu(2);
    int64_t total = 0;
    uint32_t seed = 1300;
    for (const TypeId type : {TypeId::TQ1_0, TypeId::TQ2_0, TypeId::MXFP4}) {
        const int64_t k = 4 * quant::type_info(type).block_size;
        Tally tally;
        for (const int64_t n_out : {16, 13}) {
            const std::vector<uint8_t> w = random_block_bytes(type, k, 5 * n_out, ++seed);
            for (const int64_t m : {1, 3, 17}) check_matmul(cpu, type, w.data(), k, n_out, m, ++seed, tally);
            check_matmul_id(cpu, type, w.data(), k, n_out, 5, seed, tally);
        }
        report(std::string(quant::type_info(type).name) + " random bytes", tally);
        total += tally.compared;
    }
    WARN("matmul and matmul_id on random low-bit blocks: " << total << " outputs compared bit for bit");
}

constexpr const char* kModelFiles[] = {"stories260K-f16", "stories260K-bf16", "stories260K-q4_0", "stories260K-q4_1",
                                       "stories260K-q5_0", "stories260K-q5_1", "synth-k-q8_0",     "synth-k-q2_k",
                                       "synth-k-q3_k_m",   "synth-k-q4_k_m",   "synth-k-q5_k_m",   "synth-k-q6_k",
                                       "synth-k-iq4_nl",   "synth-k-iq4_xs",   "synth-k"};
constexpr const char* kLowbitModelFiles[] = {"synth-k-iq1_s",  "synth-k-iq1_m",  "synth-k-iq2_xxs",
                                             "synth-k-iq2_xs", "synth-k-iq2_s",  "synth-k-iq3_xxs",
                                             "synth-k-iq3_s",  "synth-k-tq2_0",  "synth-gptoss-mxfp4_moe"};

}  // namespace

// The CPU's AVX2 level is the definition; where this process runs at another level the body runs
// in a child at DESKSIDE_CPU_ISA=avx2.
TEST_CASE("CUDA exact matmul: every output has the CPU's AVX2 bits on random rows", "[cuda-device-code]") {
    test::at_cpu_isa(cpu::CpuIsa::Avx2, [] { check_random_matmuls(kWeightTypes); });
}

TEST_CASE(
    "CUDA exact matmul: every output has the CPU's AVX2 bits on the "
    "shared models' tensors",
    "[cuda-device-code]") {
    test::at_cpu_isa(cpu::CpuIsa::Avx2, [] { check_model_matmuls(kModelFiles); });
}

TEST_CASE("CUDA exact matmul_id: every output has the CPU's AVX2 bits for its expert", "[cuda-device-code]") {
    test::at_cpu_isa(cpu::CpuIsa::Avx2, [] { check_random_matmul_ids(kWeightTypes); });
}

TEST_CASE("CUDA exact matmul of the low-bit types: every output has the CPU's AVX2 bits on random rows",
          "[cuda-device-code]") {
    test::at_cpu_isa(cpu::CpuIsa::Avx2, [] {
        check_random_matmuls(kLowbitTypes);
        check_random_lowbit_bytes();
    });
}

TEST_CASE("CUDA exact matmul of the low-bit types: every output has the CPU's AVX2 bits on the shared models' tensors",
          "[cuda-device-code]") {
    test::at_cpu_isa(cpu::CpuIsa::Avx2, [] { check_model_matmuls(kLowbitModelFiles); });
}

TEST_CASE("CUDA exact matmul_id of the low-bit types: every output has the CPU's AVX2 bits for its expert",
          "[cuda-device-code]") {
    test::at_cpu_isa(cpu::CpuIsa::Avx2, [] { check_random_matmul_ids(kLowbitTypes); });
}

}  // namespace deskside::backends
