// The Vulkan backend: backends/backend.h on one Vulkan device (or one logical slice of it).
//
// Ops record compute dispatches into one command buffer; nothing runs until synchronize(),
// download(), or a full staging ring submits it, and the host then waits on one fence. Between
// two dispatches a single memory barrier is recorded only when the second touches bytes the
// first wrote (or writes bytes it read): independent ops stay unordered.
//
// Op implementations (this folder's vk_ops_*.cpp, vk_matmul.cpp, vk_get_rows.cpp) use the
// public "recording" interface below; /work/notes/vk-api.md and docs/VULKAN.md describe it.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "backends/backend.h"
#include "backends/rope_angles.h"
#include "backends/vulkan/vk_device.h"
#include "backends/vulkan/vk_memory.h"
#include "backends/vulkan/vk_pipeline.h"

namespace deskside::backends::vulkan {

enum class Access { Read, Write, ReadWrite };

// A storage-buffer binding: `range` bytes of `buffer` from `offset`, which is aligned to
// minStorageBufferOffsetAlignment; the data the caller asked for starts `skip_bytes` later
// (pass it to the shader in push constants).
struct Binding {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceSize offset = 0;
    VkDeviceSize range = 0;
    uint32_t skip_bytes = 0;
    Access access = Access::Read;
};

// Workgroup counts for n groups laid out as x * y (x <= the device's limit); shaders recover the
// group index as gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x and skip the excess.
struct Groups {
    uint32_t x = 1, y = 1;
};

class VulkanBackend final : public Backend, private BufferOwner {
   public:
    // name: "vulkan0", ...; memory_limit: bytes this backend may allocate (0 = the device's
    // heap), a fraction of the device when DESKSIDE_VULKAN_SPLIT divides it.
    VulkanBackend(VkPhysicalDevice physical, std::string name, uint64_t memory_limit = 0);
    ~VulkanBackend() override;

    std::string name() const override { return name_; }

    std::unique_ptr<Buffer> alloc(size_t bytes) override;
    std::unique_ptr<Buffer> map_weights(const void* host, size_t bytes) override;
    void upload(Buffer& dst, size_t offset, const void* src, size_t bytes) override;
    void download(const Buffer& src, size_t offset, void* dst, size_t bytes) override;
    bool supports(Op op, quant::TypeId type) const override;

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
    // vk_ops_moe.cpp (matmul_id: vk_matmul.cpp)
    void moe_route(const Tensor& logits, const MoeRouteParams& p, const Tensor& ids, const Tensor& weights) override;
    void matmul_id(const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids, const Tensor& y) override;
    void add_id(const Tensor& a, const Tensor& b, const Tensor& ids, const Tensor& y) override;
    void moe_combine(const Tensor& y, const Tensor& weights, const Tensor& out) override;
    void swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, const Tensor& y) override;

    // ---- recording interface for op implementations -------------------------------------------
    const DeviceCaps& caps() const { return device_.caps(); }
    uint64_t allocated_bytes() const { return allocated_; }

    // The cached pipeline of a shader variant (see vk_pipeline.h for the binding layout).
    const Pipeline& pipeline(std::string_view variant, uint32_t n_buffers, uint32_t push_bytes,
                             std::span<const uint32_t> spec = {});
    const Pipeline& pipeline(std::string_view variant, uint32_t n_buffers, uint32_t push_bytes,
                             std::initializer_list<uint32_t> spec) {
        return pipeline(variant, n_buffers, push_bytes, std::span<const uint32_t>(spec.begin(), spec.size()));
    }

    // Rows [first, first + n) of t as one binding. Throws std::invalid_argument when t is not
    // a buffer of this backend, lies outside its buffer, or spans more than maxStorageBufferRange
    // (split the op into row ranges of at most rows_per_binding(t) rows).
    Binding bind_rows(const Tensor& t, int64_t first, int64_t n, Access access) const;
    Binding bind(const Tensor& t, Access access) const { return bind_rows(t, 0, t.ne1, access); }
    // Entries [first, first + n) of an I32 index tensor (the step's arguments) as one binding;
    // throws std::invalid_argument naming `op` when t is not I32 or too short.
    Binding bind_index(const Tensor& t, int64_t first, int64_t n, const char* op) const;
    // How many rows of t one binding can hold (>= 1; the op fails if a single row is too big).
    int64_t rows_per_binding(const Tensor& t) const;

    // Copies small per-call data (token ids, positions, block tables) into host-visible memory the
    // shaders read directly. Call before dispatch(): it may submit the work recorded so far.
    Binding upload_args(const void* data, size_t bytes);
    // A device-local buffer of at least `bytes` for intermediate results of one op (the matmul's
    // quantized activations), shared by every op of this backend: grown when needed (the old one
    // is freed, submitting first if recorded work uses it), never shrunk. Barriers are tracked
    // like any buffer's.
    Buffer& scratch(size_t bytes);

    // Records one dispatch. `push` must hold the pipeline's push_bytes bytes.
    void dispatch(const Pipeline& p, std::span<const Binding> buffers, const void* push, Groups groups);
    void dispatch(const Pipeline& p, std::initializer_list<Binding> buffers, const void* push, Groups groups) {
        dispatch(p, std::span<const Binding>(buffers.begin(), buffers.size()), push, groups);
    }
    // n workgroups spread over x and y within maxComputeWorkGroupCount.
    Groups groups(uint64_t n) const;
    // The codebook a low-bit i-quant's shaders read (shaders/iq_lowbit.glsl, vk_iq_codebook.cpp),
    // uploaded on first use and kept; nullopt for every other type, whose shaders need none.
    std::optional<Binding> iq_codebook(quant::TypeId type);

   private:
    struct Range {
        VkBuffer buffer;
        VkDeviceSize begin, end;
        bool write;
    };

    // The (cos, sin) table of every position below rp.n_ctx for these rope parameters, built
    // on the host (backends/rope_angles.h) and uploaded the first time they are seen.
    const Tensor& rope_table(const RopeParams& rp);
    void before_free(const VulkanBuffer& buffer) override;
    const VulkanBuffer& own(const Buffer& b, const char* what) const;
    VkCommandBuffer recording();
    // Records a barrier first if the access conflicts with one recorded since the last barrier.
    void track(std::span<const Range> accesses);
    void record_copy(VkBuffer src, VkDeviceSize src_offset, VkBuffer dst, VkDeviceSize dst_offset, VkDeviceSize bytes);
    // Host-ring space for `bytes` (at most the ring's capacity), submitting first when full.
    size_t ring_take(size_t bytes, size_t alignment);
    void submit_and_wait();

    std::string name_;
    VulkanDevice device_;
    uint64_t memory_limit_;
    uint64_t allocated_ = 0;
    PipelineCache pipelines_;
    DescriptorArena descriptors_;
    std::unique_ptr<HostRing> ring_;
    VkCommandPool pool_ = VK_NULL_HANDLE;
    VkCommandBuffer cmd_ = VK_NULL_HANDLE;
    VkFence fence_ = VK_NULL_HANDLE;
    bool recording_ = false;
    std::vector<Range> since_barrier_;  // accesses recorded since the last barrier
    std::unordered_set<VkBuffer> in_flight_;  // buffers the recorded commands use
    std::unique_ptr<Buffer> scratch_;         // see scratch(); after in_flight_, destroyed first
    std::unique_ptr<Buffer> gelu_table_;      // backends/gelu_table.h on the device, made by gelu()
    std::vector<std::pair<quant::TypeId, std::unique_ptr<Buffer>>> iq_codebooks_;  // see iq_codebook()
    struct RopeTable {
        std::unique_ptr<Buffer> buffer;
        Tensor tensor;
    };
    std::vector<std::pair<RopeTableKey, RopeTable>> rope_tables_;  // see rope_table()
};

}  // namespace deskside::backends::vulkan
