#include "backends/vulkan/vk_memory.h"

#include <stdexcept>
#include <string>

#include "backends/vulkan/vk_check.h"

namespace deskside::backends::vulkan {

VulkanBuffer::VulkanBuffer(const Backend& backend, const VulkanDevice& device, BufferOwner* listener, size_t bytes,
                           VkMemoryPropertyFlags required,
                           VkMemoryPropertyFlags preferred)
    : Buffer(backend), device_(device), listener_(listener), size_(bytes) {
    const DeviceCaps& caps = device.caps();
    if (caps.max_memory_allocation_size && bytes > caps.max_memory_allocation_size)
        throw std::runtime_error("vulkan: buffer of " + std::to_string(bytes) + " bytes exceeds " + caps.name +
                                 "'s maxMemoryAllocationSize (" + std::to_string(caps.max_memory_allocation_size) + ")");
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    // Whole 4-byte words (shaders read uint words, so a tensor ending mid-word at the buffer's end
    // is still bound in full); Vulkan forbids empty buffers. Buffer::size() stays the bytes asked for.
    info.size = bytes == 0 ? 4 : (bytes + 3) / 4 * 4;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkDevice dev = device.handle();
    vk_check(vkCreateBuffer(dev, &info, nullptr, &buffer_), "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, buffer_, &req);
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    try {
        alloc.memoryTypeIndex = device.memory_type(req.memoryTypeBits, required, preferred);
        const VkResult r = vkAllocateMemory(dev, &alloc, nullptr, &memory_);
        if (r != VK_SUCCESS)
            throw std::runtime_error("vulkan: cannot allocate " + std::to_string(bytes) + " bytes on " + caps.name + ": " +
                                     result_name(r));
        vk_check(vkBindBufferMemory(dev, buffer_, memory_, 0), "vkBindBufferMemory");
        if (required & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
            void* p = nullptr;
            vk_check(vkMapMemory(dev, memory_, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
            mapped_ = static_cast<uint8_t*>(p);
        }
    } catch (...) {
        if (memory_) vkFreeMemory(dev, memory_, nullptr);
        vkDestroyBuffer(dev, buffer_, nullptr);
        throw;
    }
}

VulkanBuffer::~VulkanBuffer() {
    if (listener_) listener_->before_free(*this);
    VkDevice dev = device_.handle();
    vkDestroyBuffer(dev, buffer_, nullptr);
    vkFreeMemory(dev, memory_, nullptr);  // unmaps implicitly
}

HostRing::HostRing(const Backend& backend, const VulkanDevice& device, size_t bytes)
    : buffer_(backend, device, nullptr, bytes, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
              VK_MEMORY_PROPERTY_HOST_CACHED_BIT) {}

size_t HostRing::free_bytes(size_t alignment) const {
    const size_t start = (head_ + alignment - 1) / alignment * alignment;
    return start >= capacity() ? 0 : capacity() - start;
}

size_t HostRing::take(size_t bytes, size_t alignment) {
    const size_t start = (head_ + alignment - 1) / alignment * alignment;
    head_ = start + bytes;
    return start;
}

}  // namespace deskside::backends::vulkan
