// Checks every SBP signature the nn ops offer by simulation: the logical
// inputs are laid out per the signature on `parallel_num` simulated devices
// (S(axis): balanced slices, first shards one row larger; B: whole), the op
// runs on each device's physical blobs, and the outputs are reassembled
// (S: concatenated, B: every device must agree, P: summed) and compared with
// one run on the logical blobs.
#include <cstring>

#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace nn {
namespace testing {
namespace {

// [begin, end) of shard `index` of `size` rows over `parts` devices.
std::pair<int64_t, int64_t> ShardRange(int64_t size, int64_t parts, int64_t index) {
  const int64_t base = size / parts, extra = size % parts;
  const int64_t begin = index * base + std::min(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

HostTensor SliceAxis(const HostTensor& t, int64_t axis, int64_t begin, int64_t end) {
  std::vector<int64_t> dims = t.shape().dims();
  const int64_t outer = t.shape().Count(0, axis), size = dims[axis];
  const int64_t inner_bytes = t.shape().Count(axis + 1) * SizeOf(t.dtype());
  dims[axis] = end - begin;
  HostTensor out(TensorDesc(Shape(dims), t.dtype()));
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(static_cast<char*>(out.raw()) + o * (end - begin) * inner_bytes,
                static_cast<const char*>(t.raw()) + (o * size + begin) * inner_bytes,
                (end - begin) * inner_bytes);
  }
  return out;
}

std::vector<double> ConcatAxis(const std::vector<HostTensor>& parts, int64_t axis) {
  const Shape& first = parts.at(0).shape();
  const int64_t outer = first.Count(0, axis), inner = first.Count(axis + 1);
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (const HostTensor& part : parts) {
      const std::vector<double> v = ToDoubles(part);
      const int64_t chunk = part.shape().dim(axis) * inner;
      out.insert(out.end(), v.begin() + o * chunk, v.begin() + (o + 1) * chunk);
    }
  }
  return out;
}

// The op's signatures for the logical inputs in `env`.
std::vector<SbpSignature> Signatures(const OpConf& op, const TensorMap& env, int64_t parallel_num,
                                     std::vector<TensorDesc>* outputs) {
  const OpDef* def = *LookupOpDef(op.op_type());
  std::vector<TensorDesc> inputs;
  ArgDescs in_descs;
  for (const ArgProto& arg : op.input()) {
    for (const std::string& lbn : arg.lbn()) {
      inputs.push_back(env.at(lbn).desc());
      in_descs[arg.name()].push_back(env.at(lbn).desc());
    }
  }
  ArgDescs out_descs = *InferOp(op, in_descs);
  for (const ArgProto& arg : op.output()) {
    for (const TensorDesc& d : out_descs.at(arg.name())) outputs->push_back(d);
  }
  SbpContext ctx(op, inputs, *outputs, parallel_num);
  EXPECT_TRUE(def->sbp(&ctx).ok());
  return ctx.signatures();
}

// Runs every signature of `op` on `parallel_num` simulated devices.
void CheckSignatures(const OpConf& op, const TensorMap& env, int64_t parallel_num,
                     size_t expected_signatures) {
  TensorMap logical_env;
  for (const auto& [lbn, t] : env) logical_env.emplace(lbn, t.Clone());
  const TensorMap logical = MustRun(op, &logical_env);
  std::vector<TensorDesc> out_descs;
  const std::vector<SbpSignature> signatures = Signatures(op, env, parallel_num, &out_descs);
  EXPECT_EQ(signatures.size(), expected_signatures) << op.op_type();
  for (const SbpSignature& sig : signatures) {
    SCOPED_TRACE(op.op_type() + ": " + sig.ToString() + " on " + std::to_string(parallel_num));
    std::vector<TensorMap> device_outputs;
    for (int64_t device = 0; device < parallel_num; ++device) {
      TensorMap device_env;
      size_t k = 0;
      for (const ArgProto& arg : op.input()) {
        for (const std::string& lbn : arg.lbn()) {
          const SbpParallel& sbp = sig.inputs.at(k++);
          ASSERT_FALSE(IsPartialSum(sbp)) << "P inputs are not simulated";
          const HostTensor& t = env.at(lbn);
          if (IsBroadcast(sbp)) {
            device_env.emplace(lbn, t.Clone());
          } else {
            auto [b, e] = ShardRange(t.shape().dim(sbp.split_axis()), parallel_num, device);
            device_env.emplace(lbn, SliceAxis(t, sbp.split_axis(), b, e));
          }
        }
      }
      RunOpOptions options;
      options.parallel_id = device;
      options.parallel_num = parallel_num;
      device_outputs.push_back(MustRun(op, &device_env, options));
    }
    size_t k = 0;
    for (const ArgProto& arg : op.output()) {
      for (const std::string& lbn : arg.lbn()) {
        const SbpParallel& sbp = sig.outputs.at(k++);
        const std::vector<double> want = ToDoubles(logical.at(lbn));
        std::vector<HostTensor> parts;
        for (TensorMap& outs : device_outputs) parts.push_back(std::move(outs.at(lbn)));
        if (IsSplit(sbp)) {
          const std::vector<double> got = ConcatAxis(parts, sbp.split_axis());
          ASSERT_EQ(got.size(), want.size()) << lbn;
          for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-10) << lbn;
        } else if (IsBroadcast(sbp)) {
          for (const HostTensor& part : parts) ExpectAllNear(part, want, 1e-10, lbn);
        } else {
          std::vector<double> sum(want.size(), 0.0);
          for (const HostTensor& part : parts) {
            const std::vector<double> v = ToDoubles(part);
            ASSERT_EQ(v.size(), sum.size()) << lbn;
            for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
          }
          for (size_t i = 0; i < sum.size(); ++i) ASSERT_NEAR(sum[i], want[i], 1e-10) << lbn;
        }
      }
    }
  }
}

HostTensor Random(const Shape& shape, uint64_t seed, DataType dtype = DT_DOUBLE, double lo = -1,
                  double hi = 1) {
  return RandomTensor(TensorDesc(shape, dtype), seed, lo, hi);
}

TEST(SbpSimulationTest, Softmax) {
  for (const std::string type : {"softmax", "log_softmax"}) {
    TensorMap env;
    env.emplace("in/x_0", Random(Shape({5, 3, 7}), 1));
    OpConf op = OpConfBuilder(type, "sm").Input("x", "in/x_0").Output("y").Attr("axis", 1).Build();
    for (int64_t p : {2, 3}) CheckSignatures(op, env, p, 2);
  }
  TensorMap env;
  env.emplace("in/dy_0", Random(Shape({5, 7}), 1));
  env.emplace("in/y_0", Random(Shape({5, 7}), 2));
  OpConf grad = OpConfBuilder("log_softmax_grad", "g")
                    .Input("dy", "in/dy_0")
                    .Input("y", "in/y_0")
                    .Output("dx")
                    .Build();
  CheckSignatures(grad, env, 3, 1);
}

TEST(SbpSimulationTest, CrossEntropyAndGrad) {
  TensorMap env;
  env.emplace("in/p_0", Random(Shape({7, 4}), 1));
  env.emplace("in/l_0", Random(Shape({7}), 2, DT_INT64, 0, 4));
  env.emplace("in/dy_0", Random(Shape({7}), 3));
  env.emplace("in/dp_0", Random(Shape({7, 4}), 4));
  OpConf op = OpConfBuilder("sparse_softmax_cross_entropy", "x")
                  .Input("prediction", "in/p_0")
                  .Input("label", "in/l_0")
                  .Output("prob")
                  .Output("out")
                  .Build();
  CheckSignatures(op, env, 3, 1);
  OpConf grad = OpConfBuilder("sparse_softmax_cross_entropy_grad", "g")
                    .Input("dy", "in/dy_0")
                    .Input("prob", "in/p_0")
                    .Input("label", "in/l_0")
                    .Input("dprob", "in/dp_0")
                    .Output("dx")
                    .Build();
  CheckSignatures(grad, env, 2, 1);
}

OpConfBuilder WithConvAttrs(OpConfBuilder b) {
  return b.Attr("strides", std::vector<int64_t>{2, 1})
      .Attr("padding", std::vector<int64_t>{1, 1})
      .Attr("dilations", std::vector<int64_t>{1, 1});
}

TEST(SbpSimulationTest, Conv2dAndGrads) {
  const Shape x({5, 4, 7, 6}), w({3, 4, 3, 3}), y({5, 3, 4, 6});
  TensorMap env;
  env.emplace("in/x_0", Random(x, 1));
  env.emplace("in/w_0", Random(w, 2));
  env.emplace("in/dy_0", Random(y, 3));
  env.emplace("in/xlike_0", HostTensor(TensorDesc(x, DT_DOUBLE)));
  env.emplace("in/wlike_0", HostTensor(TensorDesc(w, DT_DOUBLE)));
  OpConf conv =
      WithConvAttrs(
          OpConfBuilder("conv2d", "c").Input("x", "in/x_0").Input("weight", "in/w_0").Output("y"))
          .Build();
  OpConf data = WithConvAttrs(OpConfBuilder("conv2d_grad_data", "gd")
                                  .Input("dy", "in/dy_0")
                                  .Input("weight", "in/w_0")
                                  .Input("like", "in/xlike_0")
                                  .Output("dx"))
                    .Build();
  OpConf filter = WithConvAttrs(OpConfBuilder("conv2d_grad_filter", "gf")
                                    .Input("dy", "in/dy_0")
                                    .Input("x", "in/x_0")
                                    .Input("like", "in/wlike_0")
                                    .Output("dw"))
                      .Build();
  for (int64_t p : {2, 3}) {
    CheckSignatures(conv, env, p, 3);
    CheckSignatures(data, env, p, 3);
    CheckSignatures(filter, env, p, 3);
  }
}

TEST(SbpSimulationTest, PoolingAndGrads) {
  TensorMap env;
  env.emplace("in/x_0", Random(Shape({3, 5, 7, 5}), 1));
  env.emplace("in/y_0", HostTensor(TensorDesc(Shape({3, 5, 4, 3}), DT_DOUBLE)));
  env.emplace("in/dy_0", Random(Shape({3, 5, 4, 3}), 2));
  auto attrs = [](OpConfBuilder b) {
    return b.Attr("kernel_size", std::vector<int64_t>{3, 3})
        .Attr("strides", std::vector<int64_t>{2, 2})
        .Attr("padding", std::vector<int64_t>{1, 1})
        .Build();
  };
  CheckSignatures(attrs(OpConfBuilder("max_pool2d", "p").Input("x", "in/x_0").Output("y")), env, 2,
                  2);
  CheckSignatures(attrs(OpConfBuilder("avg_pool2d", "p").Input("x", "in/x_0").Output("y")), env, 3,
                  2);
  CheckSignatures(attrs(OpConfBuilder("max_pool2d_grad", "g")
                            .Input("dy", "in/dy_0")
                            .Input("x", "in/x_0")
                            .Input("y", "in/y_0")
                            .Output("dx")),
                  env, 2, 2);
  CheckSignatures(attrs(OpConfBuilder("avg_pool2d_grad", "g")
                            .Input("dy", "in/dy_0")
                            .Input("like", "in/x_0")
                            .Output("dx")),
                  env, 3, 2);
}

TEST(SbpSimulationTest, LayerNormAndGrad) {
  TensorMap env;
  env.emplace("in/x_0", Random(Shape({5, 3, 4}), 1));
  env.emplace("in/g_0", Random(Shape({4}), 2));
  env.emplace("in/b_0", Random(Shape({4}), 3));
  env.emplace("in/dy_0", Random(Shape({5, 3, 4}), 4));
  env.emplace("in/m_0", Random(Shape({5, 3}), 5));
  env.emplace("in/v_0", Random(Shape({5, 3}), 6, DT_DOUBLE, 0.5, 2));
  env.emplace("in/dm_0", Random(Shape({5, 3}), 7));
  OpConf ln = OpConfBuilder("layer_norm", "ln")
                  .Input("x", "in/x_0")
                  .Input("gamma", "in/g_0")
                  .Input("beta", "in/b_0")
                  .Output("y")
                  .Output("mean")
                  .Output("inv_variance")
                  .Attr("begin_norm_axis", 2)
                  .Build();
  CheckSignatures(ln, env, 2, 2);
  OpConf grad = OpConfBuilder("layer_norm_grad", "g")
                    .Input("dy", "in/dy_0")
                    .Input("x", "in/x_0")
                    .Input("mean", "in/m_0")
                    .Input("inv_variance", "in/v_0")
                    .Input("gamma", "in/g_0")
                    .Input("dmean", "in/dm_0")
                    .Output("dx")
                    .Output("dgamma")
                    .Output("dbeta")
                    .Attr("begin_norm_axis", -1)
                    .Build();
  CheckSignatures(grad, env, 3, 2);
}

TEST(SbpSimulationTest, EmbeddingAndGrad) {
  TensorMap env;
  env.emplace("in/w_0", Random(Shape({6, 5}), 1));
  env.emplace("in/i_0", Random(Shape({3, 4}), 2, DT_INT32, 0, 6));
  env.emplace("in/dy_0", Random(Shape({3, 4, 5}), 3));
  env.emplace("in/like_0", HostTensor(TensorDesc(Shape({6, 5}), DT_DOUBLE)));
  OpConf op = OpConfBuilder("embedding", "e")
                  .Input("weight", "in/w_0")
                  .Input("indices", "in/i_0")
                  .Output("out")
                  .Build();
  OpConf grad = OpConfBuilder("embedding_grad", "g")
                    .Input("dy", "in/dy_0")
                    .Input("indices", "in/i_0")
                    .Input("like", "in/like_0")
                    .Output("dweight")
                    .Build();
  for (int64_t p : {2, 3}) {
    CheckSignatures(op, env, p, 3);
    CheckSignatures(grad, env, p, 3);
  }
}

TEST(SbpSimulationTest, ArgmaxAndDropoutGrad) {
  TensorMap env;
  env.emplace("in/x_0", Random(Shape({5, 4, 3}), 1));
  env.emplace("in/m_0", Random(Shape({5, 4, 3}), 2, DT_INT32, 0, 2));
  OpConf argmax =
      OpConfBuilder("argmax", "a").Input("x", "in/x_0").Output("y").Attr("axis", 1).Build();
  CheckSignatures(argmax, env, 3, 2);
  // dropout_grad's mask is uint8.
  HostTensor mask(TensorDesc(Shape({5, 4, 3}), DT_UINT8));
  for (int64_t i = 0; i < mask.elem_count(); ++i) {
    mask.data<uint8_t>()[i] = static_cast<uint8_t>(env.at("in/m_0").data<int32_t>()[i]);
  }
  env.emplace("in/mask_0", std::move(mask));
  OpConf grad = OpConfBuilder("dropout_grad", "g")
                    .Input("dy", "in/x_0")
                    .Input("mask", "in/mask_0")
                    .Output("dx")
                    .Attr("rate", 0.25)
                    .Build();
  CheckSignatures(grad, env, 2, 3);
}

}  // namespace
}  // namespace testing
}  // namespace nn
}  // namespace oflite
