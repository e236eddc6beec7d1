// Driver for fuzz targets when libFuzzer is not available (g++ builds): feeds every file of the
// given corpus files/directories through LLVMFuzzerTestOneInput, then a fixed number of
// deterministic mutations of each (bit flips, byte writes, truncation, insertion, splicing), so
// the fuzz code is compiled and exercised by CTest in every build.
//
//   <target> [-mutations=N] <file-or-dir>...
//
// Exits non-zero if a path cannot be read or no input was given; a failed property aborts.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

constexpr size_t kMaxInput = 4096;

bool read_file(const std::string& path, std::vector<uint8_t>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

// Regular files under `path` (a file or a directory, not recursive), sorted for determinism.
bool collect(const std::string& path, std::vector<std::string>* files) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  if (!S_ISDIR(st.st_mode)) {
    files->push_back(path);
    return true;
  }
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return false;
  std::vector<std::string> found;
  while (dirent* e = readdir(d)) {
    const std::string full = path + "/" + e->d_name;
    if (e->d_name[0] != '.' && stat(full.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      found.push_back(full);
    }
  }
  closedir(d);
  std::sort(found.begin(), found.end());
  files->insert(files->end(), found.begin(), found.end());
  return true;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed | 1) {}
  uint64_t next() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return s_;
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }

 private:
  uint64_t s_;
};

void mutate(std::vector<uint8_t>* in, const std::vector<std::vector<uint8_t>>& all, Rng& rng) {
  const int steps = 1 + static_cast<int>(rng.below(4));
  for (int i = 0; i < steps; ++i) {
    std::vector<uint8_t>& v = *in;
    switch (rng.below(7)) {
      case 0:  // flip a bit
        if (!v.empty()) v[rng.below(v.size())] ^= static_cast<uint8_t>(1u << rng.below(8));
        break;
      case 1:  // overwrite a byte with an interesting value
        if (!v.empty()) {
          static const uint8_t kVals[] = {0, 1, 0x7f, 0x80, 0xff, 0xfe, 0x40, 0x10};
          v[rng.below(v.size())] = kVals[rng.below(sizeof(kVals))];
        }
        break;
      case 2:  // random byte
        if (!v.empty()) v[rng.below(v.size())] = static_cast<uint8_t>(rng.next());
        break;
      case 3:  // truncate
        v.resize(rng.below(v.size() + 1));
        break;
      case 4:  // insert a byte
        if (v.size() < kMaxInput) {
          v.insert(v.begin() + static_cast<std::ptrdiff_t>(rng.below(v.size() + 1)),
                   static_cast<uint8_t>(rng.next()));
        }
        break;
      case 5: {  // splice in the tail of another input
        const std::vector<uint8_t>& o = all[rng.below(all.size())];
        const size_t at = rng.below(v.size() + 1), from = rng.below(o.size() + 1);
        v.resize(at);
        v.insert(v.end(), o.begin() + static_cast<std::ptrdiff_t>(from), o.end());
        if (v.size() > kMaxInput) v.resize(kMaxInput);
        break;
      }
      case 6:  // append random bytes
        for (size_t n = 1 + rng.below(8); n > 0 && v.size() < kMaxInput; --n) {
          v.push_back(static_cast<uint8_t>(rng.next()));
        }
        break;
    }
  }
}

// libFuzzer never passes a null pointer, even for an empty input; neither do we.
void run_one(const std::vector<uint8_t>& in) {
  static const uint8_t kNothing[1] = {0};
  LLVMFuzzerTestOneInput(in.empty() ? kNothing : in.data(), in.size());
}

}  // namespace

int main(int argc, char** argv) {
  long mutations = 5000;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "-mutations=", 11) == 0) {
      mutations = std::strtol(argv[i] + 11, nullptr, 10);
    } else if (!collect(argv[i], &files)) {
      std::fprintf(stderr, "replay: cannot read %s\n", argv[i]);
      return 2;
    }
  }
  std::vector<std::vector<uint8_t>> inputs;
  for (const std::string& f : files) {
    inputs.emplace_back();
    if (!read_file(f, &inputs.back())) {
      std::fprintf(stderr, "replay: cannot read %s\n", f.c_str());
      return 2;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs (give corpus files or directories)\n");
    return 2;
  }
  uint64_t execs = 0;
  run_one({});
  ++execs;
  for (const auto& in : inputs) {
    run_one(in);
    ++execs;
  }
  Rng rng(0x5eed);
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (long m = 0; m < mutations; ++m) {
      buf = inputs[i];
      mutate(&buf, inputs, rng);
      run_one(buf);
      ++execs;
    }
  }
  std::printf("replay: %zu corpus inputs, %llu executions, 0 failures\n", inputs.size(),
              static_cast<unsigned long long>(execs));
  return 0;
}
