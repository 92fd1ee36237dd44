// Runs the built blkctl executable: what an operator's shell sees (exit
// status, stdout, stderr), not just what RunBlkctl returns.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/cli/fake_agent.h"

#ifndef BLKCTL_BINARY
#error "BLKCTL_BINARY must name the built blkctl (set by cli/CMakeLists.txt)"
#endif

extern char** environ;

namespace blk::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

struct Process {
  int exit_status = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// Runs blkctl with args, stdout and stderr captured in files under dir; env
// entries ("NAME=value") replace the inherited environment when given.
Process RunBinary(const testing::TempDir& dir, const std::vector<std::string>& args,
                  const std::vector<std::string>* env = nullptr) {
  std::vector<std::string> storage = {BLKCTL_BINARY};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(storage.size() + 1);
  for (std::string& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage = env ? *env : std::vector<std::string>();
  std::vector<char*> envp;
  envp.reserve(env_storage.size() + 1);
  for (std::string& entry : env_storage) envp.push_back(entry.data());
  envp.push_back(nullptr);

  const std::string out_path = dir.path() + "/stdout";
  const std::string err_path = dir.path() + "/stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(),
                                  env != nullptr ? envp.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  Process process;
  if (spawned != 0) {
    ADD_FAILURE() << "cannot run " << argv[0] << ": " << strerror(spawned);
    return process;
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) {
    ADD_FAILURE() << "waitpid: " << strerror(errno);
    return process;
  }
  process.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  process.out = ReadFile(out_path);
  process.err = ReadFile(err_path);
  return process;
}

TEST(BlkctlBinary, UnreachableSocketIsNamedAndExitsOne) {
  testing::TempDir dir;
  const std::string socket = dir.path() + "/nobody-listens.sock";
  Process run = RunBinary(dir, {"--socket", socket, "list-volumes"});
  EXPECT_EQ(run.exit_status, 1);
  EXPECT_THAT(run.err, StartsWith("blkctl: UNAVAILABLE: cannot reach blkagent at " + socket));
  EXPECT_THAT(run.out, IsEmpty());
}

TEST(BlkctlBinary, SocketFileWithoutListenerIsUnreachableToo) {
  testing::TempDir dir;
  const std::string socket = dir.path() + "/stale.sock";
  std::ofstream(socket) << "";
  Process run = RunBinary(dir, {"--socket", socket, "node-info"});
  EXPECT_EQ(run.exit_status, 1);
  EXPECT_THAT(run.err, HasSubstr(socket));
}

TEST(BlkctlBinary, VersionIsTheProjectsAndNeedsNoAgent) {
  testing::TempDir dir;
  Process run = RunBinary(dir, {"--version"});
  EXPECT_EQ(run.exit_status, 0);
  EXPECT_EQ(run.out, std::string(BLK_VERSION) + "\n");
  EXPECT_THAT(run.err, IsEmpty());
}

TEST(BlkctlBinary, UsageErrorExitsTwo) {
  testing::TempDir dir;
  Process run = RunBinary(dir, {"--socket", dir.path() + "/unused.sock", "create-volume", "v1",
                                "--size", "64M", "--backend", "null://", "--block-size", "1000"});
  EXPECT_EQ(run.exit_status, 2);
  EXPECT_THAT(run.err, HasSubstr("--block-size"));
}

TEST(BlkctlBinary, DefaultSocketComesFromBlkctlSocket) {
  testing::FakeAgent agent;
  const std::vector<std::string> env = {"BLKCTL_SOCKET=" + agent.socket_path()};
  Process created = RunBinary(
      testing::TempDir(), {"create-volume", "v1", "--size", "1G", "--backend", "null://"}, &env);
  ASSERT_EQ(created.exit_status, 0) << created.err;
  testing::TempDir dir;
  Process listed = RunBinary(dir, {"list-volumes", "-o", "json"}, &env);
  EXPECT_EQ(listed.exit_status, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr("\"devicePath\": \"/dev/ublkb0\""));
  EXPECT_THAT(listed.err, IsEmpty());
}

TEST(BlkctlBinary, SocketOptionOverridesBlkctlSocket) {
  testing::FakeAgent agent;
  const std::vector<std::string> env = {"BLKCTL_SOCKET=" + agent.socket_path()};
  testing::TempDir dir;
  Process run = RunBinary(dir, {"--socket", agent.unused_socket_path(), "list-volumes"}, &env);
  EXPECT_EQ(run.exit_status, 1);
  EXPECT_THAT(run.err, HasSubstr(agent.unused_socket_path()));
  EXPECT_EQ(agent.service().calls(), 0);
}

TEST(BlkctlBinary, HelpNamesTheDefaultSocketAndItsVariable) {
  testing::TempDir dir;
  const std::vector<std::string> empty_env;
  Process run = RunBinary(dir, {"--help"}, &empty_env);
  EXPECT_EQ(run.exit_status, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("/run/blkagent/blkagent.sock"));
  EXPECT_THAT(run.out, HasSubstr("BLKCTL_SOCKET"));
}

}  // namespace
}  // namespace blk::cli
