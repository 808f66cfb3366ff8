# Decides whether and how the CUDA backend (engine/ops/cuda) is built.
#   AUTO: on when nvcc is found, so CUDA sources compile on every machine that has the toolkit,
#         GPU or not (CI compiles them, the GPU machine runs them);
#   ON:   nvcc required;
#   OFF:  not built (engine/ops/cuda_absent says so at run time);
#   EMU:  the kernels compiled as C++ against the CPU emulation of engine/ops/cuda/emu, no nvcc:
#         cuda_tests then run the real kernel code on the CPU (the `cuda-emu` preset).
set(FLASHDESK_CUDA_ENABLED OFF)
set(FLASHDESK_CUDA_EMU OFF)
if(FLASHDESK_CUDA STREQUAL "EMU")
  set(FLASHDESK_CUDA_ENABLED ON)
  set(FLASHDESK_CUDA_EMU ON)
elseif(NOT FLASHDESK_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Ampere and Ada (sm_80 code runs on sm_86/89), Hopper, and compute_90 PTX that the driver
      # compiles for newer GPUs (Blackwell). Two machine-code targets keep CI's build short.
      set(CMAKE_CUDA_ARCHITECTURES "80-real;90")
    endif()
    if(FLASHDESK_CCACHE AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
      set(CMAKE_CUDA_COMPILER_LAUNCHER ${FLASHDESK_CCACHE})
    endif()
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc 12+'s C++20 flag (generation fails with "requires the
    # language dialect CUDA20"): tell it. Constexpr host helpers (kv_format.h) run in device code.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} --expt-relaxed-constexpr")
    find_package(CUDAToolkit REQUIRED)
    set(FLASHDESK_CUDA_ENABLED ON)
  elseif(FLASHDESK_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FLASHDESK_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
