#!/usr/bin/env bash
# 32 blkctl clients at once against the real agent: creates of 64 distinct volumes, creates of
# one id by several clients with the same spec (all succeed) and with a conflicting one
# (ALREADY_EXISTS), gets, lists, updates, deletes. Every call's answer is the one decided up
# front (ABORTED, "another call on this volume is running; retry later", is asked again, as a CSI
# driver does); none is RESOURCE_EXHAUSTED or UNAVAILABLE. While the volumes exist the state
# dir's records, GetVolume and the kernel's devices agree; after the deletes the agent's fds,
# threads, /dev/ublk* and state dir are as at the start. Then the same creates with kill -9 of
# the agent in the middle: after the restart every volume has a device and a record, every
# record a volume, every create answered OK survived, and no device is orphaned.
#
# Opt-in (BLK_VM_CONCURRENCY=1): under TCG every blkctl is a ~1-2 s process start and every
# create or delete of a device several seconds, so this takes ~10 minutes per kernel, too much
# for the CI suite.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ "${BLK_VM_CONCURRENCY:-}" == 1 ]] ||
  skip "set BLK_VM_CONCURRENCY=1 to run (about 10 minutes per kernel under TCG)"

CLIENTS=32
CALLS="$WORK/calls"  # per client: CLIENT.log (every call and its answer), CLIENT.ok (created ids)
OWN_SPEC=(--size 4M --queues 1 --queue-depth 16)
SHARED_SPEC=(--size 8M --queues 1 --queue-depth 16 --backend null://)

# --- one client

# call EXPECTED ARGS...: blkctl ARGS, whose status code (OK, or the error's code) must match the
# regex EXPECTED. ABORTED is asked again. Sets REPLY (stdout) and CODE; a mismatch marks the
# client failed. In a client gone_on_unavailable=1 turns UNAVAILABLE into the client's end.
# The deadline is long: under TCG 70 deletes queued behind 4 workers take minutes, and a call
# answered DEADLINE_EXCEEDED may still have taken effect, so its outcome is not decidable.
call() {
  local expected="$1" attempt err="$CALLS/$client.err"
  shift
  for ((attempt = 1; ; attempt++)); do
    CODE=OK
    REPLY="$(ctl --timeout 600s "$@" 2>"$err")" || CODE="$(sed -n 's/^blkctl: \([A-Z_]*\): .*/\1/p' "$err" | head -n1)"
    [[ -n "$CODE" ]] || CODE="FAILED($(head -c 200 "$err"))"
    if [[ "$CODE" != ABORTED ]] || ((attempt >= 600)); then break; fi
    sleep 0.2 # the API's "retry later"
  done
  echo "$CODE (attempts $attempt): $* -> $(tr '\n' ' ' <"$err")" >>"$CALLS/$client.log"
  if [[ ! "$CODE" =~ ^($expected)$ ]]; then
    echo "UNEXPECTED: wanted $expected: $(tr '\n' ' ' <<<"$REPLY" | head -c 300)" >>"$CALLS/$client.log"
    client_failed=1
  fi
  [[ "$CODE" != UNAVAILABLE ]] || ((gone_on_unavailable == 0)) || client_gone=1
}

# check DESCRIPTION CONDITION...: a client-side assertion on the last REPLY.
check() {
  local desc="$1"
  shift
  "$@" || {
    echo "UNEXPECTED: $desc: $(tr '\n' ' ' <<<"$REPLY" | head -c 300)" >>"$CALLS/$client.log"
    client_failed=1
  }
}

own_backend() {
  if (($1 % 8 == 0)); then echo "file://$WORK/own-$1.img"; else echo null://; fi
}

create_own() {
  call "$1" create-volume "own-$2" "${OWN_SPEC[@]}" --backend "$(own_backend "$2")" -o json
  [[ "$CODE" != OK ]] || echo "own-$2" >>"$CALLS/$client.ok"
}

reply_is() { [[ "$(jq -r "$1" <<<"$REPLY")" == "$2" ]]; }

# What client C does, all decided by C: its two volumes own-2C and own-2C+1; by role 0-15
# create shared-(C/4) with one spec (all succeed), 16-23 create conflict-0/1 (made before) with
# its spec or a larger size (ALREADY_EXISTS), 24-27 race for "race" with 4M or 12M (one size
# wins), 28-31 ask for an invalid id; then by C%4 an update of own-2C, a get of it, a list, or a
# get of a volume that does not exist. (Few calls each: every blkctl is a process start, slow
# under TCG.)
create_storm_client() {
  local c="$1" a=$((2 * $1)) b=$((2 * $1 + 1))
  create_own OK "$a"
  create_own OK "$b"
  if ((c < 16)); then
    call OK create-volume "shared-$((c / 4))" "${SHARED_SPEC[@]}"
  elif ((c < 24)); then
    if (((c - 16) % 4 < 2)); then
      call OK create-volume "conflict-$(((c - 16) / 4))" "${SHARED_SPEC[@]}"
    else
      call ALREADY_EXISTS create-volume "conflict-$(((c - 16) / 4))" --size 16M --backend null://
    fi
  elif ((c < 28)); then
    local size=$((c % 2 == 0 ? 4 : 12))
    call "OK|ALREADY_EXISTS" create-volume race --size "${size}M" --backend null://
    echo "$size $CODE" >"$CALLS/$client.race"
  else
    call INVALID_ARGUMENT create-volume "Bad_Id-$c" --size 4M --backend null://
  fi
  case $((c % 4)) in
    0)
      call OK update-volume "own-$a" --rq-affinity "$(rq_affinity_of "$c")" -o json
      check "own-$a rq_affinity in the update's reply" reply_is .volume.rqAffinity \
        "$(rq_affinity_of "$c")"
      ;;
    1)
      call OK get-volume "own-$a" -o json
      check "own-$a live" reply_is .volume.status.state VOLUME_STATE_LIVE
      check "own-$a device" test -b "$(jq -r .volume.status.devicePath <<<"$REPLY")"
      ;;
    2)
      call OK list-volumes -o json
      check "own-$a and own-$b listed" reply_is \
        "[.volumes[].id | select(. == \"own-$a\" or . == \"own-$b\")] | length" 2
      ;;
    3) call NOT_FOUND get-volume "missing-$c" ;;
  esac
}
rq_affinity_of() { echo $(($1 / 4 % 3)); }

delete_storm_client() {
  local c="$1" a=$((2 * $1)) b=$((2 * $1 + 1))
  call OK delete-volume "own-$a"
  call OK delete-volume "own-$b"
  # Four clients delete each of these: the first deletes it, the others find it gone.
  if ((c < 16)); then
    call OK delete-volume "shared-$((c / 4))" --if-exists
  elif ((c < 24)); then
    call OK delete-volume "conflict-$(((c - 16) / 4))" --if-exists
  elif ((c < 28)); then
    call OK delete-volume race --if-exists
  fi
  case $((c % 4)) in
    0) call NOT_FOUND update-volume "own-$a" --rq-affinity 1 ;;
    1) call NOT_FOUND get-volume "own-$a" ;;
    2) call OK list-volumes ;;
  esac
}

# Until the agent is killed: creates, a get and a list; after, UNAVAILABLE ends the client.
kill_storm_client() {
  local c="$1" a=$((2 * $1)) b=$((2 * $1 + 1))
  gone_on_unavailable=1
  create_own "OK|UNAVAILABLE" "$a"
  ((client_gone)) || create_own "OK|UNAVAILABLE" "$b"
  ((client_gone)) || call "OK|UNAVAILABLE" create-volume "shared-$((c % 4))" "${SHARED_SPEC[@]}"
  ((client_gone == 0)) || echo "gone" >"$CALLS/$client.gone"
}

# Deletes the ids in $WORK/delete/C.ids.
delete_listed_client() {
  local id
  while read -r id; do call OK delete-volume "$id"; done <"$WORK/delete/$1.ids"
}

# storm NAME FUNCTION: CLIENTS clients at once, each FUNCTION C in the background; waits for
# all and fails naming the clients whose calls were answered otherwise than expected.
storm() {
  local name="$1" fn="$2" c pids=() failed=() started=$SECONDS
  rm -rf "$CALLS"
  mkdir -p "$CALLS"
  for ((c = 0; c < CLIENTS; c++)); do
    (
      client="$c" client_failed=0 client_gone=0 gone_on_unavailable=0
      "$fn" "$c"
      exit "$client_failed"
    ) &
    pids+=($!)
  done
  [[ -z "${STORM_KILL:-}" ]] || "$STORM_KILL"
  for ((c = 0; c < CLIENTS; c++)); do
    wait "${pids[c]}" || failed+=("$c")
  done
  mkdir -p "$LOG_DIR/$name"
  cp "$CALLS"/*.log "$LOG_DIR/$name/"
  local calls
  calls="$(cat "$CALLS"/*.log | grep -vc '^UNEXPECTED' || true)"
  if ((${#failed[@]} > 0)); then
    for c in "${failed[@]}"; do grep -B1 UNEXPECTED "$CALLS/$c.log" | head -n 6 >&2; done
    fail "$name: clients ${failed[*]} got unexpected answers (logs in $LOG_DIR/$name)"
  fi
  grep -l 'RESOURCE_EXHAUSTED' "$CALLS"/*.log >/dev/null &&
    fail "$name: a call was answered RESOURCE_EXHAUSTED"
  echo "ok: $name: $CLIENTS clients, $calls calls, every answer as expected ($((SECONDS - started))s)"
}

# --- what the agent and the kernel hold

fd_count() { find "/proc/$AGENT_PID/fd" -mindepth 1 -maxdepth 1 | wc -l; }
# The agent's threads by name, without gRPC's timer threads (gRPC starts another when all are
# busy, 32 clients at once, and keeps it) and io_uring's io-wq workers (iou-wrk-*: the kernel
# starts them for blocking requests and ends them when idle; a leaked ring shows in the fds).
threads() {
  local task name names=()
  for task in "/proc/$AGENT_PID/task"/*/comm; do
    read -r name <"$task" 2>/dev/null || continue # the thread ended
    [[ "$name" == grpc_global_tim || "$name" == iou-wrk-* ]] || names+=("$name")
  done
  printf '%s\n' "${names[@]}" | sort | uniq -c | tr -s ' \n' ' '
}
ublk_devices() { find /dev -maxdepth 1 -name 'ublk[bc][0-9]*' -printf '%f\n' | sort | tr '\n' ' '; }
record_ids() {
  find "$AGENT_STATE_DIR/volumes" -maxdepth 1 -name '*.json' -printf '%f\n' | sed 's/\.json$//' |
    sort | tr '\n' ' '
}
listed_ids() { ctl list-volumes -o json | jq -r '.volumes // [] | .[].id' | sort | tr '\n' ' '; }

# The records as JSON lines {"id", "device", "spec"} (bash builtins only: 70 of them under TCG).
records_json() {
  local path name lines device
  for path in "$AGENT_STATE_DIR"/volumes/*.json; do
    [[ -e "$path" ]] || continue
    name="${path##*/}"
    mapfile -t lines <"$path"
    device="${lines[0]##* device=}"
    printf '{"id": "%s", "device": %s, "spec": %s}\n' "${name%.json}" "${device%% *}" \
      "$(printf '%s\n' "${lines[@]:1}")"
  done
}

# Every listed volume is live on its own device and its record says what GetVolume says (the
# spec and the device); every record has a volume; every ublk device belongs to a volume.
check_consistent() {
  local list problems devices count
  list="$(ctl list-volumes -o json)"
  problems="$(records_json | jq -rn --argjson list "$list" '
    ([inputs] | map({key: .id, value: .}) | from_entries) as $records
    | (($list.volumes // []) | map({key: .id, value: .}) | from_entries) as $volumes
    | (($volumes | keys) - ($records | keys) | .[] | "volume \(.) has no record"),
      (($records | keys) - ($volumes | keys) | .[] | "record \(.) has no volume"),
      ($volumes[] | select(.status.state != "VOLUME_STATE_LIVE")
        | "\(.id) is \(.status.state): \(.status.message)"),
      ($records[] | select($volumes[.id] != null) | . as $r | $volumes[$r.id] as $v
        | (select($r.device != ($v.status.deviceId // 0))
            | "\($r.id): the record says device \($r.device), GetVolume \($v.status.deviceId // 0)"),
          (select($r.spec != ($v | del(.status)))
            | "\($r.id): the record \($r.spec | tojson) is not GetVolume \($v | del(.status) | tojson)"))')"
  [[ -z "$problems" ]] || fail "the state dir, GetVolume and the devices disagree:"$'\n'"$problems"
  devices="$(jq -r '.volumes // [] | .[] | .status.deviceId // 0 | "ublkb\(.)\nublkc\(.)"' <<<"$list" | sort |
    tr '\n' ' ')"
  expect_eq "ublk devices vs the volumes' devices" "$devices" "$(ublk_devices)" >/dev/null
  count="$(jq '.volumes // [] | length' <<<"$list")"
  echo "ok: $count volumes: each live on its own device, records and GetVolume agree, no other device"
}

# Nothing left: the volumes, records, devices, fds and threads of the start. Queue threads and
# device fds are closed once DeleteVolume answers; the poll only lets gRPC's own threads settle.
same_as_start() { [[ "$(fd_count) $(threads)" == "$start_fds $start_threads" ]]; }
check_back_to_start() {
  expect_eq "volumes" "" "$(listed_ids)"
  expect_eq "records" "" "$(record_ids)"
  expect_eq "ublk devices" "$start_devices" "$(ublk_devices)"
  local deadline=$((SECONDS + 10))
  until same_as_start; do
    ((SECONDS < deadline)) ||
      fail "fds and threads: at the start $start_fds,$start_threads; now $(fd_count),$(threads)"
    sleep 0.1
  done
  echo "ok: fds $(fd_count), threads$(threads), as at the start"
}

kill_when_creating() {
  wait_for "creates under way before the kill" 120 records_at_least 16
  kill_agent
}
records_at_least() { (($(record_ids | wc -w) >= $1)); }

main() {
  start_agent --on-exit delete
  start_devices="$(ublk_devices)"
  start_fds="$(fd_count)" start_threads="$(threads)"
  echo "start: fds $start_fds, threads$start_threads, devices '$start_devices'"
  ctl create-volume conflict-0 "${SHARED_SPEC[@]}" >/dev/null
  ctl create-volume conflict-1 "${SHARED_SPEC[@]}" >/dev/null

  step "$CLIENTS clients create, get, update and list at once"
  storm create-storm create_storm_client
  local winners
  winners="$(cat "$CALLS"/*.race | sort -u | tr '\n' ',')"
  [[ "$winners" == "12 ALREADY_EXISTS,4 OK," || "$winners" == "12 OK,4 ALREADY_EXISTS," ]] ||
    fail "race: the clients of one size should all succeed and the others fail: $winners"
  expect_eq "race's size (the winners')" \
    "$(sed -n 's/^\([0-9]*\) OK$/\1/p' "$CALLS"/*.race | head -n1)" \
    "$(($(ctl get-volume race -o json | jq -r .volume.sizeBytes) >> 20))"
  expect_eq "volumes" 71 "$(listed_ids | wc -w)"
  check_consistent
  local c affinity device sysfs updated=0
  while read -r c affinity device; do
    updated=$((updated + 1))
    read -r sysfs <"/sys/block/ublkb$device/queue/rq_affinity"
    expect_eq "own-$((2 * c)) rq_affinity (GetVolume, sysfs)" \
      "$(rq_affinity_of "$c") $(rq_affinity_of "$c")" \
      "$affinity $sysfs" >/dev/null
  done < <(ctl list-volumes -o json | jq -r '.volumes[] | select(.id | startswith("own-") and (ltrimstr("own-") | tonumber) % 8 == 0)
    | "\(.id | ltrimstr("own-") | tonumber / 2) \(.rqAffinity) \(.status.deviceId // 0)"')
  expect_eq "updated volumes checked" 8 "$updated"
  echo "ok: every update's rq_affinity in GetVolume and sysfs"

  step "$CLIENTS clients delete at once"
  storm delete-storm delete_storm_client
  check_back_to_start

  if [[ "${BLK_VM_KERNEL:-}" == lts ]]; then
    # 6.12 scans a new disk's partitions inside START_DEV, with reads our queues serve: a kill -9
    # before they are served leaves them held for a recovery that cannot start, since the thread
    # that sent START_DEV waits for it in the kernel (seen here: iou-wrk in read_part_sector under
    # ublk_ctrl_start_dev, the gRPC thread in io_uring_cancel_generic). 7.x scans from a work
    # item. A kernel defect the agent cannot avoid without giving up user recovery (docs/kernels.md).
    echo "skip: the kill -9 round (6.12 can hang a server killed inside START_DEV, see docs/kernels.md)"
    stop_agent
    return
  fi
  step "$CLIENTS clients create at once; kill -9 of the agent in the middle"
  STORM_KILL=kill_when_creating storm kill-storm kill_storm_client
  local gone survived
  gone="$(find "$CALLS" -name '*.gone' | wc -l)"
  ((gone > 0)) || fail "the kill came after every client was done"
  survived="$(cat "$CALLS"/*.ok 2>/dev/null | sort | tr '\n' ' ')"
  echo "$gone clients lost the agent; $(wc -w <<<"$survived") creates were answered OK before"
  start_agent --on-exit delete
  check_consistent
  local listed id
  listed="$(listed_ids)"
  for id in $survived; do
    [[ " $listed " == *" $id "* ]] || fail "$id was created (answered OK) but is gone after the restart"
  done
  echo "ok: every volume whose create was answered OK is there after the restart"

  step "$CLIENTS clients delete what the restarted agent has"
  local i=0
  mkdir -p "$WORK/delete"
  for ((c = 0; c < CLIENTS; c++)); do : >"$WORK/delete/$c.ids"; done
  for id in $listed; do
    echo "$id" >>"$WORK/delete/$((i % CLIENTS)).ids"
    i=$((i + 1))
  done
  storm delete-after-kill delete_listed_client
  check_back_to_start
  stop_agent
}

main "$@"
