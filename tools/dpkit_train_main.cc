// The training binary: `dpkit train MODEL ...` (tools/train_command.cc with every trainer of
// models/), linked with LibTorch. The accounting binary `dpkit` execs it for `dpkit train`
// (tools/train_launcher.cc), so that `dpkit` itself starts like a small program. Invoked
// directly, it takes the same command line: dpkit_train train MODEL [flags].
#include "dpkit/tools/command.h"

int main(int argc, char** argv) { return dpkit::tools::RunMain(argc, argv); }
