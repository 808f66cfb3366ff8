// Which kernels run the prefill experts on Hopper (moe_grouped.cu): the wgmma kernels
// (moe_grouped_sm90a.cu) in CTAs of 256 weight rows where the shapes allow (Auto, the default) or
// of 128 only (Narrow), or the mma.sync kernels every GPU runs (Off). Shared by the backend's
// switch and the device context the MoE path reads it from.
#pragma once

namespace flashdesk::cuda {

enum class WgmmaExperts { Off, Narrow, Auto };

}  // namespace flashdesk::cuda
