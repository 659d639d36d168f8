// SIGINT and SIGTERM as a flag for commands that run child processes
// (launch, profile): while an InterruptCatcher lives, either signal is
// recorded in the atomic it was given (the signal's number) instead of
// killing the process, so the command can stop its children and exit
// 128 + signal itself. No SA_RESTART: a blocked poll returns at once. The
// previous handlers come back when the catcher goes. One catcher at a time.
#ifndef ONEFLOW_LITE_TOOLS_OFLITE_INTERRUPT_CATCHER_H_
#define ONEFLOW_LITE_TOOLS_OFLITE_INTERRUPT_CATCHER_H_

#include <signal.h>

#include <atomic>

namespace oflite {
namespace cli {

class InterruptCatcher {
 public:
  explicit InterruptCatcher(std::atomic<int>* flag) {
    target_ = flag;
    struct sigaction action = {};
    action.sa_handler = [](int signal_number) {
      if (target_ != nullptr) target_->store(signal_number);
    };
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < 2; ++i) ::sigaction(kSignals[i], &action, &previous_[i]);
  }
  ~InterruptCatcher() {
    for (int i = 0; i < 2; ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
  }
  InterruptCatcher(const InterruptCatcher&) = delete;
  InterruptCatcher& operator=(const InterruptCatcher&) = delete;

 private:
  static constexpr int kSignals[2] = {SIGINT, SIGTERM};
  static inline std::atomic<int>* target_ = nullptr;
  struct sigaction previous_[2];
};

}  // namespace cli
}  // namespace oflite

#endif  // ONEFLOW_LITE_TOOLS_OFLITE_INTERRUPT_CATCHER_H_
