// construct/semantic.py's decouple (first and second person rewritten to the speakers' names) for
// ASCII text, the reference's regular expressions matched by hand with their exact semantics:
// \b is a change between word ([A-Za-z0-9_]) and non-word, \s is what str.isspace accepts
// (\t \n \v \f \r \x1c-\x1f and space), each rule one left-to-right pass of non-overlapping matches
// over the previous rule's output (re.sub), the names put in as they are. The rules' word lists and
// whole-word forms come from the Python module (one copy of each); the caller keeps non-ASCII text and
// names on the reference.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

inline bool is_word(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
inline bool is_space(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f); }
inline bool is_lower(unsigned char c) { return c >= 'a' && c <= 'z'; }

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
    size_t a = 0, b = s.size();
    while (a < b && is_space(static_cast<unsigned char>(s[a]))) ++a;
    while (b > a && is_space(static_cast<unsigned char>(s[b - 1]))) --b;
    return s.substr(a, b - a);
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

  // the end of \s+ at i (i itself when there is none)
  static size_t spaces(std::string_view s, size_t i) {
    while (i < s.size() && is_space(static_cast<unsigned char>(s[i]))) ++i;
    return i;
  }

  // the end of \s+[a-z]+\b at i, or 0
  static size_t tail(std::string_view s, size_t i) {
    size_t q = spaces(s, i);
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
          size_t q = spaces(v, stops.back());
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
          p = spaces(v, p);
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

}  // namespace

void register_decouple(py::module_& m) {
  py::class_<Decoupler>(m, "Decoupler", "construct.semantic.decouple's rules for ASCII text (csrc/cpu/decouple.cpp)")
      .def(py::init<const py::list&, const py::list&, const py::list&, const std::vector<std::string>&,
                    std::unordered_set<std::string>, std::unordered_set<std::string>, std::unordered_set<std::string>,
                    std::unordered_map<std::string, std::string>>(),
           py::arg("first_fixed"), py::arg("first_after"), py::arg("second_fixed"), py::arg("negatable"),
           py::arg("adverbs"), py::arg("no_s"), py::arg("past"), py::arg("irregular"))
      .def("__call__", &Decoupler::operator(), py::arg("sentence"), py::arg("speaker"), py::arg("other"),
           "decouple(sentence, speaker, other) for ASCII text and names");
}
