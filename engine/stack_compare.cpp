#include "engine/stack_compare.h"

#include <algorithm>
#include <map>

namespace deskside::engine {
namespace {

using nlohmann::json;

struct Rule {
    std::string_view pattern;  // dot-separated; "*" matches one segment (a device name, an option)
    ChangeKind kind;
    std::string_view why;
};

// The most specific pattern wins (rules are matched exactly, segment count included).
constexpr ChangeKind R = ChangeKind::Results, S = ChangeKind::Speed, C = ChangeKind::Cosmetic;
constexpr Rule kRules[] = {
    {"schema", C, "the fingerprint's layout version"},
    {"isa", R, "the CPU kernels' instruction-set level fixes their summation order"},
    {"threads", S, "threads split rows between cores, never a row's sum"},
    {"deskside", R, "deskside is present on one side only"},
    {"deskside.version", R, "another deskside version can compute differently"},
    {"deskside.commit", R, "another commit can compute differently"},
    {"deskside.dirty", R, "uncommitted changes can compute differently"},
    {"deskside.build_type", R, "the optimization level decides how the compiler orders scalar float code"},
    {"deskside.options", R, "the build options choose backends and code generation"},
    {"deskside.options.*", R,
     "the build options choose backends and code generation (native lets the compiler fuse float operations)"},
    {"compiler", R, "another compiler can fuse and vectorize scalar float code differently"},
    {"compiler.*", R, "another compiler can fuse and vectorize scalar float code differently"},
    {"os", C, "the operating system is described on one side only"},
    {"os.name", C, "the distribution's name; its C library is compared as os.glibc"},
    {"os.kernel", C, "the kernel does not take part in arithmetic"},
    {"os.arch", R, "another instruction-set architecture runs other kernels"},
    {"os.glibc", R, "libm's exp, log, sin and cos can round differently across C library versions"},
    {"cpu", S, "the CPU is described on one side only; its kernels are compared as isa"},
    {"cpu.*", S, "the CPU's model, cores, clock and memory decide speed; its kernels are compared as isa"},
    {"devices", R, "the device lists differ"},
    {"devices.*", R, "a device present on one side only: the default device choice and the placement differ"},
    {"devices.*.name", C, "the device's name"},
    {"devices.*.api", R, "another API runs other kernels"},
    {"devices.*.description", R, "another device model"},
    {"devices.*.type", R, "another kind of device"},
    {"devices.*.usable", R, "a device usable on one side only"},
    {"devices.*.kernels", R, "the kernel variants (exact or plain, integer dot, subgroups) fix the device's bits"},
    {"devices.*.driver", R, "the driver compiles the shaders (or the PTX); exact paths are checked per driver"},
    {"devices.*.driver_version", R, "the driver compiles the shaders (or the PTX); exact paths are checked per driver"},
    {"devices.*.runtime_version", R, "another CUDA runtime or Vulkan loader"},
    {"devices.*.api_version", R, "another API version can enable other kernel variants"},
    {"devices.*.memory_bytes", S, "memory decides batch room and placement, not a kernel's bits"},
    {"devices.*.features", S, "limits (binding size, shared memory) decide how work is cut, not the bits; "
                              "the features the kernels use are compared as kernels"},
    {"absent", C, "why an API has no device (the devices themselves are compared)"},
    {"absent.*", C, "why an API has no device (the devices themselves are compared)"},
    {"model", R, "the model is fingerprinted on one side only (pass -m on both)"},
    {"model.path", C, "where the file lies; its contents are compared as model.sha256"},
    {"model.sha256", R, "other weights"},
    {"model.size_bytes", R, "other weights"},
    {"model.quant_types", R, "other storage types run other kernels"},
};

constexpr std::string_view kUnknownWhy = "a field this deskside does not know: counted as changing results";

std::vector<std::string_view> segments(std::string_view path) {
    std::vector<std::string_view> out;
    size_t begin = 0;
    while (true) {
        const size_t dot = path.find('.', begin);
        out.push_back(path.substr(begin, dot - begin));
        if (dot == std::string_view::npos) return out;
        begin = dot + 1;
    }
}

// A literal segment beats "*": the rule with the most literal segments that matches wins.
const Rule* find_rule(const std::string& field) {
    const std::vector<std::string_view> have = segments(field);
    const Rule* best = nullptr;
    int best_literals = -1;
    for (const Rule& rule : kRules) {
        const std::vector<std::string_view> want = segments(rule.pattern);
        if (want.size() != have.size()) continue;
        int literals = 0;
        bool match = true;
        for (size_t i = 0; i < want.size() && match; ++i) {
            if (want[i] == "*") continue;
            match = want[i] == have[i];
            ++literals;
        }
        if (match && literals > best_literals) {
            best = &rule;
            best_literals = literals;
        }
    }
    return best;
}

void add(std::vector<StackDifference>& out, const std::string& field, const json& before, const json& after) {
    const Rule* rule = find_rule(field);
    out.push_back({field, rule ? rule->kind : ChangeKind::Results, before, after,
                   std::string(rule ? rule->why : kUnknownWhy)});
}

// The "devices" array as an object keyed by device name, so entries pair up whatever their order.
json devices_by_name(const json& list) {
    json out = json::object();
    for (const json& d : list)
        if (d.is_object() && d.contains("name") && d["name"].is_string()) out[d["name"].get<std::string>()] = d;
    return out;
}

void diff(std::vector<StackDifference>& out, const std::string& field, const json& before, const json& after) {
    if (field == "devices" && before.is_array() && after.is_array()) {
        diff(out, field, devices_by_name(before), devices_by_name(after));
        return;
    }
    if (!before.is_object() || !after.is_object()) {
        if (before != after) add(out, field, before, after);
        return;
    }
    std::map<std::string, int> keys;  // sorted, each once
    for (const auto& [key, _] : before.items()) keys[key];
    for (const auto& [key, _] : after.items()) keys[key];
    for (const auto& [key, _] : keys) {
        const std::string sub = field.empty() ? key : field + "." + key;
        const json none;
        diff(out, sub, before.contains(key) ? before[key] : none, after.contains(key) ? after[key] : none);
    }
}

}  // namespace

std::string_view change_kind_name(ChangeKind kind) {
    switch (kind) {
        case ChangeKind::Results: return "results";
        case ChangeKind::Speed: return "speed";
        case ChangeKind::Cosmetic: return "cosmetic";
    }
    return "?";
}

std::vector<StackDifference> compare_stacks(const json& before, const json& after) {
    std::vector<StackDifference> out;
    diff(out, "", before, after);
    std::stable_sort(out.begin(), out.end(), [](const StackDifference& a, const StackDifference& b) {
        return a.kind < b.kind;
    });
    return out;
}

bool changes_results(const std::vector<StackDifference>& differences) {
    return std::any_of(differences.begin(), differences.end(),
                       [](const StackDifference& d) { return d.kind == ChangeKind::Results; });
}

}  // namespace deskside::engine
