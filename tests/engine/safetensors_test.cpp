// The safetensors header parser on hand-built files (valid and broken), and the writer's layout.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/safetensors_writer.h"
#include "engine/util/error.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk {
namespace {

// 8-byte little-endian length + header text + `data_bytes` data bytes (0xAB).
std::vector<uint8_t> make_file(const std::string& header, size_t data_bytes,
                               int64_t length_override = -1) {
  const uint64_t n = length_override >= 0 ? static_cast<uint64_t>(length_override) : header.size();
  std::vector<uint8_t> f(8 + header.size() + data_bytes, 0xAB);
  for (int i = 0; i < 8; ++i) f[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(f.data() + 8, header.data(), header.size());
  return f;
}

SafetensorsHeader parse(const std::vector<uint8_t>& f) {
  return parse_safetensors_header(f, f.size(), "t.safetensors");
}

void expect_error(const std::vector<uint8_t>& f, std::initializer_list<std::string> parts) {
  try {
    parse(f);
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("t.safetensors"), std::string::npos) << msg;
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

TEST(SafetensorsHeader, ParsesTensorsAndMetadata) {
  const std::string h =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2,3],"data_offsets":[8,20]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"I8","shape":[0],"data_offsets":[20,20]}})";
  const auto f = make_file(h, 20);
  const SafetensorsHeader p = parse(f);
  EXPECT_EQ(p.header_length, h.size());
  EXPECT_EQ(p.data_start, 8 + h.size());
  EXPECT_EQ(p.metadata.at("format"), "pt");
  ASSERT_EQ(p.tensors.size(), 3u);
  EXPECT_EQ(p.tensors[0].name, "a");  // file order
  EXPECT_EQ(p.tensors[0].offset, p.data_start);
  EXPECT_EQ(p.tensors[1].name, "b");
  EXPECT_EQ(p.tensors[1].dtype, DType::BF16);
  EXPECT_EQ(p.tensors[1].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(p.tensors[1].offset, p.data_start + 8);
  EXPECT_EQ(p.tensors[1].nbytes, 12u);
  EXPECT_EQ(p.tensors[2].nbytes, 0u);
}

TEST(SafetensorsHeader, AllDtypes) {
  std::string h = "{";
  uint64_t off = 0;
  const std::vector<std::pair<std::string, int>> types = {
      {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"I8", 1},  {"U8", 1},  {"BF16", 2},
      {"F16", 2},     {"F32", 4},     {"I32", 4}, {"I64", 8}, {"BOOL", 1}};
  for (const auto& [name, size] : types) {
    if (off) h += ",";
    h += "\"t" + name + "\":{\"dtype\":\"" + name + "\",\"shape\":[3],\"data_offsets\":[" +
         std::to_string(off) + "," + std::to_string(off + 3 * size) + "]}";
    off += 3 * size;
  }
  h += "}";
  const auto p = parse(make_file(h, off));
  ASSERT_EQ(p.tensors.size(), types.size());
  for (size_t i = 0; i < types.size(); ++i)
    EXPECT_EQ(dtype_name(p.tensors[i].dtype), types[i].first);
}

TEST(SafetensorsHeader, TruncatedOrBadLength) {
  expect_error({1, 2, 3}, {"truncated", "8-byte"});
  expect_error(make_file("{}", 0, 1000), {"truncated", "1000"});
  expect_error(make_file("{}", 0, 0), {"header length 0"});
  expect_error(make_file("{}", 0, int64_t{1} << 40), {"header length", "outside"});
  auto f = make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  f.resize(f.size() - 2);  // the data section is cut short
  expect_error(f, {"tensor 'a'", "outside the data section"});
}

TEST(SafetensorsHeader, MalformedJson) {
  expect_error(make_file(R"({"a": )", 0), {"invalid JSON"});
  expect_error(make_file(R"([1,2])", 0), {"expected a JSON object"});
  expect_error(make_file(std::string(40, '[') + std::string(40, ']'), 0), {"nested deeper"});
  expect_error(make_file(R"({"a": 5})", 0), {"tensor 'a'", "expected an object"});
  expect_error(make_file(R"({"__metadata__": {"k": 1}})", 0), {"__metadata__.k"});
  expect_error(make_file(R"({"__metadata__": [1]})", 0), {"__metadata__"});
}

TEST(SafetensorsHeader, BadEntries) {
  auto entry = [](const std::string& body) { return make_file("{\"w\":" + body + "}", 16); };
  expect_error(entry(R"({"shape":[1],"data_offsets":[0,4]})"), {"tensor 'w'", "dtype missing"});
  expect_error(entry(R"({"dtype":"F64","shape":[1],"data_offsets":[0,8]})"),
               {"tensor 'w'", "unsupported dtype 'F64'"});
  expect_error(entry(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"),
               {"tensor 'w'", "non-negative"});
  expect_error(entry(R"({"dtype":"F32","shape":"1","data_offsets":[0,4]})"),
               {"tensor 'w'", "shape"});
  expect_error(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})"),
               {"tensor 'w'", "data_offsets"});
  expect_error(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[4,0]})"),
               {"tensor 'w'", "outside"});
  expect_error(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0,17]})"),
               {"tensor 'w'", "outside the data section of 16"});
  expect_error(entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})"),
               {"tensor 'w'", "holds 4 bytes", "need 8"});
  expect_error(entry(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})"),
               {"tensor 'w'", "overflow"});
  expect_error(entry(R"({"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]})"),
               {"tensor 'w'", "8 dimensions"});
}

TEST(SafetensorsHeader, OverlapsAreRejected) {
  const std::string h =
      R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  expect_error(make_file(h, 8), {"'x'", "'y'", "overlap"});
}

TEST(SafetensorsWriter, RoundTripsAlignedAndContiguous) {
  testing::TempDir dir;
  std::vector<TensorData> tensors = {
      {"one_byte", DType::U8, {3}, {1, 2, 3}},
      {"floats", DType::F32, {2}, std::vector<uint8_t>(8, 0x11)},
      {"halves", DType::BF16, {1, 3}, std::vector<uint8_t>(6, 0x22)},
      {"longs", DType::I64, {1}, std::vector<uint8_t>(8, 0x33)},
  };
  write_safetensors(dir / "x.safetensors", tensors, {{"format", "pt"}, {"k", "v"}});
  const SafetensorsFile f(dir / "x.safetensors");
  EXPECT_EQ(f.metadata().at("k"), "v");
  EXPECT_EQ(f.header().data_start % 8, 0u);
  ASSERT_EQ(f.tensors().size(), 4u);
  // Ordered by element size: I64, F32, BF16, U8; contiguous up to the end of the file.
  EXPECT_EQ(f.tensors()[0].name, "longs");
  EXPECT_EQ(f.tensors()[1].name, "floats");
  EXPECT_EQ(f.tensors()[2].name, "halves");
  EXPECT_EQ(f.tensors()[3].name, "one_byte");
  uint64_t expect_offset = f.header().data_start;
  for (const auto& e : f.tensors()) {
    EXPECT_EQ(e.offset, expect_offset);
    EXPECT_EQ(e.offset % dtype_size(e.dtype), 0u) << e.name;
    expect_offset += e.nbytes;
  }
  EXPECT_EQ(expect_offset, f.size());
  const SafetensorsEntry* b = f.find("one_byte");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(std::memcmp(f.data(*b), "\x01\x02\x03", 3), 0);
  EXPECT_EQ(f.find("nothing"), nullptr);
  EXPECT_EQ(f.header_bytes().size(), f.header().data_start);
}

TEST(SafetensorsWriter, ChunkedWritesAndAbandonedFile) {
  testing::TempDir dir;
  {
    SafetensorsWriter w(dir / "c.safetensors", {{"v", DType::U8, {4}}}, {});
    const uint8_t hi[2] = {3, 4}, lo[2] = {1, 2};
    w.write("v", hi, 2);
    w.write("v", lo, 0);
    w.commit();
  }
  const SafetensorsFile f(dir / "c.safetensors");
  EXPECT_EQ(std::memcmp(f.data(f.tensors()[0]), "\x01\x02\x03\x04", 4), 0);
  { SafetensorsWriter abandoned(dir / "d.safetensors", {{"v", DType::U8, {4}}}, {}); }
  EXPECT_FALSE(std::filesystem::exists(dir / "d.safetensors"));
}

TEST(SafetensorsFile, OpenErrorsNameTheFile) {
  testing::TempDir dir;
  EXPECT_THROW(SafetensorsFile(dir / "missing.safetensors"), IoError);
  testing::write_text(dir / "bad.safetensors", "xx");
  try {
    SafetensorsFile f(dir / "bad.safetensors");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos);
  }
}

}  // namespace
}  // namespace flashdesk
