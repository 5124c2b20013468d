#include "backends/vulkan/vk_pipeline.h"

#include <stdexcept>

#include "backends/vulkan/vk_check.h"
#include "backends/vulkan/vk_shaders.h"

namespace deskside::backends::vulkan {

const ShaderCode& find_shader(std::string_view name) {
    for (const ShaderCode& s : all_shaders())
        if (name == s.name) return s;
    throw std::invalid_argument("vulkan: no shader variant '" + std::string(name) +
                                "' in this build (see backends/vulkan/shaders/*.variants)");
}

PipelineCache::~PipelineCache() {
    for (auto& [key, p] : pipelines_) {
        vkDestroyPipeline(device_, p->pipeline, nullptr);
        vkDestroyPipelineLayout(device_, p->layout, nullptr);
        vkDestroyDescriptorSetLayout(device_, p->set_layout, nullptr);
    }
}

const Pipeline& PipelineCache::get(std::string_view variant, uint32_t n_buffers, uint32_t push_bytes,
                                   std::span<const uint32_t> spec) {
    std::string key(variant);
    for (uint32_t v : spec) key += ":" + std::to_string(v);
    if (auto it = pipelines_.find(key); it != pipelines_.end()) {
        if (it->second->n_buffers != n_buffers || it->second->push_bytes != push_bytes)
            throw std::logic_error("vulkan: pipeline " + key + " requested with different bindings or push constants");
        return *it->second;
    }
    const ShaderCode& code = find_shader(variant);
    auto p = std::make_unique<Pipeline>();
    p->n_buffers = n_buffers;
    p->push_bytes = push_bytes;

    std::vector<VkDescriptorSetLayoutBinding> bindings(n_buffers);
    for (uint32_t i = 0; i < n_buffers; ++i)
        bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    set_info.bindingCount = n_buffers;
    set_info.pBindings = bindings.data();
    vk_check(vkCreateDescriptorSetLayout(device_, &set_info, nullptr, &p->set_layout), "vkCreateDescriptorSetLayout");

    VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    layout_info.setLayoutCount = 1;
    layout_info.pSetLayouts = &p->set_layout;
    layout_info.pushConstantRangeCount = push_bytes ? 1 : 0;
    layout_info.pPushConstantRanges = &push;
    vk_check(vkCreatePipelineLayout(device_, &layout_info, nullptr, &p->layout), "vkCreatePipelineLayout");

    VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    module_info.codeSize = code.n_words * sizeof(uint32_t);
    module_info.pCode = code.words;
    VkShaderModule module = VK_NULL_HANDLE;
    vk_check(vkCreateShaderModule(device_, &module_info, nullptr, &module), ("vkCreateShaderModule " + key).c_str());

    std::vector<VkSpecializationMapEntry> entries(spec.size());
    for (uint32_t i = 0; i < spec.size(); ++i) entries[i] = {i, i * 4u, 4};
    VkSpecializationInfo spec_info{static_cast<uint32_t>(spec.size()), entries.data(), spec.size() * 4, spec.data()};
    VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = module;
    info.stage.pName = "main";
    info.stage.pSpecializationInfo = spec.empty() ? nullptr : &spec_info;
    info.layout = p->layout;
    const VkResult r = vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &info, nullptr, &p->pipeline);
    vkDestroyShaderModule(device_, module, nullptr);
    if (r != VK_SUCCESS) {
        vkDestroyPipelineLayout(device_, p->layout, nullptr);
        vkDestroyDescriptorSetLayout(device_, p->set_layout, nullptr);
        vk_check(r, ("vkCreateComputePipelines " + key).c_str());
    }
    return *pipelines_.emplace(std::move(key), std::move(p)).first->second;
}

DescriptorArena::~DescriptorArena() {
    for (VkDescriptorPool pool : pools_) vkDestroyDescriptorPool(device_, pool, nullptr);
}

VkDescriptorPool DescriptorArena::new_pool() {
    // Sized for a decoding step of a large model; more pools are added when a step needs them.
    constexpr uint32_t kSets = 1024, kBuffersPerSet = 6;
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSets * kBuffersPerSet};
    VkDescriptorPoolCreateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    info.maxSets = kSets;
    info.poolSizeCount = 1;
    info.pPoolSizes = &size;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    vk_check(vkCreateDescriptorPool(device_, &info, nullptr, &pool), "vkCreateDescriptorPool");
    return pool;
}

VkDescriptorSet DescriptorArena::allocate(VkDescriptorSetLayout layout) {
    for (;;) {
        if (current_ == pools_.size()) pools_.push_back(new_pool());
        VkDescriptorSetAllocateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
        info.descriptorPool = pools_[current_];
        info.descriptorSetCount = 1;
        info.pSetLayouts = &layout;
        VkDescriptorSet set = VK_NULL_HANDLE;
        const VkResult r = vkAllocateDescriptorSets(device_, &info, &set);
        if (r == VK_SUCCESS) return set;
        if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) vk_check(r, "vkAllocateDescriptorSets");
        ++current_;
    }
}

void DescriptorArena::reset() {
    for (VkDescriptorPool pool : pools_) vkResetDescriptorPool(device_, pool, 0);
    current_ = 0;
}

}  // namespace deskside::backends::vulkan
