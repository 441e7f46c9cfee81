// The test-side XML reader must itself reject malformed XML, or "the SVG parses" would prove nothing.
#include <gtest/gtest.h>

#include "viz/xml_reader.h"

namespace dualpipe::test {
namespace {

TEST(XmlReader, ReadsElementsAttributesAndText) {
  const auto root = XmlReader::parse(
      "<?xml version=\"1.0\"?>\n<!-- c --><svg a=\"1\" b='x &amp; y'><g class=\"cell F\"><text>4&lt;5</text></g>"
      "<rect/></svg>\n");
  EXPECT_EQ(root->name, "svg");
  EXPECT_EQ(root->attr("b"), "x & y");
  EXPECT_EQ(root->number("a"), 1);
  ASSERT_EQ(root->children.size(), 2u);
  EXPECT_TRUE(root->children[0]->has_class("F"));
  EXPECT_FALSE(root->children[0]->has_class("cel"));
  EXPECT_EQ(root->all_text(), "4<5");
}

TEST(XmlReader, RejectsMalformedXml) {
  for (const char* bad : {"<a>", "<a></b>", "<a><b></a></b>", "<a x=1/>", "<a x=\"1\" x=\"2\"/>", "<a>&bogus;</a>",
                          "<a>x & y</a>", "<a/><b/>", "text", "<a x=\"<\"/>", "<a><!-- open </a>"}) {
    EXPECT_THROW(XmlReader::parse(bad), XmlError) << bad;
  }
}

}  // namespace
}  // namespace dualpipe::test
