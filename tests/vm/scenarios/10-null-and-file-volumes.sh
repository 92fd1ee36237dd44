#!/usr/bin/env bash
# A null and a file volume through blkctl: the kernel device has the requested
# geometry, data written to the file volume reads back intact, the image file
# holds it after the volume is deleted, and nothing is left behind.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

sysfs_of() { echo "/sys/block/${1#/dev/}"; }

start_agent

step "null volume, 256 MiB, 512-byte blocks"
ctl create-volume vnull --size 256M --backend null://
dev="$(volume_device vnull)"
[[ -b "$dev" ]] || fail "$dev is not a block device"
# UBLK_F_BATCH_IO is bit 15 of GET_FEATURES: 7.x offers it, 6.12 does not.
features="$(ctl node-info -o json | jq -r '.ublkFeatures // "0"')"
if (((features >> 15) & 1)); then expected_io_mode=batch; else expected_io_mode=classic; fi
expect_eq "vnull io mode (ublk features $features)" "$expected_io_mode" \
  "$(ctl get-volume vnull -o json | jq -r .volume.status.ioMode)"
ctl get-volume vnull | grep -q "^io mode: *$expected_io_mode\$" || fail "get-volume does not show io mode $expected_io_mode"
curl -fsS "http://127.0.0.1:9477/metrics" | grep '^blk_volume_info{' | grep 'volume="vnull"' |
  grep -q "io_mode=\"$expected_io_mode\"" || fail "/metrics blk_volume_info of vnull lacks io_mode=\"$expected_io_mode\""
# Kernels without UBLK_F_QUIESCE (bit 12; 6.12) notice a server that died holding every request
# only by the requests' timeout: the agent shortens it there, and leaves other kernels' default.
if (((features >> 12) & 1)); then expected_timeout_ms=30000; else expected_timeout_ms=2000; fi
expect_eq "vnull io_timeout (ms)" "$expected_timeout_ms" "$(cat "$(sysfs_of "$dev")/queue/io_timeout")"
# One queue: the kernel would give the disk mq-deadline (a kblockd hop per request); the agent
# sets none.
expect_eq "vnull I/O scheduler" none "$(grep -o '\[[^]]*\]' "$(sysfs_of "$dev")/queue/scheduler" | tr -d '[]')"
expect_eq "vnull sectors" $((256 * 1024 * 1024 / 512)) "$(cat "$(sysfs_of "$dev")/size")"
expect_eq "vnull logical block size" 512 "$(cat "$(sysfs_of "$dev")/queue/logical_block_size")"
expect_eq "vnull reads zeroes" 0 "$(head -c 1M "$dev" | tr -d '\0' | wc -c)"
# Writes put their data in the agent's tag buffers; reads through those tags still return zeroes.
pick_fio_engine
run_fio vnull-write.log --name=w --filename="$dev" --rw=randwrite --bs=64k --iodepth=32 \
  --ioengine="$fio_engine" --direct=1 --size=32M --buffer_pattern=0x5a
run_fio vnull-read.log --name=r --filename="$dev" --rw=randread --bs=64k --iodepth=32 \
  --ioengine="$fio_engine" --direct=1 --size=32M --verify=pattern --verify_pattern=0 --verify_only
dd if=/dev/urandom of="$dev" bs=128k count=8 oflag=direct status=none
expect_eq "vnull reads zeroes after writes" 0 \
  "$(dd if="$dev" bs=128k count=8 iflag=direct status=none | tr -d '\0' | wc -c)"

step "vnull: one io_uring_enter of its queue thread per request at QD1"
# strace counts the queue thread's system calls while fio reads 256 blocks one at a time. In batch
# mode each turn's COMMIT_IO_CMDS completes while it is submitted; were its CQE enough to end the
# next wait, every request would cost two.
devid="${dev#/dev/ublkb}"
queue_tid="$(queue_thread_tid "$devid" 0)"
strace -c -e trace=io_uring_enter -o "$LOG_DIR/vnull-strace.txt" -p "$queue_tid" 2>>"$LOG_DIR/vnull-strace.log" &
strace_pid=$!
traced() { [[ "$(awk '$1 == "TracerPid:" { print $2 }' "/proc/$queue_tid/status")" == "$strace_pid" ]]; }
wait_for "strace to trace blkq$devid-0" 30 traced
run_fio vnull-qd1.log --name=qd1 --filename="$dev" --rw=randread --bs=4k --iodepth=1 \
  --ioengine="$fio_engine" --direct=1 --size=1M
kill -INT "$strace_pid"
wait "$strace_pid" || true
enters="$(awk '$NF == "io_uring_enter" { print $4 }' "$LOG_DIR/vnull-strace.txt")"
cat "$LOG_DIR/vnull-strace.txt"
# One call per request, a few more for the attach and whatever else read the disk meanwhile; far
# fewer would mean strace did not see the reads.
((${enters:-0} >= 128 && enters <= 320)) ||
  fail "the queue thread made ${enters:-no} io_uring_enter calls for 256 QD1 reads (want 128..320)"
echo "ok: $enters io_uring_enter calls for 256 reads"

step "file volume, 128 MiB, 2 queues"
image="$WORK/vfile.img"
ctl create-volume vfile --size 128MiB --backend "file://$image" --queues 2
dev="$(volume_device vfile)"
expect_eq "vfile sectors" $((128 * 1024 * 1024 / 512)) "$(cat "$(sysfs_of "$dev")/size")"
expect_eq "vfile hardware queues" 2 "$(ls "$(sysfs_of "$dev")/mq" | wc -l)"
expect_eq "image created at the volume size" $((128 * 1024 * 1024)) "$(stat -c %s "$image")"
fio_verify "$dev" 16M

step "list-volumes shows both, live"
ctl list-volumes
expect_eq "live volumes" 2 "$(ctl list-volumes -o json | jq '[.volumes[] | select(.status.state == "VOLUME_STATE_LIVE")] | length')"

step "vfile: its image truncated under it fails reads past the end, degraded until it is back"
truncate -s 64M "$image"
expect_fail "reading past the image's end" \
  dd if="$dev" of=/dev/null bs=4k count=1 skip=$((100 * 256)) iflag=direct status=none
dd if="$dev" of=/dev/null bs=4k count=1 iflag=direct status=none || fail "the image's first half no longer reads"
expect_eq "vfile state with a short image" VOLUME_STATE_DEGRADED \
  "$(ctl get-volume vfile -o json | jq -r .volume.status.state)"
ctl get-volume vfile -o json | jq -r .volume.status.message | grep "past its end failed with EIO" ||
  fail "get-volume does not say why vfile is degraded"
truncate -s 128M "$image"
expect_eq "vfile state once its image is back" VOLUME_STATE_LIVE \
  "$(ctl get-volume vfile -o json | jq -r .volume.status.state)"
dd if="$dev" of=/dev/null bs=4k count=1 skip=$((100 * 256)) iflag=direct status=none ||
  fail "reading past the old end fails after the image was extended back"

step "a block device backing is claimed exclusively: refused while another holder has it"
# Swap claims its device as a mount, device-mapper or MD does (and is far quicker to set up).
truncate -s 32M "$WORK/loop.img"
loop="$(losetup -f --show "$WORK/loop.img")"
mkswap -q "$loop"
swapon "$loop"
expect_fail_with "is in use" "a volume on a block device in use as swap" \
  ctl create-volume vloop --size 32M --backend "file://$loop"
swapoff "$loop"
ctl create-volume vloop --size 32M --backend "file://$loop"
expect_fail "swap on the block device a volume holds" swapon "$loop"
ctl delete-volume vloop
losetup -d "$loop"

step "4096-byte blocks and read-only"
ctl create-volume v4k --size 64M --block-size 4096 --backend null://
expect_eq "v4k logical block size" 4096 "$(cat "$(sysfs_of "$(volume_device v4k)")/queue/logical_block_size")"
ctl create-volume vro --size 64M --read-only --backend "file://$WORK/vro.img"
ro_dev="$(volume_device vro)"
expect_eq "vro is read-only" 1 "$(cat "$(sysfs_of "$ro_dev")/ro")"
expect_fail "writing to a read-only volume" dd if=/dev/zero of="$ro_dev" bs=4k count=1 oflag=direct status=none

step "delete: the image keeps the data"
ctl delete-volume vfile
[[ ! -e "$dev" ]] || fail "$dev still exists after delete-volume"
# The same job replayed against the image file itself (buffered: /tmp is tmpfs).
run_fio "fio-check-image.log" --name=pattern --filename="$image" --direct=0 --ioengine=psync \
  --rw=randwrite --bs=4k --size=16M --randrepeat=1 --verify=crc32c --verify_fatal=1 \
  --verify_only=1 || fail "the image file does not hold the data written through the volume"
echo "ok: the image file holds the verified data"

ctl delete-volume vnull
ctl delete-volume v4k
ctl delete-volume vro
expect_eq "volumes left" 0 "$(ctl list-volumes -o json | jq '.volumes | length')"
stop_agent

step "--batch-io off: the classic commands even where the kernel offers batch"
start_agent --batch-io off --metrics-address off
ctl create-volume vclassic --size 64M --backend null://
expect_eq "vclassic io mode" classic "$(ctl get-volume vclassic -o json | jq -r .volume.status.ioMode)"
run_fio vclassic-read.log --name=r --filename="$(volume_device vclassic)" --rw=randread --bs=4k \
  --iodepth=32 --ioengine="$fio_engine" --direct=1 --size=16M --verify=pattern --verify_pattern=0 \
  --verify_only
ctl delete-volume vclassic
stop_agent
expect_eq "ublk block devices left" 0 "$(find /dev -maxdepth 1 -name 'ublkb*' | wc -l)"
[[ ! -e "$AGENT_SOCKET" ]] || fail "the agent left its socket behind"
