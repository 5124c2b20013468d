# The CUDA backend (backends/cuda/). Without DESKSIDE_CUDA the registry's stub answers "deskside was
# built without CUDA".
if(NOT DESKSIDE_CUDA)
  target_sources(deskside_backends PRIVATE ${PROJECT_SOURCE_DIR}/backends/cuda/cuda_registry_stub.cpp)
  return()
endif()
message(WARNING "deskside: the CUDA library is not written yet; building the stub")
target_sources(deskside_backends PRIVATE ${PROJECT_SOURCE_DIR}/backends/cuda/cuda_registry_stub.cpp)
