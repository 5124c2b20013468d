// deskside quantize IN OUT.gguf --type TYPE [--imatrix FILE] [--allow-requantize] [--threads N]:
// writes the file llama-quantize writes for the same input (a checkpoint directory converted
// first) and type (models/quantize.h).
#include <cstdio>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "models/imatrix_file.h"
#include "models/quant_mix.h"
#include "models/quantize.h"
#include "models/store/progress.h"

namespace deskside::cli {
namespace {

int run(Args& args) {
    const auto type = args.value("--type");
    const auto imatrix_path = args.value("--imatrix");
    const bool allow_requantize = args.flag("--allow-requantize");
    const auto threads = args.int_value("--threads", "-t");
    const std::vector<std::string> paths = args.positionals();
    args.finish();
    if (paths.size() != 2) throw UsageError("give the input model and the output file (deskside quantize IN OUT)");
    if (!type) throw UsageError("--type is required (one of " + models::quant_mix_names() + ")");
    if (!models::find_quant_mix(*type)) {
        throw UsageError("unknown --type '" + *type + "' (one of " + models::quant_mix_names() + ")");
    }
    if (threads && *threads < 1) throw UsageError("--threads must be at least 1");

    std::optional<models::Imatrix> imatrix;
    if (imatrix_path) imatrix = models::read_imatrix(*imatrix_path);
    models::QuantizeSpec spec;
    spec.type = *type;
    spec.imatrix = imatrix ? &*imatrix : nullptr;
    spec.imatrix_path = imatrix_path.value_or("");
    spec.allow_requantize = allow_requantize;
    spec.threads = threads ? static_cast<int>(*threads) : 0;

    std::optional<models::store::Progress> bar;
    models::quantize_file(paths[0], paths[1], spec, [&](uint64_t done, uint64_t total) {
        if (!bar) bar.emplace("quantize", 0, total);
        done < total ? bar->update(done) : bar->finish(done);
    });
    std::printf("%s\n", paths[1].c_str());
    return 0;
}

}  // namespace

const Command kQuantizeCommand{
    "quantize",
    "quantize a model to a GGUF file, with llama-quantize's type mixes",
    "usage: deskside quantize IN OUT.gguf --type TYPE [--imatrix FILE] [--allow-requantize] [--threads N]\n"
    "\n"
    "IN is a GGUF file (F32, F16 or BF16 tensors; quantized ones with --allow-requantize) or a Hugging\n"
    "Face checkpoint directory, converted first as convert_hf_to_gguf.py would. OUT gets the file\n"
    "llama-quantize writes for the same (converted) input and type, byte for byte: the same type per\n"
    "tensor (Q4_K_M is Q4_K with Q6_K in some layers' attn_v and ffn_down, and for the output head),\n"
    "the input's metadata plus general.file_type and general.quantization_version.\n"
    "  --type TYPE          F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_S Q3_K_M Q3_K_L\n"
    "                       Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS (Q3_K, Q4_K, Q5_K: the _M)\n"
    "  --imatrix FILE       an importance matrix (llama-imatrix's GGUF or .dat form) weighting the\n"
    "                       quantizers' error, as llama-quantize --imatrix\n"
    "  --allow-requantize   accept quantized input: its tensors are dequantized, then quantized again\n"
    "  -t, --threads N      threads splitting each tensor's rows (default: all)\n"
    "Prints OUT on stdout; progress goes to stderr. OUT is written under a temporary name and renamed\n"
    "at the end, so a failed run leaves nothing behind.\n",
    run,
};

}  // namespace deskside::cli
