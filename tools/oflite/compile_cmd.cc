// oflite compile: Job + cluster -> Plan.
#include <cstdio>

#include "tools/oflite/commands.h"
#include "tools/oflite/flags.h"

namespace oflite {
namespace cli {

int RunCompile(int argc, char** argv) {
  FlagSet flags("compile", "--job JOB.pb --cluster CLUSTER.pbtxt -o PLAN.pb",
                {{"job", "the Job file written by a model program"},
                 {"cluster", "the cluster description (text ClusterProto)"},
                 {"o", "where to write the Plan"},
                 {"output", "same as -o"}});
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
               "oflite compile: not implemented yet in this build (the compiler lands with "
               "issue 4)\n");
  return kExitUnimplemented;
}

}  // namespace cli
}  // namespace oflite
