// The word rule of text.words (one copy, for every C++ file that splits text into words): runs of
// [A-Za-z0-9][A-Za-z0-9'-]*, lower-cased, trailing ' and - cut.
#pragma once

#include <cstddef>
#include <string>

namespace xmem {

inline bool word_start(unsigned char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool word_char(unsigned char c) { return word_start(c) || c == '\'' || c == '-'; }

// The word rule, once: over n characters read by at(i) (0 for anything that is not ASCII, so it
// never belongs to a word), each word lower-cased with trailing ' and - cut, fn(word) in order.
template <typename At, typename Fn>
void scan_words(size_t n, At&& at, std::string& w, Fn&& fn) {
  size_t i = 0;
  while (i < n) {
    if (!word_start(at(i))) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < n && word_char(at(j))) ++j;
    size_t end = j;
    while (end > i + 1 && (at(end - 1) == '\'' || at(end - 1) == '-')) --end;
    w.resize(end - i);
    for (size_t k = i; k < end; ++k) {
      const unsigned char c = at(k);
      w[k - i] = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    fn(w);
    i = j;
  }
}

}  // namespace xmem
