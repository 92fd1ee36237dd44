#!/usr/bin/env bash
# Who may call the agent on its Unix socket, decided from the kernel's credentials of each
# connection: root and the admin group create and delete volumes; the reader group lists and gets
# them but its creates and deletes are refused PERMISSION_DENIED and change nothing; a user in
# neither group is refused even a list. The guest's /etc is the host's, read-only: the users are
# numeric ids given by setpriv, and the groups are given to the agent as numeric gids.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
one_kernel_only lts "authorization is the agent's, from SO_PEERCRED"

command -v setpriv >/dev/null || fail "setpriv (util-linux) not found"
admins=61010
readers=61011
chmod 0755 "$WORK"  # the other users reach the socket through it

start_agent --admin-group "$admins" --reader-group "$readers"
expect_eq "socket mode and group" "666 $admins" "$(stat -c '%a %g' "$AGENT_SOCKET")"

as() {  # as UID GID GROUPS blkctl ARGS...
  local uid="$1" gid="$2" groups="$3"
  shift 3
  setpriv --reuid "$uid" --regid "$gid" --groups "$groups" -- \
    "$(command -v blkctl)" --socket "$AGENT_SOCKET" "$@"
}
admin() { as 61100 61100 "61100,$admins" "$@"; }
reader() { as 61200 61200 "61200,$readers" "$@"; }
stranger() { as 61300 61300 61300 "$@"; }
volume_ids() { ctl list-volumes -o json | jq -r '[.volumes[]?.id] | sort | join(",")'; }

step "root creates and deletes"
ctl create-volume by-root --size 16M --backend null://
[[ -b "$(volume_device by-root)" ]] || fail "no device for by-root"
ctl delete-volume by-root
expect_eq "volumes after root's delete" "" "$(volume_ids)"

step "an admin-group user creates, writes and deletes"
admin create-volume by-admin --size 16M --backend "file://$WORK/by-admin.img"
dev="$(volume_device by-admin)"
fio_write_pattern "$dev" 4M
admin get-volume by-admin >/dev/null
expect_eq "volumes after the admin's create" "by-admin" "$(volume_ids)"

step "a reader-group user reads, and may not change anything"
listed="$(reader list-volumes)"
[[ "$listed" == *by-admin* ]] || fail "the reader's list does not show by-admin: $listed"
reader get-volume by-admin >/dev/null
reader node-info >/dev/null
expect_fail_with "PERMISSION_DENIED: uid 61200 .* may not call CreateVolume" "reader create" \
  reader create-volume by-reader --size 16M --backend null://
expect_fail_with "PERMISSION_DENIED: uid 61200 .* may not call DeleteVolume" "reader delete" \
  reader delete-volume by-admin --force
expect_eq "volumes after the reader's attempts" "by-admin" "$(volume_ids)"
[[ -b "$dev" ]] || fail "$dev vanished after a refused delete"
fio_check_pattern "$dev" 4M

step "a user in neither group is refused even a list"
expect_fail_with "PERMISSION_DENIED: uid 61300 .* may not call ListVolumes" "stranger list" \
  stranger list-volumes
expect_fail_with "PERMISSION_DENIED: uid 61300" "stranger delete" stranger delete-volume by-admin
expect_eq "volumes after the stranger's attempts" "by-admin" "$(volume_ids)"
grep -q "refused: uid 61300 (pid [0-9]*) may not call ListVolumes" "$LOG_DIR/blkagent.log" ||
  fail "the refusal is not in the agent's log"

step "the admin deletes"
admin delete-volume by-admin
expect_eq "volumes after the admin's delete" "" "$(volume_ids)"
[[ ! -e "$dev" ]] || fail "$dev still exists after the admin's delete"
stop_agent
