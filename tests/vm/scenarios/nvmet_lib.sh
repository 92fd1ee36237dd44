# shellcheck shell=bash
# NVMe over TCP targets inside the guest (the kernel's nvmet, configured through configfs) and
# the host controllers connected to them, for scenarios about nvme-tcp:// volumes. Sourced after
# lib.sh:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   source "$(dirname "${BASH_SOURCE[0]}")/nvmet_lib.sh"
#
# Provides:
#   nvmet_load                      nvmet, nvmet-tcp and nvme-tcp loaded, configfs mounted; skips
#                                   the scenario when the kernel lacks a module; registers
#                                   nvmet_teardown to run at exit
#   nvmet_subsystem NQN IMG SIZE    a subsystem any host may use, namespace 1 backed by the file
#                                   IMG (created sparse, SIZE as truncate takes it)
#   nvmet_require_host NQN HOSTNQN KEY  only HOSTNQN may use subsystem NQN, authenticated with the
#                                   DH-CHAP key KEY (DHHC-1:...); skips without nvmet auth
#   nvmet_port ID PORT [NQN]        a TCP port on 127.0.0.1:PORT exposing NQN (default: the last
#                                   subsystem made)
#   nvmet_unlink ID / nvmet_link ID stop / start exposing the port's subsystem: the path goes down
#                                   (host controllers on it go to "connecting") and comes back
#   nvmet_teardown                  deletes every host controller of our subsystems (whoever made
#                                   it), then the ports and the subsystems: nothing is left for the
#                                   next scenario
#   nvme_host_controllers NQN       the host's controllers (nvmeX) of subsystem NQN, one a line
#   nvme_controller_count NQN       how many there are
#   nvme_controller_count_is NQN N  succeeds when there are N (for wait_for)
#   nvme_controller_states NQN      "nvmeX=STATE@ADDRESS ..." on one line, for messages
#   nvme_live_controller_count NQN  how many of them are in state live
#   nvme_head_chardev NQN NSID      the multipath head's generic char device (/dev/ngXnY)

NVMET_CONFIG=/sys/kernel/config/nvmet
NVMET_SUBSYSTEMS=()             # NQNs made by nvmet_subsystem, in order
declare -gA NVMET_PORT_NQN=()   # port id -> the NQN it exposes
NVMET_TEARDOWN_REGISTERED=""
NVMET_HOSTS=()                  # host NQNs made by nvmet_require_host

nvmet_load() {
  [[ -n "${BLK_VM_MODBASE:-}" ]] ||
    fail "nvmet_load: BLK_VM_MODBASE is unset (tests/vm/guest-init.sh exports the kernel's module tree)"
  local module
  for module in nvmet nvmet-tcp nvme-tcp; do
    modprobe -d "$BLK_VM_MODBASE" -n -q "$module" ||
      skip "the kernel $(uname -r) has no module $module"
    modprobe -d "$BLK_VM_MODBASE" "$module" || fail "modprobe $module failed"
  done
  mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config ||
    fail "cannot mount configfs on /sys/kernel/config"
  [[ -d "$NVMET_CONFIG/subsystems" ]] || fail "no $NVMET_CONFIG/subsystems after loading nvmet"
  [[ -w /dev/nvme-fabrics ]] || fail "no /dev/nvme-fabrics after loading nvme-tcp"
  if [[ -z "$NVMET_TEARDOWN_REGISTERED" ]]; then
    on_exit nvmet_teardown
    NVMET_TEARDOWN_REGISTERED=1
  fi
}

nvmet_subsystem() {
  local nqn="$1" img="$2" size="$3" subsystem="$NVMET_CONFIG/subsystems/$1"
  [[ ! -e "$subsystem" ]] || fail "nvmet_subsystem: $nqn exists already (left by an earlier scenario?)"
  truncate -s "$size" "$img" || fail "nvmet_subsystem: cannot create $img"
  mkdir "$subsystem" || fail "nvmet_subsystem: mkdir $subsystem failed"
  NVMET_SUBSYSTEMS+=("$nqn")
  echo 1 >"$subsystem/attr_allow_any_host"
  mkdir "$subsystem/namespaces/1"
  echo "$img" >"$subsystem/namespaces/1/device_path"
  echo 1 >"$subsystem/namespaces/1/enable" || fail "nvmet_subsystem: cannot enable namespace 1 on $img"
  echo "nvmet: subsystem $nqn, namespace 1 on $img ($size)"
}

nvmet_require_host() {
  local nqn="$1" host="$2" key="$3" subsystem="$NVMET_CONFIG/subsystems/$1"
  local dir="$NVMET_CONFIG/hosts/$2"
  [[ -d "$dir" ]] || mkdir "$dir" || fail "nvmet_require_host: mkdir $dir failed"
  NVMET_HOSTS+=("$host")
  [[ -e "$dir/dhchap_key" ]] || skip "nvmet of $(uname -r) has no DH-CHAP (NVME_TARGET_AUTH)"
  echo "$key" >"$dir/dhchap_key" || fail "nvmet_require_host: cannot set the DH-CHAP key of $host"
  echo 0 >"$subsystem/attr_allow_any_host"
  ln -s "$dir" "$subsystem/allowed_hosts/" || fail "nvmet_require_host: cannot allow $host on $nqn"
  echo "nvmet: subsystem $nqn allows only $host, with DH-CHAP"
}

nvmet_port() {
  local id="$1" port="$2" nqn="${3:-}" dir="$NVMET_CONFIG/ports/$1"
  if [[ -z "$nqn" ]]; then
    ((${#NVMET_SUBSYSTEMS[@]} > 0)) || fail "nvmet_port: no subsystem to expose (nvmet_subsystem first)"
    nqn="${NVMET_SUBSYSTEMS[${#NVMET_SUBSYSTEMS[@]} - 1]}"
  fi
  [[ ! -e "$dir" ]] || fail "nvmet_port: port $id exists already (left by an earlier scenario?)"
  mkdir "$dir" || fail "nvmet_port: mkdir $dir failed"
  NVMET_PORT_NQN[$id]="$nqn"
  echo tcp >"$dir/addr_trtype"
  echo ipv4 >"$dir/addr_adrfam"
  echo 127.0.0.1 >"$dir/addr_traddr"
  echo "$port" >"$dir/addr_trsvcid"
  nvmet_link "$id"
  echo "nvmet: port $id on 127.0.0.1:$port exposes $nqn"
}

nvmet_link() {
  local id="$1" nqn="${NVMET_PORT_NQN[$1]:?nvmet_link: no port $1}"
  ln -s "$NVMET_CONFIG/subsystems/$nqn" "$NVMET_CONFIG/ports/$id/subsystems/" ||
    fail "nvmet_link: cannot expose $nqn on port $id"
}

nvmet_unlink() {
  local id="$1" nqn="${NVMET_PORT_NQN[$1]:?nvmet_unlink: no port $1}"
  rm "$NVMET_CONFIG/ports/$id/subsystems/$nqn" || fail "nvmet_unlink: cannot unexpose $nqn on port $id"
}

# --- the host's side ---

nvme_host_controllers() {
  local ctrl nqn
  for ctrl in /sys/class/nvme/nvme*; do
    # A controller being deleted may vanish between the glob and the read.
    read -r nqn 2>/dev/null <"$ctrl/subsysnqn" || continue
    [[ "$nqn" == "$1" ]] && echo "${ctrl##*/}"
  done
  return 0
}

nvme_controller_count() {
  local controllers
  mapfile -t controllers < <(nvme_host_controllers "$1")
  echo "${#controllers[@]}"
}

nvme_controller_count_is() { [[ "$(nvme_controller_count "$1")" == "$2" ]]; }

nvme_controller_states() {
  local ctrl state address states=()
  for ctrl in $(nvme_host_controllers "$1"); do
    read -r state 2>/dev/null <"/sys/class/nvme/$ctrl/state" || state=gone
    read -r address 2>/dev/null <"/sys/class/nvme/$ctrl/address" || address=""
    states+=("$ctrl=$state@$address")
  done
  echo "${states[*]:-none}"
}

nvme_live_controller_count() {
  local ctrl state live=0
  for ctrl in $(nvme_host_controllers "$1"); do
    read -r state 2>/dev/null <"/sys/class/nvme/$ctrl/state" || continue
    [[ "$state" == live ]] && live=$((live + 1))
  done
  echo "$live"
}

nvme_head_chardev() {
  local subsystem nqn head
  for subsystem in /sys/class/nvme-subsystem/nvme-subsys*; do
    read -r nqn 2>/dev/null <"$subsystem/subsysnqn" || continue
    [[ "$nqn" == "$1" ]] || continue
    for head in "$subsystem"/ng*n"$2"; do
      [[ -e "$head" ]] || continue
      echo "/dev/${head##*/}"
      return 0
    done
  done
  return 1
}

# --- teardown ---

# Host controllers first (a target that vanishes under them leaves them reconnecting for good),
# then the ports, then the subsystems. Quiet about what is already gone; safe to call twice.
nvmet_teardown() {
  local nqn ctrl id dir ns deadline
  if [[ -n "${AGENT_PID:-}" ]]; then
    # An agent still serving a volume on these controllers would chase them: stop it first.
    echo "nvmet_teardown: stopping blkagent (pid $AGENT_PID) before its controllers go" >&2
    kill -TERM "$AGENT_PID" 2>/dev/null
    wait_gone "$AGENT_PID" 20 || kill -KILL "$AGENT_PID" 2>/dev/null
    wait "$AGENT_PID" 2>/dev/null
    AGENT_PID=""
  fi
  for nqn in "${NVMET_SUBSYSTEMS[@]}"; do
    for ctrl in $(nvme_host_controllers "$nqn"); do
      echo "nvmet_teardown: deleting host controller $ctrl of $nqn" >&2
      echo 1 >"/sys/class/nvme/$ctrl/delete_controller" 2>/dev/null
    done
    deadline=$((SECONDS + 30))
    while [[ -n "$(nvme_host_controllers "$nqn")" ]] && ((SECONDS < deadline)); do
      sleep 0.1
    done
    [[ -z "$(nvme_host_controllers "$nqn")" ]] ||
      echo "nvmet_teardown: controllers of $nqn still there: $(nvme_controller_states "$nqn")" >&2
  done
  for id in "${!NVMET_PORT_NQN[@]}"; do
    dir="$NVMET_CONFIG/ports/$id"
    [[ -d "$dir" ]] || continue
    rm -f "$dir"/subsystems/* 2>/dev/null
    rmdir "$dir" || echo "nvmet_teardown: cannot remove port $id" >&2
  done
  NVMET_PORT_NQN=()
  for nqn in "${NVMET_SUBSYSTEMS[@]}"; do
    dir="$NVMET_CONFIG/subsystems/$nqn"
    [[ -d "$dir" ]] || continue
    for ns in "$dir"/namespaces/*; do
      [[ -d "$ns" ]] || continue
      echo 0 >"$ns/enable" 2>/dev/null
      rmdir "$ns" || echo "nvmet_teardown: cannot remove $ns" >&2
    done
    rm -f "$dir"/allowed_hosts/* 2>/dev/null
    rmdir "$dir" || echo "nvmet_teardown: cannot remove subsystem $nqn" >&2
  done
  NVMET_SUBSYSTEMS=()
  local host
  for host in "${NVMET_HOSTS[@]}"; do
    rmdir "$NVMET_CONFIG/hosts/$host" 2>/dev/null || echo "nvmet_teardown: cannot remove host $host" >&2
  done
  NVMET_HOSTS=()
  return 0
}
