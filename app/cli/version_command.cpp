// `flashdesk-cli version`: what was built, so bug reports say which engine produced a result.
#include <cstdio>

namespace flashdesk::cli {

int run_version(int, char**) {
  std::printf("flashdesk %s\n", FLASHDESK_VERSION);
#ifdef FLASHDESK_HAVE_CUDA
  std::printf("cuda backend: built\n");
#else
  std::printf("cuda backend: not built\n");
#endif
  return 0;
}

}  // namespace flashdesk::cli
