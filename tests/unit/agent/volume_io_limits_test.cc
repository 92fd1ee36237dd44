#include "agent/devices/volume_io_limits.h"

#include <iterator>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace blk::agent {
namespace {

using google::protobuf::util::MessageDifferencer;

TEST(VolumeIoLimits, UnsetLimitsAreUnlimited) {
  EXPECT_TRUE(IoLimitsOf(v1::VolumeLimits()).unlimited());
  v1::VolumeLimits limits;
  limits.mutable_read_iops();  // present, but rate 0
  EXPECT_TRUE(IoLimitsOf(limits).unlimited());
}

TEST(VolumeIoLimits, EachFieldMapsOntoItsLimit) {
  v1::VolumeLimits limits;
  limits.mutable_read_iops()->set_rate(1);
  limits.mutable_read_iops()->set_burst(2);
  limits.mutable_write_iops()->set_rate(3);
  limits.mutable_total_iops()->set_rate(5);
  limits.mutable_total_iops()->set_burst(6);
  limits.mutable_read_bytes_per_second()->set_rate(7);
  limits.mutable_write_bytes_per_second()->set_rate(9);
  limits.mutable_write_bytes_per_second()->set_burst(10);
  limits.mutable_total_bytes_per_second()->set_rate(11);
  const server::IoLimits io = IoLimitsOf(limits);
  EXPECT_EQ(io.read_iops, (server::RateLimit{1, 2}));
  EXPECT_EQ(io.write_iops, (server::RateLimit{3, 0}));
  EXPECT_EQ(io.total_iops, (server::RateLimit{5, 6}));
  EXPECT_EQ(io.read_bytes, (server::RateLimit{7, 0}));
  EXPECT_EQ(io.write_bytes, (server::RateLimit{9, 10}));
  EXPECT_EQ(io.total_bytes, (server::RateLimit{11, 0}));
  EXPECT_TRUE(MessageDifferencer::Equals(VolumeLimitsOf(io), limits))
      << VolumeLimitsOf(io).ShortDebugString();
}

TEST(VolumeIoLimits, UnlimitedLimitsStayUnsetInTheMessage) {
  server::IoLimits io;
  io.total_bytes = {.rate = 1 << 20, .burst = 0};
  const v1::VolumeLimits limits = VolumeLimitsOf(io);
  EXPECT_TRUE(limits.has_total_bytes_per_second());
  EXPECT_FALSE(limits.has_read_iops());
  EXPECT_FALSE(limits.has_read_bytes_per_second());
  EXPECT_EQ(VolumeLimitsOf(server::IoLimits()).ByteSizeLong(), 0u);
}

TEST(VolumeIoLimits, EachKindNamesTheFieldItsLimitTravelsIn) {
  const google::protobuf::Descriptor& descriptor = *v1::VolumeLimits::descriptor();
  for (const IoLimitKind& kind : kIoLimitKinds) {
    server::IoLimits io;
    (io.*kind.limit).rate = 42;
    const v1::VolumeLimits limits = VolumeLimitsOf(io);
    const google::protobuf::FieldDescriptor* field =
        descriptor.FindFieldByName(std::string(kind.field));
    ASSERT_NE(field, nullptr) << kind.field;
    const google::protobuf::Reflection& reflection = *limits.GetReflection();
    ASSERT_TRUE(reflection.HasField(limits, field)) << kind.field;
    const auto& limit = static_cast<const v1::RateLimit&>(reflection.GetMessage(limits, field));
    EXPECT_EQ(limit.rate(), 42u) << kind.field;
    EXPECT_EQ(kind.bytes, absl::EndsWith(kind.name, "_bytes")) << kind.name;
  }
  EXPECT_EQ(std::size(kIoLimitKinds), static_cast<size_t>(descriptor.field_count()));
}

}  // namespace
}  // namespace blk::agent
