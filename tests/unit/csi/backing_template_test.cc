#include "csi/backing_template.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::csi {
namespace {

using ::testing::HasSubstr;

TEST(BackendForVolume, EveryPlaceholderBecomesTheVolumeId) {
  absl::StatusOr<std::string> backend =
      BackendForVolume("file:///var/lib/blk/pool/{volume}.img", "pvc-1");
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ(*backend, "file:///var/lib/blk/pool/pvc-1.img");
  backend = BackendForVolume("nbd://server/{volume}-{volume}", "pvc-2");
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ(*backend, "nbd://server/pvc-2-pvc-2");
  backend = BackendForVolume("null://", "pvc-3");
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ(*backend, "null://");
}

TEST(BackendForVolume, ANamespaceIsNeverProvisionedDynamically) {
  absl::StatusOr<std::string> local = BackendForVolume("nvme:///dev/ng0n1?offset=1G", "pvc-1");
  EXPECT_EQ(local.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(local.status().message()),
              HasSubstr("an nvme:// class cannot be provisioned dynamically (its path names one "
                        "namespace, which every claim would share); make one PersistentVolume"));
  // A remote namespace the same, with or without a placeholder (a subsystem per claim is not
  // something a claim can make).
  for (const std::string class_backend :
       {"nvme-tcp://10.0.0.5/nqn.2014-08.org.example:array1?nsid=1&path=10.0.1.5",
        "nvme-tcp://10.0.0.5/nqn.2014-08.org.example:{volume}?nsid=1"}) {
    SCOPED_TRACE(class_backend);
    absl::StatusOr<std::string> remote = BackendForVolume(class_backend, "pvc-1");
    EXPECT_EQ(remote.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(remote.status().message()),
                HasSubstr("backend '" + class_backend +
                          "': an nvme-tcp:// class cannot be provisioned dynamically (its "
                          "subsystem NQN and nsid name one namespace, which every claim would "
                          "share); make one PersistentVolume per namespace range"));
  }
}

TEST(BackendForVolume, ABadUriIsRefusedNamingTheClassBackend) {
  absl::StatusOr<std::string> bad = BackendForVolume("nvme-tcp://10.0.0.5/nqn.x", "pvc-1");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("backend 'nvme-tcp://10.0.0.5/nqn.x': backend URI "
                        "'nvme-tcp://10.0.0.5/nqn.x': needs nsid=N"));
}

TEST(BackendForVolume, OneBackingForEveryClaimIsRefused) {
  absl::StatusOr<std::string> shared = BackendForVolume("nbd://server/export", "pvc-1");
  EXPECT_EQ(shared.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(shared.status().message()), HasSubstr("two claims would share it"));
}

}  // namespace
}  // namespace blk::csi
