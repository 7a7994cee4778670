#!/usr/bin/env bash
# step-parts.sh PROFILE: the share of a daemon CPU profile (from
# BenchmarkSteps with LEMO_STEPS_PROFILE) taken by each part of an agent
# step. Each sample counts once, in the first part (in this order) whose
# pattern a frame of its stack matches; the rest is what matches none.
set -euo pipefail
P=${1:?usage: step-parts.sh daemon-T50.pprof}
sum() {
	go tool pprof -top -nodecount=100000 -nodefraction=0 -edgefraction=0 "$@" "$P" 2>/dev/null |
		grep "Showing nodes accounting" | sed -E 's/.*accounting for ([^,]*), ([0-9.]+%).*/\1 \2/'
}
go tool pprof -top -nodecount=1 "$P" 2>/dev/null | grep "Total samples"
ign=""
while IFS='=' read -r name re; do
	if [ -z "$ign" ]; then r=$(sum -focus="$re"); else r=$(sum -focus="$re" -ignore="$ign"); fi
	echo "$name: $r"
	ign=${ign:+$ign|}$re
done <<'PARTS'
recall (memory/)=memory\.\(\*Memory\)\.Recall
model call (HTTP, encode, decode)=providers/|net/http\.
input assembly (history, prompt)=prompt\.|cycleActor\)\.run
store commit (Badger, postings, fsync)=persistence\.|badger|memory\.\(\*Memory\)\.Postings|ristretto
remote API (feeding clients)=actors/gateway|protoactor-go/remote|grpc
tool call=toolActor|lemo/tools
actor tree (Task, Cycle, hub, mailboxes)=lemo/actors|protoactor-go/actor
garbage collection=gcBgMarkWorker|runtime\.bgsweep|runtime\.bgscavenge
PARTS
echo "rest (scheduler, syscalls, runtime): $(sum -ignore="$ign")"
