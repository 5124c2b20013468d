#include "backends/vulkan/vk_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "backends/vulkan/vk_check.h"
#include "backends/vulkan/vk_matmul.h"

namespace deskside::backends::vulkan {
namespace {

// Host-visible memory shared by uploads, downloads and per-call arguments. Bigger transfers are
// cut into pieces of this size, one submission each.
constexpr size_t kRingBytes = 64u << 20;
// Alignment of everything taken from the ring (covers copy offsets and the usual storage offset
// alignments; the device's own alignment is applied on top).
constexpr size_t kRingAlignment = 256;

bool overlaps(VkDeviceSize a0, VkDeviceSize a1, VkDeviceSize b0, VkDeviceSize b1) { return a0 < b1 && b0 < a1; }

// The device's caps, with maxStorageBufferRange lowered by DESKSIDE_VULKAN_MAX_BINDING (bytes) when
// set: tests use it to exercise the row-range splitting of big tensors with small ones.
DeviceCaps caps_with_overrides(VkPhysicalDevice physical) {
    DeviceCaps caps = query_caps(physical);
    if (const char* env = std::getenv("DESKSIDE_VULKAN_MAX_BINDING"); env && *env) {
        char* end = nullptr;
        const unsigned long long v = std::strtoull(env, &end, 10);
        if (*end != '\0' || v < 256)
            throw std::invalid_argument(std::string("DESKSIDE_VULKAN_MAX_BINDING='") + env + "': expected a byte count >= 256");
        caps.max_storage_buffer_range = std::min<uint64_t>(caps.max_storage_buffer_range, v);
    }
    return caps;
}

}  // namespace

VulkanBackend::VulkanBackend(VkPhysicalDevice physical, std::string name, uint64_t memory_limit)
    : name_(std::move(name)),
      device_(physical, caps_with_overrides(physical)),
      memory_limit_(memory_limit ? memory_limit : device_.caps().device_local_bytes),
      pipelines_(device_.handle()),
      descriptors_(device_.handle()) {
    VkDevice dev = device_.handle();
    VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
    pool_info.queueFamilyIndex = device_.caps().compute_queue_family;
    vk_check(vkCreateCommandPool(dev, &pool_info, nullptr, &pool_), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo cmd_info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cmd_info.commandPool = pool_;
    cmd_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cmd_info.commandBufferCount = 1;
    vk_check(vkAllocateCommandBuffers(dev, &cmd_info, &cmd_), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    vk_check(vkCreateFence(dev, &fence_info, nullptr, &fence_), "vkCreateFence");
    ring_ = std::make_unique<HostRing>(*this, device_, kRingBytes);
}

VulkanBackend::~VulkanBackend() {
    try {
        submit_and_wait();
    } catch (...) {
        // A lost device while tearing down: nothing left to report to.
    }
    scratch_.reset();
    ring_.reset();
    VkDevice dev = device_.handle();
    vkDestroyFence(dev, fence_, nullptr);
    vkDestroyCommandPool(dev, pool_, nullptr);
}

// ---- memory -------------------------------------------------------------------------------------

std::unique_ptr<Buffer> VulkanBackend::alloc(size_t bytes) {
    if (allocated_ + bytes > memory_limit_)
        throw std::runtime_error("vulkan: " + name_ + ": cannot allocate " + std::to_string(bytes) + " bytes (" +
                                 std::to_string(allocated_) + " of " + std::to_string(memory_limit_) + " in use)");
    auto buffer = std::make_unique<VulkanBuffer>(*this, device_, static_cast<BufferOwner*>(this), bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    allocated_ += bytes;
    return buffer;
}

std::unique_ptr<Buffer> VulkanBackend::map_weights(const void* host, size_t bytes) {
    std::unique_ptr<Buffer> buffer = alloc(bytes);
    upload(*buffer, 0, host, bytes);
    return buffer;
}

void VulkanBackend::before_free(const VulkanBuffer& buffer) {
    if (in_flight_.count(buffer.handle())) submit_and_wait();
    allocated_ -= std::min<uint64_t>(allocated_, buffer.size());
}

const VulkanBuffer& VulkanBackend::own(const Buffer& b, const char* what) const {
    return owned_by<VulkanBuffer>(*this, b, what);
}

Binding VulkanBackend::bind_index(const Tensor& t, int64_t first, int64_t n, const char* op) const {
    if (t.type != quant::TypeId::I32 || first < 0 || n < 0 || t.ne0 < first + n)
        throw std::invalid_argument(std::string("vulkan ") + op + ": the index tensor must be I32 with at least " +
                                    std::to_string(first + n) + " entries, got [" + std::to_string(t.ne0) + ", " +
                                    std::to_string(t.ne1) + "] " + std::string(quant::type_info(t.type).name));
    Tensor part = t;
    part.offset += static_cast<size_t>(first) * sizeof(int32_t);
    part.ne0 = std::max<int64_t>(n, 1);  // an empty binding still needs a word
    part.ne1 = 1;
    part.row_stride = part.row_bytes();
    return bind(part, Access::Read);
}

bool VulkanBackend::supports(Op op, quant::TypeId type) const {
    switch (op) {
        case Op::GetRows:
        case Op::Matmul:
        case Op::MatmulId: return vulkan_type_suffix(type) != nullptr;
        case Op::Attention:
            return type == quant::TypeId::F32 || type == quant::TypeId::F16 || type == quant::TypeId::Q8_0;
        case Op::Copy:
        case Op::SetRows:
            return type == quant::TypeId::F32 || type == quant::TypeId::F16 || type == quant::TypeId::Q8_0;
        default: return type == quant::TypeId::F32;
    }
}

void VulkanBackend::upload(Buffer& dst, size_t offset, const void* src, size_t bytes) {
    const VulkanBuffer& vb = own(dst, "upload destination");
    if (offset > vb.size() || bytes > vb.size() - offset)
        throw std::out_of_range("vulkan: upload of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                                " into a buffer of " + std::to_string(vb.size()));
    const auto* p = static_cast<const uint8_t*>(src);
    while (bytes > 0) {
        const size_t n = std::min(bytes, ring_->capacity());
        const size_t at = ring_take(n, kRingAlignment);
        std::memcpy(ring_->at(at), p, n);
        record_copy(ring_->buffer().handle(), at, vb.handle(), offset, n);
        p += n;
        offset += n;
        bytes -= n;
    }
}

void VulkanBackend::download(const Buffer& src, size_t offset, void* dst, size_t bytes) {
    const VulkanBuffer& vb = own(src, "download source");
    if (offset > vb.size() || bytes > vb.size() - offset)
        throw std::out_of_range("vulkan: download of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                                " from a buffer of " + std::to_string(vb.size()));
    auto* p = static_cast<uint8_t*>(dst);
    while (bytes > 0) {
        const size_t n = std::min(bytes, ring_->capacity());
        const size_t at = ring_take(n, kRingAlignment);
        record_copy(vb.handle(), offset, ring_->buffer().handle(), at, n);
        submit_and_wait();
        std::memcpy(p, ring_->at(at), n);
        p += n;
        offset += n;
        bytes -= n;
    }
    submit_and_wait();  // the engine expects every op issued so far to be done (cheap when empty)
}

Buffer& VulkanBackend::scratch(size_t bytes) {
    if (!scratch_ || scratch_->size() < bytes) {
        const size_t grown = std::max(bytes, scratch_ ? 2 * scratch_->size() : size_t{0});
        scratch_.reset();  // before_free submits first when recorded work still reads it
        scratch_ = alloc(grown);
    }
    return *scratch_;
}

size_t VulkanBackend::ring_take(size_t bytes, size_t alignment) {
    if (ring_->free_bytes(alignment) < bytes) submit_and_wait();
    return ring_->take(bytes, alignment);
}

Binding VulkanBackend::upload_args(const void* data, size_t bytes) {
    const size_t align = std::max<size_t>(kRingAlignment, caps().min_storage_buffer_offset_alignment);
    if (bytes > ring_->capacity()) throw std::length_error("vulkan: per-call arguments of " + std::to_string(bytes) + " bytes");
    const size_t n = std::max<size_t>(bytes, 4);
    const size_t at = ring_take(n, align);
    std::memcpy(ring_->at(at), data, bytes);
    return Binding{ring_->buffer().handle(), at, n, 0, Access::Read};
}

// ---- recording ----------------------------------------------------------------------------------

VkCommandBuffer VulkanBackend::recording() {
    if (!recording_) {
        VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
        vk_check(vkBeginCommandBuffer(cmd_, &begin), "vkBeginCommandBuffer");
        recording_ = true;
    }
    return cmd_;
}

void VulkanBackend::track(std::span<const Range> accesses) {
    bool conflict = false;
    for (const Range& a : accesses)
        for (const Range& b : since_barrier_)
            if ((a.write || b.write) && a.buffer == b.buffer && overlaps(a.begin, a.end, b.begin, b.end)) conflict = true;
    if (conflict) {
        // One global barrier orders all earlier compute/transfer work before the next command;
        // on current drivers it costs the same as a buffer barrier and cannot miss a range.
        VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
        barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                                VK_ACCESS_TRANSFER_WRITE_BIT;
        const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
        vkCmdPipelineBarrier(recording(), stages, stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
        since_barrier_.clear();
    }
    for (const Range& a : accesses) {
        since_barrier_.push_back(a);
        in_flight_.insert(a.buffer);
    }
}

void VulkanBackend::record_copy(VkBuffer src, VkDeviceSize src_offset, VkBuffer dst, VkDeviceSize dst_offset,
                                VkDeviceSize bytes) {
    const Range accesses[] = {{src, src_offset, src_offset + bytes, false}, {dst, dst_offset, dst_offset + bytes, true}};
    track(accesses);
    const VkBufferCopy region{src_offset, dst_offset, bytes};
    vkCmdCopyBuffer(recording(), src, dst, 1, &region);
}

void VulkanBackend::submit_and_wait() {
    if (recording_) {
        vk_check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
        recording_ = false;
        VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
        submit.commandBufferCount = 1;
        submit.pCommandBuffers = &cmd_;
        VkDevice dev = device_.handle();
        vk_check(vkQueueSubmit(device_.queue(), 1, &submit, fence_), "vkQueueSubmit");
        vk_check(vkWaitForFences(dev, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
        vk_check(vkResetFences(dev, 1, &fence_), "vkResetFences");
        vk_check(vkResetCommandPool(dev, pool_, 0), "vkResetCommandPool");
    }
    descriptors_.reset();
    ring_->reset();
    since_barrier_.clear();
    in_flight_.clear();
}

const Pipeline& VulkanBackend::pipeline(std::string_view variant, uint32_t n_buffers, uint32_t push_bytes,
                                        std::span<const uint32_t> spec) {
    if (push_bytes > caps().max_push_constants)
        throw std::invalid_argument("vulkan: " + std::string(variant) + " needs " + std::to_string(push_bytes) +
                                    " bytes of push constants; the device allows " + std::to_string(caps().max_push_constants));
    return pipelines_.get(variant, n_buffers, push_bytes, spec);
}

Binding VulkanBackend::bind_rows(const Tensor& t, int64_t first, int64_t n, Access access) const {
    if (t.empty()) throw std::invalid_argument("vulkan: " + name_ + ": binding an empty tensor");
    const VulkanBuffer& vb = own(*t.buffer, "tensor");
    if (first < 0 || n < 1 || first + n > t.ne1)
        throw std::out_of_range("vulkan: rows [" + std::to_string(first) + ", " + std::to_string(first + n) +
                                ") of a tensor with " + std::to_string(t.ne1) + " rows");
    const VkDeviceSize begin = t.offset + static_cast<VkDeviceSize>(first) * t.row_stride;
    const VkDeviceSize end = begin + static_cast<VkDeviceSize>(n - 1) * t.row_stride + t.row_bytes();
    if (end > vb.size())
        throw std::out_of_range("vulkan: tensor bytes [" + std::to_string(begin) + ", " + std::to_string(end) +
                                ") lie outside its buffer of " + std::to_string(vb.size()));
    const VkDeviceSize align = std::max<VkDeviceSize>(1, caps().min_storage_buffer_offset_alignment);
    const VkDeviceSize offset = begin / align * align;
    // Round the range up to whole 4-byte words (shaders read uint words); the VkBuffer has them.
    VkDeviceSize range = (end - offset + 3) / 4 * 4;
    range = std::min<VkDeviceSize>(range, vb.word_size() - offset);
    if (range > caps().max_storage_buffer_range)
        throw std::invalid_argument("vulkan: a binding of " + std::to_string(range) + " bytes exceeds " + caps().name +
                                    "'s maxStorageBufferRange (" + std::to_string(caps().max_storage_buffer_range) +
                                    "); bind at most rows_per_binding() rows at a time");
    return Binding{vb.handle(), offset, range, static_cast<uint32_t>(begin - offset), access};
}

int64_t VulkanBackend::rows_per_binding(const Tensor& t) const {
    // Worst case: align - 1 bytes before the first row (offset rounded down), 3 after the last
    // (rounded up to a word).
    const uint64_t align = std::max<uint64_t>(1, caps().min_storage_buffer_offset_alignment);
    const uint64_t slack = align - 1 + 3;
    const uint64_t limit = caps().max_storage_buffer_range;
    if (limit < slack + t.row_bytes()) return 1;  // bind_rows will say the row is too big
    return 1 + static_cast<int64_t>((limit - slack - t.row_bytes()) / std::max<uint64_t>(1, t.row_stride));
}

Groups VulkanBackend::groups(uint64_t n) const {
    const uint64_t max_x = caps().max_workgroup_count[0];
    if (n <= max_x) return {static_cast<uint32_t>(std::max<uint64_t>(n, 1)), 1};
    const uint64_t y = (n + max_x - 1) / max_x;
    if (y > caps().max_workgroup_count[1]) throw std::length_error("vulkan: dispatch of " + std::to_string(n) + " workgroups");
    return {static_cast<uint32_t>((n + y - 1) / y), static_cast<uint32_t>(y)};
}

void VulkanBackend::dispatch(const Pipeline& p, std::span<const Binding> buffers, const void* push, Groups groups) {
    if (buffers.size() != p.n_buffers) throw std::logic_error("vulkan: dispatch with a wrong number of buffers");
    std::vector<Range> accesses;
    accesses.reserve(buffers.size());
    VkDescriptorBufferInfo infos[16];
    VkWriteDescriptorSet writes[16];
    if (buffers.size() > 16) throw std::logic_error("vulkan: more than 16 buffers in one dispatch");
    const VkDescriptorSet set = descriptors_.allocate(p.set_layout);
    for (size_t i = 0; i < buffers.size(); ++i) {
        const Binding& b = buffers[i];
        accesses.push_back({b.buffer, b.offset, b.offset + b.range, b.access != Access::Read});
        infos[i] = {b.buffer, b.offset, b.range};
        writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        writes[i].dstSet = set;
        writes[i].dstBinding = static_cast<uint32_t>(i);
        writes[i].descriptorCount = 1;
        writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(device_.handle(), static_cast<uint32_t>(buffers.size()), writes, 0, nullptr);
    track(accesses);
    VkCommandBuffer cmd = recording();
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
    if (p.push_bytes) vkCmdPushConstants(cmd, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_bytes, push);
    vkCmdDispatch(cmd, groups.x, groups.y, 1);
}

// ---- ops written by the matmul shaders' author (vk_matmul.h) ------------------------------------

void VulkanBackend::get_rows(const Tensor& table, const Tensor& ids, const Tensor& dst) {
    record_get_rows(*this, table, ids, dst);
}

void VulkanBackend::matmul(const Tensor& w, const Tensor& x, const Tensor& y) { record_matmul(*this, w, x, y); }

}  // namespace deskside::backends::vulkan
