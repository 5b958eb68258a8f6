// Subcommands of precision-lab-cli; each returns the process exit code
// (0 ok, 1 run failed, 2 bad input).
#pragma once

namespace cli {
int cmd_formats(int argc, char** argv);  // argv[0] == "formats"
// argv[0] == "run" or "compare"
int cmd_run(int argc, char** argv, bool compare);
}
