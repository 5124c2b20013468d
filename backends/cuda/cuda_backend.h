// The CUDA backend: backends/backend.h on one NVIDIA GPU (or one logical slice of it,
// DESKSIDE_CUDA_SPLIT).
//
// Each backend has one non-blocking stream; every op, upload and download is queued on it in
// issue order, so the stream itself orders ops after the uploads of their inputs and downloads
// after the ops. Ops check their arguments here (std::invalid_argument naming the op) and then
// call the launchers of kernels.h, which only enqueue kernels.
//
// Steps as CUDA graphs (begin_step / end_step). Inside a step, ops are recorded, not launched:
// each becomes a launch closure plus the words of its launch arguments (device pointers, shapes,
// strides, parameters). end_step keys the step on those words. A step seen for the first time
// runs its closures eagerly; the second time the same key appears the closures are captured
// into a graph (cudaStreamBeginCapture .. EndCapture, instantiated, launched), and from then on
// the step is one cudaGraphLaunch, no kernel launched from the host. A graph is exactly a
// function of the launch arguments the key holds (kernels read every per-step value from device
// memory: the step's index tensors), so an equal key replays a correct graph even after buffers
// were freed and others allocated at the same addresses. The scratch the ops need is grown to the
// step's maximum before anything of the step runs, and its address is part of the key, so no
// graph ever points at freed scratch. A bounded LRU cache holds kMaxGraphs graphs.
// DESKSIDE_CUDA_GRAPHS=0 turns recording off (every op launches at once, as outside a step).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/kernels.h"
#include "backends/rope_angles.h"

typedef struct CUevent_st* cudaEvent_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;

namespace deskside::backends::cuda {

class CudaBackend;

// Throws std::runtime_error("cuda: <what>: <error name> (<error string>)") unless `cuda_error`
// (a cudaError_t) is cudaSuccess.
void cuda_check(int cuda_error, const std::string& what);

// Copies backends/gelu_table.h into the current device's table that launch_gelu reads
// (kernels_elementwise.cu). Each backend calls it once, before any step (it is not capturable).
void load_gelu_table();

// Device memory from cudaMalloc, freed on destruction.
class CudaBuffer final : public Buffer {
   public:
    CudaBuffer(CudaBackend& backend, uint8_t* data, size_t bytes);
    ~CudaBuffer() override;
    CudaBuffer(const CudaBuffer&) = delete;
    CudaBuffer& operator=(const CudaBuffer&) = delete;

    size_t size() const override { return size_; }
    uint8_t* data() const { return data_; }

   private:
    CudaBackend& backend_;
    uint8_t* data_;
    size_t size_;
};

class CudaBackend final : public Backend {
   public:
    // device: the CUDA device ordinal; name: "cuda0", ...; memory_limit: bytes this backend may
    // allocate (0 = the whole device), the logical device's share under DESKSIDE_CUDA_SPLIT.
    CudaBackend(int device, std::string name, uint64_t memory_limit = 0);
    ~CudaBackend() override;
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    std::string name() const override { return name_; }
    int device() const { return device_; }
    bool supports(Op op, quant::TypeId type) const override;

    std::unique_ptr<Buffer> alloc(size_t bytes) override;
    std::unique_ptr<Buffer> map_weights(const void* host, size_t bytes) override;
    void upload(Buffer& dst, size_t offset, const void* src, size_t bytes) override;
    void download(const Buffer& src, size_t offset, void* dst, size_t bytes) override;
    void copy_to(const Buffer& src, size_t src_offset, Backend& to, Buffer& dst, size_t dst_offset,
                 size_t bytes) override;
    void begin_step() override;
    void end_step() override;

    void get_rows(const Tensor& table, const Tensor& ids, const Tensor& dst) override;
    void matmul(const Tensor& w, const Tensor& x, const Tensor& y) override;
    void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) override;
    void rope(const Tensor& x, const Tensor& positions, const RopeParams& p) override;
    void attention(const Tensor& q, const KvCacheView& kv, const Tensor& queries, const AttentionParams& p,
                   const Tensor& out) override;
    void silu(const Tensor& x, const Tensor& y) override;
    void gelu(const Tensor& x, const Tensor& y) override;
    void add(const Tensor& a, const Tensor& b, const Tensor& y) override;
    void mul(const Tensor& a, const Tensor& b, const Tensor& y) override;
    void scale(const Tensor& x, float s, const Tensor& y) override;
    void copy(const Tensor& src, const Tensor& dst) override;
    void set_rows(const Tensor& src, const Tensor& dst, const Tensor& rows) override;
    void moe_route(const Tensor& logits, const MoeRouteParams& p, const Tensor& ids, const Tensor& weights) override;
    void matmul_id(const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids, const Tensor& y) override;
    void add_id(const Tensor& a, const Tensor& b, const Tensor& ids, const Tensor& y) override;
    void moe_combine(const Tensor& y, const Tensor& weights, const Tensor& out) override;
    void swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, const Tensor& y) override;

    uint64_t allocated_bytes() const { return allocated_; }
    // Graphs launched, captured and steps run eagerly so far (tests and `deskside bench` read them).
    struct GraphStats {
        uint64_t replayed = 0, captured = 0, eager = 0, refused = 0;
    };
    const GraphStats& graph_stats() const { return stats_; }

   private:
    friend class CudaBuffer;

    // One recorded op of a step: what it launches, and the scratch bytes it needs.
    struct Launch {
        const char* op;
        size_t scratch_bytes;
        std::function<void(cudaStream_t, void* scratch)> run;
    };
    struct Graph {
        uint64_t hash;
        std::vector<uint64_t> key;
        cudaGraphExec_t exec;
    };

    void before_free(const CudaBuffer& buffer);
    void check_range(const Buffer& b, size_t offset, size_t bytes, const char* what) const;
    // Host -> device through the staging slots, queued on the stream now.
    void upload_now(uint8_t* dst, const void* src, size_t bytes);
    // Makes this backend's device current for the calling thread (several backends share one).
    void use_device() const;
    // t resolved to device memory, after checking that it belongs here and lies in its buffer.
    DevTensor dev(const Tensor& t, const char* op, const char* what) const;
    // The first n entries of an I32 index tensor.
    const int32_t* index(const Tensor& t, int64_t n, const char* op, const char* what) const;
    // Queues `run` now (outside a step, or with graphs off) or records it for end_step. `key`
    // holds the launch arguments run will pass (the step's key is made of them).
    void launch(const char* op, std::vector<uint64_t> key, size_t scratch_bytes,
                std::function<void(cudaStream_t, void*)> run);
    // Grows the scratch to at least `bytes` (never during a capture) and returns it.
    void* scratch(size_t bytes);
    // Runs the recorded ops of the current step eagerly and forgets them.
    void flush_recorded();
    void run_recorded(const std::vector<Launch>& launches, void* scratch);
    // Captures the launches into a graph and instantiates it (nullptr when capture failed: the
    // caller then runs them eagerly, and the step's key remembers to).
    cudaGraphExec_t capture_recorded(const std::vector<Launch>& launches, void* scratch);
    void check_launch(const char* op) const;
    // The (cos, sin) table of every position below rp.n_ctx for these rope parameters, built on
    // the host (backends/rope_angles.h) and uploaded the first time they are seen.
    const float* rope_table(const RopeParams& rp);
    // Host staging: the pinned slot for the next chunk of a transfer, once the copy that last
    // used it has finished.
    uint8_t* staging_slot(size_t& slot);
    void staging_done(size_t slot);

    int device_;
    std::string name_;
    uint64_t memory_limit_;
    uint64_t allocated_ = 0;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t order_event_ = nullptr;  // orders copy_to against another backend's stream

    static constexpr size_t kStagingSlots = 4;
    static constexpr size_t kStagingSlotBytes = 4u << 20;
    uint8_t* staging_ = nullptr;  // kStagingSlots * kStagingSlotBytes of pinned host memory
    cudaEvent_t staging_events_[kStagingSlots] = {};
    size_t next_slot_ = 0;

    std::unique_ptr<CudaBuffer> scratch_;
    bool freeing_scratch_ = false;  // scratch() replaces it: recorded ops take it at run time

    std::vector<std::pair<RopeTableKey, std::unique_ptr<CudaBuffer>>> rope_tables_;

    // ---- step recording and graphs ----
    static constexpr size_t kMaxGraphs = 16;
    static constexpr size_t kSeenKeys = 32;
    bool graphs_enabled_ = true;
    bool in_step_ = false;
    std::vector<Launch> recorded_;
    std::vector<uint64_t> step_key_;
    size_t step_scratch_ = 0;
    std::list<Graph> graphs_;         // most recently used first
    std::list<uint64_t> seen_once_;   // hashes of keys run eagerly once, most recent first
    GraphStats stats_;
};

}  // namespace deskside::backends::cuda
