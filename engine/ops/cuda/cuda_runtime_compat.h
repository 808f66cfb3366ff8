// The CUDA runtime API for the host code of the CUDA backend: the real one, or the CPU emulation of
// the `cuda-emu` preset (emu/cuda_emu.h). Host files include this instead of <cuda_runtime_api.h>.
#pragma once

#ifdef FLASHDESK_CUDA_EMU
#include "engine/ops/cuda/emu/cuda_emu.h"
#else
#include <cuda_runtime_api.h>
#endif

#include "engine/ops/cuda/cuda_check.h"
