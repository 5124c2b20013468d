// Device memory: buffers the backend hands out, and the host-visible ring that carries uploads,
// downloads and per-call arguments (token ids, positions, block tables).
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>

#include "backends/backend.h"
#include "backends/vulkan/vk_device.h"

namespace deskside::backends::vulkan {

class VulkanBuffer;

// Told before a buffer's memory is freed, so that work still queued on it can finish first.
class BufferOwner {
   public:
    virtual void before_free(const VulkanBuffer& buffer) = 0;

   protected:
    ~BufferOwner() = default;
};

// One VkBuffer with its own allocation. Storage + transfer usage, so any op can bind it.
class VulkanBuffer final : public Buffer {
   public:
    // backend: the backend that created it (Buffer::owner; ops refuse buffers of another
    // backend); listener: told before the memory is freed, may be null.
    VulkanBuffer(const Backend& backend, const VulkanDevice& device, BufferOwner* listener, size_t bytes,
                 VkMemoryPropertyFlags required,
                 VkMemoryPropertyFlags preferred);
    ~VulkanBuffer() override;
    VulkanBuffer(const VulkanBuffer&) = delete;
    VulkanBuffer& operator=(const VulkanBuffer&) = delete;

    size_t size() const override { return size_; }
    // Bytes of the VkBuffer: size() rounded up to whole 4-byte words.
    size_t word_size() const { return size_ == 0 ? 4 : (size_ + 3) / 4 * 4; }
    VkBuffer handle() const { return buffer_; }
    // Host pointer to the start, or nullptr when the memory is not host-visible.
    uint8_t* mapped() const { return mapped_; }

   private:
    const VulkanDevice& device_;
    BufferOwner* listener_;
    size_t size_;
    VkBuffer buffer_ = VK_NULL_HANDLE;
    VkDeviceMemory memory_ = VK_NULL_HANDLE;
    uint8_t* mapped_ = nullptr;
};

// A host-visible, coherent buffer handed out front to back within one submission and reset when
// that submission has completed (the backend calls reset() after its fence).
class HostRing {
   public:
    HostRing(const Backend& backend, const VulkanDevice& device, size_t bytes);
    const VulkanBuffer& buffer() const { return buffer_; }
    size_t capacity() const { return buffer_.size(); }
    size_t free_bytes(size_t alignment) const;
    // Offset of `bytes` fresh bytes aligned to `alignment`; the caller checked free_bytes().
    size_t take(size_t bytes, size_t alignment);
    uint8_t* at(size_t offset) const { return buffer_.mapped() + offset; }
    void reset() { head_ = 0; }

   private:
    VulkanBuffer buffer_;
    size_t head_ = 0;
};

}  // namespace deskside::backends::vulkan
