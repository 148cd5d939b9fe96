// The dpkit command line. Subcommands register themselves (see command.h).
#include "tools/command.h"

int main(int argc, char** argv) { return dpkit::tools::RunMain(argc, argv); }
