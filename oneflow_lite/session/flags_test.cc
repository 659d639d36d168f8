#include "oneflow_lite/session/flags.h"

#include <gtest/gtest.h>

namespace oflite {
namespace cli {
namespace {

// Parses `args` (after the command name) into a FlagSet of a few flags.
struct Parsed {
  FlagSet flags;
  Status status;
};

Parsed ParseArgs(std::vector<std::string> args, size_t max_positional = 0) {
  Parsed parsed{FlagSet("test", "",
                        {{"iters", "", false, "0"},
                         {"watchdog-seconds", "", false, "60"},
                         {"verbose", "", true, "false"}},
                        max_positional),
                Status::OK()};
  args.insert(args.begin(), "test");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  parsed.status = parsed.flags.Parse(static_cast<int>(argv.size()), argv.data());
  return parsed;
}

bool Contains(const Status& status, const std::string& needle) {
  return status.message().find(needle) != std::string::npos;
}

TEST(FlagSetTest, ParsesValuesBooleansAndDefaults) {
  Parsed p = ParseArgs({"--iters", "7", "--verbose"});
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(*p.flags.GetInt("iters", 0, 100), 7);
  EXPECT_TRUE(p.flags.GetBool("verbose"));
  EXPECT_EQ(p.flags.GetSeconds("watchdog-seconds", 1, 3600)->count(), 60000);
  Parsed q = ParseArgs({"--iters=3", "--noverbose"});
  ASSERT_TRUE(q.status.ok()) << q.status;
  EXPECT_EQ(*q.flags.GetInt("iters"), 3);
  EXPECT_FALSE(q.flags.GetBool("verbose"));
}

TEST(FlagSetTest, PositiveNumbers) {
  FlagSet flags("test", "", {{"lr", "", false, "0.1"}});
  std::vector<std::string> args = {"test", "--lr=2.5e-3"};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  ASSERT_TRUE(flags.Parse(static_cast<int>(argv.size()), argv.data()).ok());
  EXPECT_DOUBLE_EQ(*flags.GetPositiveDouble("lr"), 2.5e-3);
  for (const char* bad : {"abc", "0", "-1", "inf", "nan", "1e999", "0.1x", ""}) {
    FlagSet other("test", "", {{"lr", "", false, "0.1"}});
    std::vector<std::string> more = {"test", std::string("--lr=") + bad};
    std::vector<char*> more_argv;
    for (std::string& arg : more) more_argv.push_back(arg.data());
    ASSERT_TRUE(other.Parse(static_cast<int>(more_argv.size()), more_argv.data()).ok());
    StatusOr<double> value = other.GetPositiveDouble("lr");
    EXPECT_FALSE(value.ok()) << bad;
    EXPECT_TRUE(Contains(value.status(), "flag '--lr' must be a positive number")) << bad;
  }
}

TEST(FlagSetTest, BooleansTakeOnlyBooleanValues) {
  Parsed yes = ParseArgs({"--verbose=1"});
  ASSERT_TRUE(yes.status.ok()) << yes.status;
  EXPECT_TRUE(yes.flags.GetBool("verbose"));
  Parsed no = ParseArgs({"--verbose=no"});
  ASSERT_TRUE(no.status.ok()) << no.status;
  EXPECT_FALSE(no.flags.GetBool("verbose"));
  for (const char* bad : {"--verbose=maybe", "--verbose=2", "--verbose="}) {
    Parsed p = ParseArgs({bad});
    EXPECT_FALSE(p.status.ok()) << bad;
    EXPECT_TRUE(Contains(p.status, "flag '--verbose' expects true or false")) << p.status;
  }
}

TEST(FlagSetTest, RefusesPositionalArgumentsBeyondTheDeclaredCount) {
  Parsed none = ParseArgs({"--iters", "3", "stray"});
  EXPECT_FALSE(none.status.ok());
  EXPECT_TRUE(Contains(none.status, "unexpected argument 'stray'")) << none.status;
  Parsed dashes = ParseArgs({"--"});
  EXPECT_TRUE(Contains(dashes.status, "unexpected argument '--'")) << dashes.status;
  Parsed one = ParseArgs({"plan.pb"}, 1);
  ASSERT_TRUE(one.status.ok()) << one.status;
  EXPECT_EQ(one.flags.positional(), std::vector<std::string>{"plan.pb"});
  Parsed two = ParseArgs({"plan.pb", "other.pb"}, 1);
  EXPECT_TRUE(Contains(two.status, "unexpected argument 'other.pb'")) << two.status;
}

TEST(FlagSetTest, UnknownFlagAndMissingValueNameTheFlag) {
  EXPECT_TRUE(Contains(ParseArgs({"--bogus"}).status, "unknown flag '--bogus'"));
  EXPECT_TRUE(Contains(ParseArgs({"--iters"}).status, "flag '--iters' needs a value"));
}

TEST(FlagSetTest, IntegersOutsideTheirRangeNameFlagValueAndRange) {
  for (const char* bad : {"-5", "101", "abc", "", "1e3", "3 ", "+", "99999999999999999999"}) {
    Parsed p = ParseArgs({"--iters", bad});
    ASSERT_TRUE(p.status.ok()) << p.status;
    StatusOr<int64_t> value = p.flags.GetInt("iters", 0, 100);
    ASSERT_FALSE(value.ok()) << bad;
    EXPECT_EQ(value.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(value.status(), "flag '--iters' must be an integer in [0, 100], got '" +
                                             std::string(bad) + "'"))
        << value.status();
  }
  Parsed edge = ParseArgs({"--iters", "+100"});
  EXPECT_EQ(*edge.flags.GetInt("iters", 0, 100), 100);
}

TEST(FlagSetTest, ParseInt64HandlesTheWholeRangeAndRefusesOverflow) {
  EXPECT_EQ(*ParseInt64("9223372036854775807", "x"), INT64_MAX);
  EXPECT_EQ(*ParseInt64("-9223372036854775808", "x"), INT64_MIN);
  StatusOr<int64_t> over = ParseInt64("9223372036854775808", "flag '--n'");
  ASSERT_FALSE(over.ok());
  EXPECT_TRUE(Contains(over.status(), "flag '--n': '9223372036854775808' does not fit"));
  EXPECT_FALSE(ParseInt64("0x10", "x").ok());
}

// The seconds -> milliseconds conversion must never overflow: values that
// would (or nearly would) are refused before it, naming the range.
TEST(FlagSetTest, DurationsAreRangeCheckedBeforeConversion) {
  for (const char* bad : {"9300000000000000", "9223372036854775807", "9223372036854775808",
                          "0", "-1", "2592001"}) {
    Parsed p = ParseArgs({"--watchdog-seconds", bad});
    StatusOr<std::chrono::milliseconds> value =
        p.flags.GetSeconds("watchdog-seconds", 1, kMaxDurationSeconds);
    ASSERT_FALSE(value.ok()) << bad;
    EXPECT_TRUE(Contains(value.status(), "flag '--watchdog-seconds' must be an integer in [1, "
                                         "2592000]"))
        << value.status();
  }
  Parsed max = ParseArgs({"--watchdog-seconds", "2592000"});
  EXPECT_EQ(max.flags.GetSeconds("watchdog-seconds", 1, kMaxDurationSeconds)->count(),
            2592000LL * 1000);
}

}  // namespace
}  // namespace cli
}  // namespace oflite
