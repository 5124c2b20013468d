#include "models/hf_checkpoint.h"

#include <stdexcept>

namespace deskside::models {

ModelInfo load_hf_checkpoint(const std::string& dir) {
    throw std::runtime_error(dir + ": Hugging Face checkpoint directories are not supported yet");
}

}  // namespace deskside::models
