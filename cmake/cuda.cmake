# The CUDA backend (backends/cuda/), built only with DESKSIDE_CUDA.
#
# Every backends/cuda/*.cu (and any .cpp there but the stub) goes into the static library
# deskside_cuda, compiled by nvcc for DESKSIDE_CUDA_ARCHITECTURES and linked against the static
# CUDA runtime, so a deskside binary needs the NVIDIA driver (libcuda.so, loaded at run time) and
# nothing from the toolkit. Without DESKSIDE_CUDA the registry gets cuda_registry_stub.cpp, which
# lists no devices and says why, so nothing outside backends/cuda needs an #ifdef.

set(_cuda_dir ${PROJECT_SOURCE_DIR}/backends/cuda)

if(NOT DESKSIDE_CUDA)
  target_sources(deskside_backends PRIVATE ${_cuda_dir}/cuda_registry_stub.cpp)
  return()
endif()

if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
# nvcc compiles host code with the project's C++ compiler, so both sides share one ABI.
if(NOT CMAKE_CUDA_HOST_COMPILER)
  set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
endif()

# Architectures: DESKSIDE_CUDA_ARCHITECTURES when set (CI passes one to keep the build short), else
# CMAKE_CUDA_ARCHITECTURES when the caller gave it, else the GPU of this machine when one is
# visible (a developer's build), else the generations deskside targets (Turing, Ampere, Ada,
# Hopper, Blackwell consumer), each as SASS plus PTX so a newer GPU can JIT.
set(DESKSIDE_CUDA_ARCHITECTURES "" CACHE STRING
    "CUDA architectures of the CUDA backend (e.g. 86 or 75;86;89); empty: see cmake/cuda.cmake")
if(DESKSIDE_CUDA_ARCHITECTURES)
  set(_cuda_archs "${DESKSIDE_CUDA_ARCHITECTURES}")
elseif(CMAKE_CUDA_ARCHITECTURES)
  set(_cuda_archs "${CMAKE_CUDA_ARCHITECTURES}")
else()
  execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE _smi_rc OUTPUT_VARIABLE _smi_out ERROR_QUIET)
  if(_smi_rc EQUAL 0 AND _smi_out MATCHES "GPU [0-9]")
    set(_cuda_archs native)
  else()
    set(_cuda_archs "75;86;89;90;120")
  endif()
endif()
# enable_language's compiler check builds for these too (nvcc 13 rejects CMake's old default).
set(CMAKE_CUDA_ARCHITECTURES "${_cuda_archs}")

enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
# C++20 in .cu files. CMake 3.25 knows nvcc's dialect flags only up to C++17 (later versions add
# 20 for nvcc >= 12), and CUDA_STANDARD falls back to the project's CXX_STANDARD of 20.
if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
  set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
if(CCACHE_PROGRAM)
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
endif()

file(GLOB _cuda_srcs CONFIGURE_DEPENDS ${_cuda_dir}/*.cu ${_cuda_dir}/*.cpp)
list(FILTER _cuda_srcs EXCLUDE REGEX "cuda_registry_stub\\.cpp$")

add_library(deskside_cuda STATIC ${_cuda_srcs})
set_target_properties(deskside_cuda PROPERTIES
  CUDA_ARCHITECTURES "${_cuda_archs}"
  CUDA_RUNTIME_LIBRARY Static
  POSITION_INDEPENDENT_CODE ON)
target_include_directories(deskside_cuda PUBLIC ${PROJECT_SOURCE_DIR})
# cudart stays PRIVATE: only backends/cuda includes CUDA headers. A static library's PRIVATE link
# dependencies still reach the final link line.
target_link_libraries(deskside_cuda PUBLIC deskside_quant Threads::Threads PRIVATE CUDA::cudart_static)
# Device code must round each float operation as written (the ops match the CPU's bits), so no
# fast-math and no FMA contraction: the kernels ask for fused operations explicitly (fmaf).
# Host code gets the project's warnings; -Wextra is left out there, as nvcc's generated launch
# stubs trip it.
target_compile_options(deskside_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>
  $<$<COMPILE_LANGUAGE:CUDA>:-Wno-deprecated-gpu-targets>
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
# Tests that need the backend's own interface (graph statistics) compile only where it exists.
target_compile_definitions(deskside_cuda PUBLIC DESKSIDE_HAS_CUDA=1)
# The architectures the kernels were built for, for the registry's "no kernels for sm_XY" note.
string(REPLACE ";" "," _cuda_arch_text "${_cuda_archs}")
target_compile_definitions(deskside_cuda PRIVATE DESKSIDE_CUDA_BUILT_ARCHS="${_cuda_arch_text}")
target_link_libraries(deskside_backends PUBLIC deskside_cuda)
message(STATUS "deskside: CUDA kernels   for ${_cuda_archs} (nvcc ${CMAKE_CUDA_COMPILER_VERSION})")
