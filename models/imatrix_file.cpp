// See imatrix_file.h. The GGUF form goes through GgufFile / GgufWriter; the legacy form is read
// here, field by field, with every length checked against what is left of the file.
// ref: llama.cpp tools/imatrix/imatrix.cpp (save_imatrix, save_imatrix_legacy),
//      common/imatrix-loader.cpp and tools/quantize/quantize.cpp (how llama-quantize reads both)
#include "models/imatrix_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>

#include "models/gguf.h"
#include "models/gguf_writer.h"

namespace deskside::models {
namespace {

constexpr const char* kKeyType = "general.type";
constexpr const char* kKeyDatasets = "imatrix.datasets";
constexpr const char* kKeyChunkCount = "imatrix.chunk_count";
constexpr const char* kKeyChunkSize = "imatrix.chunk_size";
constexpr std::string_view kSumsSuffix = ".in_sum2";
constexpr std::string_view kCountsSuffix = ".counts";

[[noreturn]] void fail(const std::string& path, const std::string& what) {
    throw std::runtime_error(path + ": " + what);
}

bool strip_suffix(std::string& s, std::string_view suffix) {
    if (s.size() <= suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
    s.resize(s.size() - suffix.size());
    return true;
}

// What both forms promise: finite, non-negative sums; counts that are whole, non-negative and not
// all zero (a zero count is an expert no calibration token was routed to; llama-quantize gives it
// unit weights).
void check_entry(const std::string& path, const ImatrixEntry& e) {
    const std::string where = "imatrix entry '" + e.name + "': ";
    for (size_t i = 0; i < e.in_sum2.size(); ++i) {
        if (!std::isfinite(e.in_sum2[i]) || e.in_sum2[i] < 0)
            fail(path, where + "sum " + std::to_string(i) + " is " + std::to_string(e.in_sum2[i]));
    }
    bool any = false;
    for (size_t m = 0; m < e.counts.size(); ++m) {
        const float c = e.counts[m];
        if (!std::isfinite(c) || c < 0 || c != std::round(c))
            fail(path, where + "count " + std::to_string(m) + " is " + std::to_string(c) + ", not a row count");
        any = any || c > 0;
    }
    if (!any) fail(path, where + "every count is 0 (no activations were collected)");
}

Imatrix read_gguf(const std::string& path) {
    const GgufFile f = GgufFile::open(path);
    Imatrix im;
    for (const char* key : {kKeyDatasets, kKeyChunkCount, kKeyChunkSize}) {
        if (f.find(key) == nullptr) fail(path, std::string("not an imatrix: no metadata key '") + key + "'");
    }
    for (const GgufValue& v : f.find(kKeyDatasets)->as_array().items) im.datasets.push_back(v.as_string());
    im.chunk_count = f.get_int(kKeyChunkCount, 0);
    im.chunk_size = f.get_int(kKeyChunkSize, 0);

    struct Pair {
        const GgufTensorInfo* sums = nullptr;
        const GgufTensorInfo* counts = nullptr;
    };
    std::map<std::string, Pair> pairs;  // by weight name, sorted as llama.cpp iterates them
    for (const GgufTensorInfo& t : f.tensors()) {
        std::string name = t.name;
        if (strip_suffix(name, kSumsSuffix)) pairs[name].sums = &t;
        else if (strip_suffix(name, kCountsSuffix)) pairs[name].counts = &t;
        // Other tensors (newer llama-imatrix's ".in_sum") are not needed to quantize.
    }
    if (pairs.empty()) fail(path, "not an imatrix: no '<weight>.in_sum2' tensors");
    for (const auto& [name, p] : pairs) {
        const std::string where = "imatrix entry '" + name + "': ";
        if (!p.sums || !p.counts)
            fail(path, where + "has " + (p.sums ? "in_sum2 but no counts" : "counts but no in_sum2"));
        if (p.sums->type != quant::TypeId::F32 || p.counts->type != quant::TypeId::F32)
            fail(path, where + "in_sum2 and counts must be F32");
        ImatrixEntry e;
        e.name = name;
        e.n_per_row = p.sums->shape.empty() ? 0 : p.sums->shape[0];
        e.n_mat = e.n_per_row > 0 ? p.sums->n_elements() / e.n_per_row : 0;
        if (e.n_per_row <= 0 || p.counts->n_elements() != e.n_mat)
            fail(path, where + "size mismatch: in_sum2 holds " + std::to_string(p.sums->n_elements()) +
                           " sums of rows of " + std::to_string(e.n_per_row) + ", counts holds " +
                           std::to_string(p.counts->n_elements()) + " counts");
        e.in_sum2.resize(static_cast<size_t>(p.sums->n_elements()));
        e.counts.resize(static_cast<size_t>(e.n_mat));
        std::memcpy(e.in_sum2.data(), p.sums->data, e.in_sum2.size() * sizeof(float));
        std::memcpy(e.counts.data(), p.counts->data, e.counts.size() * sizeof(float));
        check_entry(path, e);
        im.entries.push_back(std::move(e));
    }
    return im;
}

// Reads little-endian fields from the legacy file's bytes, naming what is cut short.
class LegacyReader {
   public:
    LegacyReader(const std::string& path, std::vector<char> bytes) : path_(path), bytes_(std::move(bytes)) {}
    bool at_end() const { return pos_ == bytes_.size(); }
    int32_t i32(const std::string& what) {
        int32_t v;
        take(&v, sizeof(v), what);
        return v;
    }
    void take(void* out, size_t n, const std::string& what) {
        if (bytes_.size() - pos_ < n)
            fail(path_, what + ": the file ends at byte " + std::to_string(bytes_.size()) + ", " + std::to_string(n) +
                            " bytes needed at offset " + std::to_string(pos_));
        std::memcpy(out, bytes_.data() + pos_, n);
        pos_ += n;
    }

   private:
    const std::string& path_;
    std::vector<char> bytes_;
    size_t pos_ = 0;
};

// The legacy layout: int32 n_entries; per entry int32 name length, the name, int32 ncall, int32
// nval, nval floats (each column's mean square times ncall); then optionally int32 chunk count,
// int32 length and the dataset's name. It records no per-expert counts: an entry reads as one
// matrix of nval columns with count ncall, so in_sum2 / counts is the mean square llama-quantize
// takes from it.
Imatrix read_legacy(const std::string& path, std::vector<char> bytes) {
    LegacyReader in(path, std::move(bytes));
    const int32_t n_entries = in.i32("legacy imatrix header");
    if (n_entries < 1) fail(path, "not an imatrix: " + std::to_string(n_entries) + " entries");
    Imatrix im;
    for (int32_t i = 0; i < n_entries; ++i) {
        const std::string nth = "imatrix entry " + std::to_string(i);
        const int32_t len = in.i32(nth + " name length");
        if (len <= 0 || len > 4096) fail(path, nth + ": name length " + std::to_string(len));
        ImatrixEntry e;
        e.name.resize(static_cast<size_t>(len));
        in.take(e.name.data(), e.name.size(), nth + " name");
        const std::string where = "imatrix entry '" + e.name + "'";
        const int32_t ncall = in.i32(where + " call count");
        const int32_t nval = in.i32(where + " value count");
        if (nval < 1) fail(path, where + ": " + std::to_string(nval) + " values");
        e.n_per_row = nval;
        e.in_sum2.resize(static_cast<size_t>(nval));
        in.take(e.in_sum2.data(), e.in_sum2.size() * sizeof(float), where + " values");
        e.counts = {static_cast<float>(ncall)};
        check_entry(path, e);
        im.entries.push_back(std::move(e));
    }
    if (!in.at_end()) {
        im.chunk_count = in.i32("legacy imatrix chunk count");
        if (!in.at_end()) {
            const int32_t len = in.i32("legacy imatrix dataset name length");
            if (len < 0 || len > (1 << 20)) fail(path, "legacy imatrix dataset name length " + std::to_string(len));
            std::string dataset(static_cast<size_t>(len), '\0');
            in.take(dataset.data(), dataset.size(), "legacy imatrix dataset name");
            if (!dataset.empty()) im.datasets.push_back(std::move(dataset));
        }
    }
    std::sort(im.entries.begin(), im.entries.end(),
              [](const ImatrixEntry& a, const ImatrixEntry& b) { return a.name < b.name; });
    return im;
}

}  // namespace

const ImatrixEntry* Imatrix::find(const std::string& weight_name) const {
    for (const ImatrixEntry& e : entries) {
        if (e.name == weight_name) return &e;
    }
    return nullptr;
}

Imatrix read_imatrix(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(path, "cannot open");
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint32_t magic = 0;
    if (bytes.size() >= sizeof(magic)) std::memcpy(&magic, bytes.data(), sizeof(magic));
    if (magic != GgufFile::kMagic) return read_legacy(path, std::move(bytes));
    try {
        return read_gguf(path);
    } catch (const GgufError& e) {
        throw std::runtime_error(std::string("imatrix: ") + e.what());
    }
}

void write_imatrix(const std::string& path, const Imatrix& imatrix) {
    GgufWriter w;
    w.set(kKeyType, GgufValue::string("imatrix"));
    std::vector<GgufValue> datasets;
    for (const std::string& d : imatrix.datasets) datasets.push_back(GgufValue::string(d));
    w.set(kKeyDatasets, GgufValue::array(GgufType::STRING, std::move(datasets)));
    w.set(kKeyChunkCount, GgufValue::u32(static_cast<uint32_t>(imatrix.chunk_count)));
    w.set(kKeyChunkSize, GgufValue::u32(static_cast<uint32_t>(imatrix.chunk_size)));
    // llama-imatrix sorts by name and gives a single matrix 1-D tensors (ggml drops trailing 1s).
    std::vector<const ImatrixEntry*> sorted;
    for (const ImatrixEntry& e : imatrix.entries) sorted.push_back(&e);
    std::sort(sorted.begin(), sorted.end(),
              [](const ImatrixEntry* a, const ImatrixEntry* b) { return a->name < b->name; });
    auto as_bytes = [](const std::vector<float>& v) {
        return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float));
    };
    for (const ImatrixEntry* e : sorted) {
        if (e->n_per_row <= 0 || e->n_mat <= 0 || e->in_sum2.size() != static_cast<size_t>(e->n_per_row * e->n_mat) ||
            e->counts.size() != static_cast<size_t>(e->n_mat))
            throw std::invalid_argument(path + ": imatrix entry '" + e->name + "' has " +
                                        std::to_string(e->in_sum2.size()) + " sums and " +
                                        std::to_string(e->counts.size()) + " counts for " + std::to_string(e->n_mat) +
                                        " matrices of " + std::to_string(e->n_per_row));
        const bool one = e->n_mat == 1;
        w.add_tensor(e->name + std::string(kSumsSuffix), quant::TypeId::F32,
                     one ? std::vector<int64_t>{e->n_per_row} : std::vector<int64_t>{e->n_per_row, e->n_mat},
                     as_bytes(e->in_sum2));
        w.add_tensor(e->name + std::string(kCountsSuffix), quant::TypeId::F32,
                     one ? std::vector<int64_t>{1} : std::vector<int64_t>{1, e->n_mat}, as_bytes(e->counts));
    }
    w.write(path);
}

std::vector<float> importance_weights(const ImatrixEntry& entry, int64_t mat) {
    if (mat < 0 || mat >= entry.n_mat)
        throw std::out_of_range("imatrix entry '" + entry.name + "' has " + std::to_string(entry.n_mat) +
                                " matrices, not " + std::to_string(mat + 1));
    // As llama-quantize: the sums over the row count rounded to a whole number; unit weights for a
    // matrix no row reached.
    const float count = static_cast<float>(std::lround(entry.counts[static_cast<size_t>(mat)]));
    const float* sums = entry.in_sum2.data() + mat * entry.n_per_row;
    std::vector<float> w(static_cast<size_t>(entry.n_per_row), 1.0f);
    if (count > 0.0f) {
        for (int64_t i = 0; i < entry.n_per_row; ++i) w[static_cast<size_t>(i)] = sums[i] / count;
    }
    return w;
}

}  // namespace deskside::models
