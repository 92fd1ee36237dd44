#!/usr/bin/env bash
# /metrics on a real kernel: volumes by state, their info and size, and ublk
# devices this agent does not own, which it reports and never touches.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
one_kernel_only lts "the metrics and the device scan are the agent's"

scrape() { curl -fsS "http://127.0.0.1:9477/metrics"; }
metric() { scrape | awk -v m="$1" '$1 == m { print $2 }'; }

main() {
  step "two ublk devices served by another program"
  mkfifo "$WORK/smoke-in"
  blk_server_smoke --file "$WORK/foreign.img" --size $((16 << 20)) --queues 1 \
    <"$WORK/smoke-in" >"$WORK/smoke-out" 2>"$LOG_DIR/smoke.log" &
  local smoke=$!
  exec 7>"$WORK/smoke-in"  # holds the program's stdin open until we close it
  on_exit kill -KILL "$smoke"
  wait_for "the foreign devices" 60 grep -q ready "$WORK/smoke-out"
  local foreign
  foreign="$(awk '$1 == "file" { print $2 }' "$WORK/smoke-out")"

  start_agent --on-exit delete --metrics-address 127.0.0.1:9477
  expect_eq "unknown ublk devices" 2 "$(metric blk_unknown_ublk_devices)"

  ctl create-volume mine --size 32M --backend null://
  local dev
  dev="$(volume_device mine)"
  expect_eq "live volumes" 1 "$(metric 'blk_volumes{state="live"}')"
  expect_eq "unknown ublk devices beside our volume" 2 "$(metric blk_unknown_ublk_devices)"
  expect_eq "size of mine" 33554432 "$(metric 'blk_volume_size_bytes{volume="mine"}')"
  scrape | grep -c "^blk_volume_info{.*volume=\"mine\".*device=\"$dev\"" >/dev/null ||
    fail "no blk_volume_info for mine on $dev"
  scrape | grep -c '^blk_node_ublk_info{.*ublk_available="true"' >/dev/null || fail "no node ublk info"

  step "deleting ours and stopping the agent leaves the foreign devices working"
  ctl delete-volume mine
  stop_agent
  dd if="$foreign" of=/dev/null bs=4k count=16 iflag=direct status=none ||
    fail "the foreign device stopped working"
  echo "ok: $foreign still serves reads"
  exec 7>&-
  wait_for "the other program to stop its devices" 60 process_gone "$smoke"
  wait "$smoke" || fail "blk_server_smoke did not stop its devices cleanly"
}
main "$@"
