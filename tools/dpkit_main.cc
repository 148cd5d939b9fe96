// The dpkit command line. Subcommands register themselves (see command.h).
#include <cstdlib>  // defines __GLIBC__ under glibc
#ifdef __GLIBC__
#include <malloc.h>
#include <unistd.h>

#include <cstring>
#include <string>
#endif

#include "dpkit/tools/command.h"

namespace {

#ifdef __GLIBC__
// The glibc tunable that backs the heap and malloc's mappings with transparent huge pages
// (madvise(MADV_HUGEPAGE); glibc >= 2.35). glibc reads tunables only at start-up, so main
// re-executes the binary once with it added to GLIBC_TUNABLES. PLD accounting touches
// hundreds of MB in FFT windows and per-cell arrays; with 4 KiB pages the first touches
// (a fault each) and the FFTs' TLB misses cost a quarter of the command: q 1e-4, sigma 0.8,
// T 1e5 (`dpkit epsilon --accountant=pld`) 2.47 -> 1.70 s of CPU (user + sys), 56,386 ->
// 1,215 page faults; Table 1 row 6 0.99 -> 0.89 s (2026-11-29, tools/README.md). Nothing
// changes where the kernel has THP disabled.
constexpr char kHugePagesTunable[] = "glibc.malloc.hugetlb=1";

// Re-executes /proc/self/exe with the tunable unless it is already set (the second run, or
// the user's own choice of glibc.malloc.hugetlb), DPKIT_NO_HUGEPAGES is set, or the binary
// runs under valgrind (which does not follow exec by default: a profile would be empty).
// If exec fails, the command simply runs without it.
void ReexecWithHugePages(char** argv) {
  if (std::getenv("DPKIT_NO_HUGEPAGES") != nullptr) return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.hugetlb") != nullptr) return;
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload != nullptr && std::strstr(preload, "vgpreload") != nullptr) return;
  std::string value = kHugePagesTunable;
  if (tunables != nullptr && tunables[0] != '\0') value = std::string(tunables) + ":" + value;
  if (setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Still here: exec failed. Leave the environment as it was.
  if (tunables != nullptr) {
    setenv("GLIBC_TUNABLES", tunables, 1);
  } else {
    unsetenv("GLIBC_TUNABLES");
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
#ifdef __GLIBC__
  ReexecWithHugePages(argv);
  // PLD accounting allocates and frees arrays of up to hundreds of MB many times (component
  // PMFs, FFT windows, block laws). With glibc's defaults each one above the adaptive
  // mmap threshold is a fresh mapping, zeroed page by page by the kernel, and freed heap
  // tops go back to the system. A fixed 32 MiB threshold (glibc's largest) and no trimming
  // below 1 GiB let freed memory be reused instead: q 1e-6, sigma 0.3, T 1e7, delta 1e-10
  // (`dpkit epsilon`, all accountants) 37.8 -> 25.1 s of CPU (user + sys, two runs each),
  // peak memory unchanged (565-577 MB). This binary never loads LibTorch (dpkit train
  // runs dpkit_train).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  return dpkit::tools::RunMain(argc, argv);
}
