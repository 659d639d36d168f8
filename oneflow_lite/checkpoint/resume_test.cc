// Training state survives a checkpoint: a variable initialized by its kernel
// and updated by adam_update for 3 iterations ends bit-identical whether the
// run is uninterrupted or saved after 2 iterations and resumed from disk.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "oneflow_lite/checkpoint/checkpoint.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/testing/op_runner.h"

namespace oflite {
namespace {

const Shape kShape{3, 4};

TensorMap InitialState() {
  OpConf init = OpConfBuilder("variable", "w")
                    .Output("out")
                    .Attr("shape", kShape)
                    .Attr("initializer", "kaiming_uniform")
                    .Attr("seed", int64_t{17})
                    .Build();
  TensorMap env;
  StatusOr<TensorMap> out = RunOp(init, &env);
  CHECK_OK(out.status());
  env["w"] = std::move(out->at("w/out_0"));
  env["m"] = HostTensor(TensorDesc(kShape, DT_FLOAT));
  env["v"] = HostTensor(TensorDesc(kShape, DT_FLOAT));
  return env;
}

void Step(TensorMap* env, int64_t iteration) {
  OpConf adam = OpConfBuilder("adam_update", "w-update")
                    .Input("model", "w")
                    .Input("model_diff", "g")
                    .Input("m", "m")
                    .Input("v", "v")
                    .Attr("lr_type", "cosine")
                    .Attr("base_lr", 0.05)
                    .Attr("total_iters", int64_t{10})
                    .Attr("weight_decay", 0.01)
                    .Attr("decoupled", true)
                    .Build();
  // The gradient depends on the iteration, as a data-driven one would.
  (*env)["g"] = RandomTensor(TensorDesc(kShape, DT_FLOAT), 100 + iteration);
  RunOpOptions options;
  options.iteration = iteration;
  CHECK_OK(RunOp(adam, env, options).status());
}

TEST(ResumeTest, SaveAndResumeIsBitIdentical) {
  TensorMap straight = InitialState();
  for (int64_t t = 0; t < 3; ++t) Step(&straight, t);

  TensorMap first = InitialState();
  for (int64_t t = 0; t < 2; ++t) Step(&first, t);
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(root != nullptr ? root : "/tmp") + "/resume";
  std::map<std::string, HostTensor> state;
  for (const char* name : {"w", "m", "v"}) state.emplace(name, first.at(name).Clone());
  ASSERT_TRUE(SaveVariables(dir, 2, state).ok());

  const TensorDesc desc(kShape, DT_FLOAT);
  StatusOr<LoadedVariables> loaded = LoadVariables(dir, {{"w", desc}, {"m", desc}, {"v", desc}});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  TensorMap resumed;
  for (auto& [name, tensor] : loaded->tensors) resumed[name] = std::move(tensor);
  for (int64_t t = loaded->iteration; t < 3; ++t) Step(&resumed, t);

  for (const char* name : {"w", "m", "v"}) {
    EXPECT_EQ(resumed.at(name).ToVector<float>(), straight.at(name).ToVector<float>()) << name;
  }
  EXPECT_NE(straight.at("w").ToVector<float>(), InitialState().at("w").ToVector<float>());
}

}  // namespace
}  // namespace oflite
