// cli.h - the command-line reader shared by the course's two CUDA programs
// (p2pBandwidthLatencyTest and nccl_bench).
//
// It is getopt_long with the choices getopt_long leaves open made strict, so that both
// programs read their options the same way and each keeps only its own table and messages:
//   * options are read in order and never permuted; a word that is no option comes back
//     as Kind::Stray at its place;
//   * a long option must be spelled in full: getopt_long would take "--it" for "--iters",
//     here it is Kind::Unknown;
//   * "--" does not end the options: it comes back as Kind::Unknown;
//   * a short option without a value stands alone: "-Gx" is Kind::ValueNotAllowed, not
//     "-G" followed by "-x";
//   * getopt_long prints nothing (opterr = 0): the program words every error itself.
// Long options declared optional_argument take a value only as --name=value (getopt_long
// then gives the value, or none for a bare --name); required_argument takes --name=value,
// --name value, -xvalue and -x value.
#pragma once

#include <getopt.h>

#include <cstring>
#include <string>

namespace cli {

enum class Kind {
  Option,           // a known option; value is its value or nullptr
  Stray,            // a word that is not an option
  Unknown,          // an option nobody declared (or an abbreviation, or "--")
  ValueNotAllowed,  // --flag=value or -Fvalue for an option that takes no value
  ValueMissing,     // the last word is an option that needs a value
};

struct Item {
  Kind kind = Kind::Unknown;
  int val = 0;                  // the option's val from the table (0 when unknown)
  int index = 0;                // argv index of the option (or of the stray word)
  int value_index = 0;          // argv index holding the value (index, or the next word)
  std::string text;             // argv[index] as given
  std::string spelled;          // the option as written, without its value: "--iters", "-n"
  const char *value = nullptr;  // the value (Option) or the stray word (Stray)
};

class Reader {
 public:
  // shorts: the short options in getopt's notation ("o:b:G"); longs: ends with a zero entry.
  Reader(int argc, char **argv, const char *shorts, const option *longs)
      : argc_(argc), argv_(argv), shorts_(std::string("-:") + shorts), longs_(longs) {
    opterr = 0;
    optind = 0;  // glibc: start afresh
  }

  // Reads the next item into *it; false when the arguments are used up.
  bool next(Item *it) {
    if (done_) return false;
    const int at = optind > 0 ? optind : 1;  // the word getopt_long starts on
    int long_index = -1;
    optarg = nullptr;
    const int c = getopt_long(argc_, argv_, shorts_.c_str(), longs_, &long_index);
    *it = Item();
    if (c == -1) {
      done_ = true;
      if (at >= argc_) return false;
      it->index = at;  // getopt_long stopped on "--", which the programs never accepted
      it->text = it->spelled = argv_[at];
      return true;
    }
    it->index = at;
    it->text = argv_[at];
    const bool is_long = it->text.compare(0, 2, "--") == 0;
    it->spelled = is_long ? it->text.substr(0, it->text.find('=')) : it->text.substr(0, 2);
    if (c == 1) {
      it->kind = Kind::Stray;
      it->value = optarg;
      return true;
    }
    if (c == '?' || c == ':') {
      if (c == ':')
        it->kind = Kind::ValueMissing;
      else
        it->kind = is_long && optopt != 0 ? Kind::ValueNotAllowed : Kind::Unknown;
      if (is_long && !declared(it->spelled)) it->kind = Kind::Unknown;  // an abbreviation
      if (it->kind != Kind::Unknown) it->val = optopt;
      return true;
    }
    it->val = c;
    if (is_long && !declared(it->spelled)) {
      it->kind = Kind::Unknown;  // an abbreviation that getopt_long accepted
      return true;
    }
    if (!is_long && !takes_value(c) && it->text.size() != 2) {
      it->kind = Kind::ValueNotAllowed;
      return true;
    }
    it->kind = Kind::Option;
    it->value = optarg;
    it->value_index = optarg ? optind - 1 : at;
    return true;
  }

 private:
  bool declared(const std::string &spelled) const {
    for (const option *o = longs_; o->name; ++o)
      if (spelled == std::string("--") + o->name) return true;
    return false;
  }
  bool takes_value(int c) const {
    const char *p = std::strchr(shorts_.c_str() + 2, c);
    return p && p[1] == ':';
  }

  int argc_;
  char **argv_;
  std::string shorts_;
  const option *longs_;
  bool done_ = false;
};

}  // namespace cli
