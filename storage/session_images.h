// Images of stored sessions: a user's image file read for a turn (the bytes the session store
// files once per digest, and the engine's preprocessing of those same bytes), and the prompt's
// image spans (placeholder range + digest) that KV block keys and prefix digests take.
//
// Goals: one read of each file, so the stored image is exactly the one the model saw; a bad file
// fails before anything is stored. Non-goals: thumbnails, formats the engine cannot decode.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "engine/runtime/chat_engine.h"
#include "storage/kv_block_key.h"
#include "storage/session_types.h"

namespace flashdesk::storage {

struct UserImage {
  NewImage stored;     // the file's bytes and MIME type
  ImageDigest digest;  // image_digest(stored.bytes): the store's and the block keys' identity
  ImageRef prepared;   // decoded and preprocessed for the engine's model
};

// IoError when `file` cannot be read, FormatError when it is not a decodable image (or too
// large), InvalidRequest when the engine cannot read images.
UserImage read_user_image(const ChatEngine& engine, const std::filesystem::path& file);

// By the bytes' signature; TGA (which has none) by the file name's extension.
std::string image_mime_type(std::span<const uint8_t> bytes, const std::filesystem::path& name);

// The spans of a rendered prompt's images with their digests (both in prompt order).
std::vector<ImageSpan> prompt_image_spans(std::span<const flashdesk::ImageSpan> rendered,
                                          std::span<const ImageDigest> digests);

}  // namespace flashdesk::storage
