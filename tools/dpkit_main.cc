// The accounting binary (//tools:dpkit_accounting), which the `dpkit` launcher execs with
// transparent huge pages for its heap (dpkit_launcher.cc). Subcommands register themselves
// (see command.h).
#include <cstdlib>  // defines __GLIBC__ under glibc
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "dpkit/tools/command.h"

int main(int argc, char** argv) {
#ifdef __GLIBC__
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
