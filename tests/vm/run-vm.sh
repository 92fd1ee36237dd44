#!/usr/bin/env bash
# Usage: tests/vm/run-vm.sh --kernel {lts|newest} --out DIR [--mem 2G] [--smp 2]
#          [--tcg multi|single] [--timeout SEC] [--nvme IMG[:LBS]]... [--keep PATH]... [--quiet]
#          -- SCRIPT [ARGS...]
#
# Boots a Debian kernel with ublk (tests/vm/fetch-kernel.sh) in QEMU TCG and
# runs SCRIPT ARGS as root in the guest, then powers off. The guest sees:
#   - the host root, read-only, at the same paths (build trees run as is);
#   - DIR, writable, at the same path: scripts leave their results there;
#   - tmpfs on /run, /tmp and /dev/shm (host paths under /tmp that are the
#     cwd, the script or a --keep PATH stay visible, read-only);
#   - ublk_drv, nvme and null_blk (nr_devices=1 queue_mode=2 irqmode=0
#     submit_queues=2) loaded, lo up;
#   - cwd = the host cwd; env BLK_VM_KERNEL=<flavour>, BLK_VM_RELEASE=<uname -r>,
#     BLK_VM_OUT=DIR, and
#     every BLK_* variable of the host's environment.
#   --nvme IMG[:LBS]  adds an NVMe controller backed by the raw file IMG
#                     (/dev/nvme0n1, /dev/ng0n1, ...), LBS = logical block size.
#   --tcg single      one host thread runs every vCPU in turn (default multi: a thread per
#                     vCPU). For VMs sharing the host's cores with each other: a vCPU thread
#                     descheduled by the host while the other spins on it (an IPI, a lock) burns
#                     the core; two 2-vCPU guests at once on 2 cores took 20% longer and 30% more
#                     CPU multi-threaded (tests/vm scenarios 10 and 80 on both kernels).
#   --quiet           do not stream the script's output to stdout.
#
# Output in DIR: guest.log (the script's stdout+stderr, also streamed to
# stdout with a "[flavour] " prefix), console.log (the kernel console),
# exit-status, .vm/ (job file, boot time).
# A guest that dies before its script starts, or does not reach it within
# BLK_VM_BOOT_DEADLINE seconds (default 300), is booted again (3 boots at most).
# Exit status: the script's; 124 when the VM timed out (default 1200 s);
# 125 when the VM died before the script finished.
set -euo pipefail

# Everything runs inside main: bash parses a function whole before running it,
# so editing this file while it runs (the VM takes minutes) cannot derail it.
main() {
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

  die() {
    echo "run-vm: $*" >&2
    exit 2
  }

  flavour="" out="" mem=2G smp=2 tcg=multi timeout_s=1200 quiet=0
  nvme_images=() keep_paths=()
  while (($# > 0)); do
    case "$1" in
      --kernel) flavour="${2:?--kernel needs a value}" && shift 2 ;;
      --out) out="${2:?--out needs a value}" && shift 2 ;;
      --mem) mem="${2:?--mem needs a value}" && shift 2 ;;
      --smp) smp="${2:?--smp needs a value}" && shift 2 ;;
      --tcg) tcg="${2:?--tcg needs a value}" && shift 2 ;;
      --timeout) timeout_s="${2:?--timeout needs a value}" && shift 2 ;;
      --nvme) nvme_images+=("${2:?--nvme needs a value}") && shift 2 ;;
      --keep) keep_paths+=("${2:?--keep needs a value}") && shift 2 ;;
      --quiet) quiet=1 && shift ;;
      -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
      --) shift && break ;;
      *) die "unknown argument '$1' (see --help)" ;;
    esac
  done
  (($# > 0)) || die "missing '-- SCRIPT [ARGS...]'"
  [[ "$flavour" == lts || "$flavour" == newest ]] || die "--kernel must be lts or newest"
  [[ -n "$out" ]] || die "missing --out DIR"
  [[ "$timeout_s" =~ ^[0-9]+$ ]] || die "--timeout wants seconds, got '$timeout_s'"
  [[ "$smp" =~ ^[0-9]+$ ]] || die "--smp wants a number, got '$smp'"
  [[ "$tcg" == multi || "$tcg" == single ]] || die "--tcg wants multi or single, got '$tcg'"
  boot_deadline_s="${BLK_VM_BOOT_DEADLINE:-300}"
  [[ "$boot_deadline_s" =~ ^[0-9]+$ ]] || die "BLK_VM_BOOT_DEADLINE wants seconds, got '$boot_deadline_s'"

  mkdir -p "$out"
  out="$(cd "$out" && pwd)"
  # The path goes on the kernel command line and into a 9p mount.
  [[ "$out" =~ ^/[A-Za-z0-9._/+-]+$ ]] || die "--out path '$out' has characters the kernel command line cannot carry"

  script="$1"
  shift
  if [[ "$script" == */* ]]; then
    script="$(cd "$(dirname "$script")" && pwd)/$(basename "$script")"
    [[ -x "$script" ]] || die "$script is not an executable file"
  fi

  command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found (run scripts/setup.sh)"
  kernel_dir="$("$here/fetch-kernel.sh" "$flavour")" || die "cannot fetch the $flavour kernel"

  nvme_args=()
  index=0
  for spec in "${nvme_images[@]}"; do
    image="${spec%%:*}" lbs=""
    [[ "$spec" == *:* ]] && lbs="${spec#*:}"
    [[ -f "$image" ]] || die "NVMe image '$image' is not a file"
    device="nvme,serial=blkvm$index,drive=nv$index"
    [[ -n "$lbs" ]] && device+=",logical_block_size=$lbs,physical_block_size=$lbs"
    # discard=unmap: QEMU's namespaces report that deallocated blocks read zeroes (DLFEAT), which
    # holds only when a deallocate really punches the image.
    nvme_args+=(-drive "file=$image,if=none,id=nv$index,format=raw,cache=unsafe,discard=unmap"
      -device "$device")
    index=$((index + 1))
  done

  rm -rf "$out/.vm"
  rm -f "$out/exit-status" "$out/guest.log" "$out/console.log"
  mkdir -p "$out/.vm"
  : >"$out/guest.log"

  env_pass=()
  while IFS= read -r name; do
    env_pass+=("$name=${!name}")
  done < <(compgen -e | grep -E '^BLK_' | grep -vE '^BLK_VM_(KERNEL|OUT)$' || true)

  # Prints NAME=(quoted words...) for the guest to source.
  print_array() {
    local name="$1"
    shift
    printf '%s=(' "$name"
    (($# > 0)) && printf '%q ' "$@"
    printf ')\n'
  }

  {
    printf 'job_cwd=%q\n' "$PWD"
    printf 'job_flavour=%q\n' "$flavour"
    printf 'job_release=%q\n' "$(cat "$kernel_dir/version")"
    printf 'job_modbase=%q\n' "$kernel_dir/$(cat "$kernel_dir/modbase")"
    print_array job_argv "$script" "$@"
    print_array job_env "${env_pass[@]}"
    # The modules must stay reachable when the cache lives under /tmp.
    print_array job_keep "${keep_paths[@]}" "$kernel_dir"
  } >"$out/.vm/job"

  # tsc=nowatchdog: under TCG the clocksource watchdog marked the guest's TSC unstable about 150 s
  # after boot and the guest moved to HPET, where every clock read is an emulated MMIO access
  # (clock_gettime leaves the vDSO). That halved ublk IOPS mid-benchmark. tsc=reliable keeps the
  # TSC too, but crashed 2 boots of 30 in the boot-time code patching described below
  # (tsc=nowatchdog: 0 of 30). Only the 7.x guest, which the benchmarks run on: without the
  # watchdog a 6.12 guest's clock once jumped 12 days forward mid-run (console timestamps 633 s,
  # then 1033343 s), firing every timer at once; 6.12 keeps the watchdog and ends on HPET.
  local clock_args=""
  [[ "$flavour" == newest ]] && clock_args="tsc=nowatchdog"
  # shellcheck disable=SC2054 # the commas are QEMU's option syntax
  qemu=(
    qemu-system-x86_64 -nodefaults -no-user-config
    -accel "tcg,thread=$tcg" -cpu max -smp "$smp" -m "$mem"
    -display none -monitor none -serial "file:$out/console.log" -no-reboot
    -kernel "$kernel_dir/vmlinuz" -initrd "$kernel_dir/initramfs.cpio"
    -append "console=ttyS0 quiet panic=-1 mitigations=off $clock_args blk_init=$here/guest-init.sh blk_out=$out"
    -fsdev local,id=root,path=/,security_model=none,readonly=on,multidevs=remap
    -device virtio-9p-pci,fsdev=root,mount_tag=/dev/root
    -fsdev "local,id=out,path=$out,security_model=none,multidevs=remap"
    -device virtio-9p-pci,fsdev=out,mount_tag=blkout
    "${nvme_args[@]}"
  )

  qemu_pid="" tail_pid=""
  # The streaming tail follows QEMU (--pid) and ends on its own once QEMU is gone.
  # shellcheck disable=SC2317 # called by the EXIT trap
  cleanup() {
    local status=$?
    trap '' INT TERM
    if [[ -n "$qemu_pid" ]]; then
      kill "$qemu_pid" 2>/dev/null || true
      wait "$qemu_pid" 2>/dev/null || true
    fi
    [[ -z "$tail_pid" ]] || wait "$tail_pid" 2>/dev/null || true
    exit "$status"
  }
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM HUP

  # One QEMU run; sets qemu_status. Killed early when the guest has not reached its script after
  # boot_deadline_s.
  boot_once() {
    : >"$out/console.log"
    timeout --kill-after=10 "$timeout_s" "${qemu[@]}" </dev/null >"$out/.vm/qemu.log" 2>&1 &
    qemu_pid=$!
    if ((quiet == 0)); then
      tail -n +1 -F -s 0.2 --pid="$qemu_pid" "$out/guest.log" 2>/dev/null |
        sed -u "s/^/[$flavour] /" &
      tail_pid=$!
    fi
    local boot_started=$SECONDS
    while [[ ! -f "$out/.vm/boot-seconds" ]] && kill -0 "$qemu_pid" 2>/dev/null; do
      if ((SECONDS - boot_started >= boot_deadline_s)); then
        echo "run-vm: the $flavour guest did not reach its script in ${boot_deadline_s}s" >&2
        kill "$qemu_pid" 2>/dev/null || true
        break
      fi
      sleep 0.5 # polls a file the guest writes over 9p; nothing to wait on
    done
    qemu_status=0
    wait "$qemu_pid" || qemu_status=$?
    qemu_pid=""
    if [[ -n "$tail_pid" ]]; then
      wait "$tail_pid" || true
      tail_pid=""
    fi
  }

  # What killed a boot, from its console: the first oops or panic line, else its last line.
  boot_failure() {
    local line
    line="$(grep -m1 -E 'Oops|Kernel panic|BUG:' "$out/console.log" || tail -n 1 "$out/console.log" || true)"
    line="${line#\[*\] }"
    echo "${line:-an empty console}"
  }

  # A guest kernel that dies before the script starts (QEMU's multi-threaded TCG can crash the
  # guest while it patches its own code at boot: "Oops: int3" in a static branch) or that never
  # gets there is booted again, up to max_boots times. A guest that reached the script is never
  # run twice.
  local max_boots=3 attempt
  started=$SECONDS
  for ((attempt = 1; ; attempt++)); do
    boot_once
    [[ ! -f "$out/exit-status" && ! -f "$out/.vm/boot-seconds" ]] || break
    ((attempt < max_boots)) || break
    cp "$out/console.log" "$out/.vm/console-boot$attempt.log"
    echo "run-vm: the $flavour guest died before its script started ($(boot_failure));" \
      "booting again ($((attempt + 1)) of $max_boots; its console is in $out/.vm/console-boot$attempt.log)" >&2
  done

  elapsed=$((SECONDS - started))
  boot="?"
  [[ -f "$out/.vm/boot-seconds" ]] && boot="$(cat "$out/.vm/boot-seconds")"

  if [[ -f "$out/exit-status" ]]; then
    status="$(cat "$out/exit-status")"
    echo "run-vm: $flavour kernel $(cat "$kernel_dir/version"): script exited $status" \
      "(boot ${boot}s, total ${elapsed}s)" >&2
    exit "$status"
  fi

  if ((qemu_status == 124 || qemu_status == 137)); then
    echo "run-vm: the $flavour VM timed out after ${timeout_s}s; last console lines:" >&2
    tail -n 30 "$out/console.log" >&2 || true
    exit 124
  fi
  echo "run-vm: the $flavour VM stopped (qemu status $qemu_status) before the script finished;" \
    "qemu said:" >&2
  tail -n 10 "$out/.vm/qemu.log" >&2 || true
  echo "run-vm: last console lines:" >&2
  tail -n 30 "$out/console.log" >&2 || true
  exit 125
}

main "$@"
