#include "oneflow_lite/session/eval_support.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace session {
namespace {

TEST(MetricSumsTest, EmptyEncodesToNothingAndDecodesBack) {
  MetricSums empty;
  EXPECT_EQ(EncodeMetricSums(empty), "");
  StatusOr<MetricSums> decoded = DecodeMetricSums("", "rank 1");
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(decoded->empty());
  EXPECT_EQ(decoded->count(), 0);
}

TEST(MetricSumsTest, RoundTripIsBitExact) {
  MetricSums sums;
  const std::vector<double> values = {0.1, 1.0 / 3.0, 2.718281828459045, 1e-300, 0.0};
  for (double v : values) sums.Add("loss", v);
  sums.Add("accuracy", 0.71875);
  StatusOr<MetricSums> decoded = DecodeMetricSums(EncodeMetricSums(sums), "rank 0");
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_EQ(decoded->sums().size(), 2u);
  EXPECT_EQ(decoded->sums().at("loss").count, 5);
  EXPECT_EQ(decoded->sums().at("loss").sum, sums.sums().at("loss").sum);  // bit for bit
  EXPECT_EQ(decoded->sums().at("accuracy").count, 1);
  EXPECT_EQ(decoded->Means().at("accuracy"), 0.71875);
  EXPECT_EQ(decoded->count(), 5);
}

TEST(MetricSumsTest, MergeOfRanksEqualsOneSink) {
  // One sink over 3 iterations vs the same reports split over two ranks
  // (and a third rank that reported nothing).
  MetricSums one, rank0, rank1, rank2;
  for (double v : {0.5, 0.25, 0.75}) one.Add("accuracy", v);
  rank0.Add("accuracy", 0.5);
  rank1.Add("accuracy", 0.25);
  rank1.Add("accuracy", 0.75);
  MetricSums merged;
  for (const MetricSums* part : {&rank0, &rank1, &rank2}) merged.Merge(*part);
  EXPECT_EQ(merged.Means().at("accuracy"), one.Means().at("accuracy"));
  EXPECT_EQ(merged.count(), 3);
  // A sink on one rank only: the merge is that rank's sums exactly.
  MetricSums only;
  only.Merge(MetricSums());
  only.Merge(one);
  EXPECT_EQ(only.Means().at("accuracy"), one.Means().at("accuracy"));
}

TEST(MetricSumsTest, MalformedLinesNameTheSource) {
  for (const char* text : {"loss 3\n", "loss x 0x1p+0\n", "loss 2 nonsense\n", "loss -1 0x1p+0\n",
                           "loss 1 0x1p+0 extra\n"}) {
    StatusOr<MetricSums> decoded = DecodeMetricSums(text, "rank 2's metrics");
    ASSERT_FALSE(decoded.ok()) << text;
    EXPECT_NE(decoded.status().ToString().find("rank 2's metrics"), std::string::npos)
        << decoded.status().ToString();
  }
}

TEST(MetricAveragerTest, AveragesPerMetric) {
  MetricAverager averager;
  averager.OnMetrics(0, {{"loss", 2.0}, {"accuracy", 0.5}});
  averager.OnMetrics(1, {{"loss", 1.0}});
  MetricSums sums = averager.Take();
  EXPECT_EQ(sums.Means().at("loss"), 1.5);
  EXPECT_EQ(sums.Means().at("accuracy"), 0.5);
  EXPECT_EQ(sums.count(), 2);
}

// A VariableStore that records what reaches it.
class CountingStore final : public VariableStore {
 public:
  StatusOr<bool> Restore(const VariablePart& part, Blob* blob) override {
    ++restores;
    return false;
  }
  Status Save(const VariablePart& part, int64_t completed_iters, const Blob& blob) override {
    ++saves;
    return Status::OK();
  }
  int restores = 0;
  int saves = 0;
};

VariablePart Part(const std::string& name, int64_t id, int64_t num, int64_t split_axis) {
  VariablePart part;
  part.op_name = name;
  part.parallel_id = id;
  part.parallel_num = num;
  *part.sbp.add_sbp() = split_axis >= 0 ? SplitSbp(split_axis) : BroadcastSbp();
  return part;
}

HostTensor Floats(Shape shape, float first) {
  HostTensor tensor(TensorDesc{std::move(shape), DT_FLOAT});
  for (int64_t i = 0; i < tensor.elem_count(); ++i) tensor.data<float>()[i] = first + i;
  return tensor;
}

TEST(PartStoresTest, CapturesFinalPartsAndRestoresThemExactly) {
  CountingStore inner;
  PartCapturingStore capture(&inner, /*final_iteration=*/4);
  HostTensor early = Floats(Shape{2, 3}, 100);
  HostTensor weight = Floats(Shape{2, 3}, 1);  // part 1 of 2, split on axis 0
  HostTensor bias = Floats(Shape{3}, 7);       // broadcast copy on parallel id 1
  HostTensor empty = Floats(Shape{0}, 0);
  ASSERT_TRUE(capture.Save(Part("w", 1, 2, 0), 2, early.AsBlob()).ok());
  ASSERT_TRUE(capture.Save(Part("w", 1, 2, 0), 4, weight.AsBlob()).ok());
  ASSERT_TRUE(capture.Save(Part("b", 1, 2, -1), 4, bias.AsBlob()).ok());
  ASSERT_TRUE(capture.Save(Part("e", 0, 1, -1), 4, empty.AsBlob()).ok());
  HostTensor scratch = Floats(Shape{3}, 0);
  Blob scratch_blob = scratch.AsBlob();
  ASSERT_TRUE(capture.Restore(Part("b", 1, 2, -1), &scratch_blob).ok());
  EXPECT_EQ(inner.saves, 4);
  EXPECT_EQ(inner.restores, 1);

  TrainedParts parts = capture.TakeParts();
  ASSERT_EQ(parts.size(), 3u);
  TrainedPartsStore store(&parts, /*machine_id=*/1);
  HostTensor w(TensorDesc{Shape{2, 3}, DT_FLOAT});
  Blob w_blob = w.AsBlob();
  StatusOr<bool> restored = store.Restore(Part("w", 1, 2, 0), &w_blob);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_TRUE(*restored);
  EXPECT_EQ(w.ToVector<float>(), weight.ToVector<float>());
  HostTensor b(TensorDesc{Shape{3}, DT_FLOAT});
  Blob b_blob = b.AsBlob();
  ASSERT_TRUE(store.Restore(Part("b", 1, 2, -1), &b_blob).ok());
  EXPECT_EQ(b.ToVector<float>(), bias.ToVector<float>());
  HostTensor e(TensorDesc{Shape{0}, DT_FLOAT});
  Blob e_blob = e.AsBlob();
  EXPECT_TRUE(store.Restore(Part("e", 0, 1, -1), &e_blob).ok());
}

TEST(PartStoresTest, MismatchedPartsAreErrorsNamingVariableAndMachine) {
  TrainedParts parts;
  parts[{"w", 1}] = TrainedPart{PartLayout{1, 2, 0}, Floats(Shape{2, 3}, 1)};
  TrainedPartsStore store(&parts, /*machine_id=*/1);
  HostTensor w(TensorDesc{Shape{2, 3}, DT_FLOAT});
  Blob blob = w.AsBlob();
  StatusOr<bool> missing = store.Restore(Part("w", 0, 2, 0), &blob);  // machine 0's part
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().ToString().find("variable 'w' part 0 on machine 1"),
            std::string::npos);
  StatusOr<bool> relaid = store.Restore(Part("w", 1, 2, 1), &blob);
  ASSERT_FALSE(relaid.ok());
  EXPECT_NE(relaid.status().ToString().find("axis 1"), std::string::npos);
  HostTensor wrong(TensorDesc{Shape{3, 2}, DT_FLOAT});
  Blob wrong_blob = wrong.AsBlob();
  StatusOr<bool> reshaped = store.Restore(Part("w", 1, 2, 0), &wrong_blob);
  ASSERT_FALSE(reshaped.ok());
  EXPECT_NE(reshaped.status().ToString().find("variable 'w'"), std::string::npos);
}

}  // namespace
}  // namespace session
}  // namespace oflite
