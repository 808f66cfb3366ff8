// Structs whose bytes are compared as they are (kernel parameters, which a step graph compares to
// the recorded launch's, step_ops.h; library call arguments; uploads cached by their bytes) spell
// out their padding as zeroed members: implicit padding holds whatever the stack held, so equal
// values could compare unequal and stop a replay. Between FD_NO_PADDING_BEGIN and
// FD_NO_PADDING_END, a struct with implicit padding does not compile (-Wpadded as an error).
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define FD_NO_PADDING_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic error \"-Wpadded\"")
#define FD_NO_PADDING_END _Pragma("GCC diagnostic pop")
#else
#define FD_NO_PADDING_BEGIN
#define FD_NO_PADDING_END
#endif

namespace flashdesk::cuda {
// Kernel parameters of class type must have no implicit padding (cuda_compat.cuh checks every
// launch's at compile time): std::has_unique_object_representations says so for structs of
// integers and pointers, but not for those holding floats, which say it themselves by
// specialising this to true after declaring the struct between FD_NO_PADDING_BEGIN and
// FD_NO_PADDING_END (which checks it).
template <class T>
inline constexpr bool kNoPaddingDeclared = false;
}  // namespace flashdesk::cuda
