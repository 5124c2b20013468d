// Importance matrices: llama.cpp's imatrix files, read in both of its forms and written in the
// GGUF form that llama-imatrix writes by default.
//
// An imatrix holds, for every weight matrix a model multiplies activations by, the sum over the
// calibration tokens of each input column's squared activation (`in_sum2`) and how many activation
// rows went into it (`counts`), per expert for merged expert tensors. llama-quantize weights each
// column's quantization error by in_sum2 / counts.
//   GGUF form: general.type = "imatrix", imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size;
//   tensors "<weight>.in_sum2" (F32 [n_per_row, n_mat]) and "<weight>.counts" (F32 [1, n_mat]).
//   Legacy .dat form: the older binary layout llama-imatrix wrote before the GGUF form. It keeps
//   no per-expert counts nor the chunk size: each entry reads as one matrix (n_mat = 1) of all its
//   columns, with counts = {calls}, so that in_sum2 / counts is what llama-quantize takes from it.
// ref: llama.cpp tools/imatrix (the file formats only)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deskside::models {

struct ImatrixEntry {
    std::string name;            // the weight tensor, "blk.0.attn_q.weight"
    int64_t n_per_row = 0;       // the weight's input columns
    int64_t n_mat = 1;           // experts of a merged expert tensor, else 1
    std::vector<float> in_sum2;  // n_per_row * n_mat sums of squared activations
    std::vector<float> counts;   // n_mat: activation rows summed into each matrix's column sums
};

struct Imatrix {
    std::vector<ImatrixEntry> entries;
    std::vector<std::string> datasets;  // the calibration files' names
    int64_t chunk_count = 0;
    int64_t chunk_size = 0;
    const ImatrixEntry* find(const std::string& weight_name) const;
};

// Reads either form (told apart by the GGUF magic). Throws std::runtime_error naming the file and
// the entry on anything malformed (every count of an entry zero, a count that is not a whole
// non-negative number, a size that does not match, a negative or non-finite sum, a truncated
// file). A zero count for some of an entry's experts is allowed: no calibration token reached them.
Imatrix read_imatrix(const std::string& path);

// Writes the GGUF form (to a temporary name, then renamed into place).
void write_imatrix(const std::string& path, const Imatrix& imatrix);

// The per-column weights llama-quantize passes to the quantizer for matrix `mat` of `entry`
// (in_sum2 / counts; all 1 for a matrix whose count is 0): n_per_row floats.
std::vector<float> importance_weights(const ImatrixEntry& entry, int64_t mat = 0);

}  // namespace deskside::models
