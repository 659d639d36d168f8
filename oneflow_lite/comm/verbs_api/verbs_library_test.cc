#include "oneflow_lite/comm/verbs_api/verbs_library.h"

#include <dlfcn.h>

#include <gtest/gtest.h>

namespace oflite {
namespace verbs {
namespace {

TEST(VerbsLibraryTest, MissingLibraryIsUnavailableWithInstallHint) {
  VerbsLibraryOptions options;
  options.library = "libibverbs-does-not-exist.so.9";
  auto api = LoadVerbsLibrary(options);
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(api.status().message().find("RDMA unavailable"), std::string::npos)
      << api.status();
  EXPECT_NE(api.status().message().find("libibverbs-does-not-exist.so.9"),
            std::string::npos);
  EXPECT_NE(api.status().message().find("install rdma-core"),
            std::string::npos);
}

TEST(VerbsLibraryTest, LibraryWithoutVerbsSymbolsIsUnavailable) {
  VerbsLibraryOptions options;
  options.library = "libm.so.6";  // loads, but is not libibverbs
  auto api = LoadVerbsLibrary(options);
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(api.status().message().find("ibv_get_device_list"),
            std::string::npos)
      << api.status();
}

// Runs against the real libibverbs when the machine has it (rdma-core is a
// build dependency here, so it normally does); without HCAs it lists none.
TEST(VerbsLibraryTest, RealLibraryFillsEveryEntryAndListsDevices) {
  void* probe = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (probe == nullptr) GTEST_SKIP() << "libibverbs.so.1 not installed";
  dlclose(probe);
  auto api = LoadVerbsLibrary();
  ASSERT_TRUE(api.ok()) << api.status();
  const VerbsApi& table = **api;
  EXPECT_EQ(table.implementation, "libibverbs.so.1");
  EXPECT_TRUE(table.get_device_list && table.free_device_list &&
              table.get_device_name && table.open_device &&
              table.close_device && table.query_device && table.query_port &&
              table.query_gid && table.alloc_pd && table.dealloc_pd &&
              table.reg_mr && table.dereg_mr && table.create_cq &&
              table.destroy_cq && table.poll_cq && table.create_qp &&
              table.destroy_qp && table.modify_qp && table.query_qp &&
              table.post_send && table.post_recv && table.fork_init &&
              table.create_comp_channel && table.destroy_comp_channel &&
              table.req_notify_cq && table.get_cq_event &&
              table.ack_cq_events);
  int count = -1;
  ibv_device** devices = table.get_device_list(&count);
  if (devices == nullptr) {
    // No kernel verbs support in this container (ENOSYS and friends).
    SUCCEED() << "ibv_get_device_list: " << errno;
    return;
  }
  EXPECT_GE(count, 0);
  for (int i = 0; i < count; ++i) {
    EXPECT_NE(table.get_device_name(devices[i]), nullptr);
  }
  table.free_device_list(devices);
  // fork_init already ran inside LoadVerbsLibrary; a second call is a no-op.
  EXPECT_EQ(table.fork_init(), 0);
}

TEST(VerbsNamesTest, StatusAndMtuNames) {
  EXPECT_STREQ(WcStatusName(IBV_WC_REM_ACCESS_ERR), "IBV_WC_REM_ACCESS_ERR");
  EXPECT_STREQ(WcStatusName(IBV_WC_WR_FLUSH_ERR), "IBV_WC_WR_FLUSH_ERR");
  EXPECT_STREQ(WcOpcodeName(IBV_WC_RECV_RDMA_WITH_IMM),
               "IBV_WC_RECV_RDMA_WITH_IMM");
  EXPECT_STREQ(QpStateName(IBV_QPS_RTS), "RTS");
  EXPECT_EQ(MtuBytes(IBV_MTU_256), 256);
  EXPECT_EQ(MtuBytes(IBV_MTU_1024), 1024);
  EXPECT_EQ(MtuBytes(IBV_MTU_4096), 4096);
  EXPECT_EQ(MtuBytes(static_cast<ibv_mtu>(9)), 0);
}

}  // namespace
}  // namespace verbs
}  // namespace oflite
