// oflite launch: start every machine of a Plan as local processes.
#include <cstdio>

#include "tools/oflite/commands.h"
#include "tools/oflite/flags.h"

namespace oflite {
namespace cli {

int RunLaunch(int argc, char** argv) {
  FlagSet flags("launch", "--plan PLAN.pb --nproc N",
                {{"plan", "the Plan file"},
                 {"nproc", "number of local processes (machines)"},
                 {"hosts", "comma-separated hosts to start nodes on over ssh"}});
  Status s = flags.Parse(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return kExitBadInput;
  }
  if (flags.help_requested()) {
    flags.PrintHelp();
    return kExitOk;
  }
  std::fprintf(stderr,
               "oflite launch: not implemented yet in this build (multi-node launch lands with "
               "issue 6)\n");
  return kExitUnimplemented;
}

}  // namespace cli
}  // namespace oflite
