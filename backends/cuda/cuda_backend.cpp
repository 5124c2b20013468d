// CudaBackend's memory, transfers and steps (cuda_backend.h); the ops are in cuda_ops.cpp.
#include "backends/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <utility>

#include "backends/cuda/cuda_registry.h"

namespace deskside::backends::cuda {
namespace {

// --peer-access (the CLI) or DESKSIDE_CUDA_PEER_ACCESS=1.
std::atomic<bool> g_peer_access{false};

bool peer_access_on() {
    if (g_peer_access.load()) return true;
    const char* env = std::getenv("DESKSIDE_CUDA_PEER_ACCESS");
    return env && std::strcmp(env, "1") == 0;
}

// Enables access from device `from` to device `to` once per process; false when the pair cannot.
bool enable_peer(int from, int to) {
    static std::mutex mutex;
    static std::set<std::pair<int, int>> enabled;
    std::lock_guard<std::mutex> lock(mutex);
    if (enabled.count({from, to})) return true;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess || !can) {
        cudaGetLastError();
        return false;
    }
    int current = 0;
    cuda_check(cudaGetDevice(&current), "cudaGetDevice");
    cuda_check(cudaSetDevice(from), "cudaSetDevice");
    const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
    cudaSetDevice(current);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();
    } else if (e != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    enabled.insert({from, to});
    return true;
}

// DESKSIDE_CUDA_GRAPHS: unset or 1 records steps as graphs, 0 launches every op at once.
bool graphs_from_env() {
    const char* env = std::getenv("DESKSIDE_CUDA_GRAPHS");
    if (!env || !*env || std::strcmp(env, "1") == 0) return true;
    if (std::strcmp(env, "0") == 0) return false;
    throw std::invalid_argument(std::string("DESKSIDE_CUDA_GRAPHS='") + env + "': expected 0 or 1");
}

// FNV-1a over the words (the key's words are compared in full on a hit; this only buckets).
uint64_t hash_words(const std::vector<uint64_t>& words) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t w : words) {
        h ^= w;
        h *= 1099511628211ull;
    }
    return h;
}

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

void cuda_check(int cuda_error, const std::string& what) {
    const auto e = static_cast<cudaError_t>(cuda_error);
    if (e == cudaSuccess) return;
    cudaGetLastError();  // clear it unless it is sticky (then every later call reports it)
    throw std::runtime_error("cuda: " + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

void set_cuda_peer_access(bool on) { g_peer_access.store(on); }

// ---- buffers ------------------------------------------------------------------------------------

CudaBuffer::CudaBuffer(CudaBackend& backend, uint8_t* data, size_t bytes)
    : Buffer(backend), backend_(backend), data_(data), size_(bytes) {}

CudaBuffer::~CudaBuffer() {
    try {
        backend_.before_free(*this);
    } catch (...) {
        // A failed launch of recorded work while freeing: the next op or download reports it.
    }
    if (data_) cudaFree(data_);  // synchronizes the device: no queued kernel still reads it
}

// ---- construction -------------------------------------------------------------------------------

CudaBackend::CudaBackend(int device, std::string name, uint64_t memory_limit)
    : device_(device), name_(std::move(name)), graphs_enabled_(graphs_from_env()) {
    use_device();
    size_t free_bytes = 0, total_bytes = 0;
    cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), name_ + ": cudaMemGetInfo");
    memory_limit_ = memory_limit ? memory_limit : total_bytes;
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), name_ + ": cudaStreamCreate");
    cuda_check(cudaEventCreateWithFlags(&order_event_, cudaEventDisableTiming), name_ + ": cudaEventCreate");
    cuda_check(cudaHostAlloc(reinterpret_cast<void**>(&staging_), kStagingSlots * kStagingSlotBytes,
                             cudaHostAllocDefault),
               name_ + ": cudaHostAlloc of the staging buffer");
    for (cudaEvent_t& e : staging_events_)
        cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), name_ + ": cudaEventCreate");
    load_gelu_table();
}

CudaBackend::~CudaBackend() {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    for (Graph& g : graphs_)
        if (g.exec) cudaGraphExecDestroy(g.exec);
    graphs_.clear();
    recorded_.clear();
    rope_tables_.clear();
    scratch_.reset();
    for (cudaEvent_t e : staging_events_)
        if (e) cudaEventDestroy(e);
    if (order_event_) cudaEventDestroy(order_event_);
    if (staging_) cudaFreeHost(staging_);
    if (stream_) cudaStreamDestroy(stream_);
}

void CudaBackend::use_device() const { cuda_check(cudaSetDevice(device_), name_ + ": cudaSetDevice"); }

// ---- memory ---------------------------------------------------------------------------------------

std::unique_ptr<Buffer> CudaBackend::alloc(size_t bytes) {
    use_device();
    const auto refuse = [&](const std::string& why) {
        size_t free_bytes = 0, total_bytes = 0;
        if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) cudaGetLastError();
        throw std::runtime_error("cuda: " + name_ + ": cannot allocate " + std::to_string(bytes) + " bytes (" +
                                 mib(bytes) + "): " + why + "; " + mib(allocated_) + " of this device's " +
                                 mib(memory_limit_) + " in use, " + mib(free_bytes) + " free on the GPU. A smaller " +
                                 "context (-c), a smaller batch, or a split that gives this device fewer layers " +
                                 "would fit");
    };
    if (allocated_ + bytes > memory_limit_) refuse("over the device's share");
    uint8_t* data = nullptr;
    if (bytes > 0) {
        const cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&data), bytes);
        if (e != cudaSuccess) {
            cudaGetLastError();  // an allocation failure is not sticky; clear it
            refuse(std::string("cudaMalloc: ") + cudaGetErrorString(e));
        }
    }
    allocated_ += bytes;
    return std::make_unique<CudaBuffer>(*this, data, bytes);
}

std::unique_ptr<Buffer> CudaBackend::map_weights(const void* host, size_t bytes) {
    std::unique_ptr<Buffer> buffer = alloc(bytes);
    upload_now(static_cast<CudaBuffer&>(*buffer).data(), host, bytes);
    return buffer;
}

void CudaBackend::before_free(const CudaBuffer& buffer) {
    // Recorded ops of an unfinished step may read this buffer: run them while it exists.
    if (!recorded_.empty() && !freeing_scratch_) flush_recorded();
    allocated_ -= std::min<uint64_t>(allocated_, buffer.size());
    use_device();
}

void* CudaBackend::scratch(size_t bytes) {
    if (bytes == 0) return scratch_ ? scratch_->data() : nullptr;
    if (!scratch_ || scratch_->size() < bytes) {
        const size_t grown = std::max(bytes, scratch_ ? 2 * scratch_->size() : size_t{0});
        freeing_scratch_ = true;
        scratch_.reset();
        freeing_scratch_ = false;
        std::unique_ptr<Buffer> b = alloc(grown);
        scratch_.reset(static_cast<CudaBuffer*>(b.release()));
    }
    return scratch_->data();
}

// ---- transfers ------------------------------------------------------------------------------------

uint8_t* CudaBackend::staging_slot(size_t& slot) {
    slot = next_slot_;
    next_slot_ = (next_slot_ + 1) % kStagingSlots;
    // The copy that used this slot last must be done before the host touches it again.
    cuda_check(cudaEventSynchronize(staging_events_[slot]), name_ + ": staging");
    return staging_ + slot * kStagingSlotBytes;
}

void CudaBackend::staging_done(size_t slot) {
    cuda_check(cudaEventRecord(staging_events_[slot], stream_), name_ + ": cudaEventRecord");
}

void CudaBackend::upload_now(uint8_t* dst, const void* src, size_t bytes) {
    use_device();
    const auto* p = static_cast<const uint8_t*>(src);
    while (bytes > 0) {
        const size_t n = std::min(bytes, kStagingSlotBytes);
        size_t slot = 0;
        uint8_t* stage = staging_slot(slot);
        std::memcpy(stage, p, n);
        cuda_check(cudaMemcpyAsync(dst, stage, n, cudaMemcpyHostToDevice, stream_), name_ + ": upload");
        staging_done(slot);
        p += n;
        dst += n;
        bytes -= n;
    }
}

void CudaBackend::check_range(const Buffer& b, size_t offset, size_t bytes, const char* what) const {
    if (offset > b.size() || bytes > b.size() - offset)
        throw std::out_of_range("cuda: " + name_ + ": " + what + " of " + std::to_string(bytes) + " bytes at offset " +
                                std::to_string(offset) + " outside a buffer of " + std::to_string(b.size()));
}

void CudaBackend::upload(Buffer& dst, size_t offset, const void* src, size_t bytes) {
    CudaBuffer& d = owned_by<CudaBuffer>(*this, dst, "upload destination");
    check_range(d, offset, bytes, "upload");
    // The interface keeps transfers out of a step; if one comes anyway, the ops recorded before
    // it must see the old bytes, so they run first.
    if (!recorded_.empty()) flush_recorded();
    upload_now(d.data() + offset, src, bytes);
}

void CudaBackend::download(const Buffer& src, size_t offset, void* dst, size_t bytes) {
    const CudaBuffer& s = owned_by<CudaBuffer>(*this, src, "download source");
    check_range(s, offset, bytes, "download");
    if (!recorded_.empty()) flush_recorded();
    use_device();
    // Up to kStagingSlots chunks in flight; each is copied out once its event has fired.
    struct Pending {
        size_t slot, bytes;
        uint8_t* out;
    };
    std::vector<Pending> pending;
    const auto drain_one = [&]() {
        const Pending p = pending.front();
        pending.erase(pending.begin());
        cuda_check(cudaEventSynchronize(staging_events_[p.slot]), name_ + ": download");
        std::memcpy(p.out, staging_ + p.slot * kStagingSlotBytes, p.bytes);
    };
    auto* out = static_cast<uint8_t*>(dst);
    const uint8_t* from = s.data() + offset;
    while (bytes > 0) {
        if (pending.size() == kStagingSlots) drain_one();
        const size_t n = std::min(bytes, kStagingSlotBytes);
        size_t slot = 0;
        uint8_t* stage = staging_slot(slot);
        cuda_check(cudaMemcpyAsync(stage, from, n, cudaMemcpyDeviceToHost, stream_), name_ + ": download");
        staging_done(slot);
        pending.push_back({slot, n, out});
        from += n;
        out += n;
        bytes -= n;
    }
    while (!pending.empty()) drain_one();
    // Every op issued so far is done (the engine reads results after a download).
    cuda_check(cudaStreamSynchronize(stream_), name_ + ": download");
}

void CudaBackend::copy_to(const Buffer& src, size_t src_offset, Backend& to, Buffer& dst, size_t dst_offset,
                          size_t bytes) {
    auto* other = dynamic_cast<CudaBackend*>(&to);
    if (!other) {
        if (!recorded_.empty()) flush_recorded();
        Backend::copy_to(src, src_offset, to, dst, dst_offset, bytes);
        return;
    }
    const CudaBuffer& s = owned_by<CudaBuffer>(*this, src, "copy_to (source)");
    CudaBuffer& d = owned_by<CudaBuffer>(to, dst, "copy_to (destination)");
    check_range(s, src_offset, bytes, "copy_to source");
    check_range(d, dst_offset, bytes, "copy_to destination");
    if (bytes == 0) return;
    const bool same_gpu = other->device_ == device_;
    const bool peer = !same_gpu && peer_access_on() && enable_peer(device_, other->device_) &&
                      enable_peer(other->device_, device_);
    if (!same_gpu && !peer) {
        Backend::copy_to(src, src_offset, to, dst, dst_offset, bytes);  // through host memory
        return;
    }
    if (!recorded_.empty()) flush_recorded();
    if (!other->recorded_.empty()) other->flush_recorded();
    // The copy waits for the work queued on the destination (which may still read dst), and the
    // destination's later work waits for the copy.
    if (other != this) {
        other->use_device();
        cuda_check(cudaEventRecord(other->order_event_, other->stream_), other->name_ + ": cudaEventRecord");
        use_device();
        cuda_check(cudaStreamWaitEvent(stream_, other->order_event_, 0), name_ + ": cudaStreamWaitEvent");
    }
    use_device();
    if (same_gpu) {
        cuda_check(cudaMemcpyAsync(d.data() + dst_offset, s.data() + src_offset, bytes, cudaMemcpyDeviceToDevice,
                                   stream_),
                   name_ + ": copy_to " + other->name_);
    } else {
        cuda_check(cudaMemcpyPeerAsync(d.data() + dst_offset, other->device_, s.data() + src_offset, device_, bytes,
                                       stream_),
                   name_ + ": peer copy to " + other->name_);
    }
    if (other != this) {
        cuda_check(cudaEventRecord(order_event_, stream_), name_ + ": cudaEventRecord");
        other->use_device();
        cuda_check(cudaStreamWaitEvent(other->stream_, order_event_, 0), other->name_ + ": cudaStreamWaitEvent");
        use_device();
    }
}

// ---- steps and graphs -----------------------------------------------------------------------------

void CudaBackend::launch(const char* op, std::vector<uint64_t> key, size_t scratch_bytes,
                         std::function<void(cudaStream_t, void*)> run) {
    if (in_step_) {
        step_key_.insert(step_key_.end(), key.begin(), key.end());
        step_scratch_ = std::max(step_scratch_, scratch_bytes);
        recorded_.push_back({op, scratch_bytes, std::move(run)});
        return;
    }
    use_device();
    void* s = scratch(scratch_bytes);
    run(stream_, s);
    check_launch(op);
}

void CudaBackend::check_launch(const char* op) const {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        throw std::runtime_error("cuda " + std::string(op) + " on " + name_ + ": " + cudaGetErrorName(e) + " (" +
                                 cudaGetErrorString(e) + ")");
}

void CudaBackend::begin_step() {
    // Anything recorded by a step that never ended (an op threw) is dropped: that step's results
    // are not used.
    recorded_.clear();
    step_key_.clear();
    step_scratch_ = 0;
    in_step_ = graphs_enabled_;
}

void CudaBackend::run_recorded(const std::vector<Launch>& launches, void* s) {
    for (const Launch& l : launches) {
        l.run(stream_, s);
        check_launch(l.op);
    }
}

void CudaBackend::flush_recorded() {
    const std::vector<Launch> launches = std::move(recorded_);
    recorded_.clear();
    step_key_.clear();
    use_device();
    run_recorded(launches, scratch(step_scratch_));
    stats_.eager++;
}

cudaGraphExec_t CudaBackend::capture_recorded(const std::vector<Launch>& launches, void* s) {
    cuda_check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), name_ + ": cudaStreamBeginCapture");
    bool ran = true;
    try {
        run_recorded(launches, s);
    } catch (const std::runtime_error&) {
        ran = false;  // something in the step cannot be captured; the caller runs it eagerly
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    cudaGetLastError();
    cudaGraphExec_t exec = nullptr;
    if (ran && end == cudaSuccess && graph) {
        if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
            cudaGetLastError();
            exec = nullptr;
        }
    }
    if (graph) cudaGraphDestroy(graph);
    return exec;
}

void CudaBackend::end_step() {
    if (!in_step_) return;
    in_step_ = false;
    // The step's launches and key leave the members first, so an exception below drops them.
    const std::vector<Launch> launches = std::move(recorded_);
    std::vector<uint64_t> key = std::move(step_key_);
    recorded_.clear();
    step_key_.clear();
    if (launches.empty()) return;
    use_device();
    // Grow the scratch to what the step needs before anything of it runs or is captured.
    void* s = scratch(step_scratch_);
    key.push_back(reinterpret_cast<uintptr_t>(s));
    const uint64_t hash = hash_words(key);

    for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
        if (it->hash != hash || it->key != key) continue;
        graphs_.splice(graphs_.begin(), graphs_, it);
        if (!it->exec) {  // a step that could not be captured: always eager
            run_recorded(launches, s);
            stats_.eager++;
        } else {
            cuda_check(cudaGraphLaunch(it->exec, stream_), name_ + ": cudaGraphLaunch");
            stats_.replayed++;
        }
        return;
    }

    const auto seen = std::find(seen_once_.begin(), seen_once_.end(), hash);
    if (seen == seen_once_.end()) {
        // First sight: eager. Steps whose arguments never repeat never pay for a capture.
        seen_once_.push_front(hash);
        if (seen_once_.size() > kSeenKeys) seen_once_.pop_back();
        run_recorded(launches, s);
        stats_.eager++;
        return;
    }
    seen_once_.erase(seen);

    cudaGraphExec_t exec = capture_recorded(launches, s);
    graphs_.push_front({hash, std::move(key), exec});
    if (graphs_.size() > kMaxGraphs) {
        if (graphs_.back().exec) cudaGraphExecDestroy(graphs_.back().exec);
        graphs_.pop_back();
    }
    if (exec) {
        cuda_check(cudaGraphLaunch(exec, stream_), name_ + ": cudaGraphLaunch");
        stats_.captured++;
    } else {
        run_recorded(launches, s);
        stats_.refused++;
    }
}

}  // namespace deskside::backends::cuda
