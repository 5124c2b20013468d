// deskside env [--json] [-m MODEL] [-t N] [--compare A.json [B.json]]: the stack fingerprint
// (engine/stack_fingerprint.h), and the differences between two of them classified by what they
// can change (engine/stack_compare.h).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "engine/placement.h"
#include "engine/stack_compare.h"
#include "engine/stack_fingerprint.h"
#include "models/store/resolve.h"

namespace deskside::cli {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// A JSON value as one line of text: strings bare, arrays space-separated, null as "-".
std::string text(const json& v) {
    if (v.is_null()) return "-";
    if (v.is_string()) return v.get<std::string>();
    if (v.is_array()) {
        std::string out;
        for (const json& item : v) out += (out.empty() ? "" : " ") + text(item);
        return out;
    }
    return v.dump();
}

std::string bytes(const json& v) { return v.is_number() ? engine::format_bytes(v.get<uint64_t>()) : text(v); }

void print_fingerprint(const ordered_json& f) {
    const ordered_json& d = f["deskside"];
    const ordered_json& o = d["options"];
    std::printf("deskside   %s, commit %s%s, %s\n", text(d["version"]).c_str(), text(d["commit"]).c_str(),
                d["dirty"].get<bool>() ? " (modified)" : "", text(d["build_type"]).c_str());
    const std::string archs = text(o["cuda_architectures"]);
    std::printf("options    vulkan %s, cuda %s%s, native %s, sanitize %s\n", text(o["vulkan"]).c_str(),
                text(o["cuda"]).c_str(), archs.empty() ? "" : (" (" + archs + ")").c_str(), text(o["native"]).c_str(),
                text(o["sanitize"]).c_str());
    const ordered_json& c = f["compiler"];
    std::printf("compiler   %s%s\n", text(c["cxx"]).c_str(),
                c["cuda"].get<std::string>().empty() ? "" : (", nvcc " + text(c["cuda"])).c_str());
    const ordered_json& os = f["os"];
    std::printf("os         %s, kernel %s %s, glibc %s\n", text(os["name"]).c_str(), text(os["kernel"]).c_str(),
                text(os["arch"]).c_str(), text(os["glibc"]).c_str());
    const ordered_json& cpu = f["cpu"];
    std::printf("cpu        %s, %s cores, %s, %s\n", text(cpu["model"]).c_str(), text(cpu["cores"]).c_str(),
                bytes(cpu["memory_bytes"]).c_str(),
                cpu["max_mhz"].is_null() ? "clock unknown" : ("max " + text(cpu["max_mhz"]) + " MHz").c_str());
    std::printf("           kernels at isa %s (best: %s), %s threads; features %s\n", text(f["isa"]).c_str(),
                text(cpu["isa_best"]).c_str(), text(f["threads"]).c_str(), text(cpu["features"]).c_str());
    for (const ordered_json& dev : f["devices"]) {
        std::printf("%-10s %s (%s, %s)%s\n", text(dev["name"]).c_str(), text(dev["description"]).c_str(),
                    text(dev["type"]).c_str(), bytes(dev["memory_bytes"]).c_str(),
                    dev["usable"].get<bool>() ? "" : " (not usable)");
        std::printf("           driver %s, version %s; runtime %s; api %s\n", text(dev["driver"]).c_str(),
                    text(dev["driver_version"]).c_str(), text(dev["runtime_version"]).c_str(),
                    text(dev["api_version"]).c_str());
        std::printf("           kernels %s\n", text(dev["kernels"]).c_str());
    }
    for (const auto& [api, why] : f["absent"].items())
        std::printf("%-10s %s\n", ("no " + api).c_str(), text(why).c_str());
    if (f.contains("model")) {
        const ordered_json& m = f["model"];
        std::printf("model      %s, %s\n           sha256 %s\n           types", text(m["path"]).c_str(),
                    bytes(m["size_bytes"]).c_str(), text(m["sha256"]).c_str());
        for (const ordered_json& q : m["quant_types"])
            std::printf(" %s (%s tensors)", text(q["type"]).c_str(), text(q["tensors"]).c_str());
        std::printf("\n");
    }
}

json read_fingerprint(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    try {
        json j = json::parse(in);
        if (!j.is_object()) throw std::runtime_error("not a JSON object");
        return j;
    } catch (const std::exception& e) {
        throw std::runtime_error(path + ": not a fingerprint (deskside env --json): " + e.what());
    }
}

// Exit status 1 when a difference changes results: what a CI job checks before it runs.
int print_comparison(const json& before, const json& after, const std::string& before_name,
                     const std::string& after_name, bool as_json) {
    const std::vector<engine::StackDifference> diffs = engine::compare_stacks(before, after);
    const bool results = engine::changes_results(diffs);
    if (as_json) {
        json list = json::array();
        for (const auto& d : diffs)
            list.push_back({{"field", d.field}, {"class", engine::change_kind_name(d.kind)}, {"before", d.before},
                            {"after", d.after}, {"why", d.why}});
        json out{{"before", before_name}, {"after", after_name}, {"changes_results", results}, {"differences", list}};
        std::printf("%s\n", out.dump(2).c_str());
        return results ? 1 : 0;
    }
    std::printf("comparing %s (before) with %s (after)\n", before_name.c_str(), after_name.c_str());
    for (const auto& d : diffs) {
        std::printf("%-8s %s: %s -> %s\n         (%s)\n", std::string(engine::change_kind_name(d.kind)).c_str(),
                    d.field.c_str(), text(d.before).c_str(), text(d.after).c_str(), d.why.c_str());
    }
    if (diffs.empty()) std::printf("the stacks are the same\n");
    else if (results) std::printf("results can differ\n");
    else std::printf("results are the same (only speed or cosmetic fields differ)\n");
    return results ? 1 : 0;
}

int run(Args& args) {
    const bool as_json = args.flag("--json");
    const std::optional<std::string> model = args.value("--model", "-m");
    const std::optional<long long> threads = args.int_value("--threads", "-t");
    const std::optional<std::string> compare = args.value("--compare");
    const std::vector<std::string> rest = args.positionals();
    args.finish();
    if (threads && (*threads < 1 || *threads > 1024)) throw UsageError("--threads must be in [1, 1024]");
    if (!compare && !rest.empty()) throw UsageError("unexpected argument '" + rest[0] + "'");
    if (rest.size() > 1) throw UsageError("--compare takes one or two files");
    if (compare && !rest.empty() && (model || threads))
        throw UsageError("--compare A.json B.json compares two files: -m and -t describe this machine");

    if (compare && !rest.empty())
        return print_comparison(read_fingerprint(*compare), read_fingerprint(rest[0]), *compare, rest[0], as_json);

    engine::FingerprintOptions options;
    options.n_threads = threads ? static_cast<int>(*threads) : 0;
    if (model) options.model_path = models::store::resolve_model(*model);
    const ordered_json here = engine::stack_fingerprint(options);
    if (compare) return print_comparison(read_fingerprint(*compare), json(here), *compare, "this machine", as_json);
    if (as_json)
        std::printf("%s\n", here.dump(2).c_str());
    else
        print_fingerprint(here);
    return 0;
}

}  // namespace

const Command kEnvCommand{
    "env",
    "the stack fingerprint (build, compiler, OS, CPU level, devices, drivers, kernels); compare two",
    "usage: deskside env [--json] [-m MODEL] [-t N] [--compare OTHER.json [B.json]]\n"
    "\n"
    "Prints what decides results and speed on this machine: deskside's version, commit and build\n"
    "options; the compiler; OS, kernel and glibc; the CPU, the instruction-set level its kernels run\n"
    "at (DESKSIDE_CPU_ISA when set), threads and memory; each GPU with its driver, runtime and API\n"
    "versions, memory and kernel variants (Vulkan exact or plain, int8-dot, subgroup size).\n"
    "  --json               the fingerprint as JSON (save it, compare it elsewhere)\n"
    "  -m, --model MODEL    add the model's sha256 and storage types (reads the whole file)\n"
    "  -t, --threads N      the CPU thread count to record (default: physical cores, as serve uses)\n"
    "  --compare OTHER.json compare OTHER.json (before) with this machine (after)\n"
    "  --compare A.json B.json\n"
    "                       compare two saved fingerprints\n"
    "Each difference is classified: results (ISA level, kernel variants, drivers, compiler, build,\n"
    "glibc, model digest), speed (threads, CPU model, clocks, memory) or cosmetic. Exit status: 0 when\n"
    "no difference changes results, 1 when one does (with --json, the comparison as JSON).\n",
    &run,
};

}  // namespace deskside::cli
