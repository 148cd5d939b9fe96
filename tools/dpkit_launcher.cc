// `dpkit`: a small static launcher that execs the accounting binary (//tools:dpkit_accounting,
// found beside it, at $DPKIT_ACCOUNTING_BINARY or in its runfiles; sibling_binary.h) with
// glibc.malloc.hugetlb=1 added to GLIBC_TUNABLES, so that the heap is backed by transparent
// huge pages (madvise(MADV_HUGEPAGE); glibc >= 2.35). glibc reads tunables only when a
// process starts, hence a process of its own: statically linked, it starts in about a
// millisecond, where re-executing the accounting binary itself paid its start-up (its shared
// libraries) twice. PLD accounting touches hundreds of MB in FFT windows and per-cell arrays;
// with 4 KiB pages the first touches (a fault each) and the FFTs' TLB misses cost a quarter
// of the command or more: q 1e-4, sigma 0.8, T 1e5 (`dpkit epsilon --accountant=pld`) 2.47
// -> 1.70 s of CPU (user + sys, medians of 5 interleaved runs), 56,386 -> 1,215 page faults;
// Table 1 row 2 0.18 -> 0.10 s (medians of 7; 0.16 s by re-executing; tools/README.md).
// Nothing changes where the kernel has THP disabled.
//
// The tunable is not added when DPKIT_NO_HUGEPAGES is set, when GLIBC_TUNABLES already names
// glibc.malloc.hugetlb (the user's choice), or under valgrind (which does not follow exec by
// default: profile dpkit_accounting directly). The arguments, the other variables and the
// open files pass through exec unchanged; the exit status is the accounting binary's.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "dpkit/tools/sibling_binary.h"

namespace {

constexpr char kAccountingBinary[] = "dpkit_accounting";
constexpr char kHugePagesTunable[] = "glibc.malloc.hugetlb=1";

void AddHugePagesTunable() {
  if (std::getenv("DPKIT_NO_HUGEPAGES") != nullptr) return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.hugetlb") != nullptr) return;
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload != nullptr && std::strstr(preload, "vgpreload") != nullptr) return;
  std::string value = kHugePagesTunable;
  if (tunables != nullptr && tunables[0] != '\0') value = std::string(tunables) + ":" + value;
  setenv("GLIBC_TUNABLES", value.c_str(), /*overwrite=*/1);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string binary = dpkit::tools::FindSiblingBinary(
      kAccountingBinary, "DPKIT_ACCOUNTING_BINARY", argc > 0 ? argv[0] : nullptr);
  if (binary.empty()) {
    std::fprintf(stderr,
                 "dpkit: cannot find %s (looked beside dpkit and in its runfiles; build "
                 "//tools:dpkit or set DPKIT_ACCOUNTING_BINARY)\n",
                 kAccountingBinary);
    return 1;
  }
  AddHugePagesTunable();
  execv(binary.c_str(), argv);
  std::fprintf(stderr, "dpkit: cannot run %s: %s\n", binary.c_str(), std::strerror(errno));
  return 1;
}
