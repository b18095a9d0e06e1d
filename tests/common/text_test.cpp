#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/text.h"

namespace leap {
namespace {

TEST(CleanText, InvalidBytesBecomeReplacementCharactersAndJsonNeverThrows) {
  std::string bad = std::string("ok \xff\xfe end \xc3") + "\xe2\x82" + " \xed\xa0\x80 \xc0\xaf";
  std::string clean = clean_text(bad, 1 << 20);
  EXPECT_EQ(clean.find('\xff'), std::string::npos);
  EXPECT_NE(clean.find("ok \xEF\xBF\xBD\xEF\xBF\xBD end"), std::string::npos) << clean;
  nlohmann::json j = {{"feedback", clean}};
  EXPECT_NO_THROW((void)j.dump());  // dump throws type_error 316 on invalid UTF-8
  std::string valid = "gr\xC3\xBC\xC3\x9F \xE2\x82\xAC \xF0\x9F\x98\x80";  // 2-, 3- and 4-byte sequences
  EXPECT_EQ(clean_text(valid, 100), valid);
}

TEST(CleanText, CapsOnACharacterBoundaryAndSaysHowMuchWasCut) {
  std::string euros;
  for (int i = 0; i < 10000; ++i) euros += "\xE2\x82\xAC";  // 3 bytes each
  std::string c = clean_text(euros, 8192);
  EXPECT_LE(c.size(), 8192u);
  EXPECT_NE(c.find("more bytes cut]"), std::string::npos);
  std::string head = c.substr(0, c.find('\n'));
  EXPECT_EQ(head.size() % 3, 0u) << "cut inside a character";
  EXPECT_EQ(clean_text(head, 1 << 20), head);
  EXPECT_EQ(clean_text(std::string(16 << 20, 'x'), 8192).size() <= 8192, true);
}

}  // namespace
}  // namespace leap
