#!/usr/bin/env bash
# Guest script for tests/vm/run-vm.sh: proves the ublk data path of blk_server on a real kernel.
#   tests/vm/run-vm.sh --kernel lts --out DIR -- tests/vm/tools/server_smoke.sh BIN_DIR [BACKING]
# BACKING: a file (default: on the guest's tmpfs, so buffered I/O) or a block device
# (e.g. /dev/nvme0n1 with --nvme IMG, so O_DIRECT).
set -euo pipefail

bin=${1:?usage: server_smoke.sh BIN_DIR [BACKING]}
backing=${2:-/tmp/server-smoke.img}
size=$((256 << 20))
step() { echo "== $*"; }
fail() {
  echo "FAIL: $*"
  exit 1
}

cd /tmp
coproc SMOKE { exec "$bin/blk_server_smoke" --file "$backing" --size "$size" --queues 2 2>&1; }
smoke_pid=$SMOKE_PID
to_smoke=${SMOKE[1]}
from_smoke=${SMOKE[0]}
# Whatever happens, the server gets EOF/SIGTERM and its devices go away.
trap 'kill -TERM $smoke_pid 2>/dev/null || true' EXIT

expect_line() { # PATTERN: next line from the server must match
  local line
  IFS= read -r -t 120 -u "$from_smoke" line || fail "no reply from blk_server_smoke (wanted '$1')"
  echo "server: $line"
  [[ "$line" =~ $1 ]] || fail "wanted '$1', got '$line'"
  REPLY_LINE=$line
}

expect_line '^features 0x'
expect_line '^file /dev/ublkb[0-9]+$' && file_dev=${REPLY_LINE#file }
expect_line '^null /dev/ublkb[0-9]+$' && null_dev=${REPLY_LINE#null }
expect_line '^ready$'
file_char=/dev/ublkc${file_dev#/dev/ublkb}
null_char=/dev/ublkc${null_dev#/dev/ublkb}
[[ -b $file_dev && -b $null_dev ]] || fail "block devices missing"
[[ $(blockdev --getsize64 "$file_dev") == "$size" ]] || fail "wrong size of $file_dev"
echo "rq_affinity=$(cat /sys/block/${file_dev#/dev/}/queue/rq_affinity)" \
  "nr_hw_queues=$(ls /sys/block/${file_dev#/dev/}/mq | wc -l)"

step "fio random writes with crc32c verify on $file_dev (backing $backing)"
fio --name=verify --filename="$file_dev" --direct=1 --ioengine=io_uring --rw=randwrite \
  --bsrange=4k-256k --iodepth=16 --numjobs=2 --offset_increment=100M --size=96M \
  --verify=crc32c --verify_fatal=1 --verify_state_save=0 --verify_backlog=64 --fsync=32 --group_reporting \
  --output-format=terse --terse-version=3 >/tmp/fio-verify.txt ||
  {
    cat /tmp/fio-verify.txt
    fail "fio verify on $file_dev"
  }
echo "fio verify ok"

step "discard and write-zeroes read back as zeroes"
dd if=/dev/urandom of=/tmp/pattern bs=1M count=4 status=none
dd if=/tmp/pattern of="$file_dev" bs=1M seek=200 oflag=direct conv=fsync status=none
blkdiscard -o $((200 << 20)) -l $((1 << 20)) "$file_dev"
blkdiscard -z -o $((201 << 20)) -l $((1 << 20)) "$file_dev"
dd if="$file_dev" of=/tmp/readback bs=1M skip=200 count=4 iflag=direct status=none
cmp -n $((2 << 20)) /tmp/readback /dev/zero || fail "discarded/zeroed range is not zero"
cmp -i $((2 << 20)) /tmp/readback /tmp/pattern || fail "data beside the discarded range changed"
echo "discard/write-zeroes ok"

step "null device serves reads"
fio --name=null --filename="$null_dev" --direct=1 --ioengine=io_uring --rw=randread --bs=4k \
  --iodepth=32 --size=64M --output-format=terse --terse-version=3 >/dev/null ||
  fail "fio on $null_dev"
echo "counters file" >&"$to_smoke" && expect_line '^counters file reads=[1-9][0-9]* writes=[1-9][0-9]* flushes=[1-9][0-9]* discards=[1-9][0-9]* zeroes=[0-9]+ errors=0$'
echo "counters null" >&"$to_smoke" && expect_line '^counters null reads=[1-9][0-9]* .*errors=0$'

step "stop without force is refused while the device is open, and the device keeps working"
exec 5<"$file_dev"
echo "stop file" >&"$to_smoke"
expect_line "^refused file: FAILED_PRECONDITION: .*$file_dev is in use \(.*pid $$ "
dd if="$file_dev" of=/dev/null bs=4k count=16 iflag=direct status=none || fail "device broken after refusal"
exec 5<&-

step "stop without force succeeds once closed; the backing file keeps the data"
dd if=/tmp/pattern of="$file_dev" bs=1M seek=210 count=1 oflag=direct conv=fsync status=none
echo "stop file" >&"$to_smoke"
expect_line '^stopped file$'
[[ ! -e $file_char && ! -e $file_dev ]] || fail "$file_dev or $file_char still exists after stop"
cmp -n $((1 << 20)) <(dd if="$backing" bs=1M skip=210 count=1 status=none) /tmp/pattern ||
  fail "backing store does not hold the data written through the device"

step "forced stop of an open device: the opener gets errors, nothing hangs"
exec 6<"$null_dev"
echo "stop null force" >&"$to_smoke"
expect_line '^stopped null$'
if dd if=/dev/stdin of=/dev/null bs=4k count=1 iflag=direct status=none <&6 2>/dev/null; then
  echo "note: read from the stopped device's stale fd succeeded (kernel-dependent)"
fi
exec 6<&-
[[ ! -e $null_char ]] || fail "$null_char still exists after forced stop"

step "EOF ends the server cleanly"
exec {to_smoke}>&-
expect_line '^bye$'
wait "$smoke_pid" || fail "blk_server_smoke exited with $?"
trap - EXIT
ls /dev/ublkc* /dev/ublkb* 2>/dev/null && fail "devices left behind"
echo "PASS server smoke on $(uname -r) with backing $backing"
