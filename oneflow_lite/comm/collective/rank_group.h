// The ranks a collective runs over: all ranks of a Transport, or a group
// of them (the machines of one axis of a 2-D placement, e.g. {0, 2} and
// {1, 3} of a 2x2 data x tensor parallel job).
//
// A collective's schedule works on group ranks 0..size-1 (its segments,
// neighbours and summing order); connections and error messages use the
// transport's ranks (Global). Members are given in group order, distinct,
// and must include the calling rank.
#ifndef ONEFLOW_LITE_COMM_COLLECTIVE_RANK_GROUP_H_
#define ONEFLOW_LITE_COMM_COLLECTIVE_RANK_GROUP_H_

#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace comm {

class RankGroup {
 public:
  // `members` in group order (empty: every rank of `world` in rank order),
  // `rank` the caller's rank in the transport. InvalidArgument, naming
  // `what`, for a member out of range or repeated, or a group without the
  // caller.
  static StatusOr<RankGroup> Make(const std::vector<int>& members, int rank, int world,
                                  const std::string& what) {
    RankGroup group;
    if (members.empty()) {
      for (int r = 0; r < world; ++r) group.members_.push_back(r);
    } else {
      group.members_ = members;
    }
    group.local_.assign(world > 0 ? world : 0, -1);
    for (size_t i = 0; i < group.members_.size(); ++i) {
      const int member = group.members_[i];
      if (member < 0 || member >= world) {
        return InvalidArgumentError(what, ": group member ", member, " is not a rank of the ",
                                    world, "-rank job");
      }
      if (group.local_[member] >= 0) {
        return InvalidArgumentError(what, ": rank ", member, " appears twice in the group");
      }
      group.local_[member] = static_cast<int>(i);
    }
    if (rank < 0 || rank >= world || group.local_[rank] < 0) {
      return InvalidArgumentError(what, ": rank ", rank, " is not in its group of ",
                                  group.members_.size(), " ranks");
    }
    group.rank_ = group.local_[rank];
    return group;
  }

  int rank() const { return rank_; }  // the caller's group rank
  int size() const { return static_cast<int>(members_.size()); }
  // The transport rank of group rank `i` (0 <= i < size()).
  int Global(int i) const { return members_[i]; }
  // The group rank of transport rank `global`; -1 when it is not a member.
  int Local(int global) const {
    return global >= 0 && global < static_cast<int>(local_.size()) ? local_[global] : -1;
  }

 private:
  std::vector<int> members_;
  std::vector<int> local_;  // by transport rank: group rank or -1
  int rank_ = 0;
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_COLLECTIVE_RANK_GROUP_H_
