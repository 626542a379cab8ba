#!/usr/bin/env bash
# Measures docs/replay.md's table: footprint (capacity auto) and bytes moved at 1.00x and 1.02x peak
# live, virtual device, for both shared traces and the policies none / on-failure (minimal, full) / threshold.
# usage: scripts/replay_figures.sh BUILD_DIR TRACES_DIR
set -euo pipefail
replay="$1/tools/replay/vramkit-replay"
traces="$2"
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d['$1'])"; }
printf "| trace | policy | footprint ratio | search s | moved 1.00x | failed 1.00x | moved 1.02x | failed 1.02x | replay s (1.00x) |\n"
printf "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
for trace in resnet_train image_pipeline; do
  peak=$("$replay" "$traces/$trace.csv" --capacity 1099511627776 --policy none | field peak_live_bytes)
  for mode in "none minimal" "on-failure minimal" "on-failure full" "threshold minimal"; do
    set -- $mode
    auto=$("$replay" "$traces/$trace.csv" --policy "$1" --on-failure-mode "$2" --capacity auto)
    row="| $trace | $1${2:+ ($2)} | $(echo "$auto" | field footprint_ratio | xargs printf %.4f) | $(echo "$auto" | field search_seconds | xargs printf %.3f)"
    for factor in 1.00 1.02; do
      capacity=$(python3 -c "import math; print(math.ceil($peak*$factor/2**20)*2**20)")
      fixed=$("$replay" "$traces/$trace.csv" --policy "$1" --on-failure-mode "$2" --capacity "$capacity")
      row="$row | $(echo "$fixed" | field moved_ratio | xargs printf %.4f) | $(echo "$fixed" | field failed_requests)"
      [ "$factor" = 1.00 ] && seconds=$(echo "$fixed" | field seconds)
    done
    echo "$row | $(printf %.4f "$seconds") |"
  done
done
