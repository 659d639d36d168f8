// Which ops a captured device graph cannot replay: a replayed graph repeats
// the launch arguments it was captured with, so an op whose kernel computes
// a launch argument from the iteration on the host (Adam's bias
// correction, dropout's seed, a learning-rate schedule other than a
// constant without warm-up) would replay the captured iteration's values.
// The compiler asks this before marking a plan graph-capturable
// (compiler/graph_merge.h); the plan verifier refuses a graph_replay task
// holding such an op (plan/plan_verifier.h).
#ifndef ONEFLOW_LITE_OPS_GRAPH_CAPTURE_H_
#define ONEFLOW_LITE_OPS_GRAPH_CAPTURE_H_

#include "proto/job.pb.h"

namespace oflite {

bool LaunchArgumentsFollowTheIteration(const OpConf& op);

}  // namespace oflite

#endif  // ONEFLOW_LITE_OPS_GRAPH_CAPTURE_H_
