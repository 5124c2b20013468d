// The running server's stack fingerprint (engine/stack_fingerprint.h): GET /v1/deskside/env (an
// API route, so behind --api-key) and the deskside_build_info gauge on /metrics, so a cluster's
// monitoring sees which build, CPU level and kernels each replica runs.
#pragma once

#include <string>

namespace httplib {
struct Response;
}

namespace deskside::server {

struct ServedModel;

// GET /v1/deskside/env: `deskside env --json -m MODEL -t THREADS` of the served model and the
// server's CPU threads. The fingerprint is gathered once per process; the model's digest on the
// first request (it reads the whole file), then served from memory.
void handle_stack_env(httplib::Response& res, const ServedModel& m);

// The info-style gauge `deskside_build_info{version=...,commit=...,isa=...,threads=...,...} 1`
// with its # HELP and # TYPE lines. `m` is the served model, nullptr while loading (the thread
// label then holds the CPU backend's default).
std::string build_info_gauge(const ServedModel* m);

}  // namespace deskside::server
