// A minimal XML reader for the picture tests: elements, attributes, text, comments, the XML declaration and
// a DOCTYPE; entities &amp; &lt; &gt; &quot; &apos; and &#N; / &#xN;. Anything malformed (unclosed or
// mismatched tags, bad attributes, stray '<' or '&', text after the root) throws XmlError with the offset.
// It checks well-formedness, not validity, which is what "the SVG parses as XML" means for the tests.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dualpipe::test {

struct XmlError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;
  std::vector<std::unique_ptr<XmlElement>> children;
  std::string text;  // all character data directly inside, concatenated

  bool has(std::string_view key) const {
    for (const auto& [k, v] : attributes)
      if (k == key) return true;
    return false;
  }
  const std::string& attr(std::string_view key) const {
    for (const auto& [k, v] : attributes)
      if (k == key) return v;
    throw XmlError("<" + name + "> has no attribute '" + std::string(key) + "'");
  }
  double number(std::string_view key) const {
    const std::string& v = attr(key);
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0') throw XmlError("attribute " + std::string(key) + "='" + v + "' is not a number");
    return d;
  }
  // True when the class attribute holds the word.
  bool has_class(std::string_view word) const {
    if (!has("class")) return false;
    const std::string& c = attr("class");
    std::size_t pos = 0;
    while (pos < c.size()) {
      const std::size_t space = std::min(c.find(' ', pos), c.size());
      if (std::string_view(c).substr(pos, space - pos) == word) return true;
      pos = space + 1;
    }
    return false;
  }
  // All descendants (depth first, document order) that satisfy pred.
  template <typename Pred>
  void collect(Pred&& pred, std::vector<const XmlElement*>& out) const {
    for (const auto& child : children) {
      if (pred(*child)) out.push_back(child.get());
      child->collect(pred, out);
    }
  }
  std::vector<const XmlElement*> find_all(std::string_view element_name) const {
    std::vector<const XmlElement*> out;
    collect([&](const XmlElement& e) { return e.name == element_name; }, out);
    return out;
  }
  // Text of this element and all its descendants.
  std::string all_text() const {
    std::string out = text;
    for (const auto& child : children) out += child->all_text();
    return out;
  }
};

class XmlReader {
 public:
  static std::unique_ptr<XmlElement> parse(std::string_view text) {
    XmlReader reader(text);
    reader.skip_misc();
    if (reader.pos_ >= text.size() || text[reader.pos_] != '<') reader.fail("expected the root element");
    auto root = reader.element();
    reader.skip_misc();
    if (reader.pos_ != text.size()) reader.fail("content after the root element");
    return root;
  }

 private:
  explicit XmlReader(std::string_view text) : s_(text) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw XmlError("XML error at offset " + std::to_string(pos_) + ": " + what);
  }
  bool starts(std::string_view prefix) const { return s_.substr(pos_, prefix.size()) == prefix; }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  void skip_past(std::string_view end) {
    const std::size_t at = s_.find(end, pos_);
    if (at == std::string_view::npos) fail("unterminated construct, expected '" + std::string(end) + "'");
    pos_ = at + end.size();
  }
  // Whitespace, comments, the declaration and a DOCTYPE around the root.
  void skip_misc() {
    for (;;) {
      skip_space();
      if (starts("<?")) skip_past("?>");
      else if (starts("<!--")) skip_past("-->");
      else if (starts("<!DOCTYPE")) skip_past(">");
      else return;
    }
  }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':' || c == '.';
  }
  std::string name() {
    const std::size_t begin = pos_;
    while (pos_ < s_.size() && name_char(s_[pos_])) ++pos_;
    if (pos_ == begin) fail("expected a name");
    return std::string(s_.substr(begin, pos_ - begin));
  }
  std::string decode(std::string_view raw) {
    std::string out;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '<') fail("'<' inside text or an attribute value");
      if (raw[i] != '&') {
        out += raw[i];
        continue;
      }
      const std::size_t semi = raw.find(';', i);
      if (semi == std::string_view::npos) fail("'&' without ';'");
      const std::string_view entity = raw.substr(i + 1, semi - i - 1);
      if (entity == "amp") out += '&';
      else if (entity == "lt") out += '<';
      else if (entity == "gt") out += '>';
      else if (entity == "quot") out += '"';
      else if (entity == "apos") out += '\'';
      else if (!entity.empty() && entity[0] == '#') {
        const bool hex = entity.size() > 1 && entity[1] == 'x';
        const long code = std::strtol(std::string(entity.substr(hex ? 2 : 1)).c_str(), nullptr, hex ? 16 : 10);
        if (code <= 0) fail("bad character reference &" + std::string(entity) + ";");
        if (code < 0x80) out += static_cast<char>(code);
        else out += '?';  // the tests only compare ASCII
      } else {
        fail("unknown entity &" + std::string(entity) + ";");
      }
      i = semi;
    }
    return out;
  }
  std::unique_ptr<XmlElement> element() {
    ++pos_;  // '<'
    auto e = std::make_unique<XmlElement>();
    e->name = name();
    for (;;) {
      skip_space();
      if (pos_ >= s_.size()) fail("unterminated start tag <" + e->name + ">");
      if (starts("/>")) {
        pos_ += 2;
        return e;
      }
      if (s_[pos_] == '>') {
        ++pos_;
        break;
      }
      std::string key = name();
      if (e->has(key)) fail("duplicate attribute '" + key + "' on <" + e->name + ">");
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '=') fail("expected '=' after attribute " + key);
      ++pos_;
      skip_space();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) fail("attribute value must be quoted");
      const char quote = s_[pos_++];
      const std::size_t end = s_.find(quote, pos_);
      if (end == std::string_view::npos) fail("unterminated attribute value");
      e->attributes.emplace_back(std::move(key), decode(s_.substr(pos_, end - pos_)));
      pos_ = end + 1;
    }
    for (;;) {  // content
      const std::size_t lt = s_.find('<', pos_);
      if (lt == std::string_view::npos) fail("element <" + e->name + "> is never closed");
      e->text += decode(s_.substr(pos_, lt - pos_));
      pos_ = lt;
      if (starts("<!--")) {
        skip_past("-->");
      } else if (starts("<![CDATA[")) {
        const std::size_t begin = pos_ + 9;
        skip_past("]]>");
        e->text += std::string(s_.substr(begin, pos_ - 3 - begin));
      } else if (starts("</")) {
        pos_ += 2;
        const std::string closing = name();
        if (closing != e->name) fail("</" + closing + "> closes <" + e->name + ">");
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != '>') fail("expected '>' after </" + closing);
        ++pos_;
        return e;
      } else {
        e->children.push_back(element());
      }
    }
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

}  // namespace dualpipe::test
