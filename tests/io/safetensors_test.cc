#include "io/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <numeric>

#include "core/error.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

using ::testing::HasSubstr;

// A raw safetensors file: length prefix, header text, `data_bytes` bytes of data.
std::string RawFile(const std::string& header, size_t data_bytes, uint64_t declared_len = ~0ull) {
  const uint64_t n = declared_len == ~0ull ? header.size() : declared_len;
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = char(uint8_t(n >> (8 * i)));
  s += header;
  s.append(data_bytes, '\x5a');
  return s;
}

std::vector<TensorInfo> Parse(const std::string& file,
                              std::map<std::string, std::string>* meta = nullptr) {
  return ParseSafetensorsHeader(reinterpret_cast<const uint8_t*>(file.data()), file.size(),
                                file.size(), "safetensors t.safetensors", meta);
}

// Parsing `file` must throw a tq::Error whose message contains every one of `parts`.
void ExpectError(const std::string& file, std::initializer_list<std::string> parts) {
  try {
    Parse(file);
    ADD_FAILURE() << "no error for header: " << file.substr(8, 200);
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
    EXPECT_THAT(e.what(), HasSubstr("[safetensors t.safetensors"));
  }
}

TEST(SafetensorsHeader, ParsesValidHeaderInFileOrder) {
  const std::string h = R"({"b":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]},)"
                        R"("a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]},)"
                        R"("__metadata__":{"format":"pt"}})";
  std::map<std::string, std::string> meta;
  const auto t = Parse(RawFile(h, 24), &meta);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "a");
  EXPECT_EQ(t[0].dtype, DType::BF16);
  EXPECT_EQ(t[0].offset, 8 + h.size());
  EXPECT_EQ(t[1].name, "b");
  EXPECT_EQ(t[1].shape, (Shape{2, 2}));
  EXPECT_EQ(t[1].nbytes, 16u);
  EXPECT_EQ(meta.at("format"), "pt");
}

TEST(SafetensorsHeader, ScalarsAndEmptyTensors) {
  const std::string h = R"({"s":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
                        R"("e":{"dtype":"F32","shape":[0,5],"data_offsets":[8,8]},)"
                        R"("e2":{"dtype":"F16","shape":[3,0],"data_offsets":[8,8]}})";
  const auto t = Parse(RawFile(h, 8));
  ASSERT_EQ(t.size(), 3u);
}

TEST(SafetensorsHeader, HostileHeaders) {
  const std::string ok = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  // Shorter than the 8-byte length.
  ExpectError(std::string("\x01\x00\x00", 3), {"too short"});
  ExpectError("", {"too short"});
  // Length beyond the 100 MB limit, or beyond the file.
  ExpectError(RawFile(ok, 8, 200'000'000), {"exceeds"});
  ExpectError(RawFile(ok, 8, ~0ull - 1), {"exceeds"});
  ExpectError(RawFile(ok, 8, ok.size() + 9), {"runs past the end"});
  // Truncated file: header intact, data missing.
  ExpectError(RawFile(ok, 4), {"tensor 'x'", "run past the data section"});
  // Not JSON / not an object.
  ExpectError(RawFile(R"({"x": {"dtype": )", 0), {"not valid JSON"});
  ExpectError(RawFile("[1,2,3]", 0), {"expected an object"});
  ExpectError(RawFile("  ", 0), {"not valid JSON"});
  ExpectError(RawFile(R"({"x": 3})", 0), {"tensor 'x'", "expected an object"});
  // dtype problems.
  ExpectError(RawFile(R"({"x":{"dtype":"F8_E5M2","shape":[2],"data_offsets":[0,2]}})", 2),
              {"tensor 'x'", "unsupported dtype 'F8_E5M2'", "BF16"});
  ExpectError(RawFile(R"({"x":{"dtype":7,"shape":[2],"data_offsets":[0,2]}})", 2),
              {"'dtype' is a number"});
  ExpectError(RawFile(R"({"x":{"shape":[2],"data_offsets":[0,2]}})", 2), {"missing 'dtype'"});
  // Shapes.
  ExpectError(RawFile(R"({"x":{"dtype":"U8","shape":[-2],"data_offsets":[0,2]}})", 2),
              {"tensor 'x'", "non-negative"});
  ExpectError(RawFile(R"({"x":{"dtype":"U8","shape":[2.5],"data_offsets":[0,2]}})", 2),
              {"non-negative integers"});
  ExpectError(RawFile(R"({"x":{"dtype":"U8","shape":"2","data_offsets":[0,2]}})", 2),
              {"expected an array"});
  ExpectError(RawFile(R"({"x":{"dtype":"U8","data_offsets":[0,2]}})", 2), {"missing 'shape'"});
  ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[4611686018427387904,8],)"
                      R"("data_offsets":[0,0]}})",
                      0),
              {"tensor 'x'", "overflows"});
  ExpectError(RawFile(R"({"x":{"dtype":"F64","shape":[4611686018427387904],)"
                      R"("data_offsets":[0,0]}})",
                      0),
              {"overflows"});
  ExpectError(RawFile(R"({"x":{"dtype":"U8","shape":[18446744073709551615],)"
                      R"("data_offsets":[0,0]}})",
                      0),
              {"non-negative integers"});
  // Shape vs bytes.
  ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
              {"tensor 'x'", "does not match"});
  // Offsets.
  ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8),
              {"begin 8 > end 0"});
  ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[100,108]}})", 8),
              {"run past the data section"});
  ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8),
              {"[begin, end]"});
  ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", 8),
              {"non-negative"});
  ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[2]}})", 8), {"missing 'data_offsets'"});
  ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                      12),
              {"tensor 'y'", "overlaps tensor 'x'"});
  // Duplicate names.
  ExpectError(RawFile(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                      R"("x":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                      2),
              {"tensor 'x'", "twice"});
  // Deep nesting is an error, not a stack overflow.
  ExpectError(RawFile(R"({"x":)" + std::string(200000, '[') + std::string(200000, ']') + "}", 0),
              {"tensor 'x'", "expected an object"});
  // Metadata must map strings to strings.
  ExpectError(RawFile(R"({"__metadata__":{"a":1}})", 0), {"'__metadata__' value of 'a'"});
  ExpectError(RawFile(R"({"__metadata__":[1]})", 0), {"'__metadata__' is a array"});
}

TEST(SafetensorsHeader, AvailableBytesShorterThanHeader) {
  const std::string f = RawFile(R"({"__metadata__":{}})", 0);
  EXPECT_THROW(ParseSafetensorsHeader(reinterpret_cast<const uint8_t*>(f.data()), 10, f.size(), "w",
                                      nullptr),
               Error);
}

template <typename T>
std::vector<T> Iota(size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = T(i * 3 + 1);
  return v;
}

TEST(Safetensors, WriterReaderRoundTripAllDTypes) {
  test::TempDir dir;
  const std::string path = dir.file("m.safetensors");
  struct Item {
    std::string name;
    DType dtype;
    Shape shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Item> items;
  const DType all[] = {DType::BOOL, DType::F64, DType::F16, DType::F32, DType::BF16, DType::I64,
                       DType::I32,  DType::I16, DType::I8,  DType::U8,  DType::U32};
  int k = 0;
  for (DType d : all) {
    Shape shape{3, 1 + k % 3};  // odd sizes, so alignment depends on the writer's layout
    std::vector<uint8_t> b(size_t(NumElements(shape)) * DTypeSize(d));
    for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(i * 7 + k);
    if (d == DType::BOOL)
      for (auto& x : b) x &= 1;
    items.push_back({std::string("t.") + std::string(DTypeName(d)), d, shape, b});
    ++k;
  }
  items.push_back({"empty", DType::F32, {0, 4}, {}});
  {
    SafetensorsWriter w(path, {{"format", "pt"}, {"note", "round trip"}});
    for (const auto& it : items) w.Declare(it.name, it.dtype, it.shape);
    for (const auto& it : items) {
      if (it.bytes.size() > 3) {  // exercise chunked writes
        w.Write(it.bytes.data(), 3);
        w.Write(it.bytes.data() + 3, it.bytes.size() - 3);
      } else {
        w.WriteTensor(it.name, it.bytes.data(), it.bytes.size());
      }
    }
    w.Finish();
  }
  // Header padded to 8 bytes.
  const std::string raw = ReadFileToString(path);
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ(n % 8, 0u);

  auto f = SafetensorsFile::Open(path);
  EXPECT_EQ(f->tensors().size(), items.size());
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->metadata().at("note"), "round trip");
  for (const auto& it : items) {
    SCOPED_TRACE(it.name);
    ASSERT_TRUE(f->Has(it.name));
    const TensorView v = f->View(it.name);
    EXPECT_EQ(v.dtype, it.dtype);
    EXPECT_EQ(v.shape, it.shape);
    ASSERT_EQ(v.nbytes(), it.bytes.size());
    if (!it.bytes.empty()) {
      EXPECT_EQ(std::memcmp(v.data, it.bytes.data(), it.bytes.size()), 0);
      EXPECT_EQ(f->Info(it.name).offset % DTypeSize(it.dtype), 0u) << "misaligned";
    }
  }
  // ReadHeader sees the same thing without mapping.
  std::map<std::string, std::string> meta;
  const auto hdr = SafetensorsFile::ReadHeader(path, &meta);
  ASSERT_EQ(hdr.size(), f->tensors().size());
  for (size_t i = 0; i < hdr.size(); ++i) {
    EXPECT_EQ(hdr[i].name, f->tensors()[i].name);
    EXPECT_EQ(hdr[i].offset, f->tensors()[i].offset);
  }
  EXPECT_EQ(meta.size(), 2u);
  // No temp file left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) ++files, (void)e;
  EXPECT_EQ(files, 1);
}

TEST(Safetensors, ValuesSurviveAsFloats) {
  test::TempDir dir;
  const std::string path = dir.file("f.safetensors");
  const auto v = Iota<float>(10);
  {
    SafetensorsWriter w(path);
    w.Declare("w", DType::F32, {2, 5});
    w.WriteTensor("w", v.data(), v.size() * 4);
    w.Finish();
  }
  auto f = SafetensorsFile::Open(path);
  std::vector<float> out(10);
  ToF32(f->View("w"), out.data());
  EXPECT_EQ(out, v);
  EXPECT_THROW(f->View("nope"), Error);
  try {
    f->Info("nope");
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tensor 'nope'"));
  }
}

TEST(SafetensorsWriter, WrongByteCountsAreErrors) {
  test::TempDir dir;
  const std::string path = dir.file("w.safetensors");
  const std::vector<uint8_t> buf(64, 1);
  {
    SafetensorsWriter w(path);
    w.Declare("a", DType::F32, {4});
    w.Declare("b", DType::U8, {3});
    EXPECT_THROW(w.Declare("a", DType::F32, {1}), Error);
    EXPECT_THROW(w.WriteTensor("b", buf.data(), 3), Error);   // out of order
    EXPECT_THROW(w.WriteTensor("a", buf.data(), 15), Error);  // wrong size
    EXPECT_THROW(w.Write(buf.data(), 17), Error);             // chunk past the tensor
    w.Write(buf.data(), 10);
    try {
      w.Finish();
      ADD_FAILURE() << "Finish with missing bytes";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("tensor 'a'"));
      EXPECT_THAT(e.what(), HasSubstr("10 of its 16"));
    }
    EXPECT_THROW(w.Declare("c", DType::U8, {1}), Error);  // after writing started
  }
  // The failed writer left nothing: no target, no temp file.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(SafetensorsWriter, DestructorWithoutFinishRemovesTempFile) {
  test::TempDir dir;
  const std::string path = dir.file("x.safetensors");
  {
    SafetensorsWriter w(path);
    w.Declare("a", DType::U8, {4});
    const uint8_t b[4] = {1, 2, 3, 4};
    w.WriteTensor("a", b, 4);
    EXPECT_FALSE(std::filesystem::is_empty(dir.path()));  // the temp file
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(SafetensorsWriter, ReplacesExistingFileAtomically) {
  test::TempDir dir;
  const std::string path = dir.file("x.safetensors");
  test::WriteFile(path, "old contents");
  SafetensorsWriter w(path);
  w.Declare("a", DType::U8, {1});
  const uint8_t b = 9;
  w.WriteTensor("a", &b, 1);
  EXPECT_EQ(ReadFileToString(path), "old contents");  // untouched until Finish
  w.Finish();
  EXPECT_EQ(*SafetensorsFile::Open(path)->View("a").bytes(), 9);
}

TEST(SafetensorsFile, HostileFilesOnDisk) {
  test::TempDir dir;
  const std::string p = dir.file("bad.safetensors");
  const std::string ok = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  for (const std::string& content :
       {std::string(), std::string("abc"), RawFile(ok, 4), RawFile(ok, 8, 1ull << 40),
        RawFile(ok, 8, ok.size() + 100), RawFile("{", 0)}) {
    test::WriteFile(p, content);
    try {
      SafetensorsFile::Open(p);
      ADD_FAILURE() << "Open accepted " << content.size() << " bytes";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("[safetensors " + p));
    }
    EXPECT_THROW(SafetensorsFile::ReadHeader(p), Error);
  }
  test::WriteFile(p, RawFile(ok, 8));
  EXPECT_EQ(SafetensorsFile::Open(p)->tensors().size(), 1u);
  EXPECT_EQ(SafetensorsFile::ReadHeader(p).size(), 1u);
  EXPECT_THROW(SafetensorsFile::Open(dir.file("missing.safetensors")), Error);
  EXPECT_THROW(SafetensorsFile::ReadHeader(dir.file("missing.safetensors")), Error);
  EXPECT_THROW(SafetensorsFile::ReadHeader(dir.path().string()), Error);  // a directory
}

TEST(SafetensorsFile, ReadsSharedModel) {
  const std::string path = test::RequireFile(test::ModelDir("tq-llama-21m") + "/model.safetensors");
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f->Has("model.embed_tokens.weight"));
  const auto& e = f->Info("model.embed_tokens.weight");
  EXPECT_EQ(e.dtype, DType::BF16);
  EXPECT_EQ(e.shape, (Shape{8192, 512}));
  const auto hdr = SafetensorsFile::ReadHeader(path);
  EXPECT_EQ(hdr.size(), f->tensors().size());
}

}  // namespace
}  // namespace tq
