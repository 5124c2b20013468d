// SPIR-V modules embedded in the binary. The build compiles every shaders/<family>.comp (once per
// variant listed in shaders/<family>.variants) and generates the table all_shaders() returns; see
// cmake/vulkan_shaders.cmake and /work/notes/vk-api.md for how to add a shader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace deskside::backends::vulkan {

struct ShaderCode {
    const char* name;  // the variant name ("add", "matvec_q4_0", ...)
    const uint32_t* words;
    size_t n_words;
};

// Every embedded variant (generated: build-*/generated/vulkan/spv_registry.cpp).
std::span<const ShaderCode> all_shaders();

// The variant called `name`; throws std::invalid_argument naming it when the build has none.
const ShaderCode& find_shader(std::string_view name);

}  // namespace deskside::backends::vulkan
