// make_nccl_collectives (cuda_devices.h): NCCL all-reduces between the CUDA backends of one
// process, one rank a GPU. NCCL is loaded with dlopen on first use, as cuBLAS is (blas.cpp): a
// process that never splits a model over GPUs needs no NCCL installed. Each rank's all-reduce runs
// on its backend's stream, so it is ordered with that rank's kernels and the host does not wait
// for it. The CPU emulation of the CUDA backend (`cuda-emu`) has no NCCL: there it says so.
#include "engine/ops/cuda/cuda_devices.h"
#include "engine/util/error.h"

#ifndef FLASHDESK_CUDA_EMU
#include <dlfcn.h>
#include <nccl.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/cuda_check.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/step_ops.h"
#endif

namespace flashdesk {

#ifdef FLASHDESK_CUDA_EMU

std::vector<std::unique_ptr<Collective>> make_nccl_collectives(const std::vector<Backend*>&) {
  throw InvalidRequest("NCCL needs a GPU build of the CUDA backend (this is its CPU emulation)");
}

#else

namespace {

// The few entry points used, resolved once per process.
struct NcclApi {
  using GetErrorString = const char* (*)(ncclResult_t);
  using CommInitAll = ncclResult_t (*)(ncclComm_t*, int, const int*);
  using CommDestroy = ncclResult_t (*)(ncclComm_t);
  using AllReduce = ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                     ncclComm_t, cudaStream_t);
  GetErrorString error_string = nullptr;
  CommInitAll comm_init_all = nullptr;
  CommDestroy comm_destroy = nullptr;
  AllReduce all_reduce = nullptr;
};

const NcclApi& nccl_api() {
  static NcclApi api;
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    void* lib = nullptr;
    std::string tried;
    for (const char* n : {"libnccl.so.2", "libnccl.so"}) {
      if ((lib = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
      tried += std::string(tried.empty() ? "" : "; ") + n + ": " + dlerror();
    }
    if (!lib) {
      error = "NCCL could not be loaded (" + tried + "); install NCCL to split a model over GPUs";
      return;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(lib, name);
      if (!p && error.empty()) error = std::string("NCCL has no ") + name;
      return p;
    };
    api.error_string = reinterpret_cast<NcclApi::GetErrorString>(sym("ncclGetErrorString"));
    api.comm_init_all = reinterpret_cast<NcclApi::CommInitAll>(sym("ncclCommInitAll"));
    api.comm_destroy = reinterpret_cast<NcclApi::CommDestroy>(sym("ncclCommDestroy"));
    api.all_reduce = reinterpret_cast<NcclApi::AllReduce>(sym("ncclAllReduce"));
  });
  if (!error.empty()) throw CudaError(error);
  return api;
}

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    throw CudaError(std::string(what) + " failed: " + nccl_api().error_string(r));
}

// The communicators of one group, destroyed together with the last of its collectives.
struct Comms {
  std::vector<ncclComm_t> comms;
  ~Comms() {
    for (ncclComm_t c : comms)
      if (c) nccl_api().comm_destroy(c);
  }
};

class NcclCollective final : public Collective {
 public:
  NcclCollective(std::shared_ptr<Comms> comms, int rank, CudaBackend& backend)
      : comms_(std::move(comms)), rank_(rank), backend_(backend) {}
  int rank() const override { return rank_; }
  int world() const override { return static_cast<int>(comms_->comms.size()); }
  // Device F32 tensors of the same size on every rank, each rank calling from its own thread (one
  // thread a device needs no NCCL group calls).
  void all_reduce_sum(Tensor& t) override {
    check_dtype(t, DType::F32, "all_reduce_sum");
    cuda::DeviceGuard guard(backend_.context().device());
    const cudaStream_t stream = backend_.context().stream();
    ncclComm_t comm = comms_->comms[static_cast<size_t>(rank_)];
    void* data = t.bytes();
    const size_t count = static_cast<size_t>(t.numel());
    const std::array<uintptr_t, 3> args = {reinterpret_cast<uintptr_t>(data), count,
                                           reinterpret_cast<uintptr_t>(comm)};
    cuda::library_call(
        stream, "ncclAllReduce",
        {reinterpret_cast<const unsigned char*>(args.data()), sizeof(args)}, [=] {
          check(nccl_api().all_reduce(data, data, count, ncclFloat32, ncclSum, comm, stream),
                "ncclAllReduce");
        });
  }

 private:
  std::shared_ptr<Comms> comms_;
  int rank_;
  CudaBackend& backend_;
};

}  // namespace

std::vector<std::unique_ptr<Collective>> make_nccl_collectives(
    const std::vector<Backend*>& backends) {
  std::vector<CudaBackend*> gpus;
  std::vector<int> devices;
  for (Backend* b : backends) {
    auto* g = dynamic_cast<CudaBackend*>(b);
    if (!g) throw InvalidRequest("NCCL ranks need CUDA backends, not " + std::string(b->name()));
    for (int d : devices)
      if (d == g->context().device())
        throw InvalidRequest("NCCL ranks need one GPU each; cuda:" + std::to_string(d) +
                             " is given twice");
    gpus.push_back(g);
    devices.push_back(g->context().device());
  }
  auto comms = std::make_shared<Comms>();
  comms->comms.resize(gpus.size());
  check(
      nccl_api().comm_init_all(comms->comms.data(), static_cast<int>(gpus.size()), devices.data()),
      "ncclCommInitAll");
  std::vector<std::unique_ptr<Collective>> out;
  for (size_t r = 0; r < gpus.size(); ++r)
    out.push_back(std::make_unique<NcclCollective>(comms, static_cast<int>(r), *gpus[r]));
  return out;
}

#endif

}  // namespace flashdesk
