// The kernel's NVMe/TCP state read from a fake sysfs tree laid out as kernel 7.3 shows it
// (controllers in /sys/class/nvme, heads and their generic char devices under their subsystem).
// Connecting for real needs the kernel: the VM scenario 82-nvme-tcp does that.
#include "server/nvme/fabrics.h"

#include <filesystem>
#include <fstream>

#include "common/read_file.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"

namespace blk::server::nvme {
namespace {

namespace fs = std::filesystem;

constexpr char kNqn[] = "nqn.2026-12.io.blk:array";
constexpr char kHost[] = "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";

class FabricsTest : public ::testing::Test {
 protected:
  void Write(const std::string& relative, const std::string& text) {
    const fs::path path = fs::path(dir_.path()) / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text << "\n";
  }
  void Controller(const std::string& name, const std::string& transport, const std::string& nqn,
                  const std::string& address, const std::string& state) {
    const std::string base = "sys/class/nvme/" + name + "/";
    Write(base + "transport", transport);
    Write(base + "subsysnqn", nqn);
    Write(base + "hostnqn", kHost);
    Write(base + "address", address);
    Write(base + "state", state);
    Write(base + "delete_controller", "");
  }
  void Head(const std::string& subsystem, const std::string& head, uint32_t nsid) {
    Write("sys/class/nvme-subsystem/" + subsystem + "/subsysnqn", kNqn);
    Write("sys/class/nvme-subsystem/" + subsystem + "/" + head + "/nsid", std::to_string(nsid));
    Write("sys/class/nvme-generic/ng" + head.substr(4) + "/dev", "242:0");
  }

  testing::TempDir dir_;
  Fabrics fabrics_{dir_.path()};
};

TEST(FabricAddress, IpLiteralsWithAPortParseAndFormatBack) {
  absl::StatusOr<FabricAddress> v4 = ParseFabricAddress("192.0.2.7:4420");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->host, "192.0.2.7");
  EXPECT_EQ(v4->port, 4420);
  EXPECT_EQ(FormatFabricAddress(*v4), "192.0.2.7:4420");
  absl::StatusOr<FabricAddress> v6 = ParseFabricAddress("[2001:db8::1]:8009");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "2001:db8::1");
  EXPECT_EQ(FormatFabricAddress(*v6), "[2001:db8::1]:8009");
}

TEST(FabricAddress, NamesMissingPortsAndBadPortsAreRefusedNamingTheText) {
  for (const char* bad : {"array.example:4420", "192.0.2.7", "192.0.2.7:0", "192.0.2.7:70000",
                          "[2001:db8::1]4420", "[nonsense]:4420", "192.0.2.7:44x"}) {
    absl::StatusOr<FabricAddress> address = ParseFabricAddress(bad);
    EXPECT_EQ(address.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(address.status().message().find(bad), std::string::npos) << address.status();
  }
}

TEST_F(FabricsTest, HostIdentityComesFromEtcNvmeAndItsAbsenceIsNamed) {
  absl::StatusOr<HostIdentity> none = ReadHostIdentity(dir_.path());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("/etc/nvme/hostnqn"), std::string::npos);
  Write("etc/nvme/hostnqn", kHost);
  Write("etc/nvme/hostid", "11111111-2222-3333-4444-555555555555");
  absl::StatusOr<HostIdentity> identity = ReadHostIdentity(dir_.path());
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_EQ(identity->nqn, kHost);
  EXPECT_EQ(identity->id, "11111111-2222-3333-4444-555555555555");
}

TEST_F(FabricsTest, ControllersAreThisSubsystemsTcpOnesWithTheirAddressAndState) {
  Controller("nvme2", "tcp", kNqn, "traddr=127.0.0.1,trsvcid=4421,src_addr=127.0.0.1",
             "connecting");
  Controller("nvme1", "tcp", kNqn, "traddr=127.0.0.1,trsvcid=4420", "live");
  Controller("nvme0", "pcie", "nqn.2019-08.org.qemu:deadbeef", "0000:00:04.0", "live");
  Controller("nvme3", "tcp", "nqn.2026-12.io.blk:other", "traddr=127.0.0.1,trsvcid=4420", "live");
  std::vector<FabricController> found = fabrics_.Controllers(kNqn, kHost);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].name, "nvme1");
  EXPECT_EQ(found[0].address, (FabricAddress{"127.0.0.1", 4420}));
  EXPECT_EQ(found[0].state, "live");
  EXPECT_EQ(found[1].name, "nvme2");
  EXPECT_EQ(found[1].address, (FabricAddress{"127.0.0.1", 4421}));
  EXPECT_EQ(found[1].state, "connecting");
  EXPECT_TRUE(fabrics_.Controllers(kNqn, "nqn.2014-08.org.nvmexpress:uuid:other").empty());
}

TEST_F(FabricsTest, AnExistingControllerIsReusedNotConnectedAgain) {
  Controller("nvme1", "tcp", kNqn, "traddr=::1,trsvcid=4420", "live");
  ConnectOptions options;
  options.subsystem_nqn = kNqn;
  options.host.nqn = kHost;
  // The fake root has no /dev/nvme-fabrics: a connect attempt would fail.
  absl::StatusOr<bool> made = fabrics_.Connect({"0::1", 4420}, options);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_FALSE(*made);
  absl::StatusOr<bool> other = fabrics_.Connect({"127.0.0.1", 4420}, options);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("nvme-tcp"), std::string::npos) << other.status();
}

TEST_F(FabricsTest, DisconnectDeletesOnlyTheControllerOfThatAddress) {
  Controller("nvme1", "tcp", kNqn, "traddr=127.0.0.1,trsvcid=4420", "live");
  Controller("nvme2", "tcp", kNqn, "traddr=127.0.0.1,trsvcid=4421", "live");
  ASSERT_TRUE(fabrics_.Disconnect({"127.0.0.1", 4421}, kNqn, kHost).ok());
  EXPECT_EQ(*ReadFileToString(dir_.path() + "/sys/class/nvme/nvme2/delete_controller"), "1");
  EXPECT_EQ(*ReadFileToString(dir_.path() + "/sys/class/nvme/nvme1/delete_controller"), "\n");
  EXPECT_TRUE(fabrics_.Disconnect({"127.0.0.1", 9999}, kNqn, kHost).ok());
}

TEST_F(FabricsTest, TheHeadOfANamespaceIsItsGenericCharDeviceInTheSubsystem) {
  Head("nvme-subsys3", "nvme3n1", 1);
  Head("nvme-subsys3", "nvme3n2", 5);
  Write("sys/class/nvme-subsystem/nvme-subsys3/nvme3/state", "live");  // a controller entry
  absl::StatusOr<std::string> head = fabrics_.HeadCharDevice(kNqn, 5, 0);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(*head, dir_.path() + "/dev/ng3n2");
  absl::StatusOr<std::string> absent = fabrics_.HeadCharDevice(kNqn, 7, 0);
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(absent.status().message().find("namespace 7"), std::string::npos);
}

TEST_F(FabricsTest, WithoutMultipathThereIsNoHeadAndTheVolumeIsRefused) {
  Head("nvme-subsys3", "nvme3n1", 1);
  Write("sys/module/nvme_core/parameters/multipath", "N");
  absl::StatusOr<std::string> head = fabrics_.HeadCharDevice(kNqn, 1, 0);
  EXPECT_EQ(head.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(head.status().message().find("multipath"), std::string::npos);
}

}  // namespace
}  // namespace blk::server::nvme
