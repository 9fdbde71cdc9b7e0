#!/bin/bash
# Redis' instructions per job (callgrind, repeatable under load) for the
# claim + ack burst of examples/burst_baseline.rs: run it once with a
# build of the current crate and once with an older one (see that file).
#
#   benchmarks/cg_burst.sh target/release/examples/burst_baseline new 10000 0
#   benchmarks/cg_burst.sh /tmp/old/target/release/examples/burst_baseline old 10000 0
#
# usage: cg_burst.sh <burst_baseline binary> <label> <jobs> <shared 0|1>
# Counts only while the workers run (not the scheduling).
BIN=$1; LABEL=$2; JOBS=$3; SHARED=$4
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
OUT=/tmp/cg.burst.$LABEL.out
rm -f $OUT*
valgrind --tool=callgrind --callgrind-out-file=$OUT --instr-atstart=no redis-server --port $PORT --save '' --appendonly no >/tmp/cg.$LABEL.vg.log 2>&1 &
VG=$!
for i in $(seq 1 100); do redis-cli -p $PORT PING 2>/dev/null | grep -q PONG && break; sleep 0.2; done
coproc BB { BURST_URL=redis://127.0.0.1:$PORT/ BURST_JOBS=$JOBS BURST_WORKERS=4 BURST_SHARED=$SHARED $BIN; }
read -r line <&${BB[0]}; echo "child: $line"
callgrind_control -i on $VG >/dev/null
echo go >&${BB[1]}
read -r line <&${BB[0]}; echo "child: $line"
callgrind_control -i off $VG >/dev/null
callgrind_control -d $VG >/dev/null
sleep 1
kill $VG; wait $VG 2>/dev/null
IR=$(grep "Collected" /tmp/cg.$LABEL.vg.log | awk "{print \$4}")
echo "$LABEL: Ir total $IR, per job $((IR / JOBS))"
