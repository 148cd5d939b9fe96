// The dpkit command line. Subcommands register themselves (see command.h).
#include "dpkit/tools/command.h"

int main(int argc, char** argv) { return dpkit::tools::RunMain(argc, argv); }
