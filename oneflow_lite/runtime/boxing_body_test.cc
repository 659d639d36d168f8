#include "oneflow_lite/runtime/boxing_body.h"

#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"
#include "oneflow_lite/runtime/testing/test_plan_builder.h"

namespace oflite {
namespace {

using testing::TestPlanBuilder;

TEST(BalancedRangeTest, FirstPartsTakeTheRemainder) {
  int64_t begin = 0, size = 0;
  BalancedRange(7, 3, 0, &begin, &size);
  EXPECT_EQ(begin, 0);
  EXPECT_EQ(size, 3);
  BalancedRange(7, 3, 1, &begin, &size);
  EXPECT_EQ(begin, 3);
  EXPECT_EQ(size, 2);
  BalancedRange(7, 3, 2, &begin, &size);
  EXPECT_EQ(begin, 5);
  EXPECT_EQ(size, 2);
  BalancedRange(1, 2, 1, &begin, &size);
  EXPECT_EQ(size, 0);
}

using Recorder = testing::MetricsRecorder;

SbpParallel Split(int64_t axis) {
  SbpParallel sbp;
  sbp.set_split_axis(axis);
  return sbp;
}
SbpParallel Partial() {
  SbpParallel sbp;
  sbp.set_partial_sum(true);
  return sbp;
}
SbpParallel Broadcast() {
  SbpParallel sbp;
  sbp.set_broadcast(true);
  return sbp;
}

// `parts` sources on devices 0..parts-1 (source p fills iteration + 10 p),
// a boxing task converting in_sbp -> out_sbp, one sink per output part
// reporting the mean of its part as "part<j>".
std::unique_ptr<Recorder> RunBoxing(int parts, const TensorDesc& logical, const SbpParallel& in,
                   const SbpParallel& out, const std::vector<TensorDesc>& in_parts,
                   const std::vector<TensorDesc>& out_parts) {
  TestPlanBuilder b;
  std::vector<int64_t> sources;
  for (size_t p = 0; p < in_parts.size(); ++p) {
    const std::string name = "source" + std::to_string(p);
    const int64_t task = b.AddTask(name, TASK_SOURCE, p);
    sources.push_back(b.AddRegst(task, "out", {in_parts[p]}, 2));
    b.AddKernel(task, name, "test_source", {}, {{"out", sources.back()}}, {{"offset", 10 * p}});
  }
  // One boxing task per output part; inputs listed in reverse to check
  // that in_parallel_id, not the list order, places them.
  for (size_t j = 0; j < out_parts.size(); ++j) {
    const int64_t boxing = b.AddTask("boxing" + std::to_string(j), TASK_BOXING, 8 + j);
    BoxingConf* conf = b.task(boxing)->mutable_boxing();
    *conf->mutable_logical_desc() = logical.ToProto();
    *conf->mutable_in_sbp()->add_sbp() = in;
    *conf->mutable_out_sbp()->add_sbp() = out;
    conf->set_parallel_num(parts);
    conf->set_out_parallel_id(j);
    for (int p = static_cast<int>(sources.size()) - 1; p >= 0; --p) {
      b.Consume(boxing, sources[p], "in");
      conf->add_in_regst_desc_id(sources[p]);
      conf->add_in_parallel_id(p);
    }
    const int64_t regst = b.AddRegst(boxing, "out", {out_parts[j]}, 2);
    const int64_t sink = b.AddTask("sink" + std::to_string(j), TASK_SINK, 20);
    b.Consume(sink, regst, "part" + std::to_string(j));
  }
  auto recorder = std::make_unique<Recorder>();
  RuntimeOptions options;
  options.metrics = recorder.get();
  const Plan plan = b.Build(3);
  auto runtime = Runtime::Create(plan, options);
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  if (runtime.ok()) {
    Status status = (*runtime)->Run();
    EXPECT_TRUE(status.ok()) << status;
  }
  return recorder;
}

TEST(BoxingBodyTest, AllReduceSumsPartsIntoEveryDevice) {
  const TensorDesc t(Shape{4, 3}, DT_FLOAT);
  auto r = RunBoxing(3, t, Partial(), Broadcast(), {t, t, t}, {t, t, t});
  for (int64_t i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(r->values["part" + std::to_string(j)][i], 3 * i + 30) << i << " " << j;
    }
  }
}

TEST(BoxingBodyTest, AllGatherThenSliceOverAnOddSplit) {
  // 5 rows split over 2 devices: 3 + 2 rows. S(0) -> B then B -> S(0).
  const TensorDesc logical(Shape{5, 2}, DT_FLOAT);
  const TensorDesc top(Shape{3, 2}, DT_FLOAT), bottom(Shape{2, 2}, DT_FLOAT);
  auto gathered = RunBoxing(2, logical, Split(0), Broadcast(), {top, bottom},
                                {logical, logical});
  // rows 0-2 hold i, rows 3-4 hold i + 10: mean = i + 4.
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(gathered->values["part0"][i], i + 4.0);
    EXPECT_DOUBLE_EQ(gathered->values["part1"][i], i + 4.0);
  }
  // S(0) -> S(1): all-to-all over columns; each column keeps the mixed rows.
  auto columns = RunBoxing(2, logical, Split(0), Split(1), {top, bottom},
                               {TensorDesc(Shape{5, 1}, DT_FLOAT), TensorDesc(Shape{5, 1}, DT_FLOAT)});
  EXPECT_DOUBLE_EQ(columns->values["part0"][2], 6.0);
  EXPECT_DOUBLE_EQ(columns->values["part1"][2], 6.0);
}

TEST(BoxingBodyTest, ReduceScatterAndBroadcastToPartial) {
  const TensorDesc logical(Shape{4}, DT_FLOAT), half(Shape{2}, DT_FLOAT);
  auto scattered = RunBoxing(2, logical, Partial(), Split(0), {logical, logical}, {half, half});
  EXPECT_EQ(scattered->values["part0"][1], 1 + 11);
  EXPECT_EQ(scattered->values["part1"][1], 1 + 11);
  auto partial = RunBoxing(2, logical, Broadcast(), Partial(), {logical}, {logical, logical});
  EXPECT_EQ(partial->values["part0"][2], 2);
  EXPECT_EQ(partial->values["part1"][2], 0);
}

TEST(BoxingBodyTest, MismatchedPartShapeIsAnError) {
  TestPlanBuilder b;
  const TensorDesc logical(Shape{4}, DT_FLOAT);
  const int64_t boxing = b.AddTask("boxing", TASK_BOXING, 1);
  BoxingConf* conf = b.task(boxing)->mutable_boxing();
  *conf->mutable_logical_desc() = logical.ToProto();
  *conf->mutable_in_sbp()->add_sbp() = Split(0);
  *conf->mutable_out_sbp()->add_sbp() = Broadcast();
  const int64_t src = b.AddTask("source", TASK_SOURCE);
  const int64_t regst = b.AddRegst(src, "out", {TensorDesc(Shape{3}, DT_FLOAT)}, 1);
  b.AddKernel(src, "source", "test_source", {}, {{"out", regst}});
  b.Consume(boxing, regst);
  b.AddRegst(boxing, "out", {logical}, 1);
  const Plan plan = b.Build(1);
  auto runtime = Runtime::Create(plan, {});
  ASSERT_TRUE(runtime.ok());
  Status status = (*runtime)->Run();
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find("boxing"), std::string::npos);
}

}  // namespace
}  // namespace oflite
