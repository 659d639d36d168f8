#include "oneflow_lite/comm/provider_registry.h"

#include <gtest/gtest.h>

#include "oneflow_lite/comm/builtin_providers.h"

namespace oflite {
namespace comm {
namespace {

TEST(ProviderRegistryTest, BuiltinNamesAndUnknownNameListsThem) {
  ProviderRegistry registry = BuiltinProviders(BuiltinProviderOptions());
  EXPECT_EQ(registry.Names(), (std::vector<std::string>{"auto", "ibverbs", "shm", "tcp"}));
  EXPECT_EQ(registry.NameList(), "auto, ibverbs, shm or tcp");
  StatusOr<ProviderFactory> bogus = registry.Find("bogus");
  ASSERT_FALSE(bogus.ok());
  EXPECT_EQ(bogus.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bogus.status().message().find("'bogus'"), std::string::npos) << bogus.status();
  EXPECT_NE(bogus.status().message().find("auto, ibverbs, shm or tcp"), std::string::npos)
      << bogus.status();
}

TEST(ProviderRegistryTest, TcpFactoryCreatesARealTransport) {
  BuiltinProviderOptions options;
  options.job_token = "registry-test";
  ProviderRegistry registry = BuiltinProviders(options);
  StatusOr<ProviderFactory> tcp = registry.Find("tcp");
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  TransportOptions transport;
  transport.rank = 0;
  transport.world_size = 2;
  StatusOr<std::unique_ptr<Transport>> created = (*tcp)(transport);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_STREQ((*created)->provider_name(), "tcp");
  EXPECT_TRUE((*created)->LocalEndpoint(1).ok());
}

TEST(ProviderRegistryTest, ANewProviderIsOneRegistration) {
  ProviderRegistry registry;
  int calls = 0;
  registry.Register("fake", [&calls](const TransportOptions&)
                                -> StatusOr<std::unique_ptr<Transport>> {
    ++calls;
    return UnimplementedError("fake transport");
  });
  StatusOr<ProviderFactory> fake = registry.Find("fake");
  ASSERT_TRUE(fake.ok());
  EXPECT_EQ((*fake)(TransportOptions()).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(registry.NameList(), "fake");
}

}  // namespace
}  // namespace comm
}  // namespace oflite
