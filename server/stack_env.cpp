#include "server/stack_env.h"

#include <httplib.h>

#include <map>
#include <mutex>
#include <sstream>

#include "engine/stack_fingerprint.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_handlers.h"

namespace deskside::server {
namespace {

using nlohmann::ordered_json;

// The fingerprint reads /proc, the Vulkan instance and the model file: done once per key, as none
// of it changes while the process runs. Two locks: hashing a large model takes minutes, and
// /metrics (a liveness probe) must not wait for it.
std::mutex g_stacks_mutex;
std::map<int, ordered_json> g_stacks;  // by CPU thread count
std::mutex g_models_mutex;
std::map<std::string, ordered_json> g_models;  // by model path

ordered_json stack_for(int n_threads) {
    std::lock_guard lock(g_stacks_mutex);
    auto it = g_stacks.find(n_threads);
    if (it == g_stacks.end()) {
        engine::FingerprintOptions options;
        options.n_threads = n_threads;
        it = g_stacks.emplace(n_threads, engine::stack_fingerprint(options)).first;
    }
    return it->second;
}

ordered_json model_for(const std::string& path) {
    std::lock_guard lock(g_models_mutex);
    auto it = g_models.find(path);
    if (it == g_models.end()) it = g_models.emplace(path, engine::model_fingerprint(path)).first;
    return it->second;
}

std::string label_text(const ordered_json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// "vulkan0 exact (llvmpipe: Mesa 22.3.6 (LLVM 15.0.6) 0.0.1)" per device, "; " between devices:
// the kernel variant each runs and under which driver.
std::string devices_label(const ordered_json& devices) {
    std::string out;
    for (const ordered_json& d : devices) {
        const std::string variant = d["kernels"].empty() ? "" : label_text(d["kernels"][0]);
        out += (out.empty() ? "" : "; ") + label_text(d["name"]) + " " + variant + " (" + label_text(d["driver"]) +
               " " + label_text(d["driver_version"]) + ")";
    }
    return out;
}

}  // namespace

void handle_stack_env(httplib::Response& res, const ServedModel& m) {
    ordered_json f = stack_for(m.cpu_threads);
    if (!m.model_path.empty()) f["model"] = model_for(m.model_path);
    res.set_content(dump(f), "application/json");
}

std::string build_info_gauge(const ServedModel* m) {
    const ordered_json f = stack_for(m ? m->cpu_threads : 0);
    const ordered_json& d = f["deskside"];
    const std::pair<const char*, std::string> labels[] = {
        {"version", label_text(d["version"])},
        {"commit", label_text(d["commit"])},
        {"dirty", label_text(d["dirty"])},
        {"build_type", label_text(d["build_type"])},
        {"compiler", label_text(f["compiler"]["cxx"])},
        {"glibc", label_text(f["os"]["glibc"])},
        {"isa", label_text(f["isa"])},
        {"threads", label_text(f["threads"])},
        {"devices", devices_label(f["devices"])},
    };
    std::ostringstream out;
    out << "# HELP deskside_build_info the stack this server runs (deskside env; GET /v1/deskside/env has all of it)\n"
           "# TYPE deskside_build_info gauge\n"
           "deskside_build_info{";
    bool first = true;
    for (const auto& [name, value] : labels) {
        out << (first ? "" : ",") << name << "=\"" << escape_label_value(value) << "\"";
        first = false;
    }
    out << "} 1\n";
    return out.str();
}

}  // namespace deskside::server
