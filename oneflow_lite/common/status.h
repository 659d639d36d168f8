// Status and StatusOr<T>: the one error type of OneFlow-Lite.
//
// Every function that can fail because of its input, the environment or a
// peer returns Status or StatusOr<T>; CHECK is kept for programmer bugs.
// A Status message names the culprit: the op, the file, the rank.
//
// Status is a small value type (an OK status holds no allocation); it is
// copyable and thread-compatible (distinct objects may be used from different
// threads freely).
#ifndef ONEFLOW_LITE_COMMON_STATUS_H_
#define ONEFLOW_LITE_COMMON_STATUS_H_

#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>

#include <glog/logging.h>

namespace oflite {

enum class StatusCode {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status OK() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return ok() ? StatusCode::kOk : state_->code; }
  const std::string& message() const;

  // "INVALID_ARGUMENT: message" (or "OK").
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <old message>".
  Status WithContext(const std::string& context) const;

  // Marks the status as deliberately ignored.
  void IgnoreError() const {}

  bool operator==(const Status& other) const {
    return code() == other.code() && message() == other.message();
  }
  bool operator!=(const Status& other) const { return !(*this == other); }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;  // null when OK
};

std::ostream& operator<<(std::ostream& os, const Status& status);

// Constructors, one per code. Each takes any number of streamable pieces:
//   return InvalidArgumentError("op ", name, ": shape ", a, " vs ", b);
namespace status_internal {
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace status_internal

#define OFLITE_DEFINE_ERROR(Name, Code)                                         \
  template <typename... Args>                                                   \
  Status Name(const Args&... args) {                                            \
    return Status(StatusCode::Code, status_internal::StrCat(args...));          \
  }
OFLITE_DEFINE_ERROR(CancelledError, kCancelled)
OFLITE_DEFINE_ERROR(UnknownError, kUnknown)
OFLITE_DEFINE_ERROR(InvalidArgumentError, kInvalidArgument)
OFLITE_DEFINE_ERROR(DeadlineExceededError, kDeadlineExceeded)
OFLITE_DEFINE_ERROR(NotFoundError, kNotFound)
OFLITE_DEFINE_ERROR(AlreadyExistsError, kAlreadyExists)
OFLITE_DEFINE_ERROR(PermissionDeniedError, kPermissionDenied)
OFLITE_DEFINE_ERROR(ResourceExhaustedError, kResourceExhausted)
OFLITE_DEFINE_ERROR(FailedPreconditionError, kFailedPrecondition)
OFLITE_DEFINE_ERROR(AbortedError, kAborted)
OFLITE_DEFINE_ERROR(OutOfRangeError, kOutOfRange)
OFLITE_DEFINE_ERROR(UnimplementedError, kUnimplemented)
OFLITE_DEFINE_ERROR(InternalError, kInternal)
OFLITE_DEFINE_ERROR(UnavailableError, kUnavailable)
OFLITE_DEFINE_ERROR(DataLossError, kDataLoss)
#undef OFLITE_DEFINE_ERROR

// StatusOr<T>: either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // Implicit from a non-OK status (an OK status here is a programmer bug).
  StatusOr(const Status& status) : status_(status) {  // NOLINT
    CHECK(!status_.ok()) << "StatusOr constructed from an OK Status";
  }
  StatusOr(Status&& status) : status_(std::move(status)) {  // NOLINT
    CHECK(!status_.ok()) << "StatusOr constructed from an OK Status";
  }
  StatusOr(const T& value) : value_(value) {}        // NOLINT
  StatusOr(T&& value) : value_(std::move(value)) {}  // NOLINT
  template <typename U,
            typename = std::enable_if_t<std::is_convertible_v<U&&, T> &&
                                        !std::is_same_v<std::decay_t<U>, Status> &&
                                        !std::is_same_v<std::decay_t<U>, StatusOr<T>>>>
  StatusOr(U&& value) : value_(std::forward<U>(value)) {}  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  const T& value() const& {
    CHECK(ok()) << "value() on error: " << status_;
    return *value_;
  }
  T& value() & {
    CHECK(ok()) << "value() on error: " << status_;
    return *value_;
  }
  T&& value() && {
    CHECK(ok()) << "value() on error: " << status_;
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace oflite

#define OFLITE_STATUS_CONCAT_INNER(a, b) a##b
#define OFLITE_STATUS_CONCAT(a, b) OFLITE_STATUS_CONCAT_INNER(a, b)

// Returns from the current function if `expr` (a Status) is not OK.
#define RETURN_IF_ERROR(expr)                                  \
  do {                                                         \
    ::oflite::Status oflite_status_ = (expr);                  \
    if (!oflite_status_.ok()) return oflite_status_;           \
  } while (0)

// ASSIGN_OR_RETURN(auto x, Foo()): declares/assigns x from a StatusOr or
// returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  OFLITE_ASSIGN_OR_RETURN_IMPL(OFLITE_STATUS_CONCAT(oflite_statusor_, __LINE__), lhs, expr)
#define OFLITE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

// For tests and main(): dies with the status message if not OK.
#define CHECK_OK(expr)                                          \
  do {                                                          \
    ::oflite::Status oflite_check_status_ = (expr);             \
    CHECK(oflite_check_status_.ok()) << oflite_check_status_;   \
  } while (0)

#endif  // ONEFLOW_LITE_COMMON_STATUS_H_
