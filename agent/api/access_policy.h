#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace blk::agent {

// What a caller may do: everything, only the read-only RPCs, or nothing.
enum class Role { kNone, kReader, kAdmin };

// Who is on the other end of a Unix socket connection, as the kernel recorded it at connect():
// SO_PEERCRED's uid, gid and pid, and SO_PEERGROUPS' supplementary groups.
struct PeerCredentials {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
  std::vector<gid_t> groups;
};

// Decides a Unix socket caller's role: root is admin; a caller whose primary or supplementary
// groups hold the admin group is admin, else one holding the reader group is reader; anyone
// else has no role.
class AccessPolicy {
 public:
  AccessPolicy(std::optional<gid_t> admin_group, std::optional<gid_t> reader_group)
      : admin_group_(admin_group), reader_group_(reader_group) {}

  Role RoleOf(const PeerCredentials& peer) const;

 private:
  const std::optional<gid_t> admin_group_;
  const std::optional<gid_t> reader_group_;
};

// A group given by name (looked up in the group database) or by number; NOT_FOUND naming `flag`
// and the name when there is no such group.
absl::StatusOr<gid_t> ResolveGroup(const std::string& name, absl::string_view flag);

}  // namespace blk::agent
