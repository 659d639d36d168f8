#include "oneflow_lite/compiler/task_graph.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "oneflow_lite/compiler/nd_sbp.h"

namespace oflite {
namespace compiler {
namespace {

int64_t AlignUp(int64_t bytes) {
  return (bytes + kBlobAlignment - 1) / kBlobAlignment * kBlobAlignment;
}

DeviceRef HostOf(int64_t machine) { return {machine, DEVICE_CPU, 0}; }

class Builder {
 public:
  Builder(const LogicalGraph& graph, const std::vector<OpSbp>& sbp, const Job& job,
          const TaskGraphOptions& options)
      : graph_(graph), sbp_(sbp), job_(job), options_(options) {
    op_parts_.resize(graph.nodes().size());
    op_tasks_.resize(graph.nodes().size());
  }

  StatusOr<TaskGraph> Run() {
    for (int id : graph_.topo_order()) RETURN_IF_ERROR(LowerOp(graph_.node(id)));
    RETURN_IF_ERROR(AddSink());
    AssignZones();
    AssignRegstNums();
    return std::move(g_);
  }

 private:
  using Blobs = std::vector<std::pair<std::string, TensorDesc>>;

  int NewTask(TaskType type, const std::string& name, const DeviceRef& device, int stream) {
    TaskNode t;
    t.index = static_cast<int>(g_.tasks.size());
    t.type = type;
    t.name = name;
    t.device = device;
    t.stream = stream;
    g_.tasks.push_back(std::move(t));
    return g_.tasks.back().index;
  }

  int NewRegst(int producer, const std::string& name, const Blobs& blobs) {
    RegstNode r;
    r.id = static_cast<int>(g_.regsts.size());
    r.name = name;
    r.producer = producer;
    const DeviceRef& d = g_.tasks[producer].device;
    r.zone.set_machine_id(d.machine);
    if (d.type == DEVICE_CUDA && g_.tasks[producer].type != TASK_COPY_D2H) {
      r.zone.set_type(ZONE_DEVICE);
      r.zone.set_device_type(DEVICE_CUDA);
      r.zone.set_device_index(d.index);
    } else {
      r.zone.set_type(ZONE_HOST);
      r.zone.set_device_type(DEVICE_CPU);
    }
    int64_t offset = 0;
    for (const auto& [lbn, desc] : blobs) {
      BlobInRegst* b = &r.blobs.emplace_back();
      b->set_lbn(lbn);
      *b->mutable_desc() = desc.ToProto();
      b->set_offset(offset);
      b->set_bytes(desc.ByteSize());
      offset += AlignUp(desc.ByteSize());
      r.is_dynamic = r.is_dynamic || desc.is_dynamic;
    }
    r.bytes_per_regst = offset;
    g_.regsts.push_back(std::move(r));
    g_.tasks[producer].produced.push_back(g_.regsts.back().id);
    return g_.regsts.back().id;
  }

  int NewCtrlRegst(int producer, const std::string& name) {
    int id = NewRegst(producer, name, {});
    g_.regsts[id].is_ctrl = true;
    return id;
  }

  // Same blobs as `src`, produced by `producer`.
  int CopyOfRegst(int src, int producer, const std::string& name) {
    const RegstNode& s = g_.regsts[src];
    if (s.is_ctrl) return NewCtrlRegst(producer, name);
    Blobs blobs;
    for (const BlobInRegst& b : s.blobs) blobs.emplace_back(b.lbn(), TensorDesc(b.desc()));
    return NewRegst(producer, name, blobs);
  }

  // Adds `regst` under `name` unless the task consumes it already; returns the
  // name it is consumed under.
  std::string Consume(int task, const std::string& name, int regst) {
    TaskNode& t = g_.tasks[task];
    for (const auto& [existing, ids] : t.consumed) {
      if (std::find(ids.begin(), ids.end(), regst) != ids.end()) return existing;
    }
    RegstNode& r = g_.regsts[regst];
    r.consumers.push_back(task);
    for (auto& [existing, ids] : t.consumed) {
      if (existing == name) {
        ids.push_back(regst);
        return name;
      }
    }
    t.consumed.emplace_back(name, std::vector<int>{regst});
    return name;
  }

  std::string RegstLabel(int regst) const {
    const RegstNode& r = g_.regsts[regst];
    return r.blobs.empty() ? g_.tasks[r.producer].name + "/" + r.name : r.blobs[0].lbn();
  }

  int64_t MachineOf(int regst) const { return g_.tasks[g_.regsts[regst].producer].device.machine; }

  int ToHost(int regst) {
    auto it = d2h_.find(regst);
    if (it != d2h_.end()) return it->second;
    const DeviceRef device = g_.tasks[g_.regsts[regst].producer].device;
    int task = NewTask(TASK_COPY_D2H, "d2h:" + RegstLabel(regst) + "@" + device.ToString(), device,
                       kD2HStream);
    Consume(task, "in", regst);
    int out = CopyOfRegst(regst, task, "out");
    return d2h_[regst] = out;
  }

  int ToDevice(int regst, const DeviceRef& device) {
    auto key = std::make_pair(regst, device.index);
    auto it = h2d_.find(key);
    if (it != h2d_.end()) return it->second;
    int task = NewTask(TASK_COPY_H2D, "h2d:" + RegstLabel(regst) + "@" + device.ToString(), device,
                       kH2DStream);
    Consume(task, "in", regst);
    int out = CopyOfRegst(regst, task, "out");
    return h2d_[key] = out;
  }

  int ToMachine(int regst, int64_t machine) {
    auto key = std::make_pair(regst, machine);
    auto it = commnet_.find(key);
    if (it != commnet_.end()) return it->second;
    int task = NewTask(TASK_COMMNET,
                       "commnet:" + RegstLabel(regst) + "@m" + std::to_string(MachineOf(regst)) +
                           "->m" + std::to_string(machine),
                       HostOf(machine), kCommNetStream);
    Consume(task, "in", regst);
    g_.tasks[task].commnet_src_regst = regst;
    RegstNode& r = g_.regsts[regst];
    if (!r.is_ctrl) {
      r.cross_machine_strategy = r.is_dynamic ? CM_BOUNCE_BUFFER : CM_STATIC_ZERO_COPY;
    }
    int out = CopyOfRegst(regst, task, "out");
    return commnet_[key] = out;
  }

  // Returns a register holding the same data that `task` can read directly.
  int Deliver(int regst, int task) {
    const DeviceRef dst = g_.tasks[task].device;  // a copy: tasks may grow
    const bool dst_on_device = dst.type == DEVICE_CUDA;
    auto key = std::make_tuple(regst, dst.machine, dst_on_device ? dst.index : -1);
    auto it = deliver_.find(key);
    if (it != deliver_.end()) return it->second;
    int cur = regst;
    if (g_.regsts[cur].is_ctrl) {
      if (MachineOf(cur) != dst.machine) cur = ToMachine(cur, dst.machine);
      return deliver_[key] = cur;
    }
    if (MachineOf(cur) != dst.machine) {
      if (g_.regsts[cur].zone.type() == ZONE_DEVICE) cur = ToHost(cur);
      cur = ToMachine(cur, dst.machine);
    }
    const MemZoneId zone = g_.regsts[cur].zone;
    if (zone.type() == ZONE_DEVICE) {
      if (!(dst_on_device && zone.device_index() == dst.index)) {
        cur = ToHost(cur);
        if (dst_on_device) cur = ToDevice(cur, dst);
      }
    } else if (dst_on_device) {
      cur = ToDevice(cur, dst);
    }
    return deliver_[key] = cur;
  }

  // Boxing for part j runs on that part's CPU device (its own threads), or on
  // the host (cpu:0) of the machine for CUDA placements.
  static DeviceRef BoxingDevice(const DeviceRef& part) {
    return part.type == DEVICE_CPU ? part : HostOf(part.machine);
  }

  // One step of an n-D conversion on one sub-group (boxing tasks of a
  // hierarchical placement).
  struct SubGroupStep {
    const NdBoxingStep* step = nullptr;
    Hierarchy hierarchy;
    std::vector<int64_t> group;  // parallel ids in the whole placement
    TensorDesc logical;          // the tensor as split by the other axes
  };

  // `nd` null: a flat conversion over the whole logical tensor.
  int AddBoxingTask(TaskType type, const BoxingStep& step, const std::string& lbn,
                    int64_t parallel_num, int64_t j, const DeviceRef& part,
                    const std::vector<int>& inputs, const std::vector<int64_t>& input_ids,
                    const SubGroupStep* nd = nullptr) {
    const bool collective = type == TASK_COLLECTIVE;
    std::string name = std::string(collective ? "collective:" : "boxing:") +
                       BoxingKindShortName(step.kind) + ":" + lbn + "@" +
                       std::to_string(nd ? nd->group[j] : j);
    if (nd) name += "/axis" + std::to_string(nd->step->axis);
    int task = NewTask(type, name, BoxingDevice(part),
                       collective ? kCollectiveStream : kBoxingStream);
    g_.tasks[task].parallel_id = j;
    g_.tasks[task].parallel_num = parallel_num;
    const TensorDesc& logical = nd ? nd->logical : graph_.blob(lbn).desc;
    BoxingConf* conf = &g_.tasks[task].boxing;
    conf->set_kind(step.kind);
    conf->set_lbn(lbn);
    *conf->mutable_in_sbp() = ToNdSbp(step.in);
    *conf->mutable_out_sbp() = ToNdSbp(step.out);
    *conf->mutable_logical_desc() = logical.ToProto();
    conf->set_out_parallel_id(j);
    conf->set_parallel_num(parallel_num);
    if (nd) {
      for (int64_t h : nd->hierarchy) conf->mutable_hierarchy()->add_dim(h);
      conf->set_hierarchy_axis(nd->step->axis);
      for (int64_t id : nd->group) conf->add_group_parallel_id(id);
      *conf->mutable_nd_in_sbp() = nd->step->before;
      *conf->mutable_nd_out_sbp() = nd->step->after;
    }
    for (size_t k = 0; k < inputs.size(); ++k) {
      int in = Deliver(inputs[k], task);
      Consume(task, "in", in);
      conf = &g_.tasks[task].boxing;  // Deliver may grow the task vector
      conf->add_in_regst_desc_id(in);
      conf->add_in_parallel_id(input_ids[k]);
    }
    return NewRegst(task, "out", {{lbn, PhysicalDesc(logical, step.out, parallel_num, j)}});
  }

  std::vector<int> LowerStep(const BoxingStep& step, const std::string& lbn,
                             const PlacementProto& placement, const std::vector<int>& parts) {
    const int64_t n = ParallelNum(placement);
    std::vector<DeviceRef> devices = PlacementDevices(placement);
    std::vector<int> out(n);
    if (!BoxingCommunicates(step.kind)) {
      for (int64_t j = 0; j < n; ++j) {
        out[j] = AddBoxingTask(TASK_BOXING, step, lbn, n, j, devices[j], {parts[j]}, {j});
      }
      return out;
    }
    if (IsSingleMachine(placement)) {
      std::vector<int64_t> ids(n);
      for (int64_t i = 0; i < n; ++i) ids[i] = i;
      for (int64_t j = 0; j < n; ++j) {
        out[j] = AddBoxingTask(TASK_BOXING, step, lbn, n, j, devices[j], parts, ids);
      }
      return out;
    }
    std::vector<int> ring;
    for (int64_t j = 0; j < n; ++j) {
      out[j] = AddBoxingTask(TASK_COLLECTIVE, step, lbn, n, j, devices[j], {parts[j]}, {j});
      RegstNode& r = g_.regsts[out[j]];
      r.cross_machine_strategy = r.is_dynamic ? CM_BOUNCE_BUFFER : CM_STATIC_ZERO_COPY;
      ring.push_back(r.producer);
    }
    for (int64_t j = 0; j < n; ++j) {
      TaskNode& t = g_.tasks[ring[j]];
      t.ring_tasks = ring;
      t.boxing.set_ring_rank(j);
    }
    return out;
  }

  // Turns the ring tasks of one collective into a ring (ring rank = index).
  void MakeRing(const std::vector<int>& outputs) {
    std::vector<int> ring;
    for (int out : outputs) {
      RegstNode& r = g_.regsts[out];
      r.cross_machine_strategy = r.is_dynamic ? CM_BOUNCE_BUFFER : CM_STATIC_ZERO_COPY;
      ring.push_back(r.producer);
    }
    for (size_t j = 0; j < ring.size(); ++j) {
      TaskNode& t = g_.tasks[ring[j]];
      t.ring_tasks = ring;
      t.boxing.set_ring_rank(static_cast<int64_t>(j));
    }
  }

  // One step of an n-D conversion: the 1-D step on every sub-group of its
  // axis, lowered like LowerStep over the sub-group's parts.
  std::vector<int> LowerNdStep(const NdBoxingStep& step, const std::string& lbn,
                               const PlacementProto& placement, const std::vector<int>& parts) {
    const Hierarchy hierarchy = PlacementHierarchy(placement);
    const std::vector<DeviceRef> devices = PlacementDevices(placement);
    const int64_t n = hierarchy[step.axis];
    std::vector<int> out(parts.size());
    for (const std::vector<int64_t>& group : SubGroups(hierarchy, step.axis)) {
      SubGroupStep nd;
      nd.step = &step;
      nd.hierarchy = hierarchy;
      nd.group = group;
      nd.logical = SubGroupLogicalDesc(graph_.blob(lbn).desc, step.before, hierarchy, step.axis,
                                       group[0]);
      std::vector<int> group_parts;
      std::vector<int64_t> ids;
      bool one_machine = true;
      for (int64_t j = 0; j < n; ++j) {
        group_parts.push_back(parts[group[j]]);
        ids.push_back(j);
        one_machine = one_machine && devices[group[j]].machine == devices[group[0]].machine;
      }
      std::vector<int> group_out;
      for (int64_t j = 0; j < n; ++j) {
        const DeviceRef& device = devices[group[j]];
        int regst;
        if (!BoxingCommunicates(step.step.kind)) {
          regst = AddBoxingTask(TASK_BOXING, step.step, lbn, n, j, device, {group_parts[j]}, {j},
                                &nd);
        } else if (one_machine) {
          regst = AddBoxingTask(TASK_BOXING, step.step, lbn, n, j, device, group_parts, ids, &nd);
        } else {
          regst = AddBoxingTask(TASK_COLLECTIVE, step.step, lbn, n, j, device, {group_parts[j]},
                                {j}, &nd);
        }
        group_out.push_back(regst);
        out[group[j]] = regst;
      }
      if (!one_machine && BoxingCommunicates(step.step.kind)) MakeRing(group_out);
    }
    return out;
  }

  std::vector<int> LowerNdPath(const std::string& lbn, const PlacementProto& placement,
                               const std::vector<int>& parts, const NdSbp& from, const NdSbp& to) {
    std::vector<int> cur = parts;
    for (const NdBoxingStep& step : NdBoxingPath(from, to, PlacementHierarchy(placement))) {
      cur = LowerNdStep(step, lbn, placement, cur);
    }
    return cur;
  }

  // Converts the parts of `lbn` (layout `from` on `placement`) to `to`.
  std::vector<int> Box(const std::string& lbn, const PlacementProto& placement,
                       const std::vector<int>& parts, const NdSbp& from, const NdSbp& to) {
    const Hierarchy hierarchy = PlacementHierarchy(placement);
    std::string key = lbn + "|" + PlacementToString(placement) + "|" +
                      NdSbpToString(NormalizeNdSbp(to, hierarchy));
    auto it = box_.find(key);
    if (it != box_.end()) return it->second;
    std::vector<int> cur = parts;
    if (IsHierarchical(placement)) {
      // Every intermediate layout is cached too: two conversions of one
      // tensor that start alike (a gradient read as (B, S(1)) by its update
      // and as (B, B) by the norm clip: both all-reduce axis 0 first) share
      // that prefix instead of running the same collective twice.
      for (const NdBoxingStep& step : NdBoxingPath(from, to, hierarchy)) {
        const std::string step_key = lbn + "|" + PlacementToString(placement) + "|" +
                                     NdSbpToString(NormalizeNdSbp(step.after, hierarchy));
        auto done = box_.find(step_key);
        cur = done != box_.end() ? done->second : LowerNdStep(step, lbn, placement, cur);
        box_[step_key] = cur;
      }
    } else {
      const int64_t n = ParallelNum(placement);
      for (const BoxingStep& step : BoxingPath(from.sbp(0), to.sbp(0), n)) {
        cur = LowerStep(step, lbn, placement, cur);
      }
    }
    return box_[key] = cur;
  }

  // Registers holding part j (of layout `to` on `consumer`) of `lbn`, for
  // every parallel id j of the consumer placement.
  std::vector<int> InputParts(const std::string& lbn, const PlacementProto& consumer,
                              const NdSbp& to_raw) {
    const int64_t nc = ParallelNum(consumer);
    const NdSbp to = NormalizeNdSbp(to_raw, PlacementHierarchy(consumer));
    std::string key = lbn + "|" + PlacementToString(consumer) + "|" + NdSbpToString(to);
    auto it = parts_.find(key);
    if (it != parts_.end()) return it->second;
    const BlobInfo& blob = graph_.blob(lbn);
    const PlacementProto& producer = graph_.node(blob.producer).placement();
    const NdSbp& from = sbp_[blob.producer].outputs[blob.producer_slot];
    const std::vector<int>& parts = op_parts_[blob.producer][blob.producer_slot];
    const int64_t np = ParallelNum(producer);
    std::vector<int> result;
    if (PlacementEqual(producer, consumer)) {
      result = Box(lbn, producer, parts, from, to);
    } else if (IsHierarchical(producer) || IsHierarchical(consumer)) {
      // All-B on the producer, a whole replica to each consumer device,
      // then local cuts there.
      const NdSbp producer_b = AllBroadcastNdSbp(PlacementHierarchy(producer).size());
      std::vector<int> boxed = Box(lbn, producer, parts, from, producer_b);
      for (int64_t j = 0; j < nc; ++j) result.push_back(boxed[j % np]);
      if (IsHierarchical(consumer)) {
        result = LowerNdPath(lbn, consumer, result,
                             AllBroadcastNdSbp(PlacementHierarchy(consumer).size()), to);
      } else {
        std::vector<DeviceRef> devices = PlacementDevices(consumer);
        for (int64_t j = 0; j < nc; ++j) {
          for (const BoxingStep& step : BoxingPath(BroadcastSbp(), to.sbp(0), nc)) {
            result[j] = AddBoxingTask(TASK_BOXING, step, lbn, nc, j, devices[j], {result[j]}, {j});
          }
        }
      }
    } else {
      const SbpParallel mid = np == nc ? to.sbp(0) : BroadcastSbp();
      std::vector<int> boxed = Box(lbn, producer, parts, from, ToNdSbp(mid));
      std::vector<DeviceRef> devices = PlacementDevices(consumer);
      for (int64_t j = 0; j < nc; ++j) {
        int src = boxed[j % np];
        std::vector<BoxingStep> local = BoxingPath(mid, to.sbp(0), nc);
        for (const BoxingStep& step : local) {
          src = AddBoxingTask(TASK_BOXING, step, lbn, nc, j, devices[j], {src}, {j});
        }
        result.push_back(src);
      }
    }
    return parts_[key] = result;
  }

  TaskType TypeOf(const LogicalNode& node) const {
    if (node.is_variable) return TASK_VARIABLE;
    return node.is_source ? TASK_SOURCE : TASK_COMPUTE;
  }

  Status LowerOp(const LogicalNode& node) {
    const int64_t n = ParallelNum(node.placement());
    std::vector<DeviceRef> devices = PlacementDevices(node.placement());
    const OpSbp& sbp = sbp_[node.id];
    const TaskType type = TypeOf(node);
    // Inputs first, so boxing tasks precede the op's tasks in creation order.
    std::vector<std::vector<int>> input_parts(node.inputs.size());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.IsMutableInput(node.inputs[i].arg)) continue;
      input_parts[i] = InputParts(node.inputs[i].lbn, node.placement(), sbp.inputs[i]);
    }
    for (int64_t j = 0; j < n; ++j) {
      DeviceRef device = devices[j];
      int stream = kComputeStream;
      if (type == TASK_SOURCE) {
        if (device.type == DEVICE_CUDA) device = HostOf(device.machine);
        stream = kSourceStream;
      }
      std::string name = n == 1 ? node.op.name() : node.op.name() + "@" + std::to_string(j);
      int task = NewTask(type, name, device, stream);
      g_.tasks[task].op_name = node.op.name();
      g_.tasks[task].parallel_id = j;
      g_.tasks[task].parallel_num = n;
      if (IsHierarchical(node.placement())) {
        g_.tasks[task].hierarchy = PlacementHierarchy(node.placement());
      }
      op_tasks_[node.id].push_back(task);
      RETURN_IF_ERROR(BindOp(node, j, task, input_parts));
    }
    return AddControlInputs(node);
  }

  Status BindOp(const LogicalNode& node, int64_t j, int task,
                const std::vector<std::vector<int>>& input_parts) {
    const OpSbp& sbp = sbp_[node.id];
    const int64_t n = ParallelNum(node.placement());
    KernelConf kernel;
    *kernel.mutable_op() = node.op;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const ArgSlot& in = node.inputs[i];
      int regst;
      if (node.IsMutableInput(in.arg)) {
        const BlobInfo& blob = graph_.blob(in.lbn);
        regst = op_parts_[blob.producer][blob.producer_slot][j];
        const TaskNode& producer = g_.tasks[g_.regsts[regst].producer];
        if (producer.device != g_.tasks[task].device) {
          return InternalError("op '", node.op.name(), "': in-place input '", in.SlotName(),
                               "' is on ", producer.device.ToString(), ", not on ",
                               g_.tasks[task].device.ToString());
        }
        Consume(task, in.SlotName(), regst);
        g_.regsts[regst].mutators.push_back(task);
      } else {
        regst = Deliver(input_parts[i][j], task);
        Consume(task, in.SlotName(), regst);
      }
      BlobBinding* b = kernel.add_input();
      b->set_arg(in.arg);
      b->set_index(in.index);
      b->set_regst_desc_id(regst);
      *kernel.add_input_sbp() = sbp.inputs[i];
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const ArgSlot& out = node.outputs[i];
      const TensorDesc& logical = graph_.blob(out.lbn).desc;
      const TensorDesc part =
          IsHierarchical(node.placement())
              ? NdPhysicalDesc(logical, sbp.outputs[i], PlacementHierarchy(node.placement()), j)
              : PhysicalDesc(logical, sbp.outputs[i].sbp(0), n, j);
      int regst = NewRegst(task, out.SlotName(), {{out.lbn, part}});
      if (node.is_variable) g_.regsts[regst].is_persistent = true;
      if (op_parts_[node.id].size() <= i) op_parts_[node.id].resize(i + 1);
      op_parts_[node.id][i].push_back(regst);
      BlobBinding* b = kernel.add_output();
      b->set_arg(out.arg);
      b->set_index(out.index);
      b->set_regst_desc_id(regst);
      *kernel.add_output_sbp() = sbp.outputs[i];
    }
    if (!node.inputs.empty()) {
      kernel.set_dtype(graph_.blob(node.inputs[0].lbn).desc.dtype);
    } else if (!node.outputs.empty()) {
      kernel.set_dtype(graph_.blob(node.outputs[0].lbn).desc.dtype);
    }
    g_.tasks[task].kernels.push_back(std::move(kernel));
    return Status::OK();
  }

  int CtrlRegstOf(int task) {
    auto it = ctrl_.find(task);
    if (it != ctrl_.end()) return it->second;
    return ctrl_[task] = NewCtrlRegst(task, "ctrl");
  }

  Status AddControlInputs(const LogicalNode& node) {
    for (int pred : node.control_inputs) {
      const bool same = PlacementEqual(graph_.node(pred).placement(), node.placement());
      const std::vector<int>& from = op_tasks_[pred];
      const std::vector<int>& to = op_tasks_[node.id];
      for (size_t i = 0; i < from.size(); ++i) {
        for (size_t j = 0; j < to.size(); ++j) {
          if (same && i != j) continue;
          Consume(to[j], "ctrl", Deliver(CtrlRegstOf(from[i]), to[j]));
        }
      }
    }
    return Status::OK();
  }

  Status AddSink() {
    std::vector<std::pair<std::string, std::string>> metrics;  // name, lbn
    const TrainConf& train = job_.conf().train();
    if (!train.loss_lbn().empty()) metrics.emplace_back("loss", train.loss_lbn());
    for (int i = 0; i < train.metric_size(); ++i) {
      const ArgProto& m = train.metric(i);
      if (m.lbn_size() != 1 || m.name().empty()) {
        return InvalidArgumentError("job conf: train.metric[", i, "] ('", m.name(),
                                    "') must have a name and exactly one blob");
      }
      // The graph API lists the loss among the metrics too.
      if (m.name() == "loss" && m.lbn(0) == train.loss_lbn()) continue;
      metrics.emplace_back(m.name(), m.lbn(0));
    }
    // Named outputs travel only in inference / evaluation plans.
    const size_t metric_count = metrics.size();
    for (int i = 0; !job_.conf().is_train() && i < train.output_size(); ++i) {
      const ArgProto& o = train.output(i);
      if (o.lbn_size() != 1 || o.name().empty()) {
        return InvalidArgumentError("job conf: train.output[", i, "] ('", o.name(),
                                    "') must have a name and exactly one blob");
      }
      metrics.emplace_back(o.name(), o.lbn(0));
    }
    if (metrics.empty()) return Status::OK();
    std::set<std::string> names;
    for (const auto& [name, lbn] : metrics) {
      if (!graph_.HasBlob(lbn)) {
        return InvalidArgumentError("job conf: metric '", name, "' names blob '", lbn,
                                    "' which no op produces");
      }
      if (!names.insert(name).second) {
        return InvalidArgumentError("job conf: metric name '", name, "' is used twice");
      }
    }
    PlacementProto sink_placement;
    sink_placement.set_device_type(DEVICE_CPU);
    sink_placement.add_machine_id(0);
    sink_placement.add_device_id(0);
    int sink = NewTask(TASK_SINK, "sink", HostOf(0), kSinkStream);
    for (size_t i = 0; i < metrics.size(); ++i) {
      const auto& [name, lbn] = metrics[i];
      std::vector<int> parts = InputParts(lbn, sink_placement, ToNdSbp(BroadcastSbp()));
      std::string consumed = Consume(sink, name, Deliver(parts[0], sink));
      SinkMetric* m = g_.tasks[sink].sink.add_metric();
      m->set_name(name);
      m->set_lbn(lbn);
      m->set_consumed_name(consumed);
      m->set_is_output(i >= metric_count);
    }
    return Status::OK();
  }

  void AssignZones() {
    for (RegstNode& r : g_.regsts) {
      if (r.zone.type() == ZONE_DEVICE) continue;
      bool pinned = g_.tasks[r.producer].type == TASK_COPY_D2H;
      for (int c : r.consumers) pinned = pinned || g_.tasks[c].type == TASK_COPY_H2D;
      if (pinned) r.zone.set_type(ZONE_PINNED_HOST);
    }
  }

  void AssignRegstNums() {
    const int depth = std::max(1, options_.pipeline_depth);
    for (RegstNode& r : g_.regsts) {
      const TaskNode& producer = g_.tasks[r.producer];
      if (r.is_persistent || r.is_ctrl) {
        r.regst_num = 1;
        continue;
      }
      bool boundary = producer.type == TASK_SOURCE || producer.type == TASK_COMMNET ||
                      r.cross_machine_strategy != CM_NONE;
      for (int c : r.consumers) {
        const TaskNode& consumer = g_.tasks[c];
        boundary = boundary || consumer.device != producer.device;
        // Between two streams of a GPU (H2D copy -> compute, compute -> D2H
        // copy) a copy comes back only after the host saw the reader's work
        // done: with one copy, the next write would wait for that round trip.
        boundary = boundary || (producer.device.type == DEVICE_CUDA &&
                                consumer.stream != producer.stream);
      }
      r.regst_num = boundary ? depth : 1;
    }
  }

  const LogicalGraph& graph_;
  const std::vector<OpSbp>& sbp_;
  const Job& job_;
  const TaskGraphOptions& options_;
  TaskGraph g_;
  std::vector<std::vector<std::vector<int>>> op_parts_;  // node -> out slot -> pid -> regst
  std::vector<std::vector<int>> op_tasks_;               // node -> pid -> task
  std::map<int, int> d2h_;
  std::map<std::pair<int, int64_t>, int> h2d_;
  std::map<std::pair<int, int64_t>, int> commnet_;
  std::map<std::tuple<int, int64_t, int64_t>, int> deliver_;
  std::map<std::string, std::vector<int>> box_;
  std::map<std::string, std::vector<int>> parts_;
  std::map<int, int> ctrl_;
};

}  // namespace

void RemoveTasks(TaskGraph* graph, const std::vector<bool>& removed) {
  std::vector<int> index(graph->tasks.size(), -1);
  std::vector<TaskNode> kept;
  for (TaskNode& t : graph->tasks) {
    if (removed[t.index]) continue;
    index[t.index] = static_cast<int>(kept.size());
    kept.push_back(std::move(t));
  }
  auto remap = [&](std::vector<int>* tasks) {
    for (int& task : *tasks) task = index[task];
  };
  for (TaskNode& t : kept) {
    t.index = index[t.index];
    remap(&t.ring_tasks);
  }
  for (RegstNode& r : graph->regsts) {
    r.producer = index[r.producer];
    remap(&r.consumers);
    remap(&r.mutators);
  }
  graph->tasks = std::move(kept);
}

StatusOr<TaskGraph> BuildTaskGraph(const LogicalGraph& graph, const std::vector<OpSbp>& sbp,
                                   const Job& job, const ClusterProto& cluster,
                                   const TaskGraphOptions& options) {
  (void)cluster;
  Builder builder(graph, sbp, job, options);
  return builder.Run();
}

}  // namespace compiler
}  // namespace oflite
