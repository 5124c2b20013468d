// Compute pipelines built from the embedded SPIR-V, cached by (variant, specialization
// constants), and the descriptor sets they bind, taken from pools that are reset per submission.
//
// Every pipeline has one descriptor set (set 0) of `n_buffers` storage buffers at bindings
// 0..n_buffers-1 and one push-constant block of `push_bytes` bytes. Specialization constant i
// (constant_id = i) takes spec[i]; by convention constant_id 0 is the workgroup size
// (layout(local_size_x_id = 0) in;).
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deskside::backends::vulkan {

struct Pipeline {
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    uint32_t n_buffers = 0;
    uint32_t push_bytes = 0;
};

class PipelineCache {
   public:
    explicit PipelineCache(VkDevice device) : device_(device) {}
    ~PipelineCache();
    PipelineCache(const PipelineCache&) = delete;
    PipelineCache& operator=(const PipelineCache&) = delete;

    // The pipeline of `variant` with these constants, created on first use. Throws when the
    // variant is not embedded or the driver rejects it; a later call with other n_buffers or
    // push_bytes for the same key is a programming error and throws too.
    const Pipeline& get(std::string_view variant, uint32_t n_buffers, uint32_t push_bytes, std::span<const uint32_t> spec);

   private:
    VkDevice device_;
    std::map<std::string, std::unique_ptr<Pipeline>, std::less<>> pipelines_;
};

// Descriptor sets for one submission. Pools grow on demand and are all reset together once the
// submission that used them has completed, so steady-state decoding allocates no pools.
class DescriptorArena {
   public:
    explicit DescriptorArena(VkDevice device) : device_(device) {}
    ~DescriptorArena();
    DescriptorArena(const DescriptorArena&) = delete;
    DescriptorArena& operator=(const DescriptorArena&) = delete;

    VkDescriptorSet allocate(VkDescriptorSetLayout layout);
    void reset();

   private:
    VkDescriptorPool new_pool();

    VkDevice device_;
    std::vector<VkDescriptorPool> pools_;
    size_t current_ = 0;
};

}  // namespace deskside::backends::vulkan
