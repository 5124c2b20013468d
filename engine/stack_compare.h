// Two stack fingerprints (engine/stack_fingerprint.h) compared field by field, each difference
// classified by what it can change: the tokens and logits a run produces, only how fast they
// come, or nothing at all. `deskside env --compare` exits 1 when any difference changes results,
// so a cluster job can refuse to run on a stack that differs from the desk's.
//
// The classes follow what decides a kernel's bits in deskside (DESIGN.md key decision 5): the
// CPU's instruction-set level and each device's kernel variants fix the summation order, and the
// code (version, commit, compiler, build options, libm) fixes the rest; threads, clocks and memory
// only split the same sums differently across cores. A field this table does not know (a newer
// fingerprint) counts as changing results: the comparison fails closed.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace deskside::engine {

enum class ChangeKind { Results, Speed, Cosmetic };

// "results", "speed", "cosmetic".
std::string_view change_kind_name(ChangeKind kind);

struct StackDifference {
    std::string field;      // "isa", "cpu.model", "devices.vulkan0.kernels", "model.sha256"
    ChangeKind kind = ChangeKind::Results;
    nlohmann::json before;  // null where the field is absent on that side
    nlohmann::json after;
    std::string why;        // what the field decides, in a sentence
};

// Every field whose value differs between `before` and `after`, in a stable order (results first,
// then speed, then cosmetic; by field name within a class). Objects are compared key by key;
// "devices" entries are matched by name; other arrays compare whole.
std::vector<StackDifference> compare_stacks(const nlohmann::json& before, const nlohmann::json& after);

// Whether any difference changes results.
bool changes_results(const std::vector<StackDifference>& differences);

}  // namespace deskside::engine
