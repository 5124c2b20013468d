// A read-only memory mapping of a whole file (RAII). Model weights are read in place from it.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace deskside::models {

class MappedFile {
   public:
    // Throws std::runtime_error naming the path when the file cannot be opened or mapped.
    explicit MappedFile(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::span<const uint8_t> bytes() const { return {data_, size_}; }
    const std::string& path() const { return path_; }

   private:
    std::string path_;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace deskside::models
