#!/usr/bin/env bash
# Who may call the agent, on a host without ublk. Over TCP (mutual TLS only): a client with a
# certificate from the agent's client CA is served as its names allow (DNS SANs, else the CN, on
# --tls-admin-names or --tls-reader-names), one on neither list refused naming its subject; no
# certificate, one from another CA, and plaintext are refused. On the Unix socket (as root, with setpriv for other users): root and the
# admin group may call everything, the reader group only the read-only RPCs, anyone else nothing,
# each refusal PERMISSION_DENIED naming the uid and the RPC, and logged. With --file-dirs a file://
# volume outside them (by its real path) is refused and nothing is created. Bad flag combinations
# and unknown groups stop the agent at start with a clear error.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/host_test_lib.sh"
bin="$1"
chmod 0755 "$work"  # the setpriv users reach the socket through it

# agent STATE_DIR ARGS...: run in the background (`agent ... &`); exec makes $! the agent itself,
# so the cleanup's kill reaches it rather than leaving it orphaned behind a killed subshell.
agent() {
  local state="$1"; shift
  exec "$bin/blkagent" --state-dir "$state" --metrics-address off --bpf-locality off "$@"
}

# refused_at_start NAME TEXT ARGS...: the agent exits non-zero at once, saying TEXT.
refused_at_start() {
  local name="$1" text="$2"; shift 2
  local out rc=0
  out="$(timeout 30 "$bin/blkagent" --socket "$work/bad.sock" --state-dir "$work/bad-state" \
    --metrics-address off --bpf-locality off "$@" 2>&1)" || rc=$?
  if [[ "$rc" -ne 0 && "$rc" -ne 124 && "$out" == *"$text"* ]]; then
    pass "start refused: $name"
  else
    fail "start refused: $name (rc $rc): $out"
  fi
}

# --- certificates: a CA, the agent's certificate, a client of that CA, a client of another CA
certs="$work/certs"
mkdir "$certs"
make_ca() {  # make_ca NAME
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$1" \
    -keyout "$certs/$1.key" -out "$certs/$1.pem" 2>/dev/null
}
make_cert() {  # make_cert NAME CA EXTENSIONS
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$1" \
    -keyout "$certs/$1.key" -out "$certs/$1.csr" 2>/dev/null
  printf '%s\n' "$3" >"$certs/$1.ext"
  openssl x509 -req -in "$certs/$1.csr" -CA "$certs/$2.pem" -CAkey "$certs/$2.key" \
    -CAcreateserial -days 2 -extfile "$certs/$1.ext" -out "$certs/$1.pem" 2>/dev/null
}
make_ca good-ca
make_ca other-ca
make_cert agent good-ca "subjectAltName=IP:127.0.0.1,DNS:localhost"
make_cert operator good-ca "extendedKeyUsage=clientAuth"
make_cert intruder other-ca "extendedKeyUsage=clientAuth"
make_cert stranger good-ca "extendedKeyUsage=clientAuth"
# CN=operator like the admin, but a subjectAltName: known only by its DNS name (RFC 6125).
openssl req -newkey rsa:2048 -nodes -subj "/CN=operator" -keyout "$certs/auditor.key" \
  -out "$certs/auditor.csr" 2>/dev/null
printf '%s\n' "extendedKeyUsage=clientAuth" "subjectAltName=DNS:auditor.example,URI:spiffe://x/y" \
  >"$certs/auditor.ext"
openssl x509 -req -in "$certs/auditor.csr" -CA "$certs/good-ca.pem" -CAkey "$certs/good-ca.key" \
  -CAcreateserial -days 2 -extfile "$certs/auditor.ext" -out "$certs/auditor.pem" 2>/dev/null
tls=(--tls-cert "$certs/agent.pem" --tls-key "$certs/agent.key" --tls-client-ca "$certs/good-ca.pem")

# --- bad flags and groups stop the agent at start
refused_at_start "--listen-tcp without TLS files" "--tls-cert" --listen-tcp 127.0.0.1:0
refused_at_start "--listen-tcp without --tls-client-ca" "--tls-client-ca" --listen-tcp 127.0.0.1:0 \
  --tls-cert "$certs/agent.pem" --tls-key "$certs/agent.key"
refused_at_start "TLS files without --listen-tcp" "--listen-tcp" "${tls[@]}"
refused_at_start "--listen-tcp without naming its clients" "say which TLS clients may call" \
  --listen-tcp 127.0.0.1:0 "${tls[@]}"
refused_at_start "--tls-admin-names without --listen-tcp" "--listen-tcp" --tls-admin-names ops
refused_at_start "unreadable certificate" "cannot read $work/missing.pem" --listen-tcp 127.0.0.1:0 \
  --tls-any-client-admin \
  --tls-cert "$work/missing.pem" --tls-key "$certs/agent.key" --tls-client-ca "$certs/good-ca.pem"
refused_at_start "unknown admin group" "no group named 'no-such-group-blk'" \
  --admin-group no-such-group-blk
refused_at_start "unknown reader group" "--reader-group: no group named 'nobody-here-blk'" \
  --reader-group nobody-here-blk
refused_at_start "a relative --file-dirs" "--file-dirs: 'images' is not an absolute directory" \
  --file-dirs /var/lib/images,images

# --- one agent: the socket with an admin and a reader group (numeric gids), and TCP
admins=60010
readers=60011
socket="$work/run/agent.sock"
agent "$work/state" --socket "$socket" --admin-group "$admins" --reader-group "$readers" \
  --listen-tcp 127.0.0.1:0 "${tls[@]}" --tls-admin-names other.example,OPERATOR \
  --tls-reader-names auditor.example >"$work/agent.log" 2>&1 &
started+=($!)
port_known() { grep -q 'with mutual TLS (port [0-9]*)' "$work/agent.log"; }
if ! wait_for 30 test -S "$socket" || ! wait_for 30 port_known; then
  cat "$work/agent.log"; fail "agent starts"; exit 1
fi
port="$(sed -n 's/.*with mutual TLS (port \([0-9]*\)).*/\1/p' "$work/agent.log" | head -n1)"
tcp=(--tcp "127.0.0.1:$port" --tls-ca "$certs/good-ca.pem")

mode="$(stat -c '%a %g' "$socket")"
[[ "$mode" == "666 $admins" ]] && pass "socket 0666, group admins (reader group given)" ||
  fail "socket mode and group: $mode"

# expect NAME RC TEXT COMMAND...: COMMAND exits RC and prints TEXT (on stdout or stderr).
expect() {
  local name="$1" want_rc="$2" text="$3"; shift 3
  local out rc=0
  out="$("$@" 2>&1)" || rc=$?
  if [[ "$rc" -eq "$want_rc" && "$out" == *"$text"* ]]; then
    pass "$name"
  else
    fail "$name: rc $rc (want $want_rc): $out"
  fi
}

# --- TCP
create=(create-volume Bad_Id --size 1M --backend null://)  # refused by the table if permitted
expect "TCP: a client certificate of the client CA lists volumes" 0 "" \
  "$bin/blkctl" "${tcp[@]}" --tls-cert "$certs/operator.pem" --tls-key "$certs/operator.key" \
  list-volumes
expect "TCP: ... and may create (reaches the table: no PERMISSION_DENIED)" 1 "INVALID_ARGUMENT" \
  "$bin/blkctl" "${tcp[@]}" --tls-cert "$certs/operator.pem" --tls-key "$certs/operator.key" \
  create-volume Bad_Id --size 1M --backend null://
expect "TCP: a reader name (DNS SAN) lists" 0 "" \
  "$bin/blkctl" "${tcp[@]}" --tls-cert "$certs/auditor.pem" --tls-key "$certs/auditor.key" \
  list-volumes
expect "TCP: ... may not create, though its CN is an admin name (SANs decide)" 1 \
  "PERMISSION_DENIED: TLS client DNS:auditor.example at" \
  "$bin/blkctl" "${tcp[@]}" --tls-cert "$certs/auditor.pem" --tls-key "$certs/auditor.key" \
  "${create[@]}"
expect "TCP: a verified certificate on neither list is refused, naming its subject" 1 \
  "PERMISSION_DENIED: TLS client CN=stranger at" \
  "$bin/blkctl" "${tcp[@]}" --tls-cert "$certs/stranger.pem" --tls-key "$certs/stranger.key" \
  list-volumes
expect "TCP: no client certificate is refused" 1 "UNAVAILABLE" \
  "$bin/blkctl" "${tcp[@]}" --timeout 10s list-volumes
expect "TCP: a certificate of another CA is refused" 1 "UNAVAILABLE" \
  "$bin/blkctl" "${tcp[@]}" --timeout 10s --tls-cert "$certs/intruder.pem" \
  --tls-key "$certs/intruder.key" list-volumes
rc=0
curl -sS --max-time 10 --http2-prior-knowledge -X POST -H 'content-type: application/grpc' \
  "http://127.0.0.1:$port/blk.v1.VolumeService/ListVolumes" >"$work/plain.out" 2>&1 || rc=$?
[[ "$rc" -ne 0 ]] && pass "TCP: plaintext HTTP/2 is refused (curl rc $rc)" ||
  fail "TCP: plaintext got an answer: $(cat "$work/plain.out")"
# --- the certificate and key reload without a restart (and SIGHUP does not end the agent)
served_serial() {  # the serial of the certificate a new TLS connection to the agent gets
  openssl s_client -alpn h2 -connect "127.0.0.1:$port" -cert "$certs/operator.pem" \
    -key "$certs/operator.key" -CAfile "$certs/good-ca.pem" </dev/null 2>/dev/null |
    openssl x509 -noout -serial 2>/dev/null
}
old_serial="$(served_serial)"
[[ "$old_serial" == "serial="*"$(openssl x509 -noout -serial -in "$certs/agent.pem" | cut -d= -f2)" ]] &&
  pass "TLS: a connection gets the agent's certificate ($old_serial)" ||
  fail "TLS: served '$old_serial'"
kill -HUP "${started[0]}"
cp "$certs/agent.pem" "$certs/agent-old.pem"
make_cert agent-new good-ca "subjectAltName=IP:127.0.0.1,DNS:localhost"
mv "$certs/agent-new.key" "$certs/agent.key.tmp" && mv "$certs/agent-new.pem" "$certs/agent.pem.tmp"
mv "$certs/agent.key.tmp" "$certs/agent.key" && mv "$certs/agent.pem.tmp" "$certs/agent.pem"
new_serial="serial=$(openssl x509 -noout -serial -in "$certs/agent.pem" | cut -d= -f2)"
[[ "$new_serial" != "$old_serial" ]] || fail "TLS: the new certificate has the old serial"
new_served() { [[ "$(served_serial)" == "$new_serial" ]]; }
wait_for 30 new_served && pass "TLS: a new connection gets the replaced certificate, no restart" ||
  fail "TLS: still served $(served_serial), want $new_serial"
expect "TLS: ... and is served over it (the agent lived through SIGHUP)" 0 "" \
  "$bin/blkctl" "${tcp[@]}" --tls-cert "$certs/operator.pem" --tls-key "$certs/operator.key" \
  list-volumes
expect "blkctl: --tcp without --tls-ca is a usage error" 2 "--tls-ca" \
  "$bin/blkctl" --tcp "127.0.0.1:$port" list-volumes
expect "blkctl: --tls-cert without --tls-key is a usage error" 2 "--tls-key" \
  "$bin/blkctl" "${tcp[@]}" --tls-cert "$certs/operator.pem" list-volumes

# --- the Unix socket, as other users (setpriv: no accounts needed)
as() {  # as UID GID GROUPS COMMAND...
  local uid="$1" gid="$2" groups="$3"; shift 3
  setpriv --reuid "$uid" --regid "$gid" --groups "$groups" -- "$@"
}
blk=("$bin/blkctl" --socket "$socket" --timeout 20s)

expect "socket: root lists" 0 "" "${blk[@]}" list-volumes
expect "socket: root may create (reaches the table)" 1 "INVALID_ARGUMENT" "${blk[@]}" "${create[@]}"
expect "socket: admin group (supplementary) lists" 0 "" as 60100 60100 "60100,$admins" "${blk[@]}" list-volumes
expect "socket: admin group may create (reaches the table)" 1 "INVALID_ARGUMENT" \
  as 60100 60100 "60100,$admins" "${blk[@]}" "${create[@]}"
expect "socket: admin group (primary) may create (reaches the table)" 1 "INVALID_ARGUMENT" \
  as 60101 "$admins" "$admins" "${blk[@]}" "${create[@]}"
expect "socket: reader group lists" 0 "" as 60200 60200 "60200,$readers" "${blk[@]}" list-volumes
expect "socket: reader group reads node info" 0 "" as 60200 60200 "60200,$readers" "${blk[@]}" node-info
expect "socket: reader group may not create" 1 \
  "PERMISSION_DENIED: uid 60200 (pid" as 60200 60200 "60200,$readers" "${blk[@]}" "${create[@]}"
expect "socket: reader group may not delete, named in the message" 1 "may not call DeleteVolume" \
  as 60200 60200 "60200,$readers" "${blk[@]}" delete-volume v1
expect "socket: anyone else may not even list" 1 \
  "PERMISSION_DENIED: uid 60300 (pid" as 60300 60300 60300 "${blk[@]}" list-volumes
grep -q "refused: uid 60300 (pid [0-9]*) may not call ListVolumes" "$work/agent.log" &&
  pass "refusals are logged" || fail "refusal not in the log: $(tail -5 "$work/agent.log")"

# --- without groups the socket stays root's, 0660, and only root is served
socket2="$work/run2/agent.sock"
agent "$work/state2" --socket "$socket2" >"$work/agent2.log" 2>&1 &
started+=($!)
wait_for 30 test -S "$socket2" || { cat "$work/agent2.log"; fail "second agent starts"; exit 1; }
mode="$(stat -c '%a %g' "$socket2")"
[[ "$mode" == "660 0" ]] && pass "no groups: socket 0660, group root" || fail "socket: $mode"
chmod 0666 "$socket2"  # even when a user gets through the file system, the agent refuses
expect "no groups: group root is not root" 1 "PERMISSION_DENIED: uid 60400" \
  as 60400 0 0 "$bin/blkctl" --socket "$socket2" list-volumes

# --- --file-dirs: a file:// volume outside them is refused and nothing is created
mkdir -p "$work/images" "$work/outside"
ln -s "$work/outside" "$work/images/door"
socket3="$work/run3/agent.sock"
agent "$work/state3" --socket "$socket3" --file-dirs "$work/images" >"$work/agent3.log" 2>&1 &
started+=($!)
wait_for 30 test -S "$socket3" || { cat "$work/agent3.log"; fail "third agent starts"; exit 1; }
blk3=("$bin/blkctl" --socket "$socket3" --timeout 20s)
expect "file dirs: a path outside is INVALID_ARGUMENT naming it and the dirs" 1 \
  "'$work/outside/v.img' is outside the agent's file directories (--file-dirs: $work/images)" \
  "${blk3[@]}" create-volume v1 --size 1M --backend "file://$work/outside/v.img"
expect "file dirs: .. that leaves them is refused" 1 "is outside the agent's file directories" \
  "${blk3[@]}" create-volume v1 --size 1M --backend "file://$work/images/../outside/v.img"
expect "file dirs: a symlink that leads out is refused by its real path" 1 \
  "(really '$work/outside/v.img')" \
  "${blk3[@]}" create-volume v1 --size 1M --backend "file://$work/images/door/v.img"
[[ ! -e "$work/outside/v.img" ]] && pass "file dirs: nothing was created outside" ||
  fail "file dirs: $work/outside/v.img was created"
expect "file dirs: nothing was recorded" 0 "" "${blk3[@]}" list-volumes
[[ -z "$(ls "$work/state3/volumes" 2>/dev/null)" ]] && pass "file dirs: no record" ||
  fail "file dirs: records: $(ls "$work/state3/volumes")"
out="$("${blk3[@]}" create-volume v2 --size 1M --backend "file://$work/images/v2.img" 2>&1)" || true
[[ "$out" != *"outside the agent's file directories"* ]] && pass "file dirs: a path inside passes" ||
  fail "file dirs: a path inside was refused: $out"

if ((failures)); then echo "$failures failure(s)"; exit 1; fi
echo "all passed"
