#include "lm/safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "support/test_util.h"

namespace leap::lm {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const LeapError& e) {
    return e.what();
  }
  return "";
}

// A file made byte by byte as the format's specification describes it.
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header << data;
}

std::string floats(std::initializer_list<float> v) {
  return std::string(reinterpret_cast<const char*>(std::data(v)), v.size() * sizeof(float));
}

TEST(Safetensors, ReadsAFileWrittenToTheSpecification) {
  test::TempDir dir;
  const std::string p = dir.path() + "/spec.safetensors";
  write_raw(p,
            R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
            R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
            floats({1.5f, -2.0f, 7.25f}));
  SafetensorsFile f(p);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  auto a = f.tensor("a");
  ASSERT_EQ(a.sizes().vec(), (std::vector<int64_t>{2}));
  EXPECT_FLOAT_EQ(a[0].item<float>(), 1.5f);
  EXPECT_FLOAT_EQ(a[1].item<float>(), -2.0f);
  EXPECT_FLOAT_EQ(f.tensor("b")[0].item<float>(), 7.25f);
}

TEST(Safetensors, WriteThenReadKeepsEveryDtypeShapeAndValue) {
  test::TempDir dir;
  torch::manual_seed(3);
  std::map<std::string, torch::Tensor> t = {
      {"model.embed_tokens.weight", torch::randn({5, 3})},
      {"h16", torch::randn({4}).to(torch::kFloat16)},
      {"hbf", torch::randn({3, 2}).to(torch::kBFloat16)},
      {"scalar", torch::tensor(int64_t{42})},
      {"mask", torch::tensor({true, false, true})},
      {"empty", torch::zeros({0, 4})},
  };
  const std::string p = dir.path() + "/m.safetensors";
  write_safetensors(p, t, {{"note", "leap"}});
  SafetensorsFile f(p);
  EXPECT_EQ(f.metadata().at("note"), "leap");
  EXPECT_EQ(f.names().size(), t.size());
  for (const auto& [name, want] : t) {
    auto got = f.tensor(name);
    EXPECT_EQ(got.scalar_type(), want.scalar_type()) << name;
    EXPECT_EQ(got.sizes().vec(), want.sizes().vec()) << name;
    EXPECT_TRUE(torch::equal(got, want)) << name;
  }
  EXPECT_EQ(f.info("hbf").dtype, "BF16");
  // The data section starts 8-byte aligned, so float tensors view the mapping without a copy.
  std::ifstream in(p, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
}

TEST(Safetensors, ATensorOutlivesItsFileObject) {
  test::TempDir dir;
  const std::string p = dir.path() + "/m.safetensors";
  write_safetensors(p, {{"w", torch::arange(6, torch::kFloat32)}});
  torch::Tensor w;
  {
    SafetensorsFile f(p);
    w = f.tensor("w");
  }
  EXPECT_FLOAT_EQ(w.sum().item<float>(), 15.0f);  // the mapping lives as long as the view
  w.mul_(2);  // copy-on-write: the tensor changes, the file does not
  EXPECT_FLOAT_EQ(w.sum().item<float>(), 30.0f);
  EXPECT_FLOAT_EQ(SafetensorsFile(p).tensor("w").sum().item<float>(), 15.0f);
}

TEST(Safetensors, BadFilesNameTheFileTheTensorAndTheFault) {
  test::TempDir dir;
  const std::string p = dir.path() + "/bad.safetensors";
  auto open = [&] { SafetensorsFile f(p); };
  write_raw(p, R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", floats({1, 2}));
  auto e = error_of(open);
  EXPECT_NE(e.find(p), std::string::npos) << e;
  EXPECT_NE(e.find("tensor 'a'"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;

  write_raw(p, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", floats({1, 2}));
  EXPECT_NE(error_of(open).find("8 bytes for 3 F32 elements (12 expected)"), std::string::npos) << error_of(open);
  write_raw(p, R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", floats({1, 2}));
  EXPECT_NE(error_of(open).find("unknown dtype 'Q4'"), std::string::npos);
  write_raw(p, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            floats({1, 2, 3}));
  EXPECT_NE(error_of(open).find("overlap"), std::string::npos);
  write_raw(p, "{not json", "");
  EXPECT_NE(error_of(open).find("not a JSON object"), std::string::npos);
  write_raw(p, R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", floats({1}));
  EXPECT_NE(error_of(open).find("non-negative"), std::string::npos);
  {
    std::ofstream out(p, std::ios::binary);
    const std::string bytes("\x10\0\0\0\0\0\0\0{}", 10);  // says 16 header bytes, has 2
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  EXPECT_NE(error_of(open).find("the header says it is 16 bytes"), std::string::npos) << error_of(open);
  { std::ofstream out(p, std::ios::binary); out << "abc"; }
  EXPECT_NE(error_of(open).find("not a safetensors file"), std::string::npos);
  EXPECT_NE(error_of([&] { SafetensorsFile f(dir.path() + "/none.safetensors"); }).find("cannot open"), std::string::npos);
}

TEST(Safetensors, ShardedCheckpointsAreReadThroughTheirIndex) {
  test::TempDir dir;
  write_safetensors(dir.path() + "/model-00001-of-00002.safetensors", {{"a", torch::ones({2})}});
  write_safetensors(dir.path() + "/model-00002-of-00002.safetensors", {{"b", torch::full({3}, 2.0f)}});
  std::ofstream(dir.path() + "/model.safetensors.index.json")
      << R"({"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})";
  SafetensorsModel m(dir.path());
  EXPECT_EQ(m.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_FLOAT_EQ(m.tensor("b").sum().item<float>(), 6.0f);
  EXPECT_NE(error_of([&] { (void)m.tensor("c"); }).find("no tensor 'c'"), std::string::npos);
  std::ofstream(dir.path() + "/model.safetensors.index.json")
      << R"({"weight_map":{"a":"model-00002-of-00002.safetensors"}})";
  EXPECT_NE(error_of([&] { SafetensorsModel bad(dir.path()); }).find("which does not hold it"), std::string::npos);
  test::TempDir empty;
  EXPECT_NE(error_of([&] { SafetensorsModel none(empty.path()); }).find("neither model.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace leap::lm
