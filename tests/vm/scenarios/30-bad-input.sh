#!/usr/bin/env bash
# Bad requests are refused with an error naming the problem, and change nothing:
# the existing volume keeps its device and its data.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
one_kernel_only lts "bad requests are refused by the agent before any kernel call"

start_agent
ctl create-volume keep --size 64M --backend "file://$WORK/keep.img"
dev="$(volume_device keep)"
fio_write_pattern "$dev" 8M

expect_fail_with "INVALID_ARGUMENT.*size_bytes" "size 0" \
  ctl create-volume zero --size 0 --backend null://
expect_fail_with "INVALID_ARGUMENT.*volume.id" "a bad id" \
  ctl create-volume Not_A_Label --size 1M --backend null://
expect_fail_with "unknown backend scheme" "an unknown backend scheme" \
  ctl create-volume v1 --size 1M --backend gopher://x/y
expect_fail_with "INVALID_ARGUMENT.*does not exist" "a missing file directory" \
  ctl create-volume v2 --size 1M --backend "file://$WORK/no/such/dir/img"
expect_fail_with "ALREADY_EXISTS.*size_bytes" "the same id with a different size" \
  ctl create-volume keep --size 128M --backend "file://$WORK/keep.img"
expect_fail_with "FAILED_PRECONDITION.*already used" "another volume on the same image" \
  ctl create-volume other --size 64M --backend "file://$WORK/keep.img"

step "nothing changed"
expect_eq "volumes" "keep" "$(ctl list-volumes -o json | jq -r '[.volumes[].id] | join(",")')"
expect_eq "device of keep" "$dev" "$(volume_device keep)"
fio_check_pattern "$dev" 8M

step "the same spec again is OK and returns the same device"
ctl create-volume keep --size 64M --backend "file://$WORK/keep.img"
expect_eq "device after the idempotent create" "$dev" "$(volume_device keep)"

step "delete of an unknown id is NOT_FOUND, unless --if-exists"
expect_fail_with "NOT_FOUND: volume 'never-existed' does not exist" "delete of an unknown id" \
  ctl delete-volume never-existed
ctl delete-volume never-existed --if-exists
ctl delete-volume keep
stop_agent
