// oflite run: run this node's part of a Plan.
#include <cstdio>

#include "tools/oflite/commands.h"
#include "tools/oflite/flags.h"

namespace oflite {
namespace cli {

int RunRun(int argc, char** argv) {
  FlagSet flags("run", "--plan PLAN.pb [--rank R --master HOST:PORT]",
                {{"plan", "the Plan file"},
                 {"rank", "this node's machine id (else RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK)"},
                 {"master", "rendezvous address HOST:PORT (rank 0 serves it)"},
                 {"comm", "transport: ibverbs, tcp or auto", false, "auto"}});
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
               "oflite run: not implemented yet in this build (the runtime lands with issue 5)\n");
  return kExitUnimplemented;
}

}  // namespace cli
}  // namespace oflite
