#!/usr/bin/env bash
# bench-caps.sh: GPU time per iteration of the model graphs by stream cap
# and mode, the measurement behind dagrun.DefaultMaxStreams
# (docs/performance.md, "Default stream cap").
# Run from the repo root on the GPU machine with .gpu/dagrun from
# scripts/build-gpu.sh.
# For each model spec, mode (streams, graph) and cap (1 4 8 16 32 uncapped)
# it runs `dagrun run --backend cuda --json` for N1 and N2 iterations and
# takes (wall(N2) - wall(N1)) / (N2 - N1): µs per iteration in steady state,
# without process start, planning, capture/instantiation and first-iteration
# warm-up. Median of REPS repetitions. Tables (Markdown) and raw CSV to $OUT.
# Overrides for a dry run elsewhere: DAGRUN=path BACKEND=sim SPECS="a.yaml ...".
set -uo pipefail
D="${DAGRUN:-.gpu/dagrun}"
BACKEND="${BACKEND:-cuda}"
OUT="${OUT:-/tmp/bench-caps}"
N1="${N1:-10}"; N2="${N2:-60}"; REPS="${REPS:-3}"
SPECS="${SPECS:-$(ls specs/models/*.yaml)}"
CAPS="${CAPS:-1 4 8 16 32 0}"   # 0 = uncapped (--max-streams 0)
mkdir -p "$OUT"
csv="$OUT/caps.csv"
echo "model,mode,cap,streams,waits,rep,wall_n1_us,wall_n2_us,per_iter_us" >"$csv"
{
  echo "# bench-caps: stream caps, $(date -u +%FT%TZ)"
  "$D" version
  nvidia-smi -L 2>/dev/null || true
  echo "CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-unset (8)} backend=$BACKEND N1=$N1 N2=$N2 REPS=$REPS"
} | tee "$OUT/caps.md"

wall() { # spec mode cap iters -> wall_us
  "$D" run --backend "$BACKEND" --json --mode "$2" --max-streams "$3" --iterations "$4" "$1" 2>>"$OUT/stderr.txt" |
    sed -n 's/.*"wall_us": *\([0-9.eE+-]*\).*/\1/p'
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "NA"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

declare -A per streams
for spec in $SPECS; do
  m="$(basename "$spec" .yaml)"
  for cap in $CAPS; do
    # streams/waits of the plan: the table's last line "streams=S waits=W ...".
    st="$("$D" plan --max-streams "$cap" "$spec" 2>/dev/null | sed -n 's/^streams=\([0-9]*\) waits=\([0-9]*\).*/\1\/\2/p')"
    streams[$m,$cap]="${st:-?}"
    for mode in streams graph; do
      vals=""
      for rep in $(seq "$REPS"); do
        w1="$(wall "$spec" "$mode" "$cap" "$N1")"; w2="$(wall "$spec" "$mode" "$cap" "$N2")"
        if [[ -n "$w1" && -n "$w2" ]]; then
          v="$(awk -v a="$w1" -v b="$w2" -v n1="$N1" -v n2="$N2" 'BEGIN{printf "%.1f", (b-a)/(n2-n1)}')"
          vals+="$v"$'\n'
        else
          v=NA
        fi
        echo "$m,$mode,$cap,${st%/*},${st#*/},$rep,${w1:-NA},${w2:-NA},$v" >>"$csv"
      done
      per[$m,$mode,$cap]="$(printf '%s' "$vals" | grep . | median)"
      echo "$m $mode cap=$cap streams/waits=${streams[$m,$cap]}: ${per[$m,$mode,$cap]} µs/iteration" >&2
    done
  done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a=="NA"||b=="NA"||b==0) print "NA"; else printf "%.2f", a/b }'; }
{
  for mode in streams graph; do
    echo
    if [[ $mode == streams ]]; then
      echo "## stream mode: µs per iteration (median of $REPS) · × cap 1 (one stream)"
    else
      echo "## graph mode: µs per iteration (median of $REPS) · × uncapped (the last cap)"
    fi
    echo
    hdr="| model |"; sep="|---|"
    for cap in $CAPS; do
      if [[ $cap == 0 ]]; then hdr+=" uncapped |"; else hdr+=" cap $cap |"; fi
      sep+="---|"
    done
    echo "$hdr"; echo "$sep"
    for spec in $SPECS; do
      m="$(basename "$spec" .yaml)"
      row="| $m |"
      for cap in $CAPS; do
        v="${per[$m,$mode,$cap]}"
        if [[ $mode == streams ]]; then base="${per[$m,$mode,1]}"; else base="${per[$m,$mode,0]}"; fi
        row+=" $v · $(ratio "$v" "$base")× (${streams[$m,$cap]}) |"
      done
      echo "$row"
    done
  done
  echo
  echo "Cells: µs/iteration · ratio (streams/waits of the plan)."
} | tee -a "$OUT/caps.md"

