// Quantizing a model: the plan (models/quant_mix.h) decides every tensor's type before any row is
// touched, so a file's header can be written first and the tensors streamed after it. Each tensor
// is converted by row slices across threads; a slice never crosses from one expert's matrix into
// the next, since each expert has its own importance weights.
// ref: llama.cpp src/llama-quant.cpp (llama_model_quantize_impl: metadata, order, imatrix checks)
#include "models/quantize.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "models/gguf.h"
#include "models/gguf_writer.h"
#include "models/hf_to_gguf.h"
#include "models/imatrix_file.h"
#include "models/quant_mix.h"
#include "quant/quant.h"
#include "quant/quantize_rows.h"

namespace deskside::models {
namespace {

using quant::TypeId;

// ggml_is_quantized: float tensors are converted freely, quantized ones only when asked.
bool is_quantized(TypeId t) {
    return t != TypeId::F32 && t != TypeId::F16 && t != TypeId::BF16;
}

// Types whose llama.cpp quantizer takes no importance weights: with --imatrix they are made as without.
bool ignores_imatrix(TypeId t) {
    return !is_quantized(t) || t == TypeId::Q8_0;
}

std::string type_name(TypeId t) {
    return std::string(quant::type_info(t).name);
}

MixModel mix_model(const Hparams& hp) {
    return {hp.architecture, hp.n_layer, hp.n_head_layers.empty() ? hp.n_head : hp.n_head_layers[0],
            hp.n_head_kv_layers.empty() ? hp.n_head_kv : hp.n_head_kv_layers[0], hp.n_expert};
}

struct Step {
    const Tensor* src;
    TypeId type;
    const ImatrixEntry* imatrix;  // nullptr: quantized without
};

// The importance weights llama-quantize would use for `t`: none when the imatrix has no entry for
// it; an entry of the wrong size is an error, except for token_embd, which imatrices never fit.
const ImatrixEntry* imatrix_for(const Imatrix* imatrix, const Tensor& t, TypeId to) {
    if (!imatrix || ignores_imatrix(to)) return nullptr;
    const ImatrixEntry* e = imatrix->find(t.name);
    if (!e || t.n_elements() == 0) return nullptr;
    const int64_t n_mat = t.n_elements() / (t.shape[0] * (t.shape.size() > 1 ? t.shape[1] : 1));
    if (e->n_per_row == t.shape[0] && e->n_mat == n_mat) return e;
    if (t.name == "token_embd.weight" || t.name == "per_layer_token_embd.weight") return nullptr;
    throw std::invalid_argument("the importance matrix entry for " + t.name + " holds " + std::to_string(e->n_mat) +
                                " x " + std::to_string(e->n_per_row) + " values; the tensor needs " +
                                std::to_string(n_mat) + " x " + std::to_string(t.shape[0]));
}

// Every tensor's output type, checked against what can be converted, before anything is written.
std::vector<Step> plan(const ModelInfo& in, const QuantizeSpec& spec) {
    const QuantMix* mix = find_quant_mix(spec.type);
    if (!mix) {
        throw std::invalid_argument("unknown quantization type '" + spec.type + "' (valid: " + quant_mix_names() + ")");
    }
    std::vector<MixTensor> tensors;
    tensors.reserve(in.tensors.size());
    for (const Tensor& t : in.tensors) tensors.push_back({t.name, t.type, t.shape});
    std::vector<Step> steps;
    for (const PlannedTensor& p : plan_quant_mix(*mix, mix_model(in.hparams), tensors, spec.imatrix != nullptr)) {
        const Tensor& t = in.tensors[p.source];
        Step step{&t, p.type, nullptr};
        if (p.type != t.type) {
            const quant::QuantTraits* traits = quant::quant_traits(t.type);
            if (!traits || !traits->to_float) {
                throw std::invalid_argument("tensor " + t.name + ": type " + type_name(t.type) +
                                            " cannot be dequantized");
            }
            if (is_quantized(t.type) && !spec.allow_requantize) {
                throw std::invalid_argument("tensor " + t.name + " is already quantized (" + type_name(t.type) +
                                            "); --allow-requantize dequantizes and quantizes it again");
            }
            step.imatrix = imatrix_for(spec.imatrix, t, p.type);
            if (!quant::can_quantize(p.type, step.imatrix != nullptr)) {
                throw std::invalid_argument("tensor " + t.name + ": quantizing to " + type_name(p.type) +
                                            (step.imatrix ? " with an importance matrix" : "") + " is not available");
            }
        }
        steps.push_back(step);
    }
    return steps;
}

size_t output_bytes(const Step& s) {
    return quant::row_bytes(s.type, s.src->n_elements());
}

int thread_count(int requested) {
    if (requested > 0) return requested;
    return std::max(1u, std::thread::hardware_concurrency());
}

// Rows [first, last) of a tensor of `n_per_row` columns: dequantized a few at a time (when not F32
// already) and quantized with the weights of the matrix they belong to.
void convert_rows(const Step& s, const std::vector<std::vector<float>>& weights, int64_t first, int64_t last,
                  uint8_t* dst) {
    constexpr int64_t kRowsPerBatch = 64;
    const Tensor& t = *s.src;
    const int64_t n_per_row = t.shape[0];
    const int64_t rows_per_mat = t.shape.size() > 1 ? t.shape[1] : 1;
    const size_t src_row = quant::row_bytes(t.type, n_per_row);
    const size_t dst_row = quant::row_bytes(s.type, n_per_row);
    const quant::ToFloatFn to_float = quant::quant_traits(t.type)->to_float;
    std::vector<float> buf;
    for (int64_t r = first; r < last;) {
        const int64_t mat = r / rows_per_mat;
        const int64_t end = std::min({last, (mat + 1) * rows_per_mat, r + kRowsPerBatch});
        const float* rows = reinterpret_cast<const float*>(t.data + r * src_row);
        if (t.type != TypeId::F32) {
            buf.resize(static_cast<size_t>((end - r) * n_per_row));
            to_float(t.data + r * src_row, buf.data(), (end - r) * n_per_row);
            rows = buf.data();
        }
        quant::quantize_rows(s.type, rows, dst + r * dst_row, end - r, n_per_row,
                             weights.empty() ? nullptr : weights[static_cast<size_t>(mat)].data());
        r = end;
    }
}

// Converts one tensor into `dst` (output_bytes(s) bytes), its rows split evenly across threads.
void convert(const Step& s, int threads, uint8_t* dst) {
    const Tensor& t = *s.src;
    if (t.n_elements() == 0) return;
    std::vector<std::vector<float>> weights;
    if (s.imatrix) {
        for (int64_t m = 0; m < s.imatrix->n_mat; ++m) weights.push_back(importance_weights(*s.imatrix, m));
    }
    const int64_t rows = t.n_elements() / t.shape[0];
    const int64_t n_threads = std::clamp<int64_t>(threads, 1, std::max<int64_t>(rows, 1));
    const int64_t per_thread = (rows + n_threads - 1) / n_threads;
    std::vector<std::exception_ptr> errors(static_cast<size_t>(n_threads));
    {
        std::vector<std::jthread> pool;
        for (int64_t i = 0; i < n_threads; ++i) {
            pool.emplace_back([&, i] {
                try {
                    convert_rows(s, weights, i * per_thread, std::min(rows, (i + 1) * per_thread), dst);
                } catch (...) {
                    errors[static_cast<size_t>(i)] = std::current_exception();
                }
            });
        }
    }
    for (const std::exception_ptr& e : errors) {
        if (e) std::rethrow_exception(e);
    }
}

// gguf_set_val's placement: an existing key is removed and the new value goes last.
void set_last(GgufWriter& w, const std::string& key, GgufValue value) {
    w.remove(key);
    w.set(key, std::move(value));
}

// llama-quantize keeps at most 127 bytes of the strings it writes (its override buffer).
std::string clipped(const std::string& s) {
    return s.substr(0, 127);
}

void set_quantize_keys(GgufWriter& w, const QuantizeSpec& spec) {
    set_last(w, "general.quantization_version", GgufValue::u32(2));
    set_last(w, "general.file_type", GgufValue::u32(find_quant_mix(spec.type)->file_type));
    for (const char* key : {"split.no", "split.count", "split.tensors.count"}) w.remove(key);
    if (!spec.imatrix) return;
    set_last(w, "quantize.imatrix.file", GgufValue::string(clipped(spec.imatrix_path)));
    if (!spec.imatrix->datasets.empty()) {
        set_last(w, "quantize.imatrix.dataset", GgufValue::string(clipped(spec.imatrix->datasets.front())));
    }
    set_last(w, "quantize.imatrix.entries_count", GgufValue::u32(static_cast<uint32_t>(spec.imatrix->entries.size())));
    if (spec.imatrix->chunk_count > 0) {
        set_last(w, "quantize.imatrix.chunks_count", GgufValue::u32(static_cast<uint32_t>(spec.imatrix->chunk_count)));
    }
}

void refuse_same_file(const std::string& in, const std::string& out) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const bool same =
        fs::exists(out, ec) ? fs::equivalent(in, out, ec) : fs::weakly_canonical(out, ec) == fs::weakly_canonical(in);
    if (same && !ec) throw std::invalid_argument("the output " + out + " is the input file");
}

// A mapped input tensor is read once: dropping its pages afterwards keeps the process near one
// tensor's size however large the model (they are the file's, so nothing is lost; llama-quantize
// unmaps each weight likewise).
void release_pages(const Tensor& t) {
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<uintptr_t>(t.data) / page * page;
    const auto end = reinterpret_cast<uintptr_t>(t.data) + t.n_bytes;
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// An input tensor with its bytes, and the mapped tensors they are read from (their pages are
// dropped once it is written).
struct TensorBytes {
    Tensor tensor;
    std::vector<Tensor> mapped;
};
using ReadTensor = std::function<TensorBytes(size_t index, std::vector<uint8_t>& buf)>;

// The file of `model` quantized: `metadata`, then the quantize keys; the tensors read one at a time.
void write_quantized(const ModelInfo& model, const std::vector<std::pair<std::string, GgufValue>>& metadata,
                     const std::string& out, const QuantizeSpec& spec, const QuantizeProgress& progress,
                     const ReadTensor& read) {
    const std::vector<Step> steps = plan(model, spec);
    GgufWriter writer;
    for (const auto& [key, value] : metadata) writer.set(key, value);
    set_quantize_keys(writer, spec);
    uint64_t total = 0;
    for (const Step& s : steps) {
        writer.add_tensor(s.src->name, s.type, s.src->shape);
        total += s.src->n_bytes;
    }

    GgufWriter::Stream stream = writer.begin(out);
    std::vector<uint8_t> input, output;
    uint64_t done = 0;
    for (const Step& s : steps) {
        const TensorBytes in = read(static_cast<size_t>(s.src - model.tensors.data()), input);
        const Step step{&in.tensor, s.type, s.imatrix};
        if (step.type == in.tensor.type) {
            stream.append({in.tensor.data, in.tensor.n_bytes});
        } else {
            output.resize(output_bytes(step));
            convert(step, thread_count(spec.threads), output.data());
            stream.append(output);
        }
        for (const Tensor& t : in.mapped) release_pages(t);
        done += s.src->n_bytes;
        if (progress) progress(done, total);
    }
    stream.commit();
}

struct OwnedTensors {
    std::vector<std::vector<uint8_t>> buffers;
    std::shared_ptr<const void> input;  // tensors kept as they were point into the input
};

}  // namespace

ModelInfo quantize_in_memory(const ModelInfo& in, const QuantizeSpec& spec) {
    const std::vector<Step> steps = plan(in, spec);
    auto owned = std::make_shared<OwnedTensors>();
    owned->input = in.storage;
    ModelInfo out = in;
    out.tensors.clear();
    out.file_size = 0;
    for (const Step& s : steps) {
        Tensor t = *s.src;
        if (s.type != s.src->type) {
            std::vector<uint8_t>& buf = owned->buffers.emplace_back(output_bytes(s));
            convert(s, thread_count(spec.threads), buf.data());
            t.type = s.type;
            t.data = buf.data();
            t.n_bytes = buf.size();
        }
        out.file_size += t.n_bytes;
        out.tensors.push_back(std::move(t));
    }
    out.storage = std::move(owned);
    return out;
}

void quantize_file(const std::string& in, const std::string& out, const QuantizeSpec& spec,
                   const QuantizeProgress& progress) {
    if (!std::filesystem::exists(in)) throw std::runtime_error(in + ": no such file or directory");
    refuse_same_file(in, out);
    if (std::filesystem::is_directory(in)) {
        const HfAsGguf converted(in);
        write_quantized(converted.layout(), converted.metadata(), out, spec, progress,
                        [&](size_t i, std::vector<uint8_t>& buf) {
                            return TensorBytes{converted.tensor(i, buf), converted.sources(i)};
                        });
        return;
    }
    const ModelInfo model = load_model(in);
    write_quantized(model, GgufFile::open(in).metadata(), out, spec, progress, [&](size_t i, std::vector<uint8_t>&) {
        return TensorBytes{model.tensors[i], {model.tensors[i]}};
    });
}

}  // namespace deskside::models
