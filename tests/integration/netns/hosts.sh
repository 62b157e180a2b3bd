# Hosts made of network namespaces, for the tests and benchmarks that need several machines:
# each host namespace reaches a bridge in a switch namespace through a veth pair (its end named
# eth0 in the host), at SUBNET.1, SUBNET.2, ...; with a RATE (tc's units, "1gbit"), both
# directions of every link are shaped with tc tbf (netem is not in every kernel). Needs root and
# iproute2. Source it, then:
#   netns_hosts_up TAG SUBNET COUNT [RATE]  sets hosts=(TAGh0 ...) and switch=TAGsw; where
#                                           namespaces cannot be made, returns 1 and says why on
#                                           stderr
#   netns_hosts_down                        kills what runs in them and deletes them
# TAG keeps concurrent runs' namespaces and links apart (the caller's pid, say).

hosts=()
switch=

netns_hosts_up() {
  local tag=$1 subnet=$2 count=$3 rate=${4:-none} i ns
  switch=${tag}sw
  hosts=()
  for ((i = 0; i < count; i++)); do hosts+=("${tag}h$i"); done
  command -v ip >/dev/null || { echo "no 'ip' command (Debian package iproute2)" >&2; return 1; }
  ip netns add "$switch" || { echo "ip netns add failed (needs root)" >&2; return 1; }
  { ip -n "$switch" link add br0 type bridge && ip -n "$switch" link set br0 up; } ||
    { echo "cannot make a bridge in a namespace" >&2; return 1; }
  ip -n "$switch" link set lo up
  for i in "${!hosts[@]}"; do
    ns=${hosts[$i]}
    ip netns add "$ns" || { echo "ip netns add $ns failed" >&2; return 1; }
    ip link add "${tag}a$i" type veth peer name "${tag}b$i" ||
      { echo "cannot make veth pairs" >&2; return 1; }
    ip link set "${tag}a$i" netns "$ns"
    ip link set "${tag}b$i" netns "$switch"
    ip -n "$ns" link set "${tag}a$i" name eth0
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$switch" link set "${tag}b$i" master br0
    ip -n "$switch" link set "${tag}b$i" up
    [ "$rate" = none ] && continue
    # The host's sending side, and the switch port's toward the host.
    for side in "$ns eth0" "$switch ${tag}b$i"; do
      set -- $side
      ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$rate" burst 256kb latency 50ms ||
        { echo "tc tbf failed on $1/$2" >&2; return 1; }
    done
  done
}

netns_hosts_down() {
  local ns pids
  for ns in "${hosts[@]}" "$switch"; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
}

