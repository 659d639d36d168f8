// Runs the plan fuzz target (plan_fuzz.cc) over a deterministic, bounded
// corpus with gcc: real compiled plans (testing/test_plans.h) with 1..3
// structured mutations each, made through protobuf reflection: a number set
// to an edge value or to another id of the plan, an enum to any value, a
// flag flipped, a string emptied, a repeated element dropped or duplicated.
// The target aborts on a CHECK and crashes on a memory error; under
// --config=asan any out-of-bounds access from a verified plan is reported.
// PLAN_FUZZ_VERBOSE=1 prints every mutation (to reproduce a crash).
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "oneflow_lite/plan/plan_verifier.h"
#include "oneflow_lite/plan/testing/test_plans.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace oflite {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// One mutable spot: a field of a message (an element of a repeated field
// when index >= 0).
struct Spot {
  Message* message;
  const FieldDescriptor* field;
  int index;  // -1: singular
};

// Every set field below `message`, except the embedded Job (the runtime
// reads only its seed and iteration count).
void CollectSpots(Message* message, std::vector<Spot>* spots) {
  const Reflection* reflection = message->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->name() == "job") continue;
    if (field->is_repeated()) {
      const int n = reflection->FieldSize(*message, field);
      for (int i = 0; i < n; ++i) {
        if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
          CollectSpots(reflection->MutableRepeatedMessage(message, field, i), spots);
        }
        spots->push_back(Spot{message, field, i});
      }
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      CollectSpots(reflection->MutableMessage(message, field), spots);
    } else {
      spots->push_back(Spot{message, field, -1});
    }
  }
}

int64_t EdgeValue(int64_t current, const std::vector<int64_t>& ids, std::mt19937_64* random) {
  // Neighbours wrap around (unsigned arithmetic) instead of overflowing.
  const uint64_t bits = static_cast<uint64_t>(current);
  const int64_t edges[] = {0,
                           1,
                           -1,
                           static_cast<int64_t>(bits + 1),
                           static_cast<int64_t>(bits - 1),
                           static_cast<int64_t>(bits * 2),
                           255,
                           256,
                           4096,
                           std::numeric_limits<int32_t>::max(),
                           int64_t{1} << 40,
                           std::numeric_limits<int64_t>::max(),
                           std::numeric_limits<int64_t>::min()};
  if (!ids.empty() && (*random)() % 3 == 0) return ids[(*random)() % ids.size()];
  return edges[(*random)() % (sizeof(edges) / sizeof(edges[0]))];
}

std::string MutateScalar(const Spot& spot, const std::vector<int64_t>& ids,
                         std::mt19937_64* random) {
  Message* m = spot.message;
  const Reflection* r = m->GetReflection();
  const FieldDescriptor* f = spot.field;
  const bool rep = spot.index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT64: {
      const int64_t v =
          EdgeValue(rep ? r->GetRepeatedInt64(*m, f, spot.index) : r->GetInt64(*m, f), ids, random);
      rep ? r->SetRepeatedInt64(m, f, spot.index, v) : r->SetInt64(m, f, v);
      return std::to_string(v);
    }
    case FieldDescriptor::CPPTYPE_INT32: {
      const int32_t v = static_cast<int32_t>(EdgeValue(0, {}, random));
      rep ? r->SetRepeatedInt32(m, f, spot.index, v) : r->SetInt32(m, f, v);
      return std::to_string(v);
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      const uint32_t v = static_cast<uint32_t>((*random)() % 4);
      rep ? r->SetRepeatedUInt32(m, f, spot.index, v) : r->SetUInt32(m, f, v);
      return std::to_string(v);
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int v = static_cast<int>((*random)() % 12) - 1;
      rep ? r->SetRepeatedEnumValue(m, f, spot.index, v) : r->SetEnumValue(m, f, v);
      return std::to_string(v);
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      if (!rep) r->SetBool(m, f, !r->GetBool(*m, f));
      return "flipped";
    case FieldDescriptor::CPPTYPE_STRING:
      rep ? r->SetRepeatedString(m, f, spot.index, "") : r->SetString(m, f, "");
      return "emptied";
    case FieldDescriptor::CPPTYPE_DOUBLE:
      if (!rep) r->SetDouble(m, f, -1e300);
      return "-1e300";
    default:
      return "unchanged";
  }
}

// Drops (swap with the last, remove it) or duplicates a repeated element.
std::string MutateRepeated(const Spot& spot, std::mt19937_64* random) {
  Message* m = spot.message;
  const Reflection* r = m->GetReflection();
  if ((*random)() % 2 == 0) {
    r->SwapElements(m, spot.field, spot.index, r->FieldSize(*m, spot.field) - 1);
    r->RemoveLast(m, spot.field);
    return "dropped element";
  }
  if (spot.field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) return "kept";
  Message* copy = r->AddMessage(m, spot.field);
  copy->CopyFrom(r->GetRepeatedMessage(*m, spot.field, spot.index));
  return "duplicated element";
}

std::vector<int64_t> IdsOf(const Plan& plan) {
  std::vector<int64_t> ids;
  for (const MachinePlan& machine : plan.machine()) {
    for (const TaskProto& task : machine.task()) {
      ids.push_back(task.task_id());
      for (const RegstDescProto& desc : task.produced()) ids.push_back(desc.regst_desc_id());
    }
  }
  return ids;
}

// Applies one mutation; returns a description.
std::string Mutate(Plan* plan, std::mt19937_64* random) {
  const std::vector<int64_t> ids = IdsOf(*plan);
  std::vector<Spot> spots;
  CollectSpots(plan, &spots);
  if (spots.empty()) return "nothing";
  const Spot spot = spots[(*random)() % spots.size()];
  const std::string where = spot.message->GetDescriptor()->name() + "." + spot.field->name() +
                            (spot.index >= 0 ? "[" + std::to_string(spot.index) + "]" : "");
  if (spot.index >= 0 &&
      ((*random)() % 4 == 0 || spot.field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)) {
    return where + ": " + MutateRepeated(spot, random);
  }
  return where + " = " + MutateScalar(spot, ids, random);
}

void RunTarget(const Plan& plan) {
  const std::string bytes = plan.SerializeAsString();
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

TEST(PlanFuzzTest, CompiledPlansLoadAndRun) {
  StatusOr<std::vector<testing::NamedPlan>> plans = testing::CompiledTestPlans();
  ASSERT_TRUE(plans.ok()) << plans.status();
  for (const testing::NamedPlan& plan : *plans) RunTarget(plan.plan);
}

// Found by the libFuzzer run: a data source whose label blob lost its
// batch axis (a scalar) threw from the shape's dim(0) in the kernel's Init
// instead of failing it with an error. Every source of every test plan,
// its outputs' blobs made scalars one at a time, must load or be refused.
TEST(PlanFuzzTest, ASourceOutputWithoutABatchAxisIsRefusedNotThrown) {
  StatusOr<std::vector<testing::NamedPlan>> plans = testing::CompiledTestPlans();
  ASSERT_TRUE(plans.ok()) << plans.status();
  int sources = 0;
  for (const testing::NamedPlan& named : *plans) {
    for (int m = 0; m < named.plan.machine_size(); ++m) {
      for (int t = 0; t < named.plan.machine(m).task_size(); ++t) {
        const TaskProto& task = named.plan.machine(m).task(t);
        if (task.kernel_size() == 0 || task.kernel(0).input_size() != 0) continue;
        for (int o = 0; o < task.kernel(0).output_size(); ++o) {
          const BlobBinding& out = task.kernel(0).output(o);
          Plan plan = named.plan;
          for (RegstDescProto& desc : *plan.mutable_machine(m)->mutable_task(t)->mutable_produced()) {
            if (desc.regst_desc_id() != out.regst_desc_id() || out.blob_index() < 0 ||
                out.blob_index() >= desc.blob_size()) {
              continue;
            }
            desc.mutable_blob(out.blob_index())->mutable_desc()->mutable_shape()->clear_dim();
            ++sources;
          }
          RunTarget(plan);
        }
      }
    }
  }
  EXPECT_GT(sources, 0);
}

TEST(PlanFuzzTest, MutatedPlansNeverCrashTheLoader) {
  StatusOr<std::vector<testing::NamedPlan>> plans = testing::CompiledTestPlans();
  ASSERT_TRUE(plans.ok()) << plans.status();
  const bool verbose = std::getenv("PLAN_FUZZ_VERBOSE") != nullptr;
  const int rounds =
      std::getenv("PLAN_FUZZ_ROUNDS") ? std::atoi(std::getenv("PLAN_FUZZ_ROUNDS")) : 3000;
  std::mt19937_64 random(20261201);
  int accepted = 0;
  for (int i = 0; i < rounds; ++i) {
    Plan plan = (*plans)[i % plans->size()].plan;
    const int mutations = 1 + static_cast<int>(random() % 3);
    for (int k = 0; k < mutations; ++k) {
      const std::string what = Mutate(&plan, &random);
      if (verbose)
        std::fprintf(stderr, "round %d (%s): %s\n", i, (*plans)[i % plans->size()].name.c_str(),
                     what.c_str());
    }
    accepted += VerifyPlan(plan).ok() ? 1 : 0;
    RunTarget(plan);
  }
  std::printf("%d of %d mutated plans were accepted by the verifier and loaded\n", accepted,
              rounds);
  // The mutations must leave some plans valid, or the runtime is not reached.
  EXPECT_GT(accepted, rounds / 20);
}

}  // namespace
}  // namespace oflite
