// The stb_image implementation, compiled once for PNG, BMP, GIF and TGA (JPEG goes through
// libjpeg-turbo), without stdio and with a dimension cap; warnings off for this file only.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#define STBI_ONLY_TGA
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_MAX_DIMENSIONS (1 << 16)
#include "engine/vision/stb_image_config.h"
