#!/usr/bin/env bash
# NVMe passthrough volumes on QEMU's emulated controllers (one namespace with
# 512-byte LBAs, one with 4096): fio verify on both; zero copy where the kernel
# offers UBLK_F_AUTO_BUF_REG, copy mode elsewhere; two volumes at disjoint
# offsets of one namespace keep their data apart; discard reads back zeroes
# where the namespace promises it (DLFEAT); overlapping, oversized, misaligned
# and badly-pathed volumes are refused with the reason; a volume with --poll
# serves correct data; kill -9 and restart recovers an NVMe volume intact; where the kernel
# can resize (UPDATE_SIZE), a volume grows online to the namespace's end (the new bytes land at
# the right place) and no further, nor into its neighbour.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

sysfs_of() { echo "/sys/block/${1#/dev/}"; }
char_device_of() { echo "/dev/ng${1#/dev/nvme}"; }
volume_json() { ctl get-volume "$1" -o json; }

main() {
  local blk512 blk4k ng512 ng4k
  blk512="$(nvme_namespace 512)"
  blk4k="$(nvme_namespace 4096)"
  ng512="$(char_device_of "$blk512")"
  ng4k="$(char_device_of "$blk4k")"
  [[ -c "$ng512" && -c "$ng4k" ]] || fail "no generic char devices $ng512 / $ng4k"
  echo "namespaces: $blk512 ($ng512, 512-byte LBAs), $blk4k ($ng4k, 4096-byte LBAs)"

  start_agent
  local features expected_mode
  features="$(ctl node-info -o json | jq -r '.ublkFeatures // "0"')"
  # UBLK_F_AUTO_BUF_REG is bit 11.
  if (((features >> 11) & 1)); then expected_mode=zero_copy; else expected_mode=copy; fi
  echo "ublk features $features: expecting copy mode '$expected_mode'"

  step "a volume on each namespace: block size and size from the namespace"
  ctl create-volume n512 --size 64M --backend "nvme://$ng512"
  ctl create-volume n4k --backend "nvme://$ng4k"
  local dev512 dev4k
  dev512="$(volume_device n512)"
  dev4k="$(volume_device n4k)"
  expect_eq "n512 logical block size" 512 "$(cat "$(sysfs_of "$dev512")/queue/logical_block_size")"
  expect_eq "n4k logical block size" 4096 "$(cat "$(sysfs_of "$dev4k")/queue/logical_block_size")"
  expect_eq "n4k size (the whole namespace)" "$(blockdev --getsize64 "$blk4k")" "$(blockdev --getsize64 "$dev4k")"
  expect_eq "n4k size in get-volume" "$(blockdev --getsize64 "$blk4k")" "$(volume_json n4k | jq -r .volume.sizeBytes)"
  expect_eq "n512 copy mode" "$expected_mode" "$(volume_json n512 | jq -r .volume.status.copyMode)"
  expect_eq "n4k copy mode" "$expected_mode" "$(volume_json n4k | jq -r .volume.status.copyMode)"
  ctl get-volume n4k
  local info
  info="$(curl -fsS "http://127.0.0.1:9477/metrics" | grep '^blk_volume_info{' | grep 'volume="n4k"')" || true
  [[ "$info" == *'backend="nvme"'* ]] || fail "/metrics has no blk_volume_info with backend=\"nvme\" for n4k"
  echo "ok: /metrics labels n4k backend=\"nvme\""
  fio_verify "$dev512" 16M
  fio_verify "$dev4k" 16M

  step "the data is on the namespace, at the volume's offset"
  ctl create-volume n512b --size 64M --backend "nvme://$ng512?offset=64M"
  local dev512b
  dev512b="$(volume_device n512b)"
  fio_write_pattern "$dev512b" 16M
  fio_check_pattern "$dev512" 16M
  cmp <(dd if="$blk512" bs=1M skip=64 count=8 iflag=direct status=none) \
    <(dd if="$dev512b" bs=1M count=8 iflag=direct status=none) ||
    fail "bytes 64M.. of $blk512 differ from the start of n512b"
  cmp <(dd if="$blk512" bs=1M count=8 iflag=direct status=none) \
    <(dd if="$dev512" bs=1M count=8 iflag=direct status=none) ||
    fail "bytes 0.. of $blk512 differ from the start of n512"
  echo "ok: n512 and n512b are bytes 0-64M and 64M-128M of $blk512"

  step "refused: overlap, too large, misaligned, bad paths"
  expect_fail_with "FAILED_PRECONDITION.*overlap volume 'n512b'" "a volume overlapping n512b" \
    ctl create-volume over --size 64M --backend "nvme://$ng512?offset=96M"
  expect_fail_with "INVALID_ARGUMENT.*volume.size_bytes.*do not fit" "a volume larger than the namespace" \
    ctl create-volume big --size 512M --backend "nvme://$ng512?offset=128M"
  expect_fail_with "INVALID_ARGUMENT.*volume.nvme.offset_bytes.*not inside" "an offset beyond the namespace" \
    ctl create-volume far --backend "nvme://$ng512?offset=1G"
  expect_fail_with "INVALID_ARGUMENT.*volume.nvme.offset_bytes.*LBA size 4096" "an offset off the 4096-byte LBAs" \
    ctl create-volume odd --size 4M --backend "nvme://$ng4k?offset=512"
  expect_fail_with "INVALID_ARGUMENT.*volume.logical_block_size.*LBA size 4096" "512-byte blocks on 4096-byte LBAs" \
    ctl create-volume small --size 4M --block-size 512 --backend "nvme://$ng4k"
  expect_fail_with "INVALID_ARGUMENT.*volume.nvme.path.*No such file" "a missing char device" \
    ctl create-volume gone --size 4M --backend "nvme:///dev/ng9n9"
  expect_fail_with "INVALID_ARGUMENT.*volume.nvme.path.*is a block device.*ngXnY" "the block device instead of the char device" \
    ctl create-volume blk --size 4M --backend "nvme://$blk512"
  touch "$WORK/plain"
  expect_fail_with "INVALID_ARGUMENT.*volume.nvme.path.*not a character device" "a regular file" \
    ctl create-volume plain --size 4M --backend "nvme://$WORK/plain"
  expect_fail_with "volume.nvme.path.*not an NVMe namespace" "a char device that is no namespace" \
    ctl create-volume null --size 4M --backend "nvme:///dev/null"
  expect_eq "volumes after the refusals" "n4k,n512,n512b" "$(ctl list-volumes -o json | jq -r '[.volumes[].id] | join(",")')"
  fio_check_pattern "$dev512b" 16M

  step "discard and write zeroes"
  local oncs dlfeat
  oncs="$(nvme id-ctrl "${blk512%n*}" -o json | jq -r .oncs)"
  dlfeat="$(nvme id-ns "$blk512" -o json | jq -r .dlfeat)"
  echo "controller ONCS $oncs, namespace DLFEAT $dlfeat"
  if (((oncs >> 2) & 1)); then
    (($(cat "$(sysfs_of "$dev512")/queue/discard_max_bytes") > 0)) || fail "the namespace has DSM but n512 offers no discard"
    blkdiscard -o 1M -l 1M "$dev512"
    if (((dlfeat & 7) == 1)); then
      # The namespace itself first (bytes 128M.. belong to no volume): the promise must hold there.
      dd if=/dev/urandom of="$blk512" bs=1M seek=128 count=1 oflag=direct status=none
      blkdiscard -o 128M -l 1M "$blk512"
      expect_eq "nonzero bytes in a range discarded on $blk512 itself" 0 "$(dd if="$blk512" bs=1M skip=128 count=1 iflag=direct status=none | tr -d '\0' | wc -c)"
      expect_eq "nonzero bytes in the range discarded through n512" 0 "$(dd if="$dev512" bs=1M skip=1 count=1 iflag=direct status=none | tr -d '\0' | wc -c)"
    else
      echo "DLFEAT does not promise zeroes after deallocate: not checking the data"
    fi
  else
    expect_eq "n512 discard_max_bytes (no DSM)" 0 "$(cat "$(sysfs_of "$dev512")/queue/discard_max_bytes")"
  fi
  if (((oncs >> 3) & 1)); then
    (($(cat "$(sysfs_of "$dev512")/queue/write_zeroes_max_bytes") > 0)) || fail "the namespace has Write Zeroes but n512 does not offer it"
  fi
  # A flush (fsync of the block device) completes, in either copy mode.
  dd if=/dev/urandom of="$dev512" bs=4k count=1 seek=2048 oflag=direct conv=fsync status=none ||
    fail "a write with fsync on n512 failed"
  blkdiscard -z -o 4M -l 2M "$dev512"
  expect_eq "nonzero bytes after write zeroes" 0 "$(dd if="$dev512" bs=1M skip=4 count=2 iflag=direct status=none | tr -d '\0' | wc -c)"

  step "kill -9 and restart: the NVMe volumes are recovered with their data"
  kill_agent
  start_agent
  expect_eq "n512b keeps its device" "$dev512b" "$(volume_device n512b)"
  expect_eq "n512b copy mode after recovery" "$expected_mode" "$(volume_json n512b | jq -r .volume.status.copyMode)"
  fio_check_pattern "$dev512b" 16M
  fio_check_pattern "$dev4k" 16M

  step "polling queue threads serve correct data"
  ctl delete-volume n4k
  ctl create-volume npoll --size 128M --poll --queues 2 --backend "nvme://$ng4k?offset=64M"
  expect_eq "npoll poll" true "$(volume_json npoll | jq -r .volume.poll)"
  fio_verify "$(volume_device npoll)" 16M

  # UBLK_F_UPDATE_SIZE is bit 10 (6.14+; elsewhere 67 checks the refusal).
  if (((features >> 10) & 1)); then
    step "resize: an NVMe volume grows to the namespace's end, not beyond it or into a neighbour"
    local ns4k devpoll
    ns4k="$(blockdev --getsize64 "$blk4k")"
    devpoll="$(volume_device npoll)"
    ctl resize-volume npoll --size $((ns4k - 64 * 1024 * 1024))
    expect_eq "npoll device size" $((ns4k - 64 * 1024 * 1024)) "$(blockdev --getsize64 "$devpoll")"
    head -c 4M /dev/urandom >"$WORK/grown"
    dd if="$WORK/grown" of="$devpoll" bs=1M seek=128 oflag=direct conv=fsync status=none ||
      fail "a write beyond npoll's old end failed"
    cmp <(dd if="$blk4k" bs=1M skip=192 count=4 iflag=direct status=none) "$WORK/grown" ||
      fail "the grown part of npoll is not at bytes 192M.. of $blk4k"
    expect_fail_with "FAILED_PRECONDITION.*namespace has $ns4k bytes" "growing past the namespace" \
      ctl resize-volume npoll --size $((ns4k - 60 * 1024 * 1024))
    expect_fail_with "FAILED_PRECONDITION.*overlap volume 'n512b'" "growing into n512b" \
      ctl resize-volume n512 --size 96M
    expect_eq "n512 size after the refusal" $((64 * 1024 * 1024)) "$(blockdev --getsize64 "$dev512")"
  fi

  ctl delete-volume n512
  ctl delete-volume n512b
  ctl delete-volume npoll
  stop_agent
}

main "$@"
