// The parts of backends/backend.h that every backend shares: op names, the host-staged copy_to,
// and the foreign-buffer error.
#include "backends/backend.h"

#include <cstring>
#include <stdexcept>
#include <vector>

namespace deskside::backends {

const char* op_name(Op op) {
    switch (op) {
        case Op::GetRows: return "get_rows";
        case Op::Matmul: return "matmul";
        case Op::RmsNorm: return "rms_norm";
        case Op::Rope: return "rope";
        case Op::Attention: return "attention";
        case Op::Silu: return "silu";
        case Op::Gelu: return "gelu";
        case Op::Add: return "add";
        case Op::Mul: return "mul";
        case Op::Scale: return "scale";
        case Op::Copy: return "copy";
        case Op::SetRows: return "set_rows";
        case Op::CopyTo: return "copy_to";
        case Op::MoeRoute: return "moe_route";
        case Op::MatmulId: return "matmul_id";
        case Op::AddId: return "add_id";
        case Op::MoeCombine: return "moe_combine";
        case Op::SwigluOai: return "swiglu_oai";
    }
    return "unknown op";
}

void Backend::copy_to(const Buffer& src, size_t src_offset, Backend& to, Buffer& dst, size_t dst_offset, size_t bytes) {
    if (&src.owner() != this) throw_foreign_buffer(*this, src, "copy_to (source)");
    if (&dst.owner() != &to) throw_foreign_buffer(to, dst, "copy_to (destination)");
    if (src_offset > src.size() || bytes > src.size() - src_offset || dst_offset > dst.size() ||
        bytes > dst.size() - dst_offset) {
        throw std::out_of_range(name() + " copy_to " + to.name() + ": " + std::to_string(bytes) + " bytes at " +
                                std::to_string(src_offset) + " -> " + std::to_string(dst_offset) +
                                " outside the buffers (" + std::to_string(src.size()) + ", " +
                                std::to_string(dst.size()) + " bytes)");
    }
    if (bytes == 0) return;
    if (uint8_t* d = dst.host_data()) {
        download(src, src_offset, d + dst_offset, bytes);
    } else if (const uint8_t* s = src.host_data()) {
        to.upload(dst, dst_offset, s + src_offset, bytes);
    } else {
        std::vector<uint8_t> staging(bytes);
        download(src, src_offset, staging.data(), bytes);
        to.upload(dst, dst_offset, staging.data(), bytes);
    }
}

void throw_foreign_buffer(const Backend& backend, const Buffer& buffer, const char* op) {
    throw std::invalid_argument(backend.name() + " " + op + ": not a buffer of this device (it belongs to device '" +
                                buffer.owner().name() + "')");
}

}  // namespace deskside::backends
