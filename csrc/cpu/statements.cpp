// construct/semantic.py's per-message statement rules for ASCII text, the reference's regular
// expressions matched by hand with their exact semantics: \b is a change between word ([A-Za-z0-9_])
// and non-word, \s is what str.isspace accepts (\t \n \v \f \r \x1c-\x1f and space), re.I compares
// ASCII letters caselessly, a search is the leftmost match, a boolean match is whether any parse
// exists. Decoupler: decouple (first and second person rewritten to the speakers' names), each rule
// one left-to-right pass of non-overlapping matches over the previous rule's output (re.sub), the names
// put in as they are. StatementRules: message_statements (a message's sentences, filler dropped, facts
// said in questions kept, the most specific few, cut and decoupled, a photo's caption). The rules' word
// lists and alternatives come from the Python module (one copy of each); the caller keeps non-ASCII text
// and names on the reference.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "words.h"

namespace py = pybind11;

namespace {

inline bool is_word(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
inline bool is_space(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f); }
inline bool is_lower(unsigned char c) { return c >= 'a' && c <= 'z'; }
inline unsigned char uc(char c) { return static_cast<unsigned char>(c); }

// the end of \s* at i (i itself when there is none)
inline size_t skip_spaces(std::string_view s, size_t i) {
  while (i < s.size() && is_space(uc(s[i]))) ++i;
  return i;
}

// str.strip() (whitespace as str.isspace)
std::string_view strip(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && is_space(uc(s[a]))) ++a;
  while (b > a && is_space(uc(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

// \b at position i of s (before s[i]; i == s.size() is the end)
inline bool boundary(std::string_view s, size_t i) {
  bool before = i > 0 && is_word(static_cast<unsigned char>(s[i - 1]));
  bool after = i < s.size() && is_word(static_cast<unsigned char>(s[i]));
  return before != after;
}

inline bool at(std::string_view s, size_t i, std::string_view lit) { return s.substr(i, lit.size()) == lit; }

// rep with every "{key}" replaced by name (str.format of a template holding only that field)
std::string filled(const std::string& rep, std::string_view key, const std::string& name) {
  std::string out;
  for (size_t i = 0; i < rep.size();) {
    if (at(rep, i, key)) {
      out += name;
      i += key.size();
    } else {
      out += rep[i++];
    }
  }
  return out;
}

struct Rule {  // \b(?:form|form|...)\b -> rep (a "{s}" or "{o}" template)
  std::vector<std::string> forms;
  std::string rep;
};

// re.sub(r"\b(?:f1|f2|...)\b", rep, s): the forms tried in order at each position
std::string sub_forms(const std::string& s, const std::vector<std::string>& forms, const std::string& rep) {
  std::string out;
  out.reserve(s.size() + 16);
  std::string_view v(s);
  size_t i = 0;
  while (i < s.size()) {
    size_t len = 0;
    if (boundary(v, i)) {
      for (const auto& f : forms) {
        if (!f.empty() && at(v, i, f) && boundary(v, i + f.size())) {
          len = f.size();
          break;
        }
      }
    }
    if (len) {
      out += rep;
      i += len;
    } else {
      out += s[i++];
    }
  }
  return out;
}

bool contains_any(const std::string& s, const std::vector<std::string>& forms) {
  for (const auto& f : forms)
    if (s.find(f) != std::string::npos) return true;
  return false;
}

std::vector<Rule> rules_of(const py::list& table) {
  std::vector<Rule> out;
  for (const auto& item : table) {
    auto pair = item.cast<std::pair<std::vector<std::string>, std::string>>();
    out.push_back({std::move(pair.first), std::move(pair.second)});
  }
  return out;
}

class Decoupler {
 public:
  Decoupler(const py::list& first_fixed, const py::list& first_after, const py::list& second_fixed,
            const std::vector<std::string>& negatable, std::unordered_set<std::string> adverbs,
            std::unordered_set<std::string> no_s, std::unordered_set<std::string> past,
            std::unordered_map<std::string, std::string> irregular)
      : first_fixed_(rules_of(first_fixed)), first_after_(rules_of(first_after)),
        second_fixed_(rules_of(second_fixed)), negatable_(negatable), adverbs_(std::move(adverbs)),
        no_s_(std::move(no_s)), past_(std::move(past)), irregular_(std::move(irregular)) {
    for (const auto& a : adverbs_) {
      for (const auto& b : adverbs_)  // the verb rule's matcher relies on it (the regex would try each in turn)
        if (a != b && b.compare(0, a.size(), a) == 0)
          throw std::invalid_argument("Decoupler: adverb '" + a + "' is a prefix of '" + b + "'");
      if (a.empty()) throw std::invalid_argument("Decoupler: an empty adverb");
      adverb_list_.push_back(a);
    }
  }

  // decouple(s, speaker, other) for ASCII s, speaker and other (the ’ already made ')
  std::string operator()(const std::string& sentence, const std::string& speaker, const std::string& other) const {
    std::string s = sentence;
    if (person(s)) {
      for (const auto& r : first_fixed_)
        if (contains_any(s, r.forms)) s = sub_forms(s, r.forms, filled(r.rep, "{s}", speaker));
      s = sub_negation(s, speaker);
      for (const auto& r : first_after_)
        if (contains_any(s, r.forms)) s = sub_forms(s, r.forms, filled(r.rep, "{s}", speaker));
      if (s.find('I') != std::string::npos) {
        s = sub_first_verb(s, speaker);
        s = sub_forms(s, {"I"}, speaker);
      }
      for (const auto& r : second_fixed_)
        if (contains_any(s, r.forms)) s = sub_forms(s, r.forms, filled(r.rep, "{o}", other));
      s = sub_forms(s, {"You", "you"}, other);
    }
    if (s.find(speaker) == std::string::npos && s.find(other) == std::string::npos) s = speaker + " said: " + s;
    return std::string(strip(s));
  }

 private:
  // _PERSON.search: \b(?:I|[Mm]y|mine|me|[Yy]ou), no boundary needed after
  static bool person(std::string_view s) {
    static const char* heads[] = {"I", "My", "my", "mine", "me", "You", "you"};
    for (size_t i = 0; i < s.size(); ++i) {
      if (!boundary(s, i)) continue;
      for (const char* h : heads)
        if (at(s, i, h)) return true;
    }
    return false;
  }

  // \bI ((?:[a-z]+n't)|(?:can|will|...) not)\b -> "{s} \1"
  std::string sub_negation(const std::string& s, const std::string& speaker) const {
    std::string_view v(s);
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
      size_t end = 0;
      if (s[i] == 'I' && boundary(v, i) && i + 1 < s.size() && s[i + 1] == ' ') {
        size_t j = i + 2, r = j;
        while (r < s.size() && is_lower(static_cast<unsigned char>(s[r]))) ++r;
        for (size_t k = r; k > j && !end; --k)  // [a-z]+ greedy, giving back one letter at a time
          if (at(v, k, "n't") && boundary(v, k + 3)) end = k + 3;
        for (size_t a = 0; a < negatable_.size() && !end; ++a) {
          const std::string& w = negatable_[a];
          if (at(v, j, w) && at(v, j + w.size(), " not") && boundary(v, j + w.size() + 4)) end = j + w.size() + 4;
        }
      }
      if (end) {
        out += speaker;
        out += ' ';
        out.append(s, i + 2, end - i - 2);
        i = end;
      } else {
        out += s[i++];
      }
    }
    return out;
  }

  // the end of \s+[a-z]+\b at i, or 0
  static size_t tail(std::string_view s, size_t i) {
    size_t q = skip_spaces(s, i);
    if (q == i) return 0;
    size_t r = q;
    while (r < s.size() && is_lower(static_cast<unsigned char>(s[r]))) ++r;
    return r > q && boundary(s, r) ? r : 0;
  }

  // _FIRST_VERB: \bI((?:\s+(?:adverb|...))*\s+[a-z]+)\b, its verb given a third-person ending
  std::string sub_first_verb(const std::string& s, const std::string& speaker) const {
    std::string_view v(s);
    std::string out;
    size_t i = 0;
    std::vector<size_t> stops;
    while (i < s.size()) {
      size_t end = 0;
      if (s[i] == 'I' && boundary(v, i)) {
        stops.assign(1, i + 1);  // where each further (\s+ adverb) repetition ends
        for (;;) {
          size_t q = skip_spaces(v, stops.back());
          if (q == stops.back()) break;
          size_t len = 0;
          for (const auto& a : adverb_list_)  // no adverb is a prefix of another: at most one matches
            if (at(v, q, a)) len = a.size();
          if (!len) break;
          stops.push_back(q + len);
        }
        for (size_t k = stops.size(); k > 0 && !end; --k) end = tail(v, stops[k - 1]);
      }
      if (end) {
        out += speaker;
        bool done = false;
        for (size_t p = i + 1; p < end;) {  // group 1's words (str.split), the first non-adverb conjugated
          p = skip_spaces(v, p);
          size_t e = p;
          while (e < end && !is_space(static_cast<unsigned char>(s[e]))) ++e;
          std::string tok = s.substr(p, e - p);
          if (!done && !adverbs_.count(tok)) {
            tok = third_person(tok);
            done = true;
          }
          out += ' ';
          out += tok;
          p = e;
        }
        i = end;
      } else {
        out += s[i++];
      }
    }
    return out;
  }

  // _third_person for a lower-case verb
  std::string third_person(const std::string& verb) const {
    auto it = irregular_.find(verb);
    if (it != irregular_.end()) return it->second;
    size_t n = verb.size();
    auto ends = [&](std::string_view e) { return n >= e.size() && std::string_view(verb).substr(n - e.size()) == e; };
    if (no_s_.count(verb) || past_.count(verb) || ends("ed") || ends("s")) return verb;
    if (ends("ch") || ends("sh") || ends("x") || ends("o") || ends("z")) return verb + "es";
    if (n >= 2 && verb[n - 1] == 'y' && std::string_view("aeiou").find(verb[n - 2]) == std::string_view::npos)
      return verb.substr(0, n - 1) + "ies";
    return verb + "s";
  }

  std::vector<Rule> first_fixed_, first_after_, second_fixed_;
  std::vector<std::string> negatable_;
  std::unordered_set<std::string> adverbs_, no_s_, past_;
  std::vector<std::string> adverb_list_;
  std::unordered_map<std::string, std::string> irregular_;
};


// ---- the statement rules around decouple ---------------------------------------------------------

inline bool is_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool is_upper(unsigned char c) { return c >= 'A' && c <= 'Z'; }
inline bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
inline bool is_end(unsigned char c) { return c == '.' || c == '!' || c == '?'; }
inline unsigned char lower(unsigned char c) { return is_upper(c) ? static_cast<unsigned char>(c - 'A' + 'a') : c; }

// re.I: the lower-case literal lit at position i of s, ASCII letters compared caselessly
inline bool ci_at(std::string_view s, size_t i, std::string_view lit) {
  if (i > s.size() || s.size() - i < lit.size()) return false;
  for (size_t k = 0; k < lit.size(); ++k)
    if (lower(uc(s[i + k])) != uc(lit[k])) return false;
  return true;
}

std::string_view rstrip(std::string_view s) {  // str.rstrip()
  size_t b = s.size();
  while (b > 0 && is_space(uc(s[b - 1]))) --b;
  return s.substr(0, b);
}
std::string_view rstrip_chars(std::string_view s, std::string_view chars) {  // str.rstrip(chars)
  size_t b = s.size();
  while (b > 0 && chars.find(s[b - 1]) != std::string_view::npos) --b;
  return s.substr(0, b);
}

// str.split(): the whitespace-separated tokens
std::vector<std::string_view> split_ws(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = skip_spaces(s, 0); i < s.size(); i = skip_spaces(s, i)) {
    size_t j = i;
    while (j < s.size() && !is_space(uc(s[j]))) ++j;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::vector<std::string> lower_words(std::string_view what, const std::vector<std::string>& ws) {
  for (const auto& w : ws) {
    if (w.empty()) throw std::invalid_argument(std::string("StatementRules: an empty entry in ") + std::string(what));
    for (char c : w)
      if (uc(c) >= 128 || is_upper(uc(c)))
        throw std::invalid_argument("StatementRules: '" + w + "' in " + std::string(what) + " is not lower-case ASCII");
  }
  return ws;
}

class StatementRules {
 public:
  StatementRules(const Decoupler& decoupler, std::unordered_set<std::string> abbrev, std::unordered_set<std::string> stopwords,
                 std::unordered_set<std::string> reactions, const std::vector<std::string>& greetings,
                 const std::vector<std::string>& request_leads, const std::vector<std::string>& request_verbs,
                 const std::vector<std::string>& request_objects, const std::vector<std::string>& that_heads,
                 const std::vector<std::string>& ask_joins, const std::vector<std::string>& ask_verbs,
                 const std::vector<std::string>& interrogatives, int64_t assistant_min_words)
      : decouple_(decoupler), abbrev_(std::move(abbrev)), stop_(std::move(stopwords)), reactions_(std::move(reactions)),
        greetings_(lower_words("greetings", greetings)), leads_(lower_words("request_leads", request_leads)),
        verbs_(lower_words("request_verbs", request_verbs)), objects_(lower_words("request_objects", request_objects)),
        that_heads_(lower_words("that_heads", that_heads)), ask_joins_(lower_words("ask_joins", ask_joins)),
        ask_verbs_(lower_words("ask_verbs", ask_verbs)), interrogatives_(lower_words("interrogatives", interrogatives)),
        assistant_min_words_(assistant_min_words) {}

  // message_statements(text, speaker, other, assistant, cfg) for ASCII text and names
  std::vector<std::string> message(std::string_view text, const std::string& speaker, const std::string& other,
                                   bool assistant, int64_t min_words, int64_t max_per, int64_t max_words) const {
    std::vector<std::string> out;
    if (assistant && static_cast<int64_t>(split_ws(text).size()) < assistant_min_words_) return out;
    size_t start = 0;
    std::string_view cap;
    const bool photo = find_photo(text, start, cap);
    if (photo) text = text.substr(0, start);
    const std::vector<std::string> sentences = split_sentences(text);
    const bool has_cap = photo && !strip(cap).empty();
    std::vector<std::string> cands, asked;
    for (const auto& s : sentences)
      if (!is_filler(s, min_words)) cands.push_back(s);
    for (const auto& s : sentences) {
      if (s.empty() || s.back() != '?') continue;
      std::string f = stated_part(s);
      if (!is_filler(f, min_words)) asked.push_back(std::move(f));
    }
    const int64_t room = max_per - (has_cap ? 1 : 0);  // the caption counts
    std::vector<std::string> kept;
    if (room > 0)
      kept = most_specific(cands, room);
    else if (max_per == 0)
      kept = cands;
    const size_t more = max_per ? static_cast<size_t>(std::max<int64_t>(0, room - static_cast<int64_t>(kept.size())))
                                : asked.size();
    for (size_t k = 0; k < std::min(more, asked.size()); ++k) kept.push_back(asked[k]);
    const std::string said = speaker + " said: ";
    for (const auto& k : kept) {
      std::string s = decouple_(cut(k, max_words), speaker, other);
      if (assistant && s.compare(0, speaker.size(), speaker) != 0)  // an assistant's answer is attributed to it
        s = said + (s.compare(0, said.size(), said) == 0 ? s.substr(said.size()) : s);
      out.push_back(std::move(s));
    }
    if (has_cap) out.push_back(speaker + " shared a photo of " + std::string(caption(strip(cap))));
    return out;
  }

  std::vector<std::string> split_sentences(std::string_view text) const {
    std::vector<std::string> out;
    for (size_t ls = 0;;) {  // text.split("\n")
      size_t le = text.find('\n', ls);
      if (le == std::string_view::npos) le = text.size();
      const std::string_view line = text.substr(ls, le - ls);
      std::string cur;
      auto piece = [&](std::string_view p) {
        p = strip(p);
        if (p.empty()) return;
        if (!cur.empty()) {
          if (joins_next(cur)) {
            cur += ' ';
            cur.append(p);
            return;
          }
          out.push_back(cur);
        }
        cur.assign(p);
      };
      // _SENT_SPLIT: (?<=[.!?])\s+(?=[A-Z0-9"']), matches left to right
      size_t ps = 0;
      for (size_t i = 1; i < line.size();) {
        if (is_end(uc(line[i - 1])) && is_space(uc(line[i]))) {
          const size_t k = skip_spaces(line, i);
          const unsigned char c = k < line.size() ? uc(line[k]) : 0;
          if (is_upper(c) || is_digit(c) || c == '"' || c == '\'') {
            piece(line.substr(ps, i - ps));
            ps = i = k;
            continue;
          }
          i = k;
          continue;
        }
        ++i;
      }
      piece(line.substr(ps));
      if (!cur.empty()) out.push_back(cur);
      if (le == text.size()) break;
      ls = le + 1;
    }
    return out;
  }

  bool is_filler(std::string_view s, int64_t min_words) const {
    const std::string_view r = rstrip(s);
    if (!r.empty() && r.back() == '?') return true;
    int64_t n = 0, content = 0;
    std::string w;
    xmem::scan_words(s.size(), [&](size_t i) { return uc(s[i]); }, w, [&](const std::string& word) {
      ++n;
      if (word.size() > 1 && !stop_.count(word) && !reactions_.count(word)) ++content;
    });
    if (n < min_words || content < 2) return true;
    const std::string_view t = strip(s);
    return greeting_from(t, 0) || request_from(t, 0);
  }

  std::string stated_part(std::string_view sentence) const {
    const std::string_view s = strip(sentence);
    if (s.empty() || s.back() != '?') return std::string(s);
    const size_t n = s.size();
    // _THAT_CLAUSE: \b(?:heads)\s+that\s+(?P<fact>.+?)[?.!]*$
    for (size_t i = 0; i < n; ++i) {
      if (!boundary(s, i)) continue;
      for (const auto& h : that_heads_) {
        if (!ci_at(s, i, h)) continue;
        const size_t p = i + h.size(), q = skip_spaces(s, p);
        if (q == p || !ci_at(s, q, "that")) continue;
        const size_t r = skip_spaces(s, q + 4);
        if (r == q + 4 || r >= n) continue;
        size_t t = n;
        while (t > 0 && is_end(uc(s[t - 1]))) --t;
        const std::string_view lazy = s.substr(r, (t > r ? t : r + 1) - r);  // .+? up to the closing [?.!]*
        if (lazy.find('\n') != std::string_view::npos) continue;  // . takes no line break
        const std::string_view fact = rstrip_chars(strip(lazy), ",;");
        std::string out;
        if (!fact.empty()) {
          out += static_cast<char>(is_alpha(uc(fact[0])) && !is_upper(uc(fact[0])) ? fact[0] - 'a' + 'A' : fact[0]);
          out.append(fact.substr(1));
        }
        return out + ".";
      }
    }
    // _ASK_YOU: [,;:-]\s*(?:so\s+|and\s+|but\s+)?(?:verbs)\s+you\b, the leftmost
    for (size_t i = 0; i < n; ++i) {
      const char c = s[i];
      if (c != ',' && c != ';' && c != ':' && c != '-') continue;
      if (!ask_from(s, i + 1)) continue;
      if (i == 0) return std::string(s);
      const std::string_view head = strip(s.substr(0, i));
      if (interrogative(head)) return std::string(s);
      return std::string(rstrip_chars(head, ",;")) + ".";
    }
    return std::string(s);
  }

  int64_t specificity(std::string_view s) const {
    std::set<std::string> content, numbers;
    std::set<std::string_view> names;
    std::string w;
    xmem::scan_words(s.size(), [&](size_t i) { return uc(s[i]); }, w, [&](const std::string& word) {
      if (word.size() > 1 && !stop_.count(word) && !reactions_.count(word)) content.insert(word);
      if (std::any_of(word.begin(), word.end(), [](char ch) { return is_digit(uc(ch)); })) numbers.insert(word);
    });
    // _NAME: (?<!^)(?<![.!?]\s)\b[A-Z][a-z]+, findall
    for (size_t i = 1; i < s.size();) {
      if (is_upper(uc(s[i])) && !is_word(uc(s[i - 1])) && !(i >= 2 && is_end(uc(s[i - 2])) && is_space(uc(s[i - 1])))) {
        size_t j = i + 1;
        while (j < s.size() && is_lower(uc(s[j]))) ++j;
        if (j > i + 1) {
          names.insert(s.substr(i, j - i));
          i = j;
          continue;
        }
      }
      ++i;
    }
    return static_cast<int64_t>(content.size() + names.size() + numbers.size());
  }

 private:
  // _PHOTO.search: \s*\[shares a photo: (?P<cap>[^\]]*)\]\s*$ -> the match's start and the caption
  static bool find_photo(std::string_view t, size_t& start, std::string_view& cap) {
    static constexpr std::string_view lit = "[shares a photo: ";
    size_t e = t.size();
    while (e > 0 && is_space(uc(t[e - 1]))) --e;
    if (e == 0 || t[e - 1] != ']') return false;
    const size_t close = e - 1;
    const size_t prev = close == 0 ? std::string_view::npos : t.rfind(']', close - 1);
    const size_t j = t.find(lit, prev == std::string_view::npos ? 0 : prev + 1);  // the caption holds no ]
    if (j == std::string_view::npos || j + lit.size() > close) return false;
    start = j;
    while (start > 0 && is_space(uc(t[start - 1]))) --start;
    cap = t.substr(j + lit.size(), close - j - lit.size());
    return true;
  }

  // re.sub(r"^(a )?(photo|picture|image) of ", "", caption)
  static std::string_view caption(std::string_view c) {
    for (size_t a : {size_t(2), size_t(0)}) {
      if (a && !at(c, 0, "a ")) continue;
      for (std::string_view w : {"photo", "picture", "image"})
        if (at(c, a, w) && at(c, a + w.size(), " of ")) return c.substr(a + w.size() + 4);
    }
    return c;
  }

  // a piece ending in a title, abbreviation or initial joins the next: last[:-1].lower() in _ABBREV or
  // re.fullmatch(r"[A-Z]\.", last), last the current sentence's last word
  bool joins_next(std::string_view cur) const {
    size_t b = cur.size();
    while (b > 0 && !is_space(uc(cur[b - 1]))) --b;
    const std::string_view last = cur.substr(b);
    if (last.size() == 2 && is_upper(uc(last[0])) && last[1] == '.') return true;
    std::string low(last.substr(0, last.empty() ? 0 : last.size() - 1));
    for (char& ch : low) ch = static_cast<char>(lower(uc(ch)));
    return abbrev_.count(low) > 0;
  }

  // _GREETING.match: ^(?:(?:greetings)\b[\s,!.]*)+(?:[A-Z][a-z]+)?[\s,!.]*$ under re.I, from pos
  static bool greeting_punct(unsigned char c) { return is_space(c) || c == ',' || c == '!' || c == '.'; }
  static bool punct_to_end(std::string_view s, size_t p) {
    while (p < s.size() && greeting_punct(uc(s[p]))) ++p;
    return p == s.size();
  }
  // each parse as a position reached after one more repetition, visited once: no recursion, so no C
  // stack limit whatever the text (re's own matcher keeps its backtracking on the heap too)
  template <typename Step>
  static bool reaches(std::string_view s, size_t pos, Step&& step) {
    std::vector<char> seen(s.size() + 1, 0);
    std::vector<size_t> todo{pos};
    seen[pos] = 1;
    while (!todo.empty()) {
      const size_t p = todo.back();
      todo.pop_back();
      bool done = false;
      step(p, done, [&](size_t q) {
        if (!seen[q]) seen[q] = 1, todo.push_back(q);
      });
      if (done) return true;
    }
    return false;
  }

  bool greeting_from(std::string_view s, size_t pos) const {
    return reaches(s, pos, [&](size_t at_, bool& done, auto&& next) {
      for (const auto& g : greetings_) {
        if (!ci_at(s, at_, g) || !boundary(s, at_ + g.size())) continue;
        size_t p = at_ + g.size();
        while (p < s.size() && greeting_punct(uc(s[p]))) ++p;
        size_t q = p;
        while (q < s.size() && is_alpha(uc(s[q]))) ++q;
        if (punct_to_end(s, p) || (q - p >= 2 && punct_to_end(s, q))) {
          done = true;
          return;
        }
        next(p);  // another greeting from p
      }
    });
  }

  // _REQUEST.match: ^(?:(?:leads)[, ]+)*(?:verbs)\s+(?:objects)\b under re.I, from pos
  bool request_from(std::string_view s, size_t pos) const {
    return reaches(s, pos, [&](size_t at_, bool& done, auto&& next) {
      for (const auto& v : verbs_) {
        if (!ci_at(s, at_, v)) continue;
        const size_t q = skip_spaces(s, at_ + v.size());
        if (q == at_ + v.size()) continue;
        for (const auto& o : objects_)
          if (ci_at(s, q, o) && boundary(s, q + o.size())) {
            done = true;
            return;
          }
      }
      for (const auto& l : leads_) {
        if (!ci_at(s, at_, l)) continue;
        size_t q = at_ + l.size();
        while (q < s.size() && (s[q] == ',' || s[q] == ' ')) ++q;
        if (q > at_ + l.size()) next(q);
      }
    });
  }

  // the rest of _ASK_YOU after its punctuation: \s*(?:so\s+|and\s+|but\s+)?(?:verbs)\s+you\b under re.I
  bool ask_from(std::string_view s, size_t p) const {
    const size_t p1 = skip_spaces(s, p);
    if (ask_verb(s, p1)) return true;
    for (const auto& j : ask_joins_) {
      if (!ci_at(s, p1, j)) continue;
      const size_t q = skip_spaces(s, p1 + j.size());
      if (q > p1 + j.size() && ask_verb(s, q)) return true;
    }
    return false;
  }
  bool ask_verb(std::string_view s, size_t p) const {
    for (const auto& v : ask_verbs_) {
      if (!ci_at(s, p, v)) continue;
      const size_t q = skip_spaces(s, p + v.size());
      if (q > p + v.size() && ci_at(s, q, "you") && boundary(s, q + 3)) return true;
    }
    return false;
  }

  // _INTERROGATIVE.match: ^(?:words)\b under re.I
  bool interrogative(std::string_view head) const {
    for (const auto& w : interrogatives_)
      if (ci_at(head, 0, w) && boundary(head, w.size())) return true;
    return false;
  }

  // most_specific: the cap most specific sentences (ties: the earlier), in their order
  std::vector<std::string> most_specific(const std::vector<std::string>& sentences, int64_t cap) const {
    if (cap <= 0 || static_cast<int64_t>(sentences.size()) <= cap) return sentences;
    std::vector<std::pair<int64_t, size_t>> ranked;  // (-specificity, position)
    for (size_t i = 0; i < sentences.size(); ++i) ranked.emplace_back(-specificity(sentences[i]), i);
    std::sort(ranked.begin(), ranked.end());
    std::vector<size_t> keep;
    for (int64_t r = 0; r < cap; ++r) keep.push_back(ranked[static_cast<size_t>(r)].second);
    std::sort(keep.begin(), keep.end());
    std::vector<std::string> out;
    for (size_t i : keep) out.push_back(sentences[i]);
    return out;
  }

  // _cut: at most max_words words (str.split), " ..." after a cut
  static std::string cut(const std::string& sentence, int64_t max_words) {
    const std::vector<std::string_view> ws = split_ws(sentence);
    const int64_t n = static_cast<int64_t>(ws.size());
    if (n <= max_words) return sentence;
    const int64_t k = max_words < 0 ? std::max<int64_t>(0, n + max_words) : max_words;  // ws[:k]
    std::string out;
    for (int64_t i = 0; i < k; ++i) {
      if (i) out += ' ';
      out.append(ws[static_cast<size_t>(i)]);
    }
    return out + " ...";
  }

  Decoupler decouple_;
  std::unordered_set<std::string> abbrev_, stop_, reactions_;
  std::vector<std::string> greetings_, leads_, verbs_, objects_, that_heads_, ask_joins_, ask_verbs_, interrogatives_;
  int64_t assistant_min_words_;
};

// An exact str holding only ASCII, as a view of its bytes; nullopt-like false otherwise.
bool ascii_view(PyObject* o, std::string_view& out) {
  if (!PyUnicode_CheckExact(o) || !PyUnicode_IS_ASCII(o)) return false;
  out = std::string_view(reinterpret_cast<const char*>(PyUnicode_1BYTE_DATA(o)), static_cast<size_t>(PyUnicode_GET_LENGTH(o)));
  return true;
}

std::string_view ascii_arg(const py::handle& o) {
  std::string_view v;
  if (!ascii_view(o.ptr(), v)) throw py::value_error("expected an ASCII str");
  return v;
}

py::object new_str(std::string_view s) {
  PyObject* o = PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

// message_statements over a conversation's messages: per message its statements (a list of str), or
// None where its text, speaker or other is not an ASCII str (the caller runs the reference there)
py::list statements_of(const StatementRules& rules, const py::list& texts, const py::list& speakers, const py::list& others,
                       const py::list& assistant, int64_t min_words, int64_t max_per, int64_t max_words) {
  const size_t n = texts.size();
  if (speakers.size() != n || others.size() != n || assistant.size() != n)
    throw std::invalid_argument("StatementRules.statements: texts, speakers, others and assistant differ in length");
  for (int64_t v : {min_words, max_per, max_words})  // the rules add and subtract small counts to them
    if (v <= -(int64_t(1) << 62) || v >= (int64_t(1) << 62))
      throw std::invalid_argument("StatementRules.statements: min_words, max_per_message and max_statement_words must lie within +-2**62");
  py::list out(n);
  for (size_t i = 0; i < n; ++i) {
    // the flag first (its __bool__ may run Python code), and a reference held to each str whose bytes are viewed
    const int flag = PyObject_IsTrue(assistant[i].ptr());
    if (flag < 0) throw py::error_already_set();
    const py::object t = texts[i], sp = speakers[i], ot = others[i];
    std::string_view text, speaker, other;
    if (!ascii_view(t.ptr(), text) || !ascii_view(sp.ptr(), speaker) || !ascii_view(ot.ptr(), other)) {
      out[i] = py::none();
      continue;
    }
    const auto said = rules.message(text, std::string(speaker), std::string(other), flag == 1, min_words, max_per, max_words);
    py::list row(said.size());
    for (size_t k = 0; k < said.size(); ++k) row[k] = new_str(said[k]);
    out[i] = std::move(row);
  }
  return out;
}
}  // namespace

void register_statements(py::module_& m) {
  py::class_<Decoupler>(m, "Decoupler", "construct.semantic.decouple's rules for ASCII text (csrc/cpu/statements.cpp)")
      .def(py::init<const py::list&, const py::list&, const py::list&, const std::vector<std::string>&,
                    std::unordered_set<std::string>, std::unordered_set<std::string>, std::unordered_set<std::string>,
                    std::unordered_map<std::string, std::string>>(),
           py::arg("first_fixed"), py::arg("first_after"), py::arg("second_fixed"), py::arg("negatable"),
           py::arg("adverbs"), py::arg("no_s"), py::arg("past"), py::arg("irregular"))
      .def("__call__", &Decoupler::operator(), py::arg("sentence"), py::arg("speaker"), py::arg("other"),
           "decouple(sentence, speaker, other) for ASCII text and names");
  py::class_<StatementRules>(m, "StatementRules", "construct.semantic's per-message statement rules for ASCII text (csrc/cpu/statements.cpp)")
      .def(py::init<const Decoupler&, std::unordered_set<std::string>, std::unordered_set<std::string>, std::unordered_set<std::string>,
                    const std::vector<std::string>&, const std::vector<std::string>&, const std::vector<std::string>&,
                    const std::vector<std::string>&, const std::vector<std::string>&, const std::vector<std::string>&,
                    const std::vector<std::string>&, const std::vector<std::string>&, int64_t>(),
           py::arg("decoupler"), py::arg("abbrev"), py::arg("stopwords"), py::arg("reactions"), py::arg("greetings"),
           py::arg("request_leads"), py::arg("request_verbs"), py::arg("request_objects"), py::arg("that_heads"),
           py::arg("ask_joins"), py::arg("ask_verbs"), py::arg("interrogatives"), py::arg("assistant_min_words"))
      .def("statements", &statements_of, py::arg("texts"), py::arg("speakers"), py::arg("others"), py::arg("assistant"),
           py::arg("min_words"), py::arg("max_per_message"), py::arg("max_statement_words"),
           "message_statements of each message (None where a text or name is not ASCII)")
      // each rule on its own (the tests compare them with the regular expressions): ASCII str only
      .def("split_sentences", [](const StatementRules& r, const py::handle& t) { return r.split_sentences(ascii_arg(t)); },
           py::arg("text"))
      .def("is_filler", [](const StatementRules& r, const py::handle& t, int64_t mw) { return r.is_filler(ascii_arg(t), mw); },
           py::arg("sentence"), py::arg("min_words"))
      .def("stated_part", [](const StatementRules& r, const py::handle& t) { return r.stated_part(ascii_arg(t)); },
           py::arg("sentence"))
      .def("specificity", [](const StatementRules& r, const py::handle& t) { return r.specificity(ascii_arg(t)); },
           py::arg("sentence"));
}
