#include "agent/api/access_policy.h"

#include <errno.h>
#include <grp.h>

#include <algorithm>
#include <charconv>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace blk::agent {

namespace {

bool InGroup(const PeerCredentials& peer, std::optional<gid_t> group) {
  if (!group) return false;
  return peer.gid == *group ||
         std::find(peer.groups.begin(), peer.groups.end(), *group) != peer.groups.end();
}

}  // namespace

Role AccessPolicy::RoleOf(const PeerCredentials& peer) const {
  if (peer.uid == 0 || InGroup(peer, admin_group_)) return Role::kAdmin;
  if (InGroup(peer, reader_group_)) return Role::kReader;
  return Role::kNone;
}

absl::StatusOr<gid_t> ResolveGroup(const std::string& name, absl::string_view flag) {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, ": empty group name"));
  gid_t number = 0;
  const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), number);
  if (error == std::errc() && end == name.data() + name.size()) return number;

  std::vector<char> buffer(16384);
  struct group entry {};
  struct group* found = nullptr;
  int err = 0;
  while ((err = ::getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found)) ==
         ERANGE) {
    buffer.resize(buffer.size() * 2);
  }
  if (err != 0) {
    return absl::ErrnoToStatus(err, absl::StrCat(flag, ": cannot look up group '", name, "'"));
  }
  if (found == nullptr) {
    return absl::NotFoundError(absl::StrCat(flag, ": no group named '", name,
                                            "' (give an existing group name or a numeric gid)"));
  }
  return found->gr_gid;
}

}  // namespace blk::agent
