#include "oneflow_lite/cost/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <sstream>
#include <unordered_map>

#include "oneflow_lite/common/id.h"
#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/cost/calibration.h"
#include "oneflow_lite/cost/kernel_key.h"

namespace oflite {
namespace cost {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Work or bytes shared by whoever is on a resource at once: item i advances
// at min(cap_i, capacity * weight_i / sum of weights) units per us.
//
// Cores with a time slice (SetSlice, RuntimeCost.core_slice_us): while more
// threads compute than there are cores, the kernel's scheduler does not
// share a core fluidly but runs its compute threads in turns of about one
// slice each (4 ms on the 2-core VM: two spinning threads pinned to one
// core alternate every 4.0 ms). So compute items of an "owner" (a thread)
// advance only while the owner holds a turn; an owner keeps it until its
// slice is used up or it stops computing (after a short grace, since a
// stream thread whose next act follows at once never gives the core
// away), and waiting owners get turns in arrival order. Two ranks sharing
// a core thereby run up to a slice apart, and a collective between them
// waits for the one that is off its core: what fluid sharing misses.
// Items without an owner (a transport's byte work) always share fluidly.
class SharedResource {
 public:
  using Done = std::function<void(double now)>;
  using Scheduler = std::function<void(double, std::function<void(double)>)>;
  explicit SharedResource(double capacity) : capacity_(capacity) {}

  // Turns of `slice_us` for owned compute items; 0 (the default): fluid.
  void SetSlice(double slice_us) { slice_ = slice_us > 0 ? slice_us : 0; }

  // Adds an item of `amount` units; `done` runs (through `schedule`) when it
  // is through. Returns nothing: completion is an event.
  // `compute`: an act of a thread (not a transport's byte work), what
  // WhenNotComputing waits for; `owner`: that thread (>= 0), for turns.
  void Add(double now, double amount, double cap, double weight, Done done,
           const Scheduler& schedule, bool compute = false, int owner = -1) {
    Advance(now);
    Item item;
    item.remaining = amount;
    item.cap = cap;
    item.weight = weight;
    item.compute = compute;
    item.owner = compute ? owner : -1;
    item.done = std::move(done);
    items_[next_id_++] = std::move(item);
    Reschedule(now, schedule);
  }

  // Runs `ready` (through `schedule`) once a unit is not computing: at once
  // when compute items take fewer than `capacity` units, else when the
  // compute work leaves one free (an act ends and no other takes its
  // place) or after `max_wait`, whichever is first.
  void WhenNotComputing(double now, double max_wait, Done ready,
                        const std::function<void(double, std::function<void(double)>)>& schedule) {
    if (Computing() < capacity_ || !(max_wait > 0)) {
      schedule(now, std::move(ready));
      return;
    }
    auto waiter = std::make_shared<Done>(std::move(ready));
    waiters_.push_back(waiter);
    schedule(now + max_wait, [waiter](double t) { Fire(waiter, t); });
  }

 private:
  struct Item;
  static void Fire(const std::shared_ptr<Done>& waiter, double t) {
    if (!*waiter) return;  // fired already
    Done ready = std::move(*waiter);
    *waiter = nullptr;
    ready(t);
  }

  double Computing() const {
    double computing = 0;
    for (const auto& [id, item] : items_) computing += item.compute && Runs(item) ? 1 : 0;
    return computing;
  }

  bool Sliced() const { return slice_ > 0 && !std::isinf(capacity_); }
  // Whether `item` advances now (not an owned compute item off its turn).
  bool Runs(const Item& item) const {
    return !Sliced() || item.owner < 0 || turns_.count(item.owner) != 0;
  }

  // Brings the turns up to date with the items: owners that stopped
  // computing (beyond the grace) give their turn up, new ones queue, free
  // cores go to the queue's front, and the next turn's end is scheduled.
  void UpdateTurns(double now, const Scheduler& schedule) {
    if (!Sliced()) return;
    std::set<int> computing;
    for (const auto& [id, item] : items_) {
      if (item.owner >= 0) computing.insert(item.owner);
    }
    for (auto it = turns_.begin(); it != turns_.end();) {
      Turn& turn = it->second;
      if (computing.count(it->first) != 0) {
        turn.idle_since = -1;
        ++it;
      } else if (turn.idle_since < 0) {
        turn.idle_since = now;  // give it up after the grace, if still idle
        schedule(now + kTurnGrace, [this, schedule](double t) {
          Advance(t);
          Reschedule(t, schedule);
        });
        ++it;
      } else if (now - turn.idle_since >= kTurnGrace) {
        it = turns_.erase(it);
      } else {
        ++it;
      }
    }
    waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(),
                                  [&](int owner) { return computing.count(owner) == 0; }),
                   waiting_.end());
    for (int owner : computing) {
      if (turns_.count(owner) == 0 &&
          std::find(waiting_.begin(), waiting_.end(), owner) == waiting_.end()) {
        waiting_.push_back(owner);
      }
    }
    while (static_cast<double>(turns_.size()) < capacity_ && !waiting_.empty()) {
      turns_[waiting_.front()] = Turn{now, -1};
      waiting_.pop_front();
    }
    if (waiting_.empty()) return;
    // The turn that began first ends first; its owner queues again.
    auto first = std::min_element(turns_.begin(), turns_.end(), [](const auto& a, const auto& b) {
      return a.second.began < b.second.began;
    });
    const int owner = first->first;
    const double began = first->second.began;
    schedule(std::max(now, began + slice_), [this, owner, began, schedule](double t) {
      auto it = turns_.find(owner);
      if (it == turns_.end() || it->second.began != began || waiting_.empty()) return;
      Advance(t);
      turns_.erase(it);
      waiting_.push_back(owner);
      Reschedule(t, schedule);
    });
  }

  // After an item ended (and whatever its end started at that instant):
  // the waiters go when a unit stopped computing.
  void ReleaseWaiters(double now,
                      const std::function<void(double, std::function<void(double)>)>& schedule) {
    if (waiters_.empty() || Computing() >= capacity_) return;
    std::vector<std::shared_ptr<Done>> waiters = std::move(waiters_);
    waiters_.clear();
    for (auto& waiter : waiters) schedule(now, [waiter](double t) { Fire(waiter, t); });
  }

  struct Item {
    double remaining = 0;
    double cap = kInf;
    double weight = 1;
    double rate = 0;
    bool compute = false;
    int owner = -1;
    uint64_t version = 0;
    Done done;
  };
  struct Turn {
    double began = 0;
    double idle_since = -1;  // < 0: computing
  };
  // How long an owner with its turn may go without a compute item and keep
  // it (its next act starting at once, through the runtime's messages).
  static constexpr double kTurnGrace = 5;

  void Advance(double now) {
    double dt = now - last_;
    if (dt > 0) {
      for (auto& [id, item] : items_) item.remaining = std::max(0.0, item.remaining - dt * item.rate);
    }
    last_ = now;
  }

  void Reschedule(double now, const Scheduler& schedule) {
    UpdateTurns(now, schedule);
    double weights = 0;
    for (auto& [id, item] : items_) weights += Runs(item) ? item.weight : 0;
    for (auto& [id, item] : items_) {
      double share = std::isinf(capacity_) ? kInf : capacity_ * item.weight / weights;
      item.rate = Runs(item) ? std::min(item.cap, share) : 0;
      ++item.version;
      if (item.rate <= 0 && item.remaining > 0) continue;  // off its turn: no end yet
      double finish = item.remaining <= 0 ? now
                      : std::isinf(item.rate) ? now
                                              : now + item.remaining / item.rate;
      uint64_t id_copy = id;
      uint64_t version = item.version;
      schedule(finish, [this, id_copy, version, schedule](double t) {
        auto it = items_.find(id_copy);
        if (it == items_.end() || it->second.version != version) return;
        Advance(t);
        Done done = std::move(it->second.done);
        items_.erase(it);
        Reschedule(t, schedule);
        done(t);
        ReleaseWaiters(t, schedule);
      });
    }
  }

  double capacity_;
  double last_ = 0;
  uint64_t next_id_ = 0;
  std::map<uint64_t, Item> items_;
  std::vector<std::shared_ptr<Done>> waiters_;  // of WhenNotComputing
  double slice_ = 0;          // SetSlice; 0: fluid
  std::map<int, Turn> turns_;  // owners on a core now
  std::deque<int> waiting_;    // owners computing without a core, first come first
};

struct Readable {
  int regst;
  int copy;
  int64_t piece;
  int node;  // the act that produced it
};

struct CopyState {
  int64_t piece = -1;
  int owing = 0;
  bool to_mutators = false;  // readers done, mutators hold it
};

struct Regst {
  const RegstDescProto* desc = nullptr;
  int producer = -1;
  std::vector<int> readers;
  std::vector<int> mutators;
  std::deque<int> free_copies;
  std::vector<CopyState> copies;
  int64_t bytes = 0;
  // Per copy: its box's bytes-touched count when an act last touched it
  // (TouchTensors); -1: never.
  std::vector<double> touched_at;
};

enum WorkKind { kAct = 0, kCommNetAct = 1, kCutOut = 2 };

struct Node {
  double begin = 0;
  double end = 0;
  int pred = -1;
  int label = -1;  // index into labels
  int kind = 0;    // 0 act, 1 read, 2 collective
  int64_t piece = 0;
};

struct Actor {
  const TaskProto* task = nullptr;
  int thread = -1;
  int64_t machine = 0;
  std::vector<int> consumed;
  std::vector<std::deque<Readable>> inbox;
  std::vector<int> produced;
  double act_us = 0;       // the act (or a collective's staging act)
  // What its kernels take more when all their tensors come from memory
  // (KernelTime.cold_extra_us); charged by the share out of cache.
  double cold_extra_us = 0;
  double cutout_us = 0;    // a collective's second act
  int64_t acts = 0;
  bool queued = false;
  bool busy = false;       // a READ or a collective in flight
  int enabler = -1;        // the node that last made it readier
  // Held across a READ or a collective.
  std::vector<Readable> held_inputs;
  std::vector<int> held_copies;
  int64_t held_piece = 0;
  // Collective.
  std::string ring_key;
  int ring_size = 1;
  CollectiveTraffic traffic;
  double floor_us = -1;
  int64_t next_machine = -1;  // the ring's next rank's machine
  int label = -1;
};

struct Work {
  double ready;
  int64_t seq;
  int actor;
  WorkKind kind;
  bool operator>(const Work& o) const {
    return ready != o.ready ? ready > o.ready : seq > o.seq;
  }
};

struct Thread {
  std::string name;
  int64_t machine = 0;
  int group = -1;  // cpu group, -1: cores of its own
  int threads = 1;
  bool running = false;
  int last_node = -1;
  std::priority_queue<Work, std::vector<Work>, std::greater<Work>> queue;
  std::vector<std::pair<double, double>> busy;  // act intervals
  int64_t acts = 0;
};

// One collective in flight (StartCollective): its ranks' actors, its node
// on the critical path and what bounds its end.
struct CollectiveRun {
  std::vector<int> members;
  int node = -1;
  int64_t piece = 0;
  double start = 0;
  double floor = 0;    // the transport's curve
  double latency = 0;  // the link's, per step
  int steps = 1;
};

struct Ring {
  std::map<int64_t, std::vector<int>> arrived;  // piece -> actors
  std::map<int64_t, int> last_node;             // piece -> latest staging node
};

using Interval = std::pair<double, double>;

std::vector<Interval> Merge(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.second <= i.first) continue;
    if (!out.empty() && i.first <= out.back().second) {
      out.back().second = std::max(out.back().second, i.second);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

double Length(const std::vector<Interval>& merged, double lo, double hi) {
  double total = 0;
  for (const Interval& i : merged) total += std::max(0.0, std::min(hi, i.second) - std::max(lo, i.first));
  return total;
}

// Length of a minus b (both merged) within [lo, hi].
double LengthMinus(const std::vector<Interval>& a, const std::vector<Interval>& b, double lo,
                   double hi) {
  double total = 0;
  for (const Interval& i : a) {
    double s = std::max(lo, i.first), e = std::min(hi, i.second);
    if (e <= s) continue;
    double covered = 0;
    for (const Interval& j : b) covered += std::max(0.0, std::min(e, j.second) - std::max(s, j.first));
    total += (e - s) - covered;
  }
  return total;
}

std::string DeviceName(const TaskProto& task) {
  std::string d = task.device_type() == DEVICE_CUDA ? "cuda:" : "cpu:";
  return d + std::to_string(task.device_index());
}

class Simulation {
 public:
  Simulation(const Plan& plan, const Calibration& calibration, const SimOptions& options)
      : plan_(plan), index_(plan), tables_(calibration), options_(options) {}

  StatusOr<SimResult> Run();

 private:
  Status Build();
  Status BuildCpuGroups();
  void Schedule(double t, std::function<void(double)> fn) {
    events_.push(Event{t, seq_++, std::move(fn)});
  }
  int AddNode(double begin, double end, int pred, int label, int kind, int64_t piece) {
    nodes_.push_back(Node{begin, end, pred, label, kind, piece});
    return static_cast<int>(nodes_.size()) - 1;
  }
  int Label(const std::string& text) {
    auto it = label_ids_.find(text);
    if (it != label_ids_.end()) return it->second;
    labels_.push_back(text);
    label_ids_[text] = static_cast<int>(labels_.size()) - 1;
    return label_ids_[text];
  }
  double Delay(int from, int to) const;
  LinkSpec Link(int64_t a, int64_t b) const {
    return LinkBetween(plan_.cluster(), a, b, options_.link_gbit_per_s, options_.link_latency_us);
  }
  double TransportLatency() const { return transport_ ? transport_->latency_us() : 0; }
  // The caches' term of an act starting now (docs/simulate.md "Tensors out
  // of cache"): counts the bytes of its input and output registers as
  // touched on its machine's box and returns its cold extra times the share
  // of those bytes that more than RuntimeCost.cache_bytes of other touches
  // have gone past since their last touch.
  double TouchTensors(Actor& actor);
  // Machines with a cpu_set share one box (its caches); others have their own.
  int64_t BoxOf(int64_t machine) const {
    return machine_group_.count(machine) != 0 ? -1 : machine;
  }
  // The runtime's cost of one act beyond its kernels: measured inside a
  // real run when the calibration has it, else on empty actors.
  double ActCost() const {
    const RuntimeCost& rt = tables_.runtime();
    return rt.in_situ_act_us() > 0 ? rt.in_situ_act_us() : rt.act_us();
  }
  void TryReady(int a, double now);
  void TryRunThread(int t, double now);
  void StartWork(int t, const Work& work, double now);
  // Runs `fn` when `machine`'s transport gets to handle an event that
  // arrives at `now` (at once unless its cores all compute).
  void WhenTransportRuns(int64_t machine, double now, std::function<void(double)> fn);
  void FinishWork(int t, int a, WorkKind kind, int node, double now);
  void Produce(int a, const std::vector<int>& copies, int64_t piece, int node, double now);
  void SendProduced(int regst, int copy, int64_t piece, const std::vector<int>& to, int node,
                    double now);
  void ReturnInputs(int a, const std::vector<Readable>& inputs, int node, double now);
  // Runs `fn` when actor `to` has a message `from` sent at `now`.
  void Deliver(int from, int to, double now, std::function<void(double)> fn);
  void OnReturned(int regst, int copy, int node, double now);
  void StartRead(int a, double now);
  void Arrive(int a, int node, double now);
  void StartCollective(const std::string& key, int64_t piece, double now);
  void CollectiveStep(const std::shared_ptr<CollectiveRun>& run, int step, double now);
  void FinishCollective(const CollectiveRun& run, double e);
  // `bytes` from one machine to another: through the sender's NIC and the
  // CPU of both ends; `done` when all are through. Each end's cores are
  // also charged busy_message_us per message it receives (`from_messages`
  // at the sender: a READ's request; `to_messages` at the receiver),
  // compute they lose without delaying the flow.
  void AddFlow(int64_t from_machine, int64_t to_machine, double bytes, double now,
               std::function<void(double)> done, double from_messages = 0,
               double to_messages = 0);
  SharedResource* CoresOf(int64_t machine);
  void NotePiece(int64_t piece, double end) {
    if (piece >= 0 && piece < static_cast<int64_t>(piece_end_.size())) {
      piece_end_[piece] = std::max(piece_end_[piece], end);
    }
  }
  void Record(int64_t machine, const std::string& track, const std::string& name,
              const char* category, double b, double e, int64_t piece) {
    if (!options_.record_timeline) return;
    result_.timeline.push_back(SimEvent{machine, track, name, category, b, e, piece});
  }
  std::string Stuck() const;

  struct Event {
    double t;
    int64_t seq;
    std::function<void(double)> fn;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };

  const Plan& plan_;
  PlanIndex index_;
  CostTables tables_;
  SimOptions options_;
  const TransportCost* transport_ = nullptr;
  int64_t iterations_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  int64_t seq_ = 0;
  std::vector<Actor> actors_;
  std::vector<Regst> regsts_;
  std::vector<Thread> threads_;
  std::unordered_map<int64_t, int> actor_of_task_;
  std::unordered_map<int64_t, int> regst_of_desc_;
  std::map<std::string, Ring> rings_;
  std::vector<std::unique_ptr<SharedResource>> cpu_groups_;
  std::vector<std::unique_ptr<SharedResource>> own_cores_;  // per thread without a group
  std::map<int64_t, std::unique_ptr<SharedResource>> nics_;
  // A sender NIC's token bucket (LinkSpec.burst_bytes): `tokens` valid at
  // `stamp`, refilled at `rate` while no flow is queued at the NIC
  // (`queued` 0); a queue drains it.
  struct Bucket {
    double depth = 0;
    double rate = 0;  // bytes per us
    double tokens = 0;
    double stamp = 0;
    int queued = 0;
  };
  std::map<int64_t, Bucket> buckets_;
  std::map<int64_t, std::unique_ptr<SharedResource>> machine_cores_;  // machines without cpu_set
  std::map<int64_t, int> group_cores_;
  std::map<int64_t, int> machine_group_;
  std::map<int64_t, double> box_touched_;  // bytes acts touched, per box
  // Per machine: the work charged to acts, per iteration (SimMachineStat).
  std::map<int64_t, std::map<int64_t, double>> act_work_us_;
  std::vector<Node> nodes_;
  std::vector<std::string> labels_;
  std::unordered_map<std::string, int> label_ids_;
  std::vector<double> piece_end_;
  std::vector<int> piece_final_node_;
  std::map<int64_t, std::vector<Interval>> comm_intervals_;
  std::map<int64_t, double> egress_bytes_;
  std::map<int64_t, double> comm_cpu_us_;  // per machine, all iterations
  std::map<int64_t, double> act_cpu_us_;   // per machine, all iterations, every act
  SimResult result_;
};

Status Simulation::BuildCpuGroups() {
  // Machines whose cpu lists overlap form one group (union-find over
  // machines), whose capacity is the cores of the union.
  std::vector<int64_t> ids;
  std::map<int64_t, std::vector<int>> cores;
  for (int i = 0; i < plan_.cluster().machine_size(); ++i) {
    const MachineProto& m = plan_.cluster().machine(i);
    if (m.cpu_set().empty()) continue;
    ASSIGN_OR_RETURN(cores[m.id()],
                     ParseCpuSet(m.cpu_set(), "cluster.machine[" + std::to_string(i) + "].cpu_set"));
    ids.push_back(m.id());
  }
  std::map<int64_t, int64_t> parent;
  for (int64_t id : ids) parent[id] = id;
  std::function<int64_t(int64_t)> find = [&](int64_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (size_t i = 0; i < ids.size(); ++i) {
    for (size_t j = i + 1; j < ids.size(); ++j) {
      const auto& a = cores[ids[i]];
      const auto& b = cores[ids[j]];
      bool overlap = std::any_of(a.begin(), a.end(), [&](int c) {
        return std::binary_search(b.begin(), b.end(), c);
      });
      if (overlap) parent[find(ids[i])] = find(ids[j]);
    }
  }
  std::map<int64_t, std::set<int>> union_cores;
  for (int64_t id : ids) union_cores[find(id)].insert(cores[id].begin(), cores[id].end());
  std::map<int64_t, int> group_index;
  for (auto& [root, set] : union_cores) {
    group_index[root] = static_cast<int>(cpu_groups_.size());
    cpu_groups_.push_back(std::make_unique<SharedResource>(static_cast<double>(set.size())));
    cpu_groups_.back()->SetSlice(tables_.runtime().core_slice_us());
  }
  for (int64_t id : ids) machine_group_[id] = group_index[find(id)];
  return Status::OK();
}

Status Simulation::Build() {
  if (!options_.transport.empty()) transport_ = tables_.transport(options_.transport);
  if (plan_.machine_size() > 1 && transport_ == nullptr) {
    result_.notes.push_back("the calibration has no transport '" + options_.transport +
                            "': only the links' latency and rate count between machines");
  }
  RETURN_IF_ERROR(BuildCpuGroups());
  // Actors and threads.
  std::map<int64_t, int> thread_of_stream;
  for (const TaskProto* task : index_.tasks()) {
    Actor actor;
    actor.task = task;
    actor.machine = task->machine_id();
    int64_t stream = StreamKeyOfTaskId(task->task_id());
    auto it = thread_of_stream.find(stream);
    if (it == thread_of_stream.end()) {
      Thread thread;
      thread.machine = task->machine_id();
      thread.name = "m" + std::to_string(task->machine_id()) + " " + DeviceName(*task) +
                    " stream " + std::to_string(stream & ((1 << kStreamBits) - 1));
      auto g = machine_group_.find(task->machine_id());
      thread.group = g == machine_group_.end() ? -1 : g->second;
      it = thread_of_stream.emplace(stream, static_cast<int>(threads_.size())).first;
      threads_.push_back(std::move(thread));
    }
    actor.thread = it->second;
    actor.label = Label(task->name());
    actor_of_task_[task->task_id()] = static_cast<int>(actors_.size());
    actors_.push_back(std::move(actor));
  }
  own_cores_.resize(threads_.size());
  for (auto& r : own_cores_) r = std::make_unique<SharedResource>(kInf);
  // Registers.
  for (size_t a = 0; a < actors_.size(); ++a) {
    for (const RegstDescProto& desc : actors_[a].task->produced()) {
      Regst regst;
      regst.desc = &desc;
      regst.producer = static_cast<int>(a);
      regst.bytes = desc.bytes_per_regst();
      int num = std::max(1, desc.regst_num());
      regst.copies.resize(num);
      regst.touched_at.assign(num, -1);
      for (int c = 0; c < num; ++c) regst.free_copies.push_back(c);
      std::set<int64_t> mutators(desc.mutator_task_id().begin(), desc.mutator_task_id().end());
      for (int64_t consumer : desc.consumer_task_id()) {
        auto ca = actor_of_task_.find(consumer);
        if (ca == actor_of_task_.end()) {
          return InvalidArgumentError("register desc ", desc.regst_desc_id(), " of task '",
                                      actors_[a].task->name(), "' names consumer task ",
                                      TaskIdToString(consumer), ", which the plan does not have");
        }
        (mutators.count(consumer) ? regst.mutators : regst.readers).push_back(ca->second);
      }
      regst_of_desc_[desc.regst_desc_id()] = static_cast<int>(regsts_.size());
      actors_[a].produced.push_back(static_cast<int>(regsts_.size()));
      regsts_.push_back(std::move(regst));
    }
  }
  for (Actor& actor : actors_) {
    for (const ConsumedRegst& consumed : actor.task->consumed()) {
      for (int64_t id : consumed.regst_desc_id()) {
        auto it = regst_of_desc_.find(id);
        if (it == regst_of_desc_.end()) {
          return InvalidArgumentError("task '", actor.task->name(), "' consumes register desc ",
                                      id, ", which no task of the plan produces");
        }
        actor.consumed.push_back(it->second);
      }
    }
    actor.inbox.resize(actor.consumed.size());
  }
  // Act costs.
  std::map<int64_t, int> threads_of_machine;
  for (const MachineProto& m : plan_.cluster().machine()) {
    threads_of_machine[m.id()] = CpuThreadsOf(m, std::max(1, options_.host_cores));
  }
  std::set<std::string> missing_ops;
  for (Actor& actor : actors_) {
    const TaskProto& task = *actor.task;
    int threads = task.device_type() == DEVICE_CPU
                      ? (threads_of_machine.count(task.machine_id())
                             ? threads_of_machine[task.machine_id()]
                             : 1)
                      : 1;
    threads_[actor.thread].threads = std::max(threads_[actor.thread].threads, threads);
    int64_t in_bytes = 0, out_bytes = 0;
    for (int r : actor.consumed) in_bytes += regsts_[r].bytes;
    for (int r : actor.produced) out_bytes += regsts_[r].bytes;
    double us = ActCost();
    switch (task.type()) {
      case TASK_COMPUTE:
      case TASK_SOURCE:
        for (const KernelConf& kernel : task.kernel()) {
          ASSIGN_OR_RETURN(std::string key, KernelKey(kernel, task.device_type(), threads, index_));
          ASSIGN_OR_RETURN(KernelShapes shapes, ShapesOfKernel(kernel, index_));
          KernelTime time = tables_.Kernel(key, kernel.op().op_type(), task.device_type(), threads,
                                           KernelElements(shapes));
          us += time.us;
          actor.cold_extra_us += time.cold_extra_us;
          switch (time.source) {
            case KernelTimeSource::kMeasured: ++result_.kernels_measured; break;
            case KernelTimeSource::kEstimated: ++result_.kernels_estimated; break;
            case KernelTimeSource::kMissing:
              ++result_.kernels_missing;
              missing_ops.insert(kernel.op().op_type());
              break;
          }
        }
        break;
      case TASK_BOXING:
      case TASK_COPY_H2D:
      case TASK_COPY_D2H:
        us += tables_.CopyUs(in_bytes + out_bytes);
        break;
      case TASK_COLLECTIVE: {
        us += tables_.CopyUs(in_bytes);
        actor.cutout_us = tables_.CopyUs(out_bytes);
        const BoxingConf& boxing = task.boxing();
        std::vector<int64_t> ring(boxing.ring_task_id().begin(), boxing.ring_task_id().end());
        actor.ring_size = static_cast<int>(ring.size());
        std::ostringstream key;
        for (int64_t id : ring) key << id << ",";
        actor.ring_key = key.str();
        int64_t rank = boxing.ring_rank();
        if (!ring.empty()) {
          actor.next_machine = MachineOfTaskId(ring[(rank + 1) % ring.size()]);
        }
        int64_t logical = task.collective().buffer_bytes();
        if (logical <= 0) {
          const TensorDescProto& d = boxing.logical_desc();
          int64_t n = 1;
          for (int64_t dim : d.shape().dim()) n *= dim;
          logical = n * 4;
        }
        // The all-to-all of S(a) -> S(b) sends each peer 1/n of its part
        // (blocks: runtime/commnet/all_to_all_parts.h), others whole parts.
        int64_t sent_part = in_bytes;
        int64_t in_axis = 0, out_axis = 0;
        if (task.collective().algorithm() == COLLECTIVE_ALL_TO_ALL &&
            boxing.in_sbp().sbp_size() == 1 && boxing.out_sbp().sbp_size() == 1 &&
            actor.ring_size > 0 &&
            SplitToSplitAxes(boxing.in_sbp().sbp(0), boxing.out_sbp().sbp(0),
                             TensorDesc(boxing.logical_desc()), &in_axis, &out_axis)) {
          sent_part = in_bytes / actor.ring_size;
        }
        actor.traffic =
            TrafficOf(task.collective().algorithm(), actor.ring_size, logical, sent_part);
        if (transport_ != nullptr) {
          actor.floor_us = tables_.CollectiveFloorUs(*transport_, task.collective().algorithm(),
                                                     actor.ring_size, logical);
          if (actor.floor_us < 0) {
            actor.floor_us = actor.traffic.latencies * transport_->latency_us() +
                             (transport_->gbyte_per_s() > 0
                                  ? actor.traffic.bytes_sent_per_rank / (transport_->gbyte_per_s() * 1e3)
                                  : 0);
          }
        }
        break;
      }
      default:
        break;
    }
    actor.act_us = us;
  }
  if (!missing_ops.empty()) {
    std::string list;
    for (const std::string& op : missing_ops) list += (list.empty() ? "" : ", ") + op;
    result_.notes.push_back("no calibrated time for op type(s) " + list +
                            ": counted as 0 (run `oflite profile --update` on this plan)");
  }
  if (result_.kernels_estimated > 0) {
    result_.notes.push_back(std::to_string(result_.kernels_estimated) +
                            " kernel(s) not measured at their shapes: scaled from the same op "
                            "type's nearest measured size");
  }
  return Status::OK();
}

double Simulation::Delay(int from, int to) const {
  const Actor& a = actors_[from];
  const Actor& b = actors_[to];
  if (a.thread == b.thread) return 0;
  double msg = tables_.runtime().message_us();
  if (a.machine == b.machine) return msg;
  return msg + TransportLatency() + Link(a.machine, b.machine).latency_us();
}

void Simulation::TryReady(int a, double now) {
  Actor& actor = actors_[a];
  if (actor.queued || actor.busy) return;
  for (size_t i = 0; i < actor.inbox.size(); ++i) {
    if (actor.inbox[i].empty()) return;
  }
  if (actor.consumed.empty() && actor.acts >= iterations_) return;
  for (int r : actor.produced) {
    if (regsts_[r].free_copies.empty()) return;
  }
  if (actor.task->type() == TASK_COMMNET) {
    StartRead(a, now);
    return;
  }
  actor.queued = true;
  threads_[actor.thread].queue.push(Work{now, seq_++, a, kAct});
  TryRunThread(actor.thread, now);
}

void Simulation::TryRunThread(int t, double now) {
  Thread& thread = threads_[t];
  if (thread.running || thread.queue.empty()) return;
  Work work = thread.queue.top();
  thread.queue.pop();
  StartWork(t, work, now);
}

void Simulation::StartWork(int t, const Work& work, double now) {
  Thread& thread = threads_[t];
  Actor& actor = actors_[work.actor];
  thread.running = true;
  int pred = (thread.last_node >= 0 && nodes_[thread.last_node].end >= work.ready &&
              nodes_[thread.last_node].end > 0)
                 ? thread.last_node
                 : actor.enabler;
  double us = 0;
  int64_t piece = 0;
  if (work.kind == kAct) {
    actor.held_inputs.clear();
    for (auto& q : actor.inbox) {
      actor.held_inputs.push_back(q.front());
      q.pop_front();
    }
    piece = actor.held_inputs.empty() ? actor.acts : actor.held_inputs.front().piece;
    actor.held_copies.clear();
    for (int r : actor.produced) {
      actor.held_copies.push_back(regsts_[r].free_copies.front());
      regsts_[r].free_copies.pop_front();
    }
    actor.held_piece = piece;
    us = actor.act_us + TouchTensors(actor);
    act_work_us_[thread.machine][piece] += us;
  } else {
    piece = actor.held_piece;
    us = work.kind == kCutOut ? actor.cutout_us : ActCost();
  }
  int node = AddNode(now, now, pred, actor.label, 0, piece);
  int a = work.actor;
  WorkKind kind = work.kind;
  auto done = [this, t, a, kind, node](double end) { FinishWork(t, a, kind, node, end); };
  int threads = thread.threads;
  act_cpu_us_[thread.machine] += us * threads;
  if (thread.group >= 0) {
    cpu_groups_[thread.group]->Add(now, us * threads, threads, threads, done,
                                   [this](double at, std::function<void(double)> fn) {
                                     Schedule(at, std::move(fn));
                                   },
                                   /*compute=*/true, /*owner=*/t);
  } else {
    Schedule(now + us, done);
  }
}

double Simulation::TouchTensors(Actor& actor) {
  const double cache = tables_.runtime().cache_bytes();
  if (!(cache > 0)) return 0;
  double& touched = box_touched_[BoxOf(actor.machine)];
  // Calls fn(register, copy) for each input and output the act holds.
  auto each_tensor = [&](auto fn) {
    for (const Readable& in : actor.held_inputs) fn(in.regst, in.copy);
    for (size_t i = 0; i < actor.produced.size() && i < actor.held_copies.size(); ++i) {
      fn(actor.produced[i], actor.held_copies[i]);
    }
  };
  double total = 0, cold = 0;
  each_tensor([&](int r, int copy) {
    const double bytes = static_cast<double>(regsts_[r].bytes);
    const double at = regsts_[r].touched_at[copy];
    total += bytes;
    if (at < 0 || touched - at > cache) cold += bytes;
  });
  touched += total;
  each_tensor([&](int r, int copy) { regsts_[r].touched_at[copy] = touched; });
  return total > 0 ? actor.cold_extra_us * cold / total : 0;
}

void Simulation::WhenTransportRuns(int64_t machine, double now, std::function<void(double)> fn) {
  // The transport's poller on a machine whose cores all compute handles an
  // event when the compute lets go of a core or after the calibrated delay
  // (the rest of a time slice), whichever comes first.
  const double wakeup = tables_.runtime().busy_core_wakeup_us();
  auto g = machine_group_.find(machine);
  if (!(wakeup > 0) || g == machine_group_.end()) {
    fn(now);
    return;
  }
  cpu_groups_[g->second]->WhenNotComputing(
      now, wakeup, std::move(fn),
      [this](double at, std::function<void(double)> f) { Schedule(at, std::move(f)); });
}

void Simulation::FinishWork(int t, int a, WorkKind kind, int node, double now) {
  Thread& thread = threads_[t];
  Actor& actor = actors_[a];
  nodes_[node].end = now;
  thread.running = false;
  thread.last_node = node;
  thread.busy.push_back({nodes_[node].begin, now});
  ++thread.acts;
  Record(actor.machine, thread.name, actor.task->name(), "act", nodes_[node].begin, now,
         actor.held_piece);
  NotePiece(actor.held_piece, now);
  if (actor.held_piece >= 0 && actor.held_piece < static_cast<int64_t>(piece_final_node_.size()) &&
      piece_end_[actor.held_piece] == now) {
    piece_final_node_[actor.held_piece] = node;
  }
  if (kind == kAct && actor.task->type() == TASK_COLLECTIVE) {
    std::vector<Readable> inputs = std::move(actor.held_inputs);
    actor.held_inputs.clear();
    actor.busy = true;
    actor.queued = false;
    ReturnInputs(a, inputs, node, now);
    Arrive(a, node, now);
  } else if (kind == kCommNetAct) {
    std::vector<int> copies = actor.held_copies;
    Produce(a, copies, actor.held_piece, node, now);
    ReturnInputs(a, actor.held_inputs, node, now);
    actor.held_inputs.clear();
    actor.busy = false;
    ++actor.acts;
    TryReady(a, now);
  } else {
    std::vector<Readable> inputs = std::move(actor.held_inputs);
    actor.held_inputs.clear();
    std::vector<int> copies = actor.held_copies;
    Produce(a, copies, actor.held_piece, node, now);
    ReturnInputs(a, inputs, node, now);
    actor.busy = false;
    actor.queued = false;
    ++actor.acts;
    TryReady(a, now);
  }
  TryRunThread(t, now);
}

void Simulation::Produce(int a, const std::vector<int>& copies, int64_t piece, int node,
                         double now) {
  const Actor& actor = actors_[a];
  for (size_t i = 0; i < actor.produced.size() && i < copies.size(); ++i) {
    int r = actor.produced[i];
    Regst& regst = regsts_[r];
    CopyState& state = regst.copies[copies[i]];
    state.piece = piece;
    state.to_mutators = regst.readers.empty();
    const std::vector<int>& to = regst.readers.empty() ? regst.mutators : regst.readers;
    state.owing = static_cast<int>(to.size());
    if (to.empty()) {
      regst.free_copies.push_back(copies[i]);
      continue;
    }
    SendProduced(r, copies[i], piece, to, node, now);
  }
}

void Simulation::SendProduced(int r, int copy, int64_t piece, const std::vector<int>& to,
                              int node, double now) {
  const Regst& regst = regsts_[r];
  for (int consumer : to) {
    Deliver(regst.producer, consumer, now, [this, r, copy, piece, consumer, node](double t) {
      Actor& c = actors_[consumer];
      for (size_t k = 0; k < c.consumed.size(); ++k) {
        if (c.consumed[k] == r) {
          c.inbox[k].push_back(Readable{r, copy, piece, node});
          break;
        }
      }
      c.enabler = node;
      TryReady(consumer, t);
    });
  }
}

void Simulation::ReturnInputs(int a, const std::vector<Readable>& inputs, int node, double now) {
  for (const Readable& in : inputs) {
    int r = in.regst, copy = in.copy;
    Deliver(a, regsts_[r].producer, now, [this, r, copy, node](double t) { OnReturned(r, copy, node, t); });
  }
}

void Simulation::Deliver(int from, int to, double now, std::function<void(double)> fn) {
  const double at = now + Delay(from, to);
  const int64_t machine = actors_[to].machine;
  if (actors_[from].machine == machine) {
    Schedule(at, std::move(fn));
    return;
  }
  // Another machine's message is read by its transport's poller.
  Schedule(at, [this, machine, fn = std::move(fn)](double t) { WhenTransportRuns(machine, t, fn); });
}

void Simulation::OnReturned(int r, int copy, int node, double now) {
  Regst& regst = regsts_[r];
  CopyState& state = regst.copies[copy];
  if (--state.owing > 0) return;
  if (!state.to_mutators && !regst.mutators.empty()) {
    state.to_mutators = true;
    state.owing = static_cast<int>(regst.mutators.size());
    SendProduced(r, copy, state.piece, regst.mutators, node, now);
    return;
  }
  regst.free_copies.push_back(copy);
  actors_[regst.producer].enabler = node;
  TryReady(regst.producer, now);
}

SharedResource* Simulation::CoresOf(int64_t machine) {
  auto g = machine_group_.find(machine);
  if (g != machine_group_.end()) return cpu_groups_[g->second].get();
  auto& own = machine_cores_[machine];
  if (!own) own = std::make_unique<SharedResource>(kInf);
  return own.get();
}

void Simulation::AddFlow(int64_t from_machine, int64_t to_machine, double bytes, double now,
                         std::function<void(double)> done, double from_messages,
                         double to_messages) {
  LinkSpec link = Link(from_machine, to_machine);
  double cap = link.gbit_per_s() > 0 ? link.gbit_per_s() * 125.0 : kInf;  // bytes per us
  if (from_machine == to_machine) {
    Schedule(now, std::move(done));
    return;
  }
  auto schedule = [this](double at, std::function<void(double)> fn) {
    Schedule(at, std::move(fn));
  };
  const double message_us = transport_ != nullptr ? transport_->busy_message_us() : 0.0;
  if (message_us > 0) {
    // The compute the receiving ends' cores lose to the messages: charged
    // beside the flow, which does not wait for it (its delay while the
    // cores compute is WhenTransportRuns').
    for (const auto& [machine, messages] :
         {std::make_pair(from_machine, from_messages), std::make_pair(to_machine, to_messages)}) {
      if (messages > 0) {
        comm_cpu_us_[machine] += messages * message_us;
        CoresOf(machine)->Add(now, messages * message_us, 1.0, 1.0, [](double) {}, schedule);
      }
    }
  }
  if (bytes <= 0) {
    Schedule(now, std::move(done));
    return;
  }
  egress_bytes_[from_machine] += bytes;
  // The bytes cross the link (the sender's NIC, shared fairly) and cost CPU
  // at both ends (the transport's and the path's per byte, on the
  // machines' cores, shared with compute); the flow is through when all
  // three are.
  const double cpu_ns = (transport_ ? CostTables::TransportCpuNsPerByte(*transport_) : 0.0) +
                        link.cpu_ns_per_byte();
  auto pending = std::make_shared<int>(1);
  auto join = [pending, done = std::move(done)](double t) {
    if (--*pending == 0) done(t);
  };
  if (cpu_ns > 0) {
    const double cpu_us = bytes * cpu_ns / 1e3;
    *pending += 2;
    comm_cpu_us_[from_machine] += cpu_us;
    comm_cpu_us_[to_machine] += cpu_us;
    CoresOf(from_machine)->Add(now, cpu_us, 1.0, 1.0, join, schedule);
    CoresOf(to_machine)->Add(now, cpu_us, 1.0, 1.0, join, schedule);
  }
  if (std::isinf(cap)) {
    Schedule(now, join);
    return;
  }
  auto& nic = nics_[from_machine];
  Bucket& bucket = buckets_[from_machine];
  if (!nic) {
    double rate = kInf;
    double burst = 0;
    for (const MachineProto& m : plan_.cluster().machine()) {
      if (m.id() == from_machine && m.nic().gbit_per_s() > 0) {
        rate = m.nic().gbit_per_s() * 125.0;
        burst = std::max(0.0, m.nic().burst_bytes());
      }
    }
    if (options_.link_gbit_per_s >= 0) {  // another link: the file's bucket is not its
      rate = options_.link_gbit_per_s > 0 ? options_.link_gbit_per_s * 125.0 : kInf;
      burst = 0;
    }
    nic = std::make_unique<SharedResource>(rate);
    if (!std::isinf(rate)) bucket = Bucket{burst, rate, burst, 0.0, 0};
  }
  // A shaped link's bucket (tc tbf): after idle time the bytes its tokens
  // cover pass at once; the rest, and everything sent while a queue is
  // draining it, at the rate.
  double queued_bytes = bytes;
  if (bucket.depth > 0 && bucket.queued == 0) {
    bucket.tokens = std::min(bucket.depth, bucket.tokens + bucket.rate * (now - bucket.stamp));
    bucket.stamp = now;
    const double at_once = std::min(bucket.tokens, bytes);
    bucket.tokens -= at_once;
    queued_bytes -= at_once;
  }
  if (queued_bytes <= 0) {
    Schedule(now, join);
    return;
  }
  ++bucket.queued;
  auto drained = [this, from_machine, join](double t) {
    Bucket& b = buckets_[from_machine];
    if (--b.queued == 0) {
      b.tokens = 0;
      b.stamp = t;
    }
    join(t);
  };
  nic->Add(now, queued_bytes, cap, 1.0, drained, schedule);
}

void Simulation::StartRead(int a, double now) {
  Actor& actor = actors_[a];
  actor.busy = true;
  actor.held_inputs.clear();
  for (auto& q : actor.inbox) {
    actor.held_inputs.push_back(q.front());
    q.pop_front();
  }
  actor.held_piece = actor.held_inputs.empty() ? actor.acts : actor.held_inputs.front().piece;
  actor.held_copies.clear();
  for (int r : actor.produced) {
    actor.held_copies.push_back(regsts_[r].free_copies.front());
    regsts_[r].free_copies.pop_front();
  }
  int64_t src_machine = actor.task->commnet().src_machine_id();
  double bytes = 0;
  for (const Readable& in : actor.held_inputs) bytes += static_cast<double>(regsts_[in.regst].bytes);
  int pred = actor.enabler;
  int label = Label("read " + actor.task->name());
  int node = AddNode(now, now, pred, label, 1, actor.held_piece);
  double floor = 0;
  if (transport_ != nullptr) {
    floor = transport_->latency_us() +
            (transport_->gbyte_per_s() > 0 ? bytes / (transport_->gbyte_per_s() * 1e3) : 0);
  }
  double latency = Link(src_machine, actor.machine).latency_us();
  double start = now;
  int64_t machine = actor.machine;
  auto finish = [this, a, node, start, src_machine, machine](double e) {
    nodes_[node].end = e;
    comm_intervals_[machine].push_back({start, e});
    comm_intervals_[src_machine].push_back({start, e});
    Actor& act = actors_[a];
    Record(machine, "nic m" + std::to_string(src_machine) + "->m" + std::to_string(machine),
           act.task->name(), "read", start, e, act.held_piece);
    act.enabler = node;
    threads_[act.thread].queue.push(Work{e, seq_++, a, kCommNetAct});
    TryRunThread(act.thread, e);
  };
  // The request waits for the producer's poller, the data for the
  // reader's, while their cores compute (WhenTransportRuns).
  auto arrived = [this, start, floor, latency, machine, finish](double t) {
    const double end = std::max(start + floor, t + latency);
    Schedule(end, [this, machine, finish](double e) { WhenTransportRuns(machine, e, finish); });
  };
  WhenTransportRuns(src_machine, now, [this, src_machine, machine, bytes, arrived](double t) {
    AddFlow(src_machine, machine, bytes, t, arrived, /*from_messages=*/1, /*to_messages=*/1);
  });
}

void Simulation::Arrive(int a, int node, double now) {
  Actor& actor = actors_[a];
  Ring& ring = rings_[actor.ring_key];
  auto& arrived = ring.arrived[actor.held_piece];
  arrived.push_back(a);
  auto last = ring.last_node.find(actor.held_piece);
  if (last == ring.last_node.end() || nodes_[last->second].end <= nodes_[node].end) {
    ring.last_node[actor.held_piece] = node;
  }
  if (static_cast<int>(arrived.size()) >= actor.ring_size) {
    StartCollective(actor.ring_key, actor.held_piece, now);
  }
}

void Simulation::StartCollective(const std::string& key, int64_t piece, double now) {
  Ring& ring = rings_[key];
  std::vector<int> members = std::move(ring.arrived[piece]);
  ring.arrived.erase(piece);
  int pred = ring.last_node[piece];
  ring.last_node.erase(piece);
  const Actor& first = actors_[members.front()];
  int label = Label("collective " + first.task->boxing().lbn() + " (" +
                    CollectiveAlgorithm_Name(first.task->collective().algorithm()) + ")");
  int node = AddNode(now, now, pred, label, 2, piece);
  double floor = 0, latency = 0;
  for (int m : members) {
    const Actor& actor = actors_[m];
    floor = std::max(floor, actor.floor_us);
    if (actor.next_machine >= 0 && actor.next_machine != actor.machine) {
      latency = std::max(latency, Link(actor.machine, actor.next_machine).latency_us());
    }
  }
  auto run = std::make_shared<CollectiveRun>();
  run->members = std::move(members);
  run->node = node;
  run->piece = piece;
  run->start = now;
  run->floor = floor;
  run->latency = latency;
  run->steps = std::max(1, actors_[run->members.front()].traffic.latencies);
  CollectiveStep(run, 0, now);
}

void Simulation::CollectiveStep(const std::shared_ptr<CollectiveRun>& run, int step, double now) {
  // A step starts when every rank's waiting thread sees it may go (late on
  // a rank whose cores compute: WhenTransportRuns); each rank then sends
  // its share of the step's bytes, and the step ends a link latency after
  // the last flow. The collective ends after its last step, and not before
  // the transport's measured curve allows.
  auto ready = std::make_shared<int>(static_cast<int>(run->members.size()));
  auto flows_left = std::make_shared<int>(static_cast<int>(run->members.size()));
  auto flows_end = std::make_shared<double>(now);
  auto step_done = [this, run, step, flows_left, flows_end](double t) {
    *flows_end = std::max(*flows_end, t);
    if (--*flows_left > 0) return;
    const double end = *flows_end + run->latency;
    if (step + 1 < run->steps) {
      Schedule(end, [this, run, step](double e) { CollectiveStep(run, step + 1, e); });
    } else {
      Schedule(std::max(end, run->start + run->floor),
               [this, run](double e) { FinishCollective(*run, e); });
    }
  };
  for (int m : run->members) {
    const int64_t machine = actors_[m].machine;
    WhenTransportRuns(machine, now, [this, run, ready, step_done](double t) {
      if (--*ready > 0) return;
      for (int member : run->members) {
        const Actor& actor = actors_[member];
        const int64_t to = actor.next_machine >= 0 ? actor.next_machine : actor.machine;
        // `to` receives this member's pieces of the step (each member is
        // one machine's `to`): their share of its messages.
        AddFlow(actor.machine, to, actor.traffic.bytes_sent_per_rank / run->steps, t, step_done,
                0, static_cast<double>(actor.traffic.messages_received_per_rank) / run->steps);
      }
    });
  }
}

void Simulation::FinishCollective(const CollectiveRun& run, double e) {
  nodes_[run.node].end = e;
  for (int m : run.members) {
    Actor& actor = actors_[m];
    comm_intervals_[actor.machine].push_back({run.start, e});
    Record(actor.machine, "nic m" + std::to_string(actor.machine), labels_[nodes_[run.node].label],
           "collective", run.start, e, run.piece);
    actor.enabler = run.node;
    threads_[actor.thread].queue.push(Work{e, seq_++, m, kCutOut});
    TryRunThread(actor.thread, e);
  }
}

std::string Simulation::Stuck() const {
  std::ostringstream out;
  int shown = 0;
  for (const Actor& actor : actors_) {
    if (actor.acts >= iterations_) continue;
    if (shown++ >= 5) break;
    out << "\n  task '" << actor.task->name() << "' acted " << actor.acts << " time(s)";
    for (size_t i = 0; i < actor.inbox.size(); ++i) {
      if (actor.inbox[i].empty()) {
        const Regst& r = regsts_[actor.consumed[i]];
        out << "; waits for register desc " << r.desc->regst_desc_id() << " of '"
            << actors_[r.producer].task->name() << "'";
        break;
      }
    }
    for (int r : actor.produced) {
      if (regsts_[r].free_copies.empty()) {
        out << "; no free copy of its register desc " << regsts_[r].desc->regst_desc_id();
        break;
      }
    }
  }
  return out.str();
}

StatusOr<SimResult> Simulation::Run() {
  iterations_ = options_.iterations > 0 ? options_.iterations : 24;
  int64_t warmup = options_.warmup >= 0 ? options_.warmup : iterations_ / 3;
  int64_t cooldown = options_.cooldown >= 0 ? options_.cooldown : iterations_ / 6;
  if (warmup + cooldown >= iterations_) {
    return InvalidArgumentError("simulation: warm-up ", warmup, " and cool-down ", cooldown,
                                " leave none of the ", iterations_, " iteration(s) to measure");
  }
  RETURN_IF_ERROR(Build());
  piece_end_.assign(iterations_, 0);
  piece_final_node_.assign(iterations_, -1);
  for (size_t a = 0; a < actors_.size(); ++a) TryReady(static_cast<int>(a), 0);
  int64_t events = 0;
  while (!events_.empty()) {
    Event ev = events_.top();
    events_.pop();
    ev.fn(ev.t);
    if (++events > 200000000) {
      return InternalError("simulation: more than 2e8 events; the plan is too large to simulate");
    }
  }
  for (const Actor& actor : actors_) {
    if (actor.acts < iterations_) {
      return FailedPreconditionError("simulation: the plan stopped before iteration ",
                                     iterations_, " (a cycle in its registers or a missing "
                                     "producer):", Stuck());
    }
  }
  SimResult& r = result_;
  r.iterations = iterations_;
  r.warmup = warmup;
  r.first_iteration_us = piece_end_[0];
  r.total_us = *std::max_element(piece_end_.begin(), piece_end_.end());
  const int64_t last = iterations_ - 1 - cooldown;
  double lo = warmup > 0 ? piece_end_[warmup - 1] : 0;
  double hi = piece_end_[last];
  int64_t steps = warmup > 0 ? last - warmup + 1 : last + 1;
  r.step_time_us = (hi - lo) / steps;
  double window = std::max(1e-9, hi - lo);
  // Threads and machines.
  std::map<int64_t, std::vector<Interval>> compute;
  std::map<int64_t, double> busiest;
  for (const Thread& thread : threads_) {
    std::vector<Interval> merged = Merge(thread.busy);
    SimThreadStat stat;
    stat.machine = thread.machine;
    stat.name = thread.name;
    stat.busy_share = Length(merged, lo, hi) / window;
    stat.acts_per_step = thread.acts / iterations_;
    r.threads.push_back(stat);
    compute[thread.machine].insert(compute[thread.machine].end(), merged.begin(), merged.end());
    busiest[thread.machine] = std::max(busiest[thread.machine], stat.busy_share);
  }
  for (const MachinePlan& mp : plan_.machine()) {
    SimMachineStat stat;
    stat.machine = mp.machine_id();
    stat.compute_busy_share = busiest[mp.machine_id()];
    {
      const std::map<int64_t, double>& work = act_work_us_[mp.machine_id()];
      double sum = 0;
      for (int64_t piece = warmup; piece <= last; ++piece) {
        auto it = work.find(piece);
        if (it != work.end()) sum += it->second;
      }
      stat.compute_us_per_step = sum / std::max<int64_t>(1, last - warmup + 1);
    }
    std::vector<Interval> comm = Merge(comm_intervals_[mp.machine_id()]);
    std::vector<Interval> comp = Merge(compute[mp.machine_id()]);
    stat.comm_us_per_step = Length(comm, lo, hi) / steps;
    stat.exposed_comm_us_per_step = LengthMinus(comm, comp, lo, hi) / steps;
    stat.egress_bytes_per_step = egress_bytes_[mp.machine_id()] / iterations_;
    stat.comm_cpu_us_per_step = comm_cpu_us_[mp.machine_id()] / iterations_;
    stat.cpu_us_per_step = act_cpu_us_[mp.machine_id()] / iterations_ + stat.comm_cpu_us_per_step;
    for (const MemBlockProto& block : mp.mem_block()) stat.memory_bytes += block.size();
    r.machines.push_back(stat);
  }
  // Critical path: back from the last node of the last iteration.
  std::map<std::pair<std::string, std::string>, double> path;
  int node = piece_final_node_[last];
  const char* kinds[] = {"act", "read", "collective"};
  int guard = 0;
  while (node >= 0 && nodes_[node].end > lo && guard++ < 10000000) {
    const Node& n = nodes_[node];
    double b = std::max(lo, n.begin), e = std::min(hi, n.end);
    if (e > b) path[{labels_[n.label], kinds[n.kind]}] += e - b;
    if (n.pred >= 0) {
      double gap_b = std::max(lo, nodes_[n.pred].end), gap_e = std::min(hi, n.begin);
      if (gap_e > gap_b) path[{"messages and waits", "wait"}] += gap_e - gap_b;
    }
    node = n.pred;
  }
  for (const auto& [k, us] : path) r.critical_path.push_back({k.first, k.second, us / steps});
  std::sort(r.critical_path.begin(), r.critical_path.end(),
            [](const SimPathEntry& a, const SimPathEntry& b) {
              return a.us_per_step != b.us_per_step ? a.us_per_step > b.us_per_step : a.what < b.what;
            });
  return std::move(result_);
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string Num(double v) {
  std::ostringstream out;
  out.precision(6);
  out << v;
  return out.str();
}

}  // namespace

StatusOr<SimResult> SimulatePlan(const Plan& plan, const Calibration& calibration,
                                 const SimOptions& options) {
  Simulation sim(plan, calibration, options);
  return sim.Run();
}

std::string SimResultJson(const SimResult& r) {
  std::ostringstream out;
  out << "{\"step_time_ms\": " << Num(r.step_time_us / 1e3)
      << ", \"first_iteration_ms\": " << Num(r.first_iteration_us / 1e3)
      << ", \"iterations\": " << r.iterations << ", \"warmup\": " << r.warmup
      << ", \"kernels\": {\"measured\": " << r.kernels_measured
      << ", \"estimated\": " << r.kernels_estimated << ", \"missing\": " << r.kernels_missing
      << "}, \"devices\": [";
  for (size_t i = 0; i < r.threads.size(); ++i) {
    const SimThreadStat& t = r.threads[i];
    out << (i ? ", " : "") << "{\"machine\": " << t.machine << ", \"thread\": " << JsonString(t.name)
        << ", \"busy_share\": " << Num(t.busy_share) << ", \"acts_per_step\": " << t.acts_per_step
        << "}";
  }
  out << "], \"machines\": [";
  for (size_t i = 0; i < r.machines.size(); ++i) {
    const SimMachineStat& m = r.machines[i];
    out << (i ? ", " : "") << "{\"machine\": " << m.machine
        << ", \"compute_busy_share\": " << Num(m.compute_busy_share)
        << ", \"compute_ms_per_step\": " << Num(m.compute_us_per_step / 1e3)
        << ", \"comm_ms_per_step\": " << Num(m.comm_us_per_step / 1e3)
        << ", \"exposed_comm_ms_per_step\": " << Num(m.exposed_comm_us_per_step / 1e3)
        << ", \"comm_cpu_ms_per_step\": " << Num(m.comm_cpu_us_per_step / 1e3)
        << ", \"cpu_ms_per_step\": " << Num(m.cpu_us_per_step / 1e3)
        << ", \"egress_bytes_per_step\": " << Num(m.egress_bytes_per_step)
        << ", \"memory_bytes\": " << m.memory_bytes << "}";
  }
  out << "], \"critical_path\": [";
  for (size_t i = 0; i < r.critical_path.size(); ++i) {
    const SimPathEntry& p = r.critical_path[i];
    out << (i ? ", " : "") << "{\"what\": " << JsonString(p.what) << ", \"kind\": "
        << JsonString(p.kind) << ", \"ms_per_step\": " << Num(p.us_per_step / 1e3) << "}";
  }
  out << "], \"notes\": [";
  for (size_t i = 0; i < r.notes.size(); ++i) out << (i ? ", " : "") << JsonString(r.notes[i]);
  out << "]}";
  return out.str();
}

std::string SimChromeTrace(const SimResult& r) {
  std::map<std::pair<int64_t, std::string>, int> tids;
  for (const SimEvent& e : r.timeline) tids.emplace(std::make_pair(e.machine, e.track), 0);
  int next = 1;
  for (auto& [k, tid] : tids) tid = next++;
  std::ostringstream out;
  out << "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"source\": \"oflite simulate\", "
         "\"predicted\": true}, \"traceEvents\": [";
  bool first = true;
  std::set<int64_t> machines;
  for (const auto& [k, tid] : tids) {
    if (machines.insert(k.first).second) {
      out << (first ? "" : ",\n") << "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": "
          << k.first << ", \"args\": {\"name\": \"rank " << k.first << " (predicted)\"}}";
      first = false;
    }
    out << ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " << k.first
        << ", \"tid\": " << tid << ", \"args\": {\"name\": " << JsonString(k.second) << "}}";
  }
  for (const SimEvent& e : r.timeline) {
    out << (first ? "" : ",\n") << "{\"ph\": \"X\", \"name\": " << JsonString(e.name)
        << ", \"cat\": " << JsonString(e.category) << ", \"pid\": " << e.machine
        << ", \"tid\": " << tids[{e.machine, e.track}] << ", \"ts\": " << Num(e.begin_us)
        << ", \"dur\": " << Num(e.end_us - e.begin_us) << ", \"args\": {\"iteration\": "
        << e.iteration << "}}";
    first = false;
  }
  out << "]}\n";
  return out.str();
}

}  // namespace cost
}  // namespace oflite
