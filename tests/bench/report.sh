#!/usr/bin/env bash
# Usage: tests/bench/report.sh OUT_DIR FLAVOUR...
#
# Turns the groups the guest wrote (OUT_DIR/FLAVOUR/groups/*.json, see
# tests/bench/lib.sh) into OUT_DIR/bench.json (every run, the medians and the
# ratios each group asked for) and OUT_DIR/bench.md (the ratios, then every
# device's medians), and prints bench.md. Groups a failed boot did not finish
# are simply missing. Ratios are A/B of the medians: above 1 is better for
# IOPS and MB/s, below 1 is better for latency.
set -euo pipefail

main() {
  out="${1:?usage: report.sh OUT_DIR FLAVOUR...}"
  shift
  local flavour runs=()
  for flavour in "$@"; do
    local groups=("$out/$flavour"/groups/*.json)
    [[ -e "${groups[0]}" ]] || continue
    runs+=("$(jq -s --arg flavour "$flavour" '
      def ratio($a; $b): if $a == null or $b == null or $b == 0 then null
        else ($a / $b * 1000 | round) / 1000 end;
      # The lowest and highest of the rounds'"'"' own ratios (A and B ran in the same round, one
      # after the other): how far the median ratio can be trusted.
      def range($a; $b): if ($a | length) == 0 or ($a | length) != ($b | length) then null
        else [range($a | length) as $i | ratio($a[$i]; $b[$i])] | map(select(. != null))
          | if length == 0 then null else [min, max] end end;
      { flavour: $flavour, kernel: .[0].kernel, runtime_seconds: .[0].runtime_seconds,
        rounds: .[0].rounds,
        groups: sort_by({ defaults: 0, "defaults-nvme": 0.5, null: 1, placement: 1.1, "placement-busy": 1.2, "placement-qd1": 1.3, nvme: 2, fabric: 3, nbd: 4 }[.group] // 9) | map(. as $g
          | .ratios |= map(. as $r
            | ($g.devices[] | select(.key == $r.a)) as $da | ($g.devices[] | select(.key == $r.b)) as $db
            | $da.median as $a | $db.median as $b
            | $r + { iops: ratio($a.iops; $b.iops), lat_p50: ratio($a.lat_p50_us; $b.lat_p50_us),
                     lat_p99: ratio($a.lat_p99_us; $b.lat_p99_us),
                     seq: ratio($a.seq_mbps; $b.seq_mbps),
                     rounds: { iops: range($da.iops; $db.iops),
                               lat_p50: range($da.lat_p50_us; $db.lat_p50_us),
                               lat_p99: range($da.lat_p99_us; $db.lat_p99_us),
                               seq: range($da.seq_mbps; $db.seq_mbps) } })) }' "${groups[@]}")")
  done
  ((${#runs[@]} > 0)) || {
    echo "bench report: no results in $out/{$*}/groups" >&2
    exit 1
  }
  printf '%s\n' "${runs[@]}" |
    jq -s --arg date "$(date -u +%F)" --arg cpus "${BLK_BENCH_VM_CPUS:-2}" \
      '{ date: $date, vm: "QEMU TCG, \($cpus) vCPUs", kernels: . }' >"$out/bench.json"

  jq -r '
    def x: if . == null then "-" else "\(. * 100 | round / 100)x" end;
    def r2: . * 100 | round / 100 | tostring;
    # The median ratio, then the range of the rounds'"'"' own ratios when they differ.
    def xr($range): x + (if . == null or $range == null or ($range[0] | r2) == ($range[1] | r2)
      then "" else " (\($range[0] | r2)-\($range[1] | r2))" end);
    def n: if . == null then "-" else tostring end;
    # Of a device'"'"'s medians: each thread name'"'"'s CPU per read with its user-space part.
    def cpu_row: (.cpu_user_per_read_us // {}) as $user | .cpu_per_read_us as $c
      | [$c | to_entries[] | select(.key != "idle" and .key != "rest" and .value > 0)] | sort_by(-.value)
      | map("\(.key) \(.value)\(if $user[.key] == null then "" else " (user \($user[.key]))" end)")
        + ["idle \($c.idle // 0)", "rest \($c.rest // 0)"] | join(", ");
    "Measured \(.date), \(.vm); medians of \(.kernels[0].rounds) rounds (each starting one device later) of" +
    " \(.kernels[0].runtime_seconds) s per fio run (io_uring, O_DIRECT). Emulated: only" +
    " ratios within one boot mean something. A ratio is of the medians; in brackets, the lowest and" +
    " highest of the rounds'"'"' own ratios (A and B measured in the same round).\n",
    (.kernels[] |
      "### kernel \(.kernel)\n",
      "| comparison (A / B) | 4k randread QD32 IOPS | QD1 p50 latency | QD1 p99 latency | 128k read MB/s |",
      "|---|---|---|---|---|",
      (.groups[].ratios[] | .rounds as $r
        | "| \(.label) | \(.iops | xr($r.iops)) | \(.lat_p50 | xr($r.lat_p50)) | \(.lat_p99 | xr($r.lat_p99)) | \(.seq | xr($r.seq)) |"),
      "",
      (.groups[] |
        "#### \(.title)\(if .iops_fio_args == "" then "" else " (QD32 runs: \(.iops_fio_args))" end)\n",
        "| device | 4k randread QD32 IOPS | QD1 p50 us | QD1 p99 us | 128k read MB/s |",
        "|---|---|---|---|---|",
        (.devices[] | if .unavailable then "| \(.name) | - | - | - | - |" else
          "| \(.name) | \(.median.iops | n) | \(.median.lat_p50_us | n) | \(.median.lat_p99_us | n) | \(.median.seq_mbps | n) |" end),
        "",
        (select(any(.devices[]; (.median.cpu_per_read_us // {}) | length > 0)) |
          "Where the CPU goes at QD32 (us per 4k read, medians): each thread'"'"'s CPU time over the" +
          " run / the reads in it (IOPS x the run'"'"'s length, fio'"'"'s start included), by thread" +
          " name with digits as N, and in brackets the part of it in user space (the rest is the" +
          " kernel'"'"'s, on that thread'"'"'s behalf); idle: the CPUs'"'"' idle time, iowait included; rest: what no" +
          " thread alive at the end accounts for (fio'"'"'s own, threads that ended).\n",
          "| device | CPU per read, by thread (us) |",
          "|---|---|",
          (.devices[] | select(.unavailable | not) | select((.median.cpu_per_read_us // {}) | length > 0)
            | "| \(.name) | \(.median | cpu_row) |"),
          ""),
        (select(any(.devices[]; .median.queue_local_pct != null)) |
          "Where the reads completed at QD32 (medians, % of the completions in a run): on the" +
          " queue thread while it ran on a CPU of its queue'"'"'s hctx set (the agent'"'"'s" +
          " blk_queue_completions_total, local / all); and where the block layer completed the" +
          " request relative to the CPU that submitted it: that CPU, another CPU of its hctx" +
          " group, or elsewhere (blk_block_completions_total, BPF; - without it).\n",
          "| device | queue thread on its hctx CPUs | block layer: submitting CPU | its hctx group | elsewhere |",
          "|---|---|---|---|---|",
          (.devices[] | select(.unavailable | not) | select(.median.queue_local_pct != null)
            | .median as $m
            | "| \(.name) | \($m.queue_local_pct | n) | \($m.same_cpu_pct | n) | \($m.same_hctx_group_pct | n) | \($m.other_cpu_pct | n) |"),
          ""),
        (select(any(.devices[]; .median.server_lat_mean_us != null)) |
          "Where the time of a QD1 read goes (means, us): in the server = from the queue receiving" +
          " the request to committing its result (the agent latency histogram); the rest is" +
          " the kernel side (block layer, ublk, waking the queue thread) and fio.\n",
          "| device | fio mean | in the server | the rest |",
          "|---|---|---|---|",
          (.devices[] | select(.unavailable | not) | select(.median.lat_mean_us != null)
            | .median as $m
            | "| \(.name) | \($m.lat_mean_us | n) | \($m.server_lat_mean_us | n) | \(
                if $m.server_lat_mean_us == null then "-"
                else ($m.lat_mean_us - $m.server_lat_mean_us) * 10 | round / 10 | tostring end) |"),
          "")))' "$out/bench.json" >"$out/bench.md"
  cat "$out/bench.md"
}

main "$@"
