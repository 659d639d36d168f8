# shellcheck shell=bash
# Metric comparisons of the multinode tests, sourced: the caller sets TMP
# (where the runs' files are) and `fail` (set to 1 on a mismatch). Sourced by
# tests/multinode_test.sh and tests/netns/multinode_netns_test.sh: every
# metric within 1e-5 relative of the one-machine run.

# compare DESCRIPTION REFERENCE FILES...: the concatenated metrics of FILES
# (one machine's sink reports them) match REFERENCE within 1e-5 relative.
compare() {
  local what=$1 ref=$2; shift 2
  cat "$@" | sort -n > "$TMP/got"
  sort -n "$ref" > "$TMP/want"
  if [[ ! -s "$TMP/want" ]]; then echo "FAIL: $what: reference has no metrics"; fail=1; return; fi
  if awk 'NR == FNR { want[$1 " " $2] = $3; n++; next }
          { key = $1 " " $2; if (!(key in want)) { print "extra " key; bad = 1; next }
            d = $3 - want[key]; if (d < 0) d = -d; s = want[key]; if (s < 0) s = -s;
            if (d > 1e-5 * (s > 1e-12 ? s : 1e-12)) { print "differs " key ": " $3 " vs " want[key]; bad = 1 }
            seen++ }
          END { if (seen != n) { print "got " seen " of " n " metrics"; bad = 1 } exit bad }' \
      "$TMP/want" "$TMP/got"; then
    echo "ok: $what ($(wc -l < "$TMP/want") metric values equal)"
  else
    echo "FAIL: $what"; fail=1
  fi
}
# compare_eval DESCRIPTION REFERENCE_RUN NAME NPROC: NAME's rank 0 printed
# the one test line, every other rank said its part is done, and the test
# metrics (--eval-out) equal the single-machine run's within 1e-5 relative.
compare_eval() {
  local what=$1 ref=$2 name=$3 nproc=$4
  local lines; lines=$(grep -c "^\[rank 0\] test (" "$TMP/$name.log")
  if [[ $lines != 1 || $(grep -c "test (" "$TMP/$name.log") != 1 ]]; then
    echo "FAIL: $what: expected one test line, from rank 0"; grep test "$TMP/$name.log"; fail=1; return
  fi
  if [[ $(grep -c "test: this machine's part done" "$TMP/$name.log") != $((nproc - 1)) ]]; then
    echo "FAIL: $what: not every other rank finished its part"; grep test "$TMP/$name.log"; fail=1
  fi
  if [[ ! -s "$TMP/$ref.eval.txt" || ! -s "$TMP/$name.eval.0.txt" ]]; then
    echo "FAIL: $what: missing --eval-out"; fail=1; return
  fi
  if awk 'NR == FNR { want[$1] = $2; n++; next }
          { if (!($1 in want)) { print "extra " $1; bad = 1; next }
            d = $2 - want[$1]; if (d < 0) d = -d; s = want[$1]; if (s < 0) s = -s;
            if (d > 1e-5 * (s > 1e-12 ? s : 1e-12)) { print "differs " $1 ": " $2 " vs " want[$1]; bad = 1 }
            seen++ }
          END { if (seen != n) { print "got " seen " of " n " metrics"; bad = 1 } exit bad }' \
      "$TMP/$ref.eval.txt" "$TMP/$name.eval.0.txt"; then
    local how="within 1e-5"
    cmp -s "$TMP/$ref.eval.txt" "$TMP/$name.eval.0.txt" && how="bit-identical"
    echo "ok: $what ($how:$(tr '\n' ' ' < "$TMP/$name.eval.0.txt"| sed 's/^/ /'))"
    echo "    1 machine: $(grep "test (" "$TMP/$ref.log")"
    echo "    $nproc machines: $(grep "test (" "$TMP/$name.log")"
  else
    echo "FAIL: $what"; fail=1
  fi
}
