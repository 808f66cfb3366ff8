// Where stb_image.h lives (Debian's libstb-dev: <stb/stb_image.h>); the includer sets options.
#pragma once

#if __has_include(<stb/stb_image.h>)
#include <stb/stb_image.h>
#else
#include <stb_image.h>
#endif
